// extern "C" harness around the Verilated mlp_top for the cycle-accurate "rtl" backend
// (pearl_fpga/backends/mlp_rtl.py loads it with ctypes). It plays the host: AXI4-Lite register
// accesses, the LOAD stream, INFER batches with outputs collected, all cycle by cycle, and counts
// cycles. Every wait has a cycle limit and returns an error code instead of hanging.
#include <cstdint>
#include <memory>

#include "Vmlp_top.h"
#include "verilated.h"

namespace {

constexpr uint32_t REG_CTRL = 0x00, REG_GIE = 0x04, REG_IER = 0x08, REG_ISR = 0x0c, REG_MODE = 0x10, REG_BATCH = 0x18;
constexpr int OK = 0, ERR_TIMEOUT = -1, ERR_PROTOCOL = -2;

struct Sim {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vmlp_top> top;
    uint64_t cycles = 0;  // since construction
};

// One clock: inputs were set and settled with clk low; the rising edge moves the state.
void tick(Sim& s) {
    s.top->ap_clk = 1;
    s.top->eval();
    s.top->ap_clk = 0;
    s.top->eval();
    ++s.cycles;
}

void idle_inputs(Vmlp_top& t) {
    t.s_axis_in_tvalid = 0;
    t.s_axis_in_tlast = 0;
    t.s_axis_in_tdata = 0;
    t.m_axis_out_tready = 0;
    t.s_axi_control_awvalid = 0;
    t.s_axi_control_wvalid = 0;
    t.s_axi_control_bready = 0;
    t.s_axi_control_arvalid = 0;
    t.s_axi_control_rready = 0;
    t.s_axi_control_wstrb = 0xF;
}

int axil_write(Sim& s, uint32_t addr, uint32_t data, uint64_t limit) {
    Vmlp_top& t = *s.top;
    bool aw = false, w = false;
    t.s_axi_control_awaddr = addr;
    t.s_axi_control_wdata = data;
    t.s_axi_control_wstrb = 0xF;
    for (uint64_t n = 0; !(aw && w); ++n) {
        if (n > limit) return ERR_TIMEOUT;
        t.s_axi_control_awvalid = !aw;
        t.s_axi_control_wvalid = !w;
        t.eval();
        bool aw_fire = t.s_axi_control_awvalid && t.s_axi_control_awready;
        bool w_fire = t.s_axi_control_wvalid && t.s_axi_control_wready;
        tick(s);
        aw = aw || aw_fire;
        w = w || w_fire;
    }
    t.s_axi_control_awvalid = 0;
    t.s_axi_control_wvalid = 0;
    t.s_axi_control_bready = 1;
    for (uint64_t n = 0;; ++n) {
        if (n > limit) return ERR_TIMEOUT;
        t.eval();
        bool b_fire = t.s_axi_control_bvalid;
        tick(s);
        if (b_fire) break;
    }
    t.s_axi_control_bready = 0;
    t.eval();
    return OK;
}

int axil_read(Sim& s, uint32_t addr, uint32_t* data, uint64_t limit) {
    Vmlp_top& t = *s.top;
    t.s_axi_control_araddr = addr;
    t.s_axi_control_arvalid = 1;
    for (uint64_t n = 0;; ++n) {
        if (n > limit) return ERR_TIMEOUT;
        t.eval();
        bool fire = t.s_axi_control_arready;
        tick(s);
        if (fire) break;
    }
    t.s_axi_control_arvalid = 0;
    t.s_axi_control_rready = 1;
    for (uint64_t n = 0;; ++n) {
        if (n > limit) return ERR_TIMEOUT;
        t.eval();
        if (t.s_axi_control_rvalid) {
            *data = t.s_axi_control_rdata;
            tick(s);
            break;
        }
        tick(s);
    }
    t.s_axi_control_rready = 0;
    t.eval();
    return OK;
}

// Runs one operation: ap_start, then streams `in` (tlast every `frame` words) and collects up to
// `out_cap` output words until the `interrupt` pin reports ap_done (GIE and IER bit0 are set, so no
// bus traffic disturbs the streams). `*cycles` counts from the ap_start write to ap_done.
int run_op(Sim& s, uint32_t mode, uint32_t batch, const uint16_t* in, int64_t n_in, int64_t frame, uint16_t* out,
           int64_t out_cap, int64_t* n_out, uint64_t max_cycles, uint64_t* cycles) {
    Vmlp_top& t = *s.top;
    const uint64_t lim = 64;
    if (axil_write(s, REG_GIE, 1, lim) || axil_write(s, REG_IER, 1, lim)) return ERR_PROTOCOL;
    if (axil_write(s, REG_MODE, mode, lim) || axil_write(s, REG_BATCH, batch, lim)) return ERR_PROTOCOL;
    if (axil_write(s, REG_CTRL, 1, lim)) return ERR_PROTOCOL;
    const uint64_t start = s.cycles;
    int64_t sent = 0, got = 0;
    t.m_axis_out_tready = 1;
    for (;;) {
        if (s.cycles - start > max_cycles) {
            t.s_axis_in_tvalid = 0;
            t.m_axis_out_tready = 0;
            t.eval();
            *n_out = got;
            *cycles = s.cycles - start;
            return ERR_TIMEOUT;
        }
        t.s_axis_in_tvalid = sent < n_in;
        if (sent < n_in) {
            t.s_axis_in_tdata = in[sent];
            t.s_axis_in_tlast = ((sent + 1) % frame) == 0;
        }
        t.eval();
        bool in_fire = t.s_axis_in_tvalid && t.s_axis_in_tready;
        if (t.m_axis_out_tvalid) {
            if (got >= out_cap) return ERR_PROTOCOL;
            out[got++] = t.m_axis_out_tdata;
        }
        tick(s);
        if (in_fire) ++sent;
        if (t.__SYM__interrupt) break;  // Verilator renames the `interrupt` port (a C++ keyword-like word)
    }
    *cycles = s.cycles - start;
    *n_out = got;
    t.s_axis_in_tvalid = 0;
    t.m_axis_out_tready = 0;
    uint32_t ctrl = 0;
    if (axil_read(s, REG_CTRL, &ctrl, lim) || axil_write(s, REG_ISR, 1, lim)) return ERR_PROTOCOL;  // clear done
    if (sent != n_in) return ERR_PROTOCOL;  // the kernel finished without taking all words (rejected)
    return OK;
}

}  // namespace

