// replay.h: the prioritized-replay sum-tree kernel (contract: hls/replay/SPEC.md).
//
// One source, two builds:
//   * Vitis HLS synthesizes `replay_top` (replay.cpp) with CAPACITY/FANOUT fixed at compile time
//     (REPLAY_CAPACITY / REPLAY_FANOUT of replay_config.h, generated from kernel.json, overridable with -D).
//   * g++ compiles the batched core functions (`tree_update`, `tree_sample`, `tree_total`,
//     `tree_clear`) into the Python package; there the shape is a runtime TreeShape, so one binary
//     serves every capacity and fan-out, with the levels in heap memory behind level pointers.
//   The top keeps its own compile-time storage (below: Vitis HLS wants static per-level arrays, not
//   pointer arrays) and shares the arithmetic, replay.cpp's `choose_child<K>` (prefix compare of
//   one descent step), `leaf_delta` and `update_lane` (one update's delta and per-level change),
//   which both the top and tree_sample/tree_update call. (A separate top storage costs the CPU
//   backend nothing: its heap levels, huge pages and batched prefetching stay as they were.)
//   replay_tb.cpp checks both against one plain model (the top through its ports only).
//
// Memory layout: one array per tree level, K = FANOUT, D = DEPTH = ceil(log_K(CAPACITY)) >= 1.
//
//   level 0      [ root ]                                   u64   (root = total)
//   level 1      [ s0 s1 ... s(K-1) ]                       u64
//   ...                                                      u64
//   level D-1    [ ... ceil(CAPACITY / K) sums ... ]          u64
//   level D      [ p0 p1 ... p(CAPACITY-1) | 0 padding ]     u32   (leaves, Q16.16 priorities)
//
// Node i of level d has children K*i .. K*i+K-1 in level d+1; every level (except the root) is
// allocated in whole groups of K, so the K children of a node are one aligned block, read together
// (one 64-byte cache line for K=16 u32 leaves, two for K=16 u64 sums; in hardware one wide word).
// Leaf i's ancestor at level d is i >> (log2(K) * (D - d)) (K is a power of two). Padding holds 0
// forever: updates to index >= CAPACITY are dropped (the host never sends them).
//
// Cost per operation (K children, D levels):
//   update: 1 leaf read-modify-write + D ancestor adds of (new - old) in wrapping u64 arithmetic
//           (exact: every true sum fits in 64 bits), so a batch is the same as the updates applied
//           one after another; the batched form does the leaves in command order (repeated index:
//           last one wins), then adds the deltas level by level (additions commute).
//   sample: D steps, each reading the K child sums of the current node and picking the first child
//           whose running prefix sum exceeds the target (branch-free: count prefixes <= target).
//           The batched form walks all B samples one level at a time, prefetching the next level,
//           so B independent cache misses overlap instead of D*B serial ones.
//   total:  one read of the root.
//
// ---- HLS top (replay_top in replay.cpp): storage, pragmas, pipeline ----------------------------
// Storage, all compile-time sized (no pointers, no pointer arrays: Vitis HLS maps each static array
// to its own memory). The arrays are static locals of replay_top, each declared with its pragmas
// (UG1399 wants them in the function that defines the array), and passed down by reference:
//   level 0        g_root: a 64-bit register (the total).
//   level D=1..DEPTH  levelD[GROUPS_D][K]: u64 sums, one block of K children per row (the leaf level,
//                  D = DEPTH, is leaf_level[GROUPS_DEPTH][K] of u32 words). ARRAY_PARTITION complete
//                  dim=2 -> K memories of GROUPS_D words per level, so the K children of a node are
//                  read in the same cycle. BIND_STORAGE ram_s2p latency=1: one read and one write
//                  port, fixed 1-cycle read, which the forwarding below assumes.
//   front leaves   front_leaves[LEAVES]: a second copy of the leaf words, read and written at the
//                  front of the pipeline so an UPDATE has its delta (new - old) before it reaches the
//                  sums; cost: CAPACITY x 32 bits more memory, for II = 1 on mixed streams.
//   memory kind    block RAM everywhere, except that with REPLAY_LEAVES_URAM (Alveo builds, from the
//                  catalog's "uram_leaves") the leaf level and the front leaves are UltraRAM: they
//                  are most of the storage, and in block RAM a 2^19-leaf tree would not fit one SLR.
// Pipeline: COMMANDS is one loop, PIPELINE II=1, over the command stream; its body runs every level
// (Descent<1..DEPTH>, unrolled by template recursion, INLINE). A SAMPLE descends (read the K
// children, prefix compare: choose_child, pick); an UPDATE does a read-modify-write of one lane per
// level. Both derive level D's address from level D-1's output, so every access to a level happens
// in the same pipeline stage, whatever the opcode. A later command's read of a level can still run
// ahead of an earlier command's write there by the level's read-to-write latency (2 cycles at most:
// read, 1-cycle memory latency, add or compare, write); each level keeps its last FWD_DEPTH = 2 writes
// (hls/common/write_window.h) and reads through them, and the DEPENDENCE pragmas in COMMANDS (inter,
// RAW, distance 3, dependent) make HLS land every write before the read 3 commands later (SPEC.md,
// "Pipeline hazards"). HLS sees the true dependences through the windows and the root register, and
// raises II itself if they do not fit in one cycle.
// CLEAR ends the pipelined run (drain), zeroes every level (one row of K per cycle), then resumes.
// Expected cost of the top (K <= 16, after fill; estimates: csynth to confirm, Vitis HLS was not
// available when this was written; the planner's stated model, pearl_fpga/planner/hls_schedule.py):
//   SAMPLE, UPDATE, TOTAL: 1 command per clock (II = 1) in any mix. Latency about 3 + DEPTH * L
//     cycles, L = 1 read + the K chained 64-bit prefix adds and compares of choose_child (the model
//     assumes two per clock at <= 150 MHz, one at 200-300 MHz), e.g. 3 + 4 * 9 = 39 cycles for
//     CAPACITY 16384, K 16 (DEPTH 4) at 100 MHz.
//   B commands: B - 1 + latency cycles.  CLEAR: LEAVES + sum over levels of GROUPS_D cycles
//     (about CAPACITY * (1 + 1/(K-1)) / K + CAPACITY), plus one pipeline drain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/hls_compat.h"
#include "replay_config.h"  // REPLAY_CAPACITY / REPLAY_FANOUT and the limits, from kernel.json

