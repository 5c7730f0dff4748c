// tabular.cpp: the tabular update kernel (see tabular.h for the arithmetic and the top's design).
// `update_batch` is the batch loop that the cpu backend (pearl_fpga/native/tabular_ext.cpp) runs;
// `tabular_top` is the HLS top that make hls / make bitstream synthesize, with the same update
// (`update_one`) behind AXI4-Stream commands and AXI4-Lite control. The reference RTL,
// rtl/tabular_top.sv, keeps the same contract with another schedule (SPEC.md, "Timing").
#include "tabular.h"

#ifndef __SYNTHESIS__
#include <vector>
#endif

namespace tabular {

void update_batch(int32_t* q, uint32_t n_actions, uint32_t alpha, uint32_t gamma, bool sarsa, const uint32_t* s,
                  const uint32_t* a, const int32_t* r, const uint32_t* s2, const uint32_t* a2, const uint8_t* done,
                  uint32_t n) {
TRANSITIONS:
    for (uint32_t i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MAX_BATCH
        update_one(q + uint64_t(s[i]) * n_actions + a[i], q + uint64_t(s2[i]) * n_actions, n_actions,
                   sarsa ? a2[i] : 0, r[i], done[i] != 0, alpha, gamma, sarsa);
    }
}

}  // namespace tabular

namespace {

constexpr uint32_t STATES = TABULAR_STATES;
constexpr uint32_t ACTIONS = TABULAR_ACTIONS;
static_assert(ACTIONS >= 1 && ACTIONS <= tabular::MAX_ACTIONS, "TABULAR_ACTIONS must be 1..64");
static_assert(STATES >= 1 && uint64_t(STATES) * ACTIONS <= tabular::config::MAX_ENTRIES, "TABULAR_STATES x ACTIONS <= 2^24");

// The table twice (tabular.h: row_copy for row reads, update_copy for the word being updated): static arrays of
// tabular_top, declared there with their pragmas (UG1399: in the function that defines the array).
using Table = int32_t[STATES][ACTIONS];
// Hazards (SPEC.md, "Pipeline hazards"): an issued command's write may land up to HAZARD_WINDOW - 1
// issue slots after its reads, so a command that reads a row written by one of the last
// HAZARD_WINDOW - 1 issued commands waits (an empty slot) until that write has landed. The
// DEPENDENCE pragmas of COMMANDS state exactly this (distance HAZARD_WINDOW), which leaves HLS free to
// pipeline the whole update (row read, max tree, two products, saturation, write) over that many
// cycles at II = 1; independent commands issue one per clock.
constexpr uint32_t HAZARD_WINDOW = tabular::HAZARD_WINDOW;
constexpr uint32_t IN_FLIGHT = HAZARD_WINDOW - 1;
constexpr uint32_t NO_ROW = 0xFFFFFFFFu;

// The rows written by the last IN_FLIGHT issue slots (NO_ROW: that slot wrote nothing), newest first.
struct InFlight {
    uint32_t row[IN_FLIGHT];
};

bool waits(const InFlight& f, uint32_t s, uint32_t s2, bool reads_row2) {
#pragma HLS INLINE
    bool hit = false;
    for (uint32_t k = 0; k < IN_FLIGHT; k++) {
#pragma HLS UNROLL
        hit = hit || f.row[k] == s || (reads_row2 && f.row[k] == s2);
    }
    return hit;
}

void advance(InFlight& f, uint32_t written_row) {
#pragma HLS INLINE
    for (uint32_t k = IN_FLIGHT - 1; k > 0; k--) {
#pragma HLS UNROLL
        f.row[k] = f.row[k - 1];
    }
    f.row[0] = written_row;
}

// max over the first n_actions columns of a row, as a balanced tree of compares (log2(ACTIONS) deep,
// not a chain of ACTIONS - 1): a column past n_actions takes the value of column 0, so it never wins.
int32_t row_max(const int32_t (&row)[ACTIONS], uint32_t n_actions) {
#pragma HLS INLINE
    constexpr uint32_t WIDTH = tabular::pow2_at_least(ACTIONS);
    constexpr uint32_t TREE_DEPTH = tabular::log2_exact(WIDTH);
    constexpr uint32_t HALF_WIDTH = WIDTH / 2;
    int32_t level[WIDTH];
#pragma HLS ARRAY_PARTITION variable = level type = complete
    for (uint32_t b = 0; b < WIDTH; b++) {
#pragma HLS UNROLL
        level[b] = b < ACTIONS && b < n_actions ? row[b] : row[0];
    }
    for (uint32_t depth = 0; depth < TREE_DEPTH; depth++) {
#pragma HLS UNROLL
        const uint32_t half = WIDTH >> (depth + 1);
        for (uint32_t b = 0; b < HALF_WIDTH; b++) {
#pragma HLS UNROLL
            if (b < half) level[b] = level[b + half] > level[b] ? level[b + half] : level[b];
        }
    }
    return level[0];
}

#ifndef __SYNTHESIS__
// C simulation only: the hazard rule checked as it runs (no read of a row within HAZARD_WINDOW slots
// of its write), and the issue slots of the last call, for the tests' cycle model.
struct HazardCheck {
    std::vector<uint64_t> written_at;  // row -> issue slot (counted from 1) of its last write; 0: none in flight
    uint64_t slot = 0, violations = 0;
    void drained() { written_at.assign(STATES, 0); }
    void read(uint32_t row) {
        if (written_at[row] != 0 && slot - written_at[row] < HAZARD_WINDOW) violations++;
    }
    void write(uint32_t row) { written_at[row] = slot; }
};
HazardCheck g_check;
#endif

}  // namespace

