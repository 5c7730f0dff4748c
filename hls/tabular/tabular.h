// tabular.h: tabular Q-learning / SARSA update kernel (contract: docs/tabular.md and
// pearl_fpga/spec/tabular.py; the numpy reference is pearl_fpga/backends/tabular_numpy.py).
//
// Arithmetic, identical in every implementation:
//   Q table   int32 Q16.16, n_states x n_actions, state-major
//   alpha     unsigned, 16 fractional bits, 1..65536 (65536 = 1.0)
//   gamma     unsigned, 16 fractional bits, 0..65536 (gamma = 1 is representable)
//   reward    int32 Q16.16
//   for each transition, strictly in order (a batch equals the sequential loop):
//     boot    = 0 if done, else max_b Q[s2][b] (Q-learning) or Q[s2][a2] (SARSA)
//     target  = r + ((gamma * boot + 2^15) >> 16)            int64, arithmetic shift (floor)
//     Q[s][a] = sat32(Q[s][a] + ((alpha * (target - Q[s][a]) + 2^15) >> 16))
//   Every intermediate fits int64 (|gamma * boot| <= 2^47, |alpha * delta| <= 2^50); only the store
//   saturates, to [-2^31, 2^31 - 1].
//
// Cost: one row read (the max over n_actions, or one word for SARSA) and one read-modify-write per
// transition. An update may read the row an earlier one wrote, so the loop is a chain through the
// table; the HLS top pipelines independent updates one per clock and holds an update back while a
// write to a row it reads is in flight (SPEC.md, "Pipeline hazards").
//
// ---- HLS top (tabular_top in tabular.cpp): storage, pragmas, pipeline ---------------------------
// Interface (SPEC.md, "Board interface"): AXI4-Lite control with ap_ctrl_hs; 128-bit command words in
// on s_axis_cmd (UPDATE, WRITE, READ, CLEAR, IDENTITY); one 128-bit response out on m_axis_resp per
// READ or IDENTITY.
// Storage: the table of MAX_STATES x MAX_ACTIONS words (TABULAR_STATES / TABULAR_ACTIONS, the catalog
// sizes), kept twice: row_copy, read a whole row s2 at a time for the bootstrap, and update_copy, read one
// word Q[s][a] for the update. Each copy is partitioned by action (one memory per column, so a row
// is read in one clock) and bound to ram_s2p: one read and one write port per memory, which is
// what one read and one write per clock need; both copies take every write.
// Pipeline: COMMANDS is one loop, PIPELINE II = 1, one issue slot per iteration, built for the board's
// catalog clock. The update (row read, max tree, two products, saturation, write) is pipelined over
// up to HAZARD_WINDOW - 1 clocks; a command that reads a row written by one of the last
// HAZARD_WINDOW - 1 issued commands waits (empty slots) until that write has landed, and the
// DEPENDENCE pragmas in COMMANDS (inter, RAW, distance HAZARD_WINDOW, dependent) state exactly that.
// CLEAR ends the pipelined run (drain), zeroes both copies one row per clock, and the run resumes.
// Commands whose s, s2, a or a2 lie outside the synthesized table are ignored (a READ answers 0); the
// host never sends them.
// Expected cost (estimates, Vitis HLS not available when written; csynth to confirm): one command per
// clock when no command reads a row written within HAZARD_WINDOW - 1 commands before it, n UPDATEs in
// spec.tabular.hls_issue_slots(s, s2) clocks plus a drain otherwise; CLEAR MAX_STATES clocks plus a
// drain; memory 2 x MAX_STATES x MAX_ACTIONS x 32 bits (1024 x 8: 16 BRAM36), the DSPs of the two
// 17 x 33-bit products.
#pragma once

#include <cstdint>

#include "common/hls_compat.h"
#include "tabular_config.h"  // TABULAR_STATES / TABULAR_ACTIONS / TABULAR_MAX_BATCH and the limits, from kernel.json

