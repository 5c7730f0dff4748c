// extern "C" harness around the Verilated replay_top (built with FREE_RUN=1 by
// pearl_fpga.backends.replay_rtl through pearl_fpga.sim.verilator.build_library; CAPACITY and FANOUT
// are fixed at build time with -G). Python drives it with ctypes: push a batch of 128-bit command
// words, clock until every command is taken, every response is collected and the kernel is idle,
// and get the responses and the cycle count. A cycle limit turns a hang into an error code.
//
// Words are passed as pairs of uint64: [2*i] = bits 63:0, [2*i+1] = bits 127:64.
#include <cstdint>
#include <new>

#include "Vreplay_top.h"
#include "Vreplay_top___024root.h"
#include "verilated.h"

namespace {

struct Sim {
    VerilatedContext ctx;
    Vreplay_top* top = nullptr;
    uint64_t cycles = 0;  // since create
};

// Idle means nothing queued or in flight in the kernel (read from the RTL's `busy` net).
bool busy(Sim* s) { return s->top->rootp->replay_top__DOT__busy; }

void settle(Sim* s) { s->top->eval(); }

// One rising edge; inputs must be set (and settled) before.
void tick(Sim* s) {
    s->top->ap_clk = 1;
    s->top->eval();
    s->ctx.timeInc(1);
    s->top->ap_clk = 0;
    s->top->eval();
    s->ctx.timeInc(1);
    s->cycles++;
}

void set_cmd(Vreplay_top* t, uint64_t lo, uint64_t hi) {
    t->s_axis_cmd_tdata[0] = static_cast<uint32_t>(lo);
    t->s_axis_cmd_tdata[1] = static_cast<uint32_t>(lo >> 32);
    t->s_axis_cmd_tdata[2] = static_cast<uint32_t>(hi);
    t->s_axis_cmd_tdata[3] = static_cast<uint32_t>(hi >> 32);
}

void idle_inputs(Vreplay_top* t) {
    t->s_axis_cmd_tvalid = 0;
    t->s_axis_cmd_tlast = 0;
    set_cmd(t, 0, 0);
    t->m_axis_resp_tready = 0;
    t->s_axi_control_awvalid = 0;
    t->s_axi_control_wvalid = 0;
    t->s_axi_control_wstrb = 0xf;
    t->s_axi_control_bready = 1;
    t->s_axi_control_arvalid = 0;
    t->s_axi_control_rready = 1;
}

}  // namespace

extern "C" {

// Status codes of replay_rtl_run / replay_rtl_reset.
enum { RTL_OK = 0, RTL_TIMEOUT = 1, RTL_TOO_MANY_RESPONSES = 2 };

void* replay_rtl_create() {
    Sim* s = new (std::nothrow) Sim();
    if (!s) return nullptr;
    s->top = new Vreplay_top(&s->ctx, "replay_top");
    idle_inputs(s->top);
    s->top->ap_clk = 0;
    s->top->ap_rst_n = 0;
    settle(s);
    return s;
}

void replay_rtl_destroy(void* h) {
    Sim* s = static_cast<Sim*>(h);
    if (!s) return;
    s->top->final();
    delete s->top;
    delete s;
}

// Reset for a few cycles, then clock until the clearing sweep is over. Returns cycles used in *cycles.
int replay_rtl_reset(void* h, uint64_t max_cycles, uint64_t* cycles) {
    Sim* s = static_cast<Sim*>(h);
    uint64_t start = s->cycles;
    idle_inputs(s->top);
    s->top->ap_rst_n = 0;
    for (int i = 0; i < 4; i++) {
        settle(s);
        tick(s);
    }
    s->top->ap_rst_n = 1;
    settle(s);
    while (busy(s)) {
        if (s->cycles - start >= max_cycles) {
            *cycles = s->cycles - start;
            return RTL_TIMEOUT;
        }
        tick(s);
        settle(s);
    }
    *cycles = s->cycles - start;
    return RTL_OK;
}

// Stream n_cmds commands (tlast on the final one) with the response stream always ready; collect up
// to resp_capacity responses. Returns RTL_OK when every command was taken, the kernel is idle and
// all responses are in; *cycles counts from the first cycle the first command is offered to the
// cycle the kernel is idle again. On RTL_TIMEOUT, *n_taken and *n_resp tell how far it got.
int replay_rtl_run(void* h, const uint64_t* cmds, uint32_t n_cmds, uint64_t* resp, uint32_t resp_capacity,
                   uint64_t max_cycles, uint32_t* n_taken, uint32_t* n_resp, uint64_t* cycles) {
    Sim* s = static_cast<Sim*>(h);
    Vreplay_top* t = s->top;
    uint64_t start = s->cycles;
    uint32_t taken = 0, got = 0;
    int status = RTL_OK;
    t->m_axis_resp_tready = 1;
    for (;;) {
        bool more = taken < n_cmds;
        t->s_axis_cmd_tvalid = more;
        t->s_axis_cmd_tlast = more && taken + 1 == n_cmds;
        if (more) set_cmd(t, cmds[2 * taken], cmds[2 * taken + 1]);
        settle(s);
        if (!more && !t->m_axis_resp_tvalid && !busy(s)) break;
        if (s->cycles - start >= max_cycles) {
            status = RTL_TIMEOUT;
            break;
        }
        bool cmd_fire = more && t->s_axis_cmd_tready;
        if (t->m_axis_resp_tvalid) {
            if (got >= resp_capacity) {
                status = RTL_TOO_MANY_RESPONSES;
                break;
            }
            resp[2 * got] = (static_cast<uint64_t>(t->m_axis_resp_tdata[1]) << 32) | t->m_axis_resp_tdata[0];
            resp[2 * got + 1] = (static_cast<uint64_t>(t->m_axis_resp_tdata[3]) << 32) | t->m_axis_resp_tdata[2];
            got++;
        }
        tick(s);
        if (cmd_fire) taken++;
    }
    t->s_axis_cmd_tvalid = 0;
    t->s_axis_cmd_tlast = 0;
    t->m_axis_resp_tready = 0;
    settle(s);
    *n_taken = taken;
    *n_resp = got;
    *cycles = s->cycles - start;
    return status;
}

// AXI4-Lite read of one control register (a handful of cycles; not counted by replay_rtl_run).
int replay_rtl_read_reg(void* h, uint32_t addr, uint32_t* value, uint64_t max_cycles) {
    Sim* s = static_cast<Sim*>(h);
    Vreplay_top* t = s->top;
    uint64_t start = s->cycles;
    t->s_axi_control_araddr = addr;
    t->s_axi_control_arvalid = 1;
    t->s_axi_control_rready = 1;
    for (;;) {
        settle(s);
        if (s->cycles - start >= max_cycles) return RTL_TIMEOUT;
        bool ar_fire = t->s_axi_control_arvalid && t->s_axi_control_arready;
        bool r_fire = t->s_axi_control_rvalid;
        if (r_fire) *value = t->s_axi_control_rdata;
        tick(s);
        if (ar_fire) t->s_axi_control_arvalid = 0;
        if (r_fire) break;
    }
    settle(s);
    return RTL_OK;
}

uint64_t replay_rtl_cycles(void* h) { return static_cast<Sim*>(h)->cycles; }

}  // extern "C"
