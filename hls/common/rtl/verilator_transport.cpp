// The one C++ harness of every kernel's board IP under Verilator, loaded with ctypes by
// pearl_fpga/board/verilator_transport.py (the Verilator Transport). It plays the board around the
// IP: an AXI4-Lite master for the control registers, a DMA that streams queued words into the IP's
// input stream (tlast on the last word of each send) and one that collects its output stream
// (tready always high), and the clock. Streams move on every clock, register accesses included.
//
// The model is built with --prefix Vpearl_ip; the kernel's stream ports and word sizes come from
// -D flags: PEARL_IN / PEARL_OUT (port prefixes, e.g. s_axis_cmd / m_axis_resp) and PEARL_IN_BYTES /
// PEARL_OUT_BYTES. Every wait has a cycle limit and returns PEARL_TIMEOUT instead of hanging.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "Vpearl_ip.h"
#include "verilated.h"

#define PEARL_PASTE2(a, b) a##b
#define PEARL_PASTE(a, b) PEARL_PASTE2(a, b)
#define IN(signal) PEARL_PASTE(PEARL_IN, signal)
#define OUT(signal) PEARL_PASTE(PEARL_OUT, signal)

namespace {

constexpr int IN_BYTES = PEARL_IN_BYTES, OUT_BYTES = PEARL_OUT_BYTES;
constexpr uint32_t REG_CTRL = 0x00, CTRL_START = 1;

// A stream word to and from a port: an integer port (up to 64 bits) or a VlWide of 32-bit words.
template <typename T>
void put_word(T& port, const uint8_t* bytes, int n) {
    uint64_t v = 0;
    std::memcpy(&v, bytes, n);
    port = static_cast<T>(v);
}
template <std::size_t N>
void put_word(VlWide<N>& port, const uint8_t* bytes, int n) {
    for (std::size_t i = 0; i < N; ++i) {
        uint32_t w = 0;
        int at = static_cast<int>(4 * i);
        if (at < n) std::memcpy(&w, bytes + at, std::min(4, n - at));
        port[i] = w;
    }
}
template <typename T>
void get_word(const T& port, uint8_t* bytes, int n) {
    uint64_t v = port;
    std::memcpy(bytes, &v, n);
}
template <std::size_t N>
void get_word(const VlWide<N>& port, uint8_t* bytes, int n) {
    for (std::size_t i = 0; i < N; ++i) {
        uint32_t w = port[i];
        int at = static_cast<int>(4 * i);
        if (at < n) std::memcpy(bytes + at, &w, std::min(4, n - at));
    }
}

struct Sim {
    VerilatedContext ctx;
    Vpearl_ip* top = nullptr;
    std::vector<uint8_t> in;       // queued input words (IN_BYTES each) ...
    std::vector<uint8_t> in_last;  // ... and their tlast
    size_t in_head = 0;            // the next input word to offer
    std::vector<uint8_t> out;      // output words collected, not yet taken
    uint64_t ticks = 0;            // clocks since the model was made
    uint64_t kernel_cycles = 0;    // clocks from each ap_start write to its ap_done (the interrupt)
    bool running = false;
};

// One clock, the streams included: offer the next input word, collect an output word, and run
// `before_edge` (the register channels' handshakes) after the inputs settle, before the rising edge.
template <typename F>
void step(Sim& s, F&& before_edge) {
    Vpearl_ip& t = *s.top;
    bool have = s.in_head < s.in_last.size();
    t.IN(_tvalid) = have;
    if (have) {
        put_word(t.IN(_tdata), &s.in[s.in_head * IN_BYTES], IN_BYTES);
        t.IN(_tlast) = s.in_last[s.in_head];
    }
    t.OUT(_tready) = 1;
    t.eval();
    bool in_fire = have && t.IN(_tready);
    if (t.OUT(_tvalid)) {
        size_t at = s.out.size();
        s.out.resize(at + OUT_BYTES);
        get_word(t.OUT(_tdata), &s.out[at], OUT_BYTES);
    }
    before_edge();
    t.ap_clk = 1;
    t.eval();
    t.ap_clk = 0;
    t.eval();
    ++s.ticks;
    if (s.running) ++s.kernel_cycles;
    if (in_fire && ++s.in_head == s.in_last.size()) {
        s.in.clear();
        s.in_last.clear();
        s.in_head = 0;
    }
    if (s.running && t.__SYM__interrupt) s.running = false;
}

void idle_control(Vpearl_ip& t) {
    t.s_axi_control_awvalid = 0;
    t.s_axi_control_wvalid = 0;
    t.s_axi_control_wstrb = 0xF;
    t.s_axi_control_bready = 0;
    t.s_axi_control_arvalid = 0;
    t.s_axi_control_rready = 0;
}

}  // namespace

