// replay.cpp: the sum-tree core (shared by the HLS top and the CPU backend) and the HLS top.
// Layout, arithmetic and cost: see replay.h; interface: SPEC.md.
#include "replay.h"

#ifdef __SYNTHESIS__
#define REPLAY_PREFETCH(addr) ((void)0)
#else
#pragma GCC diagnostic ignored "-Wunused-label"  // loop labels name loops for HLS directives and reports
// Only a hint for the CPU build: the batched loops touch B independent tree paths.
#define REPLAY_PREFETCH(addr) __builtin_prefetch(addr)
#endif

namespace replay {
namespace {

// The first child whose running prefix sum exceeds rem; rem becomes the offset inside that child.
// Branch-free: with non-decreasing prefixes, the number of prefixes <= rem is that child's number
// (zero-sum children have equal prefixes and are skipped). A target >= the node's sum, which the
// host never sends, is clamped to the last child so memory stays in bounds.
template <uint32_t K, typename T>
inline uint32_t choose_child(const T* child, uint64_t& rem) {
    uint64_t running = 0, before = 0;
    uint32_t chosen = 0;
CHILD_PREFIX:
    for (uint32_t k = 0; k < K; k++) {
#pragma HLS UNROLL
        running += child[k];
        const bool passed = running <= rem;
        chosen += passed;
        before += passed ? uint64_t(child[k]) : 0;
    }
    rem -= before;
    return chosen < K ? chosen : K - 1;
}

template <uint32_t K>
void sample_k(const TreeShape& shape, const uint64_t* const* sums, const uint32_t* leaves,
              const uint64_t* targets, uint32_t n, uint32_t* node, uint32_t* out_words, uint64_t* rem) {
SAMPLE_INIT:
    for (uint32_t b = 0; b < n; b++) {
        rem[b] = targets[b];
        node[b] = 0;
    }
    // Internal levels: children are u64 sums. One level for the whole batch at a time.
SAMPLE_LEVELS:
    for (uint32_t d = 0; d + 1 < shape.depth; d++) {
        const uint64_t* child = sums[d + 1];
        const bool next_is_leaf = d + 2 == shape.depth;
    SAMPLE_BATCH:
        for (uint32_t b = 0; b < n; b++) {
#pragma HLS PIPELINE II = 1
            const uint32_t base = node[b] * K;
            const uint32_t chosen = base + choose_child<K>(child + base, rem[b]);
            node[b] = chosen;
            if (next_is_leaf) {
                REPLAY_PREFETCH(leaves + size_t(chosen) * K);
            } else {
                const uint64_t* next = sums[d + 2] + size_t(chosen) * K;
                REPLAY_PREFETCH(next);
                if (K * sizeof(uint64_t) > 64) REPLAY_PREFETCH(next + 64 / sizeof(uint64_t));
            }
        }
    }
    // Leaf level: u32 words.
SAMPLE_LEAVES:
    for (uint32_t b = 0; b < n; b++) {
#pragma HLS PIPELINE II = 1
        const uint32_t base = node[b] * K;
        const uint32_t leaf = base + choose_child<K>(leaves + base, rem[b]);
        node[b] = leaf;
        out_words[b] = leaves[leaf];
    }
}

}  // namespace

void tree_clear(const TreeShape& shape, uint64_t* const* sums, uint32_t* leaves) {
CLEAR_LEVELS:
    for (uint32_t d = 0; d < shape.depth; d++) {
    CLEAR_SUMS:
        for (uint32_t i = 0; i < shape.level_size[d]; i++) sums[d][i] = 0;
    }
CLEAR_LEAVES:
    for (uint32_t i = 0; i < shape.level_size[shape.depth]; i++) leaves[i] = 0;
}

void tree_update(const TreeShape& shape, uint64_t* const* sums, uint32_t* leaves, const uint32_t* idx,
                 const uint32_t* words, uint32_t n, uint64_t* delta) {
    // Leaves first, in command order: a repeated index sees the value the previous update wrote,
    // so its delta is relative to it and the last write wins.
UPDATE_LEAVES:
    for (uint32_t b = 0; b < n; b++) {
        if (b + 8 < n && idx[b + 8] < shape.capacity) REPLAY_PREFETCH(leaves + idx[b + 8]);
        const uint32_t i = idx[b];
        if (i >= shape.capacity) {  // never sent by the host; dropped so padding stays 0
            delta[b] = 0;
            continue;
        }
        const uint32_t old = leaves[i];
        leaves[i] = words[b];
        delta[b] = uint64_t(words[b]) - uint64_t(old);  // wraps; the sums below come out exact
    }
    // Then every ancestor level, bottom up: additions commute, so the batch order no longer matters.
UPDATE_LEVELS:
    for (uint32_t level = shape.depth; level-- > 0;) {
        uint64_t* sum = sums[level];
        const uint32_t shift = shape.log2_fanout * (shape.depth - level);
    UPDATE_BATCH:
        for (uint32_t b = 0; b < n; b++) {
            if (idx[b] < shape.capacity) sum[idx[b] >> shift] += delta[b];
        }
    }
}

void tree_sample(const TreeShape& shape, const uint64_t* const* sums, const uint32_t* leaves,
                 const uint64_t* targets, uint32_t n, uint32_t* out_idx, uint32_t* out_words, uint64_t* rem) {
    switch (shape.fanout) {
        case 2: sample_k<2>(shape, sums, leaves, targets, n, out_idx, out_words, rem); break;
        case 4: sample_k<4>(shape, sums, leaves, targets, n, out_idx, out_words, rem); break;
        case 8: sample_k<8>(shape, sums, leaves, targets, n, out_idx, out_words, rem); break;
        default: sample_k<16>(shape, sums, leaves, targets, n, out_idx, out_words, rem); break;
    }
}

}  // namespace replay

