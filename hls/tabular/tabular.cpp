// tabular.cpp: the tabular update kernel (see tabular.h for the arithmetic and the top's design).
// `update_batch` is the batch loop that the cpu backend (pearl_fpga/native/tabular_ext.cpp) runs;
// `tabular_top` is the HLS top that make hls / make bitstream synthesize, with the same update
// (`update_one`) behind AXI4-Stream commands and AXI4-Lite control. The reference RTL of the same
// pipeline is rtl/tabular_top.sv.
#include "tabular.h"

#include "common/write_window.h"

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
// Hazard forwarding (SPEC.md, "Pipeline hazards"): the loop's II equals its read-to-write latency (the
// next command's bootstrap can be the value just computed, a true dependence through this window), so
// a read can run ahead of the write of at most FWD_DEPTH = 1 earlier command; the window keeps that
// write, and the DEPENDENCE pragmas of COMMANDS (distance RAW_DISTANCE) make HLS land every write
// before the read of the command after. A restructured loop with more commands in flight raises it.
constexpr uint32_t FWD_DEPTH = 1;
constexpr uint32_t RAW_DISTANCE = FWD_DEPTH + 1;
static_assert(STATES <= (1u << 26), "the window's key packs s above 6 bits of action");
// The word Q[s][b] as the window's key: s and b side by side (ACTIONS <= MAX_ACTIONS = 64), no arithmetic.
inline uint32_t word_key(uint32_t s, uint32_t b) { return (s << 6) | b; }
static_assert(tabular::MAX_ACTIONS == 64, "word_key gives the action 6 bits");
// The last FWD_DEPTH words written, forwarded to the reads of the next commands.
pearl::WriteWindow<uint32_t, int32_t, FWD_DEPTH> g_window = {};

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
    g_window.clear();
}

// Q[s][b] as the sequential loop sees it: the stored word, or a write still in flight.
int32_t forwarded(int32_t stored, uint32_t s, uint32_t b) {
#pragma HLS INLINE
    return g_window.read(word_key(s, b), stored);
}

void write_word(Table& row, Table& self, uint32_t s, uint32_t a, int32_t value) {
#pragma HLS INLINE
    row[s][a] = value;
    self[s][a] = value;
    g_window.push(word_key(s, a), value);
}

}  // namespace

void tabular_top(pearl::stream<pearl::axis128>& s_axis_cmd, pearl::stream<pearl::axis128>& m_axis_resp, uint32_t n_cmds,
                 uint32_t alpha, uint32_t gamma, uint32_t sarsa, uint32_t n_actions, uint32_t& max_states,
                 uint32_t& max_actions, uint32_t& updates) {
#pragma HLS INTERFACE mode = axis port = s_axis_cmd
#pragma HLS INTERFACE mode = axis port = m_axis_resp
#pragma HLS INTERFACE mode = s_axilite port = n_cmds offset = 0x10 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = alpha offset = 0x18 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = gamma offset = 0x20 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = sarsa offset = 0x28 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = n_actions offset = 0x30 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = max_states offset = 0x38 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = max_actions offset = 0x40 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = updates offset = 0x48 bundle = control
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
    uint32_t c = 0;
    // A CLEAR ends the pipelined run (the pipeline drains), clears the table, and the run resumes.
SEGMENTS:
    while (c < n_cmds) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = 1
        bool clear = false;
    COMMANDS:
        for (; c < n_cmds && !clear; c++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = TABULAR_MAX_BATCH
#pragma HLS PIPELINE II = 1
            // A read may run ahead of the write of the FWD_DEPTH commands before (the window covers
            // them), no further: each write lands before the read RAW_DISTANCE commands later.
#pragma HLS DEPENDENCE variable = row_copy type = inter direction = RAW distance = RAW_DISTANCE dependent = true
#pragma HLS DEPENDENCE variable = update_copy type = inter direction = RAW distance = RAW_DISTANCE dependent = true
            const pearl::axis128 cmd = s_axis_cmd.read();
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
            int32_t row2[ACTIONS];
#pragma HLS ARRAY_PARTITION variable = row2 type = complete
            for (uint32_t b = 0; b < ACTIONS; b++) {
#pragma HLS UNROLL
                row2[b] = forwarded(row_copy[s2_rd][b], s2_rd, b);
            }
            const int32_t old = forwarded(update_copy[s_rd][a_rd], s_rd, a_rd);
            // The row max over the columns in use (n_actions), a fixed-size unrolled compare tree.
            int32_t best = row2[0];
            for (uint32_t b = 1; b < ACTIONS; b++) {
#pragma HLS UNROLL
                best = b < n_actions && row2[b] > best ? row2[b] : best;
            }
            const int64_t boot = done ? 0 : is_sarsa ? row2[a2 < ACTIONS ? a2 : 0] : best;
            if (op == tabular::OP_UPDATE && update_ok) {
                write_word(row_copy, update_copy, s, a, tabular::updated(old, boot, value, alpha, gamma));
                applied++;
            } else if (op == tabular::OP_WRITE && sa_ok) {
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
        if (clear) clear_table(row_copy, update_copy);
    }
    max_states = STATES;
    max_actions = ACTIONS;
    updates = applied;
}
