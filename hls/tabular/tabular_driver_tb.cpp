// tabular_driver_tb.cpp: tabular_top behind the C ABI of common/driver_tb.h, so that the board
// driver (pearl_fpga/board/tabular_driver.py) runs against the HLS C++ through the C-simulation
// transport. Registers (SPEC.md): 0x10 n_cmds, 0x18 alpha, 0x20 gamma, 0x28 sarsa, 0x30 n_actions in;
// 0x38 max_states, 0x40 max_actions, 0x48 updates out.
#include "common/driver_tb.h"
#include "tabular.h"

extern "C" int pearl_csim_call(uint32_t* regs, const uint8_t* in, size_t in_bytes, uint8_t* out, size_t out_capacity,
                               size_t* out_bytes, uint8_t* out_last) {
    pearl::stream<pearl::axis128> cmd, resp;
    pearl::words_to_stream128(in, in_bytes, cmd);
    uint32_t max_states = 0, max_actions = 0, updates = 0;
    try {
        tabular_top(cmd, resp, regs[0x10 / 4], regs[0x18 / 4], regs[0x20 / 4], regs[0x28 / 4], regs[0x30 / 4], max_states,
                    max_actions, updates);
    } catch (const pearl::starved&) {
        return pearl::CSIM_STARVED;
    }
    regs[0x38 / 4] = max_states;
    regs[0x40 / 4] = max_actions;
    regs[0x48 / 4] = updates;
    return pearl::stream128_to_words(resp, out, out_capacity, out_bytes, out_last);
}

// The issue slots of the last call (commands + waits for writes in flight; SPEC.md, "Pipeline hazards"),
// and the reads that ran ahead of a write to their row (0 unless the in-flight check is wrong).
extern "C" uint64_t pearl_csim_tabular_slots() { return tabular::g_csim_slots; }
extern "C" uint64_t pearl_csim_tabular_violations() { return tabular::g_csim_violations; }