#ifndef __SYNTHESIS__
namespace tabular {
uint64_t g_csim_slots = 0;
uint64_t g_csim_violations = 0;
}  // namespace tabular
#endif

namespace {

void clear_table(Table& row, Table& self) {
#pragma HLS INLINE
CLEAR_ROWS:
    for (uint32_t s = 0; s < STATES; s++) {
#pragma HLS LOOP_TRIPCOUNT min = STATES max = STATES
#pragma HLS PIPELINE II = 1
        for (uint32_t b = 0; b < ACTIONS; b++) {
#pragma HLS UNROLL
            row[s][b] = 0;
            self[s][b] = 0;
        }
    }
}

void write_word(Table& row, Table& self, uint32_t s, uint32_t a, int32_t value) {
#pragma HLS INLINE
    row[s][a] = value;
    self[s][a] = value;
}

}  // namespace

// COMMANDS' initiation interval: 1 up to the descriptor's II1_MAX_MHZ, 2 above it (SPEC.md, "Initiation
// interval"; the catalog's hls_defines set TABULAR_COMMANDS_II for a faster clock).
#ifndef TABULAR_COMMANDS_II
#define TABULAR_COMMANDS_II 1
#endif

void tabular_top(pearl::stream<pearl::axis128>& s_axis_cmd, pearl::stream<pearl::axis128>& m_axis_resp, uint32_t n_cmds,
                 uint32_t alpha, uint32_t gamma, uint32_t sarsa, uint32_t n_actions, uint32_t& max_states,
                 uint32_t& max_actions, uint32_t& updates) {
#pragma HLS INTERFACE mode = axis port = s_axis_cmd
#pragma HLS INTERFACE mode = axis port = m_axis_resp
PEARL_AXILITE_REGISTER(n_cmds, 0x10)
PEARL_AXILITE_REGISTER(alpha, 0x18)
PEARL_AXILITE_REGISTER(gamma, 0x20)
PEARL_AXILITE_REGISTER(sarsa, 0x28)
PEARL_AXILITE_REGISTER(n_actions, 0x30)
PEARL_AXILITE_REGISTER(max_states, 0x38)
PEARL_AXILITE_REGISTER(max_actions, 0x40)
PEARL_AXILITE_REGISTER(updates, 0x48)
#pragma HLS INTERFACE mode = s_axilite port = return bundle = control
// Vitis defaults kernels to a chained handshake that waits for ap_continue; the drivers speak ap_ctrl_hs.
#pragma HLS INTERFACE mode = ap_ctrl_hs port = return
    static Table row_copy = {}, update_copy = {};  // kept between calls
#pragma HLS ARRAY_PARTITION variable = row_copy type = complete dim = 2
#pragma HLS ARRAY_PARTITION variable = update_copy type = complete dim = 2
#pragma HLS BIND_STORAGE variable = row_copy type = ram_s2p latency = 1
#pragma HLS BIND_STORAGE variable = update_copy type = ram_s2p latency = 1
    const bool is_sarsa = (sarsa & 1) != 0;
    uint32_t applied = 0;
    uint32_t c = 0;              // commands taken from the stream
    bool held = false;           // a command taken but not issued yet (it waits for a write in flight)
    pearl::axis128 held_cmd = {};
    InFlight in_flight;
    for (uint32_t k = 0; k < IN_FLIGHT; k++) in_flight.row[k] = NO_ROW;  // a call starts drained
#ifndef __SYNTHESIS__
    g_check.drained();
    g_check.slot = g_check.violations = 0;
#endif
    // A CLEAR ends the pipelined run (the pipeline drains), clears the table, and the run resumes.
SEGMENTS:
    while (c < n_cmds || held) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = 1
        bool clear = false;
    COMMANDS:
        while ((c < n_cmds || held) && !clear) {  // one issue slot per iteration
#pragma HLS LOOP_TRIPCOUNT min = 0 max = TABULAR_MAX_BATCH
#pragma HLS PIPELINE II = TABULAR_COMMANDS_II
            // No read of a row within HAZARD_WINDOW slots of its write (the in-flight check below).
#pragma HLS DEPENDENCE variable = row_copy type = inter direction = RAW distance = HAZARD_WINDOW dependent = true
#pragma HLS DEPENDENCE variable = update_copy type = inter direction = RAW distance = HAZARD_WINDOW dependent = true
            pearl::axis128 cmd = held_cmd;
            if (!held) {
                cmd = s_axis_cmd.read();
                c++;
            }
            const uint64_t lo = pearl::axis_lo(cmd), hi = pearl::axis_hi(cmd);
            const int32_t value = int32_t(uint32_t(lo));
            const uint32_t s = uint32_t(lo >> 32);
            const uint32_t s2 = uint32_t(hi);
            const uint32_t a = uint32_t(hi >> 32) & 0xFF;
            const uint32_t a2 = uint32_t(hi >> 40) & 0xFF;
            const bool done = ((hi >> 48) & 1) != 0;
            const uint32_t op = uint32_t(hi >> 56) & 0xFF;
            const bool sa_ok = s < STATES && a < ACTIONS;
            const uint32_t s_rd = sa_ok ? s : 0, a_rd = sa_ok ? a : 0;  // in-range addresses for the reads
            const bool update_ok = sa_ok && s2 < STATES && (!is_sarsa || a2 < ACTIONS);
            const uint32_t s2_rd = s2 < STATES ? s2 : 0;
            const bool is_update = op == tabular::OP_UPDATE && update_ok;
            const bool is_write = op == tabular::OP_WRITE && sa_ok;
            // UPDATE reads row s2 and word (s, a), READ word (s, a); a write in flight to either row waits.
            const bool wait = (is_update && waits(in_flight, s_rd, s2_rd, true)) ||
                              (op == tabular::OP_READ && sa_ok && waits(in_flight, s_rd, s2_rd, false));
            advance(in_flight, !wait && (is_update || is_write) ? s : NO_ROW);
#ifndef __SYNTHESIS__
            g_check.slot++;
#endif
            held = wait;
            held_cmd = cmd;
            if (wait) continue;
            int32_t row2[ACTIONS];
#pragma HLS ARRAY_PARTITION variable = row2 type = complete
            for (uint32_t b = 0; b < ACTIONS; b++) {
#pragma HLS UNROLL
                row2[b] = row_copy[s2_rd][b];
            }
            const int32_t old = update_copy[s_rd][a_rd];
#ifndef __SYNTHESIS__
            if (is_update) g_check.read(s2_rd), g_check.read(s_rd);
            if (op == tabular::OP_READ && sa_ok) g_check.read(s_rd);
            if (is_update || is_write) g_check.write(s);
#endif
            const int64_t boot = done ? 0 : is_sarsa ? row2[a2 < ACTIONS ? a2 : 0] : row_max(row2, n_actions);
            if (is_update) {
                write_word(row_copy, update_copy, s, a, tabular::updated(old, boot, value, alpha, gamma));
                applied++;
            } else if (is_write) {
                write_word(row_copy, update_copy, s, a, value);
            } else if (op == tabular::OP_READ) {
                const uint32_t word = sa_ok ? uint32_t(old) : 0;
                m_axis_resp.write(pearl::make_axis128(uint64_t(word) | (uint64_t(s) << 32),
                                                      (uint64_t(op) << 56) | (uint64_t(a) << 32), cmd.last));
            } else if (op == tabular::OP_IDENTITY) {
                // XRT cannot read output registers: the same facts come back on the stream.
                m_axis_resp.write(pearl::make_axis128(uint64_t(applied) | (uint64_t(STATES) << 32),
                                                      (uint64_t(op) << 56) | uint64_t(ACTIONS), cmd.last));
            }
            clear = op == tabular::OP_CLEAR;  // other opcodes: ignored, no response
        }
        if (clear) {
            clear_table(row_copy, update_copy);
            for (uint32_t k = 0; k < IN_FLIGHT; k++) in_flight.row[k] = NO_ROW;  // drained
#ifndef __SYNTHESIS__
            g_check.drained();
#endif
        }
    }
#ifndef __SYNTHESIS__
    tabular::g_csim_slots = g_check.slot;
    tabular::g_csim_violations = g_check.violations;
#endif
    max_states = STATES;
    max_actions = ACTIONS;
    updates = applied;
}