// ---- HLS top ------------------------------------------------------------------------------------
namespace {

constexpr replay::TreeShape SHAPE = replay::TOP_SHAPE;

constexpr uint64_t level_offset(uint32_t d) {
    uint64_t off = 0;
    for (uint32_t i = 0; i < d; i++) off += SHAPE.level_size[i];
    return off;
}

// The tree lives across calls (on the FPGA: on-chip memory, zero after configuration; the host
// sends CLEAR to start over). Levels are consecutive segments of one sums array, addressed through
// per-level pointers with compile-time offsets.
uint64_t g_sums[replay::sums_size(SHAPE)];
uint32_t g_leaves[SHAPE.level_size[SHAPE.depth]];

void level_pointers(uint64_t* sums[replay::MAX_DEPTH]) {
LEVEL_POINTERS:
    for (uint32_t d = 0; d < replay::MAX_DEPTH; d++) {
#pragma HLS UNROLL
        sums[d] = d < SHAPE.depth ? g_sums + level_offset(d) : g_sums;
    }
}

}  // namespace

void replay_top(pearl::stream<pearl::axis128>& s_axis_cmd, pearl::stream<pearl::axis128>& m_axis_resp,
                uint32_t n_cmds, uint32_t& capacity, uint32_t& fanout, uint64_t& total) {
#pragma HLS INTERFACE mode = axis port = s_axis_cmd
#pragma HLS INTERFACE mode = axis port = m_axis_resp
#pragma HLS INTERFACE mode = s_axilite port = n_cmds offset = 0x10 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = capacity offset = 0x18 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = fanout offset = 0x20 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = total offset = 0x28 bundle = control
#pragma HLS INTERFACE mode = s_axilite port = return bundle = control
    uint64_t* sums[replay::MAX_DEPTH];
    level_pointers(sums);
COMMANDS:
    for (uint32_t c = 0; c < n_cmds; c++) {
        const pearl::axis128 cmd = s_axis_cmd.read();
        const uint64_t cmd_hi = pearl::axis_hi(cmd);
        const uint32_t op = uint32_t(cmd_hi >> 56) & 0xFF;
        const uint32_t index = uint32_t(cmd_hi);
        const uint64_t value = pearl::axis_lo(cmd);
        const uint64_t resp_hi = uint64_t(op) << 56;
        if (op == replay::OP_UPDATE) {
            const uint32_t word = uint32_t(value);
            uint64_t delta;
            replay::tree_update(SHAPE, sums, g_leaves, &index, &word, 1, &delta);
        } else if (op == replay::OP_SAMPLE) {
            uint32_t leaf, word;
            uint64_t rem;
            replay::tree_sample(SHAPE, sums, g_leaves, &value, 1, &leaf, &word, &rem);
            m_axis_resp.write(pearl::make_axis128(word, resp_hi | leaf, cmd.last));
        } else if (op == replay::OP_TOTAL) {
            m_axis_resp.write(pearl::make_axis128(replay::tree_total(sums), resp_hi, cmd.last));
        } else if (op == replay::OP_CLEAR) {
            replay::tree_clear(SHAPE, sums, g_leaves);
        }  // other opcodes: ignored, no response
    }
    capacity = SHAPE.capacity;
    fanout = SHAPE.fanout;
    total = replay::tree_total(sums);
}

const uint64_t* const* replay_top_sums() {
    static uint64_t* sums[replay::MAX_DEPTH];
    level_pointers(sums);
    return sums;
}
const uint32_t* replay_top_leaves() { return g_leaves; }