extern "C" {

enum { PEARL_OK = 0, PEARL_TIMEOUT = 1 };

void* pearl_vt_create() {
    Sim* s = new (std::nothrow) Sim();
    if (!s) return nullptr;
    s->ctx.randReset(0);
    s->top = new Vpearl_ip(&s->ctx, "pearl_ip");
    idle_control(*s->top);
    s->top->IN(_tvalid) = 0;
    s->top->OUT(_tready) = 0;
    s->top->ap_clk = 0;
    s->top->ap_rst_n = 0;
    s->top->eval();
    return s;
}

void pearl_vt_destroy(void* h) {
    Sim* s = static_cast<Sim*>(h);
    if (!s) return;
    s->top->final();
    delete s->top;
    delete s;
}

// ap_rst_n low for `cycles` clocks, then high; the queues are emptied (a fresh board).
void pearl_vt_reset(void* h, uint32_t cycles) {
    Sim& s = *static_cast<Sim*>(h);
    s.in.clear();
    s.in_last.clear();
    s.in_head = 0;
    s.out.clear();
    s.running = false;
    idle_control(*s.top);
    s.top->ap_rst_n = 0;
    for (uint32_t i = 0; i < cycles; ++i) step(s, [] {});
    s.top->ap_rst_n = 1;
    s.out.clear();
}

// AXI4-Lite write; a write of ap_start (bit 0 of 0x00) starts counting kernel cycles.
int pearl_vt_write(void* h, uint32_t addr, uint32_t data, uint64_t max_cycles) {
    Sim& s = *static_cast<Sim*>(h);
    Vpearl_ip& t = *s.top;
    bool aw = false, w = false, b = false;
    t.s_axi_control_awaddr = addr;
    t.s_axi_control_wdata = data;
    t.s_axi_control_wstrb = 0xF;
    int status = PEARL_TIMEOUT;
    for (uint64_t n = 0; n < max_cycles; ++n) {
        t.s_axi_control_awvalid = !aw;
        t.s_axi_control_wvalid = !w;
        t.s_axi_control_bready = aw && w;
        bool aw_fire = false, w_fire = false, b_fire = false;
        step(s, [&] {
            aw_fire = t.s_axi_control_awvalid && t.s_axi_control_awready;
            w_fire = t.s_axi_control_wvalid && t.s_axi_control_wready;
            b_fire = t.s_axi_control_bready && t.s_axi_control_bvalid;
        });
        aw = aw || aw_fire;
        w = w || w_fire;
        b = b || b_fire;
        if (b) {
            status = PEARL_OK;
            break;
        }
    }
    idle_control(t);
    if (status == PEARL_OK && addr == REG_CTRL && (data & CTRL_START)) s.running = true;
    return status;
}

// AXI4-Lite read.
int pearl_vt_read(void* h, uint32_t addr, uint32_t* data, uint64_t max_cycles) {
    Sim& s = *static_cast<Sim*>(h);
    Vpearl_ip& t = *s.top;
    t.s_axi_control_araddr = addr;
    t.s_axi_control_arvalid = 1;
    t.s_axi_control_rready = 1;
    int status = PEARL_TIMEOUT;
    for (uint64_t n = 0; n < max_cycles; ++n) {
        bool ar_fire = false, r_fire = false;
        step(s, [&] {
            ar_fire = t.s_axi_control_arvalid && t.s_axi_control_arready;
            r_fire = t.s_axi_control_rvalid;
            if (r_fire) *data = t.s_axi_control_rdata;
        });
        if (ar_fire) t.s_axi_control_arvalid = 0;
        if (r_fire) {
            status = PEARL_OK;
            break;
        }
    }
    idle_control(t);
    return status;
}

// Queue `n_words` input words (IN_BYTES each, little-endian), tlast on the last; no clock runs.
void pearl_vt_send(void* h, const uint8_t* words, uint64_t n_words) {
    Sim& s = *static_cast<Sim*>(h);
    if (!n_words) return;
    s.in.insert(s.in.end(), words, words + n_words * IN_BYTES);
    s.in_last.resize(s.in_last.size() + n_words, 0);
    s.in_last.back() = 1;
}

// Clock until `n_words` output words are collected, then move them to `dst` (OUT_BYTES each);
// PEARL_TIMEOUT after `max_cycles` clocks (`*got` then says how many had arrived; none are taken).
int pearl_vt_receive(void* h, uint8_t* dst, uint64_t n_words, uint64_t max_cycles, uint64_t* got) {
    Sim& s = *static_cast<Sim*>(h);
    const size_t want = n_words * OUT_BYTES;
    for (uint64_t n = 0; s.out.size() < want; ++n) {
        if (n >= max_cycles) {
            *got = s.out.size() / OUT_BYTES;
            return PEARL_TIMEOUT;
        }
        step(s, [] {});
    }
    std::memcpy(dst, s.out.data(), want);
    s.out.erase(s.out.begin(), s.out.begin() + want);
    *got = n_words;
    return PEARL_OK;
}

// Clock until the interrupt pin is high (ap_done with GIE and IER bit 0 set), at most `max_cycles`.
int pearl_vt_wait_interrupt(void* h, uint64_t max_cycles) {
    Sim& s = *static_cast<Sim*>(h);
    for (uint64_t n = 0; !s.top->__SYM__interrupt; ++n) {
        if (n >= max_cycles) return PEARL_TIMEOUT;
        step(s, [] {});
    }
    return PEARL_OK;
}

uint64_t pearl_vt_ticks(void* h) { return static_cast<Sim*>(h)->ticks; }
uint64_t pearl_vt_kernel_cycles(void* h) { return static_cast<Sim*>(h)->kernel_cycles; }
uint64_t pearl_vt_pending_input(void* h) {
    Sim& s = *static_cast<Sim*>(h);
    return s.in_last.size() - s.in_head;
}
uint64_t pearl_vt_pending_output(void* h) { return static_cast<Sim*>(h)->out.size() / OUT_BYTES; }

}  // extern "C"
