// replay.cpp: the sum-tree core (shared by the HLS top and the CPU backend) and the HLS top.
// Layout, arithmetic and cost: see replay.h; interface: SPEC.md.
#include "replay.h"

#include <type_traits>

#include "common/write_window.h"

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

// The arithmetic of one UPDATE, shared by the batched core and the top: the leaf's change as a
// wrapping u64 delta, and what each level does with it (the sums add it, the leaf takes the word).
// Wrapping is exact overall: every true sum fits in 64 bits.
inline uint64_t leaf_delta(uint32_t word, uint32_t old) { return uint64_t(word) - uint64_t(old); }
inline void update_lane(uint64_t& sum, uint32_t, uint64_t delta) { sum += delta; }
inline void update_lane(uint32_t& leaf, uint32_t word, uint64_t) { leaf = word; }

template <uint32_t K>
void sample_k(const TreeShape& shape, const uint64_t* const* sums, const uint32_t* leaves,
              const uint64_t* targets, uint32_t n, uint32_t* node, uint32_t* out_words, uint64_t* rem) {
SAMPLE_INIT:
    for (uint32_t b = 0; b < n; b++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_BATCH
        rem[b] = targets[b];
        node[b] = 0;
    }
    // Internal levels: children are u64 sums. One level for the whole batch at a time.
SAMPLE_LEVELS:
    for (uint32_t d = 0; d + 1 < shape.depth; d++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_DEPTH
        const uint64_t* child = sums[d + 1];
        const bool next_is_leaf = d + 2 == shape.depth;
    SAMPLE_BATCH:
        for (uint32_t b = 0; b < n; b++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_BATCH
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
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_BATCH
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
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_DEPTH
    CLEAR_SUMS:
        for (uint32_t i = 0; i < shape.level_size[d]; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_CAPACITY
            sums[d][i] = 0;
        }
    }
CLEAR_LEAVES:
    for (uint32_t i = 0; i < shape.level_size[shape.depth]; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_CAPACITY
        leaves[i] = 0;
    }
}

void tree_update(const TreeShape& shape, uint64_t* const* sums, uint32_t* leaves, const uint32_t* idx,
                 const uint32_t* words, uint32_t n, uint64_t* delta) {
    // Leaves first, in command order: a repeated index sees the value the previous update wrote,
    // so its delta is relative to it and the last write wins.
UPDATE_LEAVES:
    for (uint32_t b = 0; b < n; b++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_BATCH
        if (b + 8 < n && idx[b + 8] < shape.capacity) REPLAY_PREFETCH(leaves + idx[b + 8]);
        const uint32_t i = idx[b];
        if (i >= shape.capacity) {  // never sent by the host; dropped so padding stays 0
            delta[b] = 0;
            continue;
        }
        const uint32_t old = leaves[i];
        leaves[i] = words[b];
        delta[b] = leaf_delta(words[b], old);
    }
    // Then every ancestor level, bottom up: additions commute, so the batch order no longer matters.
UPDATE_LEVELS:
    for (uint32_t level = shape.depth; level-- > 0;) {
        uint64_t* sum = sums[level];
        const uint32_t shift = shape.log2_fanout * (shape.depth - level);
    UPDATE_BATCH:
        for (uint32_t b = 0; b < n; b++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_BATCH
            if (idx[b] < shape.capacity) update_lane(sum[idx[b] >> shift], 0, delta[b]);
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
// Storage and pipeline of the synthesized kernel: see "HLS top" in replay.h. No pointers: every level
// is its own static array of compile-time size, reached through Level<D>, and the level loop is
// unrolled by template recursion (Descent<1> .. Descent<DEPTH>) inside one pipelined command loop.
namespace {

using replay::choose_child;
using replay::leaf_delta;
using replay::update_lane;
constexpr replay::TreeShape SHAPE = replay::TOP_SHAPE;
constexpr uint32_t K = SHAPE.fanout;
constexpr uint32_t LOG2K = SHAPE.log2_fanout;
constexpr uint32_t DEPTH = SHAPE.depth;
constexpr uint32_t LEAVES = SHAPE.level_size[DEPTH];
// Pragma values are evaluated where the pragma stands (UG1399): replay_top, in the global namespace,
// sees these, not replay::MAX_BATCH.
constexpr uint32_t MAX_BATCH = replay::MAX_BATCH;
// The leaf words' memories (leaf_level, front_leaves): block RAM read in 1 cycle, or, on an Alveo card
// (hls/build.mk defines REPLAY_LEAVES_URAM from the catalog), UltraRAM read through its output and
// cascade registers in URAM_READ_LATENCY cycles, so that a cascade of up to URAM_CASCADE_BLOCKS blocks
// closes timing at the card's clock (UG573, "UltraRAM cascade" REG_CAS; UG949, the cascade height).
#ifdef REPLAY_LEAVES_URAM
constexpr uint32_t LEAF_LATENCY = replay::config::URAM_READ_LATENCY;
#else
constexpr uint32_t LEAF_LATENCY = 1;
#endif
// Hazard forwarding (SPEC.md, "Pipeline hazards"): at II = 1 a level's write lands up to FWD_DEPTH
// cycles after the read of the same command (read, LEAF_LATENCY cycles of the slowest memory, add or
// compare, write), so the next FWD_DEPTH commands can read before it; each level keeps its last
// FWD_DEPTH writes, and the DEPENDENCE pragmas of COMMANDS (distance RAW_DISTANCE) make HLS land every
// write within that.
constexpr uint32_t FWD_DEPTH = LEAF_LATENCY + 1;
constexpr uint32_t RAW_DISTANCE = FWD_DEPTH + 1;
// COMMANDS' initiation interval: 1 up to the descriptor's II1_MAX_MHZ, 2 above it (SPEC.md, "Initiation
// interval"; the catalog's hls_defines set REPLAY_COMMANDS_II for a faster clock).
#ifndef REPLAY_COMMANDS_II
#define REPLAY_COMMANDS_II 1
#endif

// The K children of one node, as one value (K registers in hardware).
template <typename Word>
struct Group {
    Word child[K];
};

// Level D (1..DEPTH; DEPTH = leaves) of the top's tree: GROUPS blocks of K children, stored as
// mem[group][lane]. The memory itself is a static array of replay_top (declared there, with its
// partition and storage pragmas, where UG1399 wants them: in the function that defines the array);
// the functions below receive it by reference. Partitioning dim 2 gives K memories of GROUPS words,
// so a node's K children are read in one cycle; the write window holds the blocks the last FWD_DEPTH
// commands wrote, which the next commands' reads may run ahead of. The top declares MAX_DEPTH level
// memories (so that each can be named in a pragma); from DEPTH on they are 1 x K placeholders it never
// uses, and the leaf level (D = DEPTH) is its own array, leaf_level.
// (C++14 on purpose, no `if constexpr` / inline variables: the Vitis HLS front end's default.)
template <uint32_t D>
struct Level {
    using Word = typename std::conditional<D == DEPTH, uint32_t, uint64_t>::type;
    static constexpr uint32_t GROUPS = D <= DEPTH ? SHAPE.level_size[D] / K : 1;
    static constexpr uint32_t SHIFT = D <= DEPTH ? LOG2K * (DEPTH - D) : 0;  // leaf index >> SHIFT = its ancestor here
    using Memory = Word[GROUPS][K];
    // What the top declares as level##D: the memory above the leaves; at D >= DEPTH a 1 x K
    // placeholder (the leaf level is its own array, leaf_level, so that it can be bound to UltraRAM).
    using Declared = typename std::conditional<(D < DEPTH), Memory, Word[1][K]>::type;
    static pearl::WriteWindow<uint32_t, Group<Word>, FWD_DEPTH> window;  // group -> block written

    static Group<Word> read(const Memory& mem, uint32_t group) {
#pragma HLS INLINE
        Group<Word> stored;
    READ_LANES:
        for (uint32_t k = 0; k < K; k++) {
#pragma HLS UNROLL
            stored.child[k] = mem[group][k];
        }
        return window.read(group, stored);
    }

    // Writes the one changed lane (one of the K memories) and remembers the whole block.
    static void write(Memory& mem, uint32_t group, uint32_t lane, const Group<Word>& value) {
#pragma HLS INLINE
        mem[group][lane] = value.child[lane];
        window.push(group, value);
    }

    static void clear(Memory& mem) {
#pragma HLS INLINE
    CLEAR_GROUPS:
        for (uint32_t g = 0; g < GROUPS; g++) {
#pragma HLS PIPELINE II = 1
        CLEAR_LANES:
            for (uint32_t k = 0; k < K; k++) {
#pragma HLS UNROLL
                mem[g][k] = 0;
            }
        }
        window.clear();
    }
};
template <uint32_t D>
pearl::WriteWindow<uint32_t, Group<typename Level<D>::Word>, FWD_DEPTH> Level<D>::window = {};

// The leaf words once more (replay_top's front_leaves), read and written at the front of the
// pipeline: an UPDATE needs the old word (for its delta) before it reaches the sums, while SAMPLE
// reads the leaves last. It has its own write window (leaf index -> word), as the levels do.
using FrontLeaves = uint32_t[LEAVES];
// In UltraRAM the front copy is banked like the leaf level (whose K lane memories are LEAVES / K deep):
// banks of at most URAM_CASCADE_BLOCKS blocks of 4K words each, rather than one cascade of all of them.
constexpr uint32_t URAM_BANK_WORDS = 4096 * replay::config::URAM_CASCADE_BLOCKS;
constexpr uint32_t FRONT_BANKS = (LEAVES + URAM_BANK_WORDS - 1) / URAM_BANK_WORDS;
pearl::WriteWindow<uint32_t, uint32_t, FWD_DEPTH> g_front_window = {};
uint64_t g_root = 0;  // level 0: the total, a register


// One command at level D. An UPDATE changes its ancestor's lane at this level; a SAMPLE reads the
// K children of `node` (its choice at level D-1), picks one and moves `node` to it. Both compute
// this level's address from the previous level's output, so HLS schedules every access to level D
// in the same stage. Returns the chosen child's value (at the leaf level: the sampled word).
template <uint32_t D>
typename Level<D>::Word level_step(typename Level<D>::Memory& mem, bool is_update, uint32_t index, uint64_t delta,
                                   uint32_t word, uint32_t& node, uint64_t& rem) {
#pragma HLS INLINE
    using L = Level<D>;
    const uint32_t ancestor = index >> L::SHIFT;
    // The clamp only acts for commands that are not a valid SAMPLE (target >= total, other opcodes,
    // which run the descent too and discard it): it keeps their addresses inside the level.
    const uint32_t group = is_update ? ancestor >> LOG2K : node < L::GROUPS ? node : L::GROUPS - 1;
    Group<typename L::Word> block = L::read(mem, group);
    uint32_t lane;
    if (is_update) {
        lane = ancestor & (K - 1);
        update_lane(block.child[lane], word, delta);
        L::write(mem, group, lane, block);
    } else {
        lane = choose_child<K>(block.child, rem);
        node = group * K + lane;
    }
    return block.child[lane];
}

using LeafLevel = Level<DEPTH>::Memory;

// Levels D..DEPTH, unrolled at compile time, each given its own memory (the top's level D, D+1, ...
// above the leaves, then leaf_level; the placeholders from DEPTH on are ignored); the leaf level
// hands out the sampled word.
template <uint32_t D, bool LEAF = D == DEPTH>
struct Descent {
    template <typename... Deeper>
    static void run(bool is_update, uint32_t index, uint64_t delta, uint32_t word, uint32_t& node, uint64_t& rem,
                    uint32_t& leaf_word, LeafLevel& leaves, typename Level<D>::Memory& mem, Deeper&... deeper) {
#pragma HLS INLINE
        level_step<D>(mem, is_update, index, delta, word, node, rem);
        Descent<D + 1>::run(is_update, index, delta, word, node, rem, leaf_word, leaves, deeper...);
    }
    template <typename... Deeper>
    static void clear(LeafLevel& leaves, typename Level<D>::Memory& mem, Deeper&... deeper) {
#pragma HLS INLINE
        Level<D>::clear(mem);
        Descent<D + 1>::clear(leaves, deeper...);
    }
};
template <uint32_t D>
struct Descent<D, true> {
    template <typename... Unused>
    static void run(bool is_update, uint32_t index, uint64_t delta, uint32_t word, uint32_t& node, uint64_t& rem,
                    uint32_t& leaf_word, LeafLevel& leaves, Unused&...) {
#pragma HLS INLINE
        leaf_word = level_step<D>(leaves, is_update, index, delta, word, node, rem);
    }
    template <typename... Unused>
    static void clear(LeafLevel& leaves, Unused&...) {
#pragma HLS INLINE
        Level<D>::clear(leaves);
    }
};

void clear_front(FrontLeaves& front_leaves) {
#pragma HLS INLINE
CLEAR_FRONT:
    for (uint32_t i = 0; i < LEAVES; i++) {
#pragma HLS PIPELINE II = 1
        front_leaves[i] = 0;
    }
    g_front_window.clear();
    g_root = 0;
}

// Leaf `index` := word at the front of the pipeline; returns word - old (wrapping).
uint64_t front_update(FrontLeaves& front_leaves, uint32_t index, uint32_t word) {
#pragma HLS INLINE
    const uint32_t old = g_front_window.read(index, front_leaves[index]);
    front_leaves[index] = word;
    g_front_window.push(index, word);
    return leaf_delta(word, old);
}

static_assert(replay::MAX_DEPTH == 20, "replay_top declares one memory per level up to MAX_DEPTH: update the list");

}  // namespace

// Pragmas from a macro (UG1399: _Pragma), so that one line declares a level's memory, and one line
// gives the pragmas of every level the tree has.
#define REPLAY_PRAGMA(x) _Pragma(#x)
#define REPLAY_LEVEL_MEMORY(D) static Level<D>::Declared level##D = {};
#define REPLAY_LEVEL_STORAGE(D)                                                   \
    REPLAY_PRAGMA(HLS ARRAY_PARTITION variable = level##D type = complete dim = 2) \
    REPLAY_PRAGMA(HLS BIND_STORAGE variable = level##D type = ram_s2p latency = 1)
#define REPLAY_LEVEL_DEPENDENCE(D) \
    REPLAY_PRAGMA(HLS DEPENDENCE variable = level##D type = inter direction = RAW distance = RAW_DISTANCE dependent = true)
#define REPLAY_LEVELS level1, level2, level3, level4, level5, level6, level7, level8, level9, level10, level11, \
    level12, level13, level14, level15, level16, level17, level18, level19, level20

// Only the levels this build's tree has (1 .. DEPTH - 1) carry pragmas: the placeholders from DEPTH on are
// never read, Vitis HLS removes them, and a pragma naming a removed variable is a warning. The
// preprocessor counts the levels from REPLAY_CAPACITY and REPLAY_FANOUT as tree_depth does
// (REPLAY_TREE_DEPTH, checked against DEPTH below), and REPLAY_EACH_LEVEL(X) expands X(1) .. X(DEPTH - 1).
#define REPLAY_LOG2K (REPLAY_FANOUT == 2 ? 1 : REPLAY_FANOUT == 4 ? 2 : REPLAY_FANOUT == 8 ? 3 : 4)
#define REPLAY_SPANS(d) (REPLAY_LOG2K * (d) >= 21 || (1 << (REPLAY_LOG2K * (d))) >= REPLAY_CAPACITY)
#if REPLAY_SPANS(1)
#define REPLAY_TREE_DEPTH 1
#elif REPLAY_SPANS(2)
#define REPLAY_TREE_DEPTH 2
#elif REPLAY_SPANS(3)
#define REPLAY_TREE_DEPTH 3
#elif REPLAY_SPANS(4)
#define REPLAY_TREE_DEPTH 4
#elif REPLAY_SPANS(5)
#define REPLAY_TREE_DEPTH 5
#elif REPLAY_SPANS(6)
#define REPLAY_TREE_DEPTH 6
#elif REPLAY_SPANS(7)
#define REPLAY_TREE_DEPTH 7
#elif REPLAY_SPANS(8)
#define REPLAY_TREE_DEPTH 8
#elif REPLAY_SPANS(9)
#define REPLAY_TREE_DEPTH 9
#elif REPLAY_SPANS(10)
#define REPLAY_TREE_DEPTH 10
#elif REPLAY_SPANS(11)
#define REPLAY_TREE_DEPTH 11
#elif REPLAY_SPANS(12)
#define REPLAY_TREE_DEPTH 12
#elif REPLAY_SPANS(13)
#define REPLAY_TREE_DEPTH 13
#elif REPLAY_SPANS(14)
#define REPLAY_TREE_DEPTH 14
#elif REPLAY_SPANS(15)
#define REPLAY_TREE_DEPTH 15
#elif REPLAY_SPANS(16)
#define REPLAY_TREE_DEPTH 16
#elif REPLAY_SPANS(17)
#define REPLAY_TREE_DEPTH 17
#elif REPLAY_SPANS(18)
#define REPLAY_TREE_DEPTH 18
#elif REPLAY_SPANS(19)
#define REPLAY_TREE_DEPTH 19
#else
#define REPLAY_TREE_DEPTH 20
#endif
#define REPLAY_UPTO_1(X)
#define REPLAY_UPTO_2(X) REPLAY_UPTO_1(X) X(1)
#define REPLAY_UPTO_3(X) REPLAY_UPTO_2(X) X(2)
#define REPLAY_UPTO_4(X) REPLAY_UPTO_3(X) X(3)
#define REPLAY_UPTO_5(X) REPLAY_UPTO_4(X) X(4)
#define REPLAY_UPTO_6(X) REPLAY_UPTO_5(X) X(5)
#define REPLAY_UPTO_7(X) REPLAY_UPTO_6(X) X(6)
#define REPLAY_UPTO_8(X) REPLAY_UPTO_7(X) X(7)
#define REPLAY_UPTO_9(X) REPLAY_UPTO_8(X) X(8)
#define REPLAY_UPTO_10(X) REPLAY_UPTO_9(X) X(9)
#define REPLAY_UPTO_11(X) REPLAY_UPTO_10(X) X(10)
#define REPLAY_UPTO_12(X) REPLAY_UPTO_11(X) X(11)
#define REPLAY_UPTO_13(X) REPLAY_UPTO_12(X) X(12)
#define REPLAY_UPTO_14(X) REPLAY_UPTO_13(X) X(13)
#define REPLAY_UPTO_15(X) REPLAY_UPTO_14(X) X(14)
#define REPLAY_UPTO_16(X) REPLAY_UPTO_15(X) X(15)
#define REPLAY_UPTO_17(X) REPLAY_UPTO_16(X) X(16)
#define REPLAY_UPTO_18(X) REPLAY_UPTO_17(X) X(17)
#define REPLAY_UPTO_19(X) REPLAY_UPTO_18(X) X(18)
#define REPLAY_UPTO_20(X) REPLAY_UPTO_19(X) X(19)
#define REPLAY_CAT(a, b) REPLAY_CAT_(a, b)
#define REPLAY_CAT_(a, b) a##b
#define REPLAY_EACH_LEVEL(X) REPLAY_CAT(REPLAY_UPTO_, REPLAY_TREE_DEPTH)(X)
static_assert(REPLAY_TREE_DEPTH == DEPTH, "REPLAY_TREE_DEPTH must count the levels as tree_depth does");

void replay_top(pearl::stream<pearl::axis128>& s_axis_cmd, pearl::stream<pearl::axis128>& m_axis_resp,
                uint32_t n_cmds, uint32_t& capacity, uint32_t& fanout, uint64_t& total) {
#pragma HLS INTERFACE mode = axis port = s_axis_cmd
#pragma HLS INTERFACE mode = axis port = m_axis_resp
PEARL_AXILITE_REGISTER(n_cmds, 0x10)
PEARL_AXILITE_REGISTER(capacity, 0x18)
PEARL_AXILITE_REGISTER(fanout, 0x20)
PEARL_AXILITE_REGISTER(total, 0x28)
#pragma HLS INTERFACE mode = s_axilite port = return bundle = control
// Vitis defaults kernels to a chained handshake that waits for ap_continue; the drivers speak ap_ctrl_hs.
#pragma HLS INTERFACE mode = ap_ctrl_hs port = return
    // The tree's storage, kept between calls: level D's memory (one per level up to MAX_DEPTH; from
    // DEPTH on, 1 x K placeholders that nothing reads), the leaf level and the front copy of the leaves.
    REPLAY_LEVEL_MEMORY(1) REPLAY_LEVEL_MEMORY(2) REPLAY_LEVEL_MEMORY(3) REPLAY_LEVEL_MEMORY(4)
    REPLAY_LEVEL_MEMORY(5) REPLAY_LEVEL_MEMORY(6) REPLAY_LEVEL_MEMORY(7) REPLAY_LEVEL_MEMORY(8)
    REPLAY_LEVEL_MEMORY(9) REPLAY_LEVEL_MEMORY(10) REPLAY_LEVEL_MEMORY(11) REPLAY_LEVEL_MEMORY(12)
    REPLAY_LEVEL_MEMORY(13) REPLAY_LEVEL_MEMORY(14) REPLAY_LEVEL_MEMORY(15) REPLAY_LEVEL_MEMORY(16)
    REPLAY_LEVEL_MEMORY(17) REPLAY_LEVEL_MEMORY(18) REPLAY_LEVEL_MEMORY(19) REPLAY_LEVEL_MEMORY(20)
    REPLAY_EACH_LEVEL(REPLAY_LEVEL_STORAGE)
    static LeafLevel leaf_level = {};
#pragma HLS ARRAY_PARTITION variable = leaf_level type = complete dim = 2
    static FrontLeaves front_leaves = {};
// The leaf words (the leaf level and their front copy) are most of the storage: on an Alveo card the
// build binds them to UltraRAM (hls/build.mk defines REPLAY_LEAVES_URAM from the catalog), which
// keeps the compute unit inside one SLR's block RAM, with the cascade registers (LEAF_LATENCY) and the
// front copy in FRONT_BANKS banks; Zynq boards keep them in block RAM.
#ifdef REPLAY_LEAVES_URAM
#pragma HLS BIND_STORAGE variable = leaf_level type = ram_s2p impl = uram latency = LEAF_LATENCY
#pragma HLS ARRAY_PARTITION variable = front_leaves type = block factor = FRONT_BANKS
#pragma HLS BIND_STORAGE variable = front_leaves type = ram_s2p impl = uram latency = LEAF_LATENCY
#else
#pragma HLS BIND_STORAGE variable = leaf_level type = ram_s2p impl = bram latency = 1
#pragma HLS BIND_STORAGE variable = front_leaves type = ram_s2p impl = bram latency = 1
#endif
    uint32_t c = 0;
    // A CLEAR ends the pipelined run (the pipeline drains), clears every level, and the run resumes.
SEGMENTS:
    while (c < n_cmds) {
        bool clear = false;
    COMMANDS:
        for (; c < n_cmds && !clear; c++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_BATCH
#pragma HLS PIPELINE II = REPLAY_COMMANDS_II
            // A command's read of a level may run up to FWD_DEPTH commands ahead of an earlier write
            // there (the write windows cover it); no further: each write lands before the read
            // RAW_DISTANCE commands later.
            REPLAY_EACH_LEVEL(REPLAY_LEVEL_DEPENDENCE)
#pragma HLS DEPENDENCE variable = leaf_level type = inter direction = RAW distance = RAW_DISTANCE dependent = true
#pragma HLS DEPENDENCE variable = front_leaves type = inter direction = RAW distance = RAW_DISTANCE dependent = true
            const pearl::axis128 cmd = s_axis_cmd.read();
            const uint64_t cmd_hi = pearl::axis_hi(cmd);
            const uint32_t op = uint32_t(cmd_hi >> 56) & 0xFF;
            const uint32_t index = uint32_t(cmd_hi);
            const uint64_t value = pearl::axis_lo(cmd);
            const uint64_t resp_hi = uint64_t(op) << 56;
            // Updates beyond CAPACITY are dropped (never sent by the host), so padding stays 0.
            const bool is_update = op == replay::OP_UPDATE && index < SHAPE.capacity;
            const uint32_t word = uint32_t(value);
            uint64_t delta = 0;
            if (is_update) {
                delta = front_update(front_leaves, index, word);
                g_root += delta;
            }
            uint32_t node = 0, leaf_word = 0;
            uint64_t rem = value;
            Descent<1>::run(is_update, index, delta, word, node, rem, leaf_word, leaf_level, REPLAY_LEVELS);
            if (op == replay::OP_SAMPLE) {
                m_axis_resp.write(pearl::make_axis128(leaf_word, resp_hi | node, cmd.last));
            } else if (op == replay::OP_TOTAL) {
                m_axis_resp.write(pearl::make_axis128(g_root, resp_hi, cmd.last));
            } else if (op == replay::OP_IDENTITY) {
                // XRT cannot read output registers: the same facts come back on the stream.
                m_axis_resp.write(pearl::make_axis128(SHAPE.capacity, resp_hi | SHAPE.fanout, cmd.last));
            }
            clear = op == replay::OP_CLEAR;  // other opcodes: ignored, no response
        }
        if (clear) {
            clear_front(front_leaves);
            Descent<1>::clear(leaf_level, REPLAY_LEVELS);
        }
    }
    capacity = SHAPE.capacity;
    fanout = SHAPE.fanout;
    total = g_root;
}
