// extern "C" harness around the Verilated tabular_core (N_STATES and N_ACTIONS fixed at build time with
// -G), driven with ctypes by pearl_fpga.backends.tabular_rtl: a batch of transitions goes in one per
// clock, the clock runs until the last one is written, and the cycle count comes back. A cycle
// limit turns a hang into an error code.
#include <cstdint>

#include "Vtabular_core.h"
#include "verilated.h"

namespace {

struct Sim {
    VerilatedContext ctx;
    Vtabular_core* top = nullptr;
};

// One rising edge; inputs must be set before.
void tick(Sim* s) {
    s->top->clk = 1;
    s->top->eval();
    s->ctx.timeInc(1);
    s->top->clk = 0;
    s->top->eval();
    s->ctx.timeInc(1);
}

void idle_inputs(Vtabular_core* t) {
    t->in_valid = 0;
    t->clear = 0;
    t->wr_en = 0;
}

}  // namespace

extern "C" {

void* tabular_rtl_create() {
    Sim* s = new Sim();
    s->top = new Vtabular_core(&s->ctx);
    idle_inputs(s->top);
    s->top->rst_n = 0;
    s->top->clk = 0;
    s->top->eval();
    tick(s);
    tick(s);
    s->top->rst_n = 1;
    tick(s);
    return s;
}

void tabular_rtl_destroy(void* h) {
    Sim* s = static_cast<Sim*>(h);
    s->top->final();
    delete s->top;
    delete s;
}

void tabular_rtl_configure(void* h, uint32_t alpha, uint32_t gamma, int sarsa, uint32_t n_actions) {
    Sim* s = static_cast<Sim*>(h);
    s->top->n_actions = n_actions;
    s->top->alpha = alpha;
    s->top->gamma = gamma;
    s->top->sarsa = sarsa ? 1 : 0;
}

// Returns 0, or 1 when the last transition was not written within max_cycles (cycles says how many ran).
int tabular_rtl_run(void* h, const uint32_t* st, const uint32_t* a, const int32_t* r, const uint32_t* s2,
                    const uint32_t* a2, const uint8_t* done, uint32_t n, uint64_t max_cycles, uint64_t* cycles) {
    Sim* s = static_cast<Sim*>(h);
    Vtabular_core* t = s->top;
    const uint32_t start = t->updates;
    uint64_t c = 0;
    for (uint32_t i = 0; i < n; i++) {
        t->in_valid = 1;
        t->in_s = st[i];
        t->in_a = a[i];
        t->in_r = static_cast<uint32_t>(r[i]);
        t->in_s2 = s2[i];
        t->in_a2 = a2[i];
        t->in_done = done[i] ? 1 : 0;
        tick(s);
        c++;
    }
    t->in_valid = 0;
    while (t->updates - start < n && c < max_cycles) {
        tick(s);
        c++;
    }
    tick(s);  // the forwarding register drains, so a host write or read that follows sees a settled table
    *cycles = c;
    return t->updates - start < n ? 1 : 0;
}

void tabular_rtl_read(void* h, int32_t* out, uint32_t words) {
    Sim* s = static_cast<Sim*>(h);
    for (uint32_t i = 0; i < words; i++) {
        s->top->rd_addr = i;
        s->top->eval();
        out[i] = static_cast<int32_t>(s->top->rd_data);
    }
}

void tabular_rtl_write(void* h, const int32_t* in, uint32_t words) {
    Sim* s = static_cast<Sim*>(h);
    for (uint32_t i = 0; i < words; i++) {
        s->top->wr_en = 1;
        s->top->wr_addr = i;
        s->top->wr_data = static_cast<uint32_t>(in[i]);
        tick(s);
    }
    s->top->wr_en = 0;
}

void tabular_rtl_clear(void* h) {
    Sim* s = static_cast<Sim*>(h);
    s->top->clear = 1;
    tick(s);
    s->top->clear = 0;
    tick(s);
}

}  // extern "C"