namespace replay {

// Opcodes of the command stream (SPEC.md, "Command word").
constexpr uint32_t OP_UPDATE = 0x01;
constexpr uint32_t OP_SAMPLE = 0x02;
constexpr uint32_t OP_TOTAL = 0x03;
constexpr uint32_t OP_CLEAR = 0x04;
constexpr uint32_t OP_IDENTITY = 0x05;  // answers the synthesized capacity and fan-out (hosts without register reads: XRT)

constexpr uint32_t MAX_CAPACITY = config::CAPACITY_RANGE.max;  // CPU backend limit (SPEC.md)
constexpr uint32_t MAX_BATCH = config::MAX_BATCH_RANGE.max;     // most commands of one kind in one batched call
constexpr uint32_t MAX_DEPTH = 20;           // K=2 at 2^20 leaves

// The shape of a tree: sizes of every level. Built by make_shape (constexpr for the HLS top).
struct TreeShape {
    uint32_t capacity;
    uint32_t fanout;
    uint32_t log2_fanout;
    uint32_t depth;                       // levels below the root
    uint32_t level_size[MAX_DEPTH + 1];   // allocated entries per level; [depth] = leaves
};

constexpr bool valid_fanout(uint32_t k) { return k == 2 || k == 4 || k == 8 || k == 16; }

// ceil(log_K(capacity)), at least 1 (SPEC.md).
constexpr uint32_t tree_depth(uint32_t capacity, uint32_t fanout) {
    uint32_t depth = 1;
    uint64_t span = fanout;
    while (span < capacity) {
        depth++;
        span *= fanout;
    }
    return depth;
}

// Caller checks: valid_fanout(fanout) and 1 <= capacity <= MAX_CAPACITY.
constexpr TreeShape make_shape(uint32_t capacity, uint32_t fanout) {
    TreeShape s{};
    s.capacity = capacity;
    s.fanout = fanout;
    s.log2_fanout = fanout == 2 ? 1 : fanout == 4 ? 2 : fanout == 8 ? 3 : 4;
    s.depth = tree_depth(capacity, fanout);
    for (uint32_t d = 0; d <= s.depth; d++) {
        const uint32_t shift = s.log2_fanout * (s.depth - d);
        const uint64_t nodes = (uint64_t(capacity) + (uint64_t(1) << shift) - 1) >> shift;
        // Whole groups of K below the root, so a node's children are one block.
        s.level_size[d] = d == 0 ? 1u : uint32_t((nodes + fanout - 1) / fanout * fanout);
    }
    return s;
}

// Sum of the sums levels' sizes (levels 0..depth-1), for callers that carve them from one buffer.
constexpr uint64_t sums_size(const TreeShape& s) {
    uint64_t n = 0;
    for (uint32_t d = 0; d < s.depth; d++) n += s.level_size[d];
    return n;
}

// sums[d] points at level d (d < depth, u64); leaves is level depth (u32). Both zero-filled by the
// caller at construction (or by tree_clear).
void tree_clear(const TreeShape& shape, uint64_t* const* sums, uint32_t* leaves);

// Applies n updates (leaf idx[b] := words[b]) as if one after another. delta: n entries of scratch.
void tree_update(const TreeShape& shape, uint64_t* const* sums, uint32_t* leaves, const uint32_t* idx,
                 const uint32_t* words, uint32_t n, uint64_t* delta);

// n samples: leaf index and its word for each target. The caller guarantees target < total, which
// makes the chosen leaf non-zero and < capacity. rem: n entries of scratch.
void tree_sample(const TreeShape& shape, const uint64_t* const* sums, const uint32_t* leaves,
                 const uint64_t* targets, uint32_t n, uint32_t* out_idx, uint32_t* out_words, uint64_t* rem);

inline uint64_t tree_total(const uint64_t* const* sums) { return sums[0][0]; }

// ---- HLS top: the synthesized kernel, with the compile-time shape -------------------------------
constexpr TreeShape TOP_SHAPE = make_shape(REPLAY_CAPACITY, REPLAY_FANOUT);
static_assert(valid_fanout(REPLAY_FANOUT), "REPLAY_FANOUT must be 2, 4, 8 or 16");
static_assert(REPLAY_CAPACITY >= 1, "REPLAY_CAPACITY must be at least 1");

}  // namespace replay

// Processes n_cmds commands from s_axis_cmd (SPEC.md); one response per SAMPLE and TOTAL.
// capacity/fanout/total are AXI4-Lite read registers (total as of the end of the call).
extern "C" void replay_top(pearl::stream<pearl::axis128>& s_axis_cmd, pearl::stream<pearl::axis128>& m_axis_resp,
                uint32_t n_cmds, uint32_t& capacity, uint32_t& fanout, uint64_t& total);