namespace tabular {

constexpr int FRAC_BITS = 16;
constexpr int64_t HALF = int64_t(1) << (FRAC_BITS - 1);
constexpr uint32_t ONE = uint32_t(1) << FRAC_BITS;
// Trip-count bounds for the synthesis reports (the cpu build accepts any size the host validates).
constexpr uint32_t MAX_ACTIONS = config::ACTIONS_RANGE.max;
constexpr uint32_t MAX_BATCH = 1u << 20;

// Issue slots between an UPDATE's reads and the read of the row it writes (SPEC.md, "Pipeline hazards"):
// the HLS top's read-to-write latency may be up to HAZARD_WINDOW - 1 clocks.
constexpr uint32_t HAZARD_WINDOW = config::HAZARD_WINDOW;

// The least power of two >= n (the width of the row-max tree), and log2 of a power of two (its depth).
constexpr uint32_t pow2_at_least(uint32_t n) {
    uint32_t p = 1;
    while (p < n) p *= 2;
    return p;
}
constexpr uint32_t log2_exact(uint32_t p) {
    uint32_t d = 0;
    while ((1u << d) < p) d++;
    return d;
}

#ifndef __SYNTHESIS__
// C simulation of the HLS top only: the issue slots its last call took (commands + waits), and the reads
// that came within HAZARD_WINDOW slots of a write to their row (0 unless the in-flight check is wrong).
extern uint64_t g_csim_slots;
extern uint64_t g_csim_violations;
#endif

// Opcodes of the command stream (SPEC.md, "Command word").
constexpr uint32_t OP_UPDATE = 0x01;
constexpr uint32_t OP_WRITE = 0x02;
constexpr uint32_t OP_READ = 0x03;
constexpr uint32_t OP_CLEAR = 0x04;
constexpr uint32_t OP_IDENTITY = 0x05;  // answers the synthesized shape and this call's UPDATE count (XRT)

// The store's saturation to int32.
inline int32_t sat32(int64_t x) {
    return x > INT32_MAX ? INT32_MAX : (x < INT32_MIN ? INT32_MIN : int32_t(x));
}

// The new Q[s][a] from the old one and the bootstrap term (0 when done).
inline int32_t updated(int32_t old, int64_t boot, int32_t r, uint32_t alpha, uint32_t gamma) {
#pragma HLS INLINE
    const int64_t target = int64_t(r) + ((int64_t(gamma) * boot + HALF) >> FRAC_BITS);
    return sat32(old + ((int64_t(alpha) * (target - old) + HALF) >> FRAC_BITS));
}

// One update of the contract above; `row2` is Q[s2][*]. (CPU path: the loop bound is the table's.)
inline void update_one(int32_t* q_sa, const int32_t* row2, uint32_t n_actions, uint32_t a2, int32_t r, bool done,
                       uint32_t alpha, uint32_t gamma, bool sarsa) {
    int64_t boot = 0;
    if (!done) {
        if (sarsa) {
            boot = row2[a2];
        } else {
            int32_t best = row2[0];
            for (uint32_t b = 1; b < n_actions; b++) best = row2[b] > best ? row2[b] : best;
            boot = best;
        }
    }
    *q_sa = updated(*q_sa, boot, r, alpha, gamma);
}

// A batch of n transitions applied in order to the table q (n_states x n_actions). Indices are
// trusted (the host validates them); a2 is read only for SARSA.
void update_batch(int32_t* q, uint32_t n_actions, uint32_t alpha, uint32_t gamma, bool sarsa, const uint32_t* s,
                  const uint32_t* a, const int32_t* r, const uint32_t* s2, const uint32_t* a2, const uint8_t* done,
                  uint32_t n);

}  // namespace tabular

// The HLS top (SPEC.md, "Board interface"). Inputs: n_cmds command words, alpha/gamma words, sarsa,
// n_actions (columns in use, 1..TABULAR_ACTIONS). Outputs, valid from the first ap_done on:
// max_states/max_actions (the synthesized table) and updates (UPDATE commands applied by this call).
extern "C" void tabular_top(pearl::stream<pearl::axis128>& s_axis_cmd, pearl::stream<pearl::axis128>& m_axis_resp, uint32_t n_cmds,
                 uint32_t alpha, uint32_t gamma, uint32_t sarsa, uint32_t n_actions, uint32_t& max_states,
                 uint32_t& max_actions, uint32_t& updates);