extern "C" {

void* mlp_rtl_new() {
    auto* s = new Sim;
    s->ctx = std::make_unique<VerilatedContext>();
    s->ctx->randReset(0);
    s->top = std::make_unique<Vmlp_top>(s->ctx.get());
    idle_inputs(*s->top);
    s->top->ap_clk = 0;
    s->top->ap_rst_n = 0;
    s->top->eval();
    return s;
}

void mlp_rtl_free(void* h) { delete static_cast<Sim*>(h); }

// Holds ap_rst_n low for a few cycles (all control state returns to idle; weights must be reloaded).
void mlp_rtl_reset(void* h) {
    Sim& s = *static_cast<Sim*>(h);
    idle_inputs(*s.top);
    s.top->ap_rst_n = 0;
    for (int i = 0; i < 4; ++i) tick(s);
    s.top->ap_rst_n = 1;
    s.top->eval();
    tick(s);
}

int mlp_rtl_read(void* h, uint32_t addr, uint32_t* data) { return axil_read(*static_cast<Sim*>(h), addr, data, 64); }

int mlp_rtl_write(void* h, uint32_t addr, uint32_t data) { return axil_write(*static_cast<Sim*>(h), addr, data, 64); }

// LOAD: the whole stream as one frame.
int mlp_rtl_load(void* h, const uint16_t* words, int64_t n, uint64_t max_cycles, uint64_t* cycles) {
    int64_t n_out = 0;
    return run_op(*static_cast<Sim*>(h), 0, 0, words, n, n, nullptr, 0, &n_out, max_cycles, cycles);
}

// INFER: `batch` observations of n0 words; `out` receives batch * out_words words.
int mlp_rtl_infer(void* h, const int16_t* x, int64_t batch, int64_t n0, int16_t* out, int64_t out_words,
                  uint64_t max_cycles, uint64_t* cycles) {
    int64_t n_out = 0;
    int rc = run_op(*static_cast<Sim*>(h), 1, static_cast<uint32_t>(batch), reinterpret_cast<const uint16_t*>(x),
                    batch * n0, n0, reinterpret_cast<uint16_t*>(out), batch * out_words, &n_out, max_cycles, cycles);
    if (rc == OK && n_out != batch * out_words) return ERR_PROTOCOL;
    return rc;
}

uint64_t mlp_rtl_cycles(void* h) { return static_cast<Sim*>(h)->cycles; }
}
