// replay_tb.cpp: C simulation of the replay kernel (`make csim`). Exit code 0 = pass.
//
// Checks, against a plain C++ model (a flat array of leaves, linear scans):
//   1. replay_top at its compile-time shape, on random and adversarial command streams (repeated
//      indices, zero and maximum words, targets 0 and total-1, CLEAR in the middle, tlast echo,
//      unknown opcodes and UPDATEs beyond CAPACITY, which must change nothing);
//   2. the core functions the CPU backend calls (batched update/sample) at runtime shapes: fan-outs
//      2/4/8/16, capacities 1 .. non-powers of K;
//   3. after each sequence, every internal sum equals the sum of its K children, padding is 0 (the
//      core functions: their arrays; the top: through its ports only, as in C/RTL co-simulation,
//      where the top's C statics are not the hardware's state: every nonzero leaf is sampled at the
//      first and last target of its interval, which fails if any leaf or partial sum is wrong).
#include <cstdio>
#include <random>
#include <vector>

#include "replay.h"

namespace {

int g_failures = 0;

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (!(cond)) {                                     \
            if (++g_failures <= 20) {                      \
                std::printf("MISMATCH %s:%d: ", __FILE__, __LINE__); \
                std::printf(__VA_ARGS__);                  \
                std::printf("\n");                         \
            }                                              \
        }                                                  \
    } while (0)

// The obviously-right model: leaves only.
struct Model {
    std::vector<uint32_t> leaves;
    explicit Model(uint32_t capacity) : leaves(capacity, 0) {}
    void update(uint32_t i, uint32_t w) { leaves[i] = w; }
    uint64_t total() const {
        uint64_t t = 0;
        for (uint32_t w : leaves) t += w;
        return t;
    }
    uint32_t sample(uint64_t target) const {
        uint64_t running = 0;
        for (uint32_t i = 0; i < leaves.size(); i++) {
            running += leaves[i];
            if (target < running) return i;
        }
        return UINT32_MAX;  // target >= total: never asked
    }
};

// Random words with adversarial values mixed in.
uint32_t random_word(std::mt19937_64& rng) {
    switch (rng() % 8) {
        case 0: return 0;
        case 1: return 0xFFFFFFFFu;
        case 2: return 1;
        default: return uint32_t(rng() >> (rng() % 33));
    }
}

// Random targets in [0, total) with the interval ends mixed in.
uint64_t random_target(std::mt19937_64& rng, uint64_t total) {
    switch (rng() % 6) {
        case 0: return 0;
        case 1: return total - 1;
        default: return rng() % total;
    }
}

void check_structure(const replay::TreeShape& s, const uint64_t* const* sums, const uint32_t* leaves,
                     const Model& model, const char* where) {
    for (uint32_t i = 0; i < s.level_size[s.depth]; i++) {
        const uint32_t expect = i < s.capacity ? model.leaves[i] : 0;
        CHECK(leaves[i] == expect, "%s: leaf %u is %u, model %u", where, i, leaves[i], expect);
    }
    for (uint32_t d = 0; d < s.depth; d++) {
        for (uint32_t i = 0; i < s.level_size[d]; i++) {
            uint64_t children = 0;
            for (uint32_t k = 0; k < s.fanout; k++) {
                const uint64_t c = uint64_t(i) * s.fanout + k;
                if (c >= s.level_size[d + 1]) break;
                children += d + 1 == s.depth ? uint64_t(leaves[c]) : sums[d + 1][c];
            }
            CHECK(sums[d][i] == children, "%s: level %u node %u sum %llu, children %llu", where, d, i,
                  (unsigned long long)sums[d][i], (unsigned long long)children);
        }
    }
    CHECK(replay::tree_total(sums) == model.total(), "%s: total", where);
}

// 1. The top, through its streams.
void test_top(uint64_t seed) {
    const replay::TreeShape& s = replay::TOP_SHAPE;
    std::mt19937_64 rng(seed);
    Model model(s.capacity);
    pearl::stream<pearl::axis128> cmd, resp;
    uint32_t capacity = 0, fanout = 0;
    uint64_t total = 0;

    cmd.write(pearl::make_axis128(0, uint64_t(replay::OP_CLEAR) << 56, false));
    replay_top(cmd, resp, 1, capacity, fanout, total);
    CHECK(capacity == s.capacity && fanout == s.fanout && total == 0, "top registers after CLEAR");
    CHECK(resp.empty(), "CLEAR must give no response");

    for (int round = 0; round < 40; round++) {
        std::vector<pearl::axis128> expected;
        const uint32_t n = 1 + rng() % 300;
        // Hot indices make repeated indices within a call likely.
        const uint32_t hot = uint32_t(rng() % s.capacity);
        for (uint32_t c = 0; c < n; c++) {
            const bool last = c + 1 == n;
            const uint32_t kind = rng() % 16;
            if (rng() % 32 == 0) {
                // Never sent by the host; the top must ignore them: an unknown opcode, or an UPDATE
                // beyond CAPACITY (padding leaves stay 0).
                if (rng() % 2) {
                    const uint64_t op = rng() % 2 ? 0x00 : 0x06 + rng() % 0xFA;
                    cmd.write(pearl::make_axis128(rng(), (op << 56) | uint32_t(rng()), last));
                } else {
                    const uint32_t i = s.capacity + uint32_t(rng() % (rng() % 2 ? 64 : 0xFFFFFFFFu - s.capacity));
                    cmd.write(pearl::make_axis128(random_word(rng), (uint64_t(replay::OP_UPDATE) << 56) | i, last));
                }
            } else if (kind < 8 || model.total() == 0) {
                const uint32_t i = kind < 3 ? hot : uint32_t(rng() % s.capacity);
                const uint32_t w = random_word(rng);
                cmd.write(pearl::make_axis128(w, (uint64_t(replay::OP_UPDATE) << 56) | i, last));
                model.update(i, w);
            } else if (kind < 14) {
                const uint64_t t = random_target(rng, model.total());
                const uint32_t leaf = model.sample(t);
                cmd.write(pearl::make_axis128(t, uint64_t(replay::OP_SAMPLE) << 56, last));
                expected.push_back(pearl::make_axis128(model.leaves[leaf], (uint64_t(replay::OP_SAMPLE) << 56) | leaf, last));
            } else if (kind < 15 || round % 10 != 9) {
                cmd.write(pearl::make_axis128(0, uint64_t(replay::OP_TOTAL) << 56, last));
                expected.push_back(pearl::make_axis128(model.total(), uint64_t(replay::OP_TOTAL) << 56, last));
            } else {
                cmd.write(pearl::make_axis128(0, uint64_t(replay::OP_CLEAR) << 56, last));
                model = Model(s.capacity);
            }
        }
        replay_top(cmd, resp, n, capacity, fanout, total);
        CHECK(cmd.empty(), "top left %zu commands unread", cmd.size());
        CHECK(resp.size() == expected.size(), "round %d: %zu responses, expected %zu", round, resp.size(),
              expected.size());
        for (const pearl::axis128& e : expected) {
            if (resp.empty()) break;
            const pearl::axis128 r = resp.read();
            const uint64_t rh = pearl::axis_hi(r), rl = pearl::axis_lo(r);
            const uint64_t eh = pearl::axis_hi(e), el = pearl::axis_lo(e);
            CHECK(rh == eh && rl == el && bool(r.last) == bool(e.last),
                  "round %d: response hi %016llx lo %llu last %d, expected hi %016llx lo %llu last %d", round,
                  (unsigned long long)rh, (unsigned long long)rl, int(r.last), (unsigned long long)eh,
                  (unsigned long long)el, int(e.last));
        }
        CHECK(total == model.total(), "round %d: total register", round);
    }
    // Every leaf through the ports: the first and the last target of each nonzero leaf's interval
    // must sample it (a wrong leaf, partial sum or padding word moves some interval), IDENTITY must
    // give the synthesized shape and TOTAL the model's total.
    std::vector<pearl::axis128> expected;
    uint64_t before = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s.capacity; i++) {
        const uint32_t w = model.leaves[i];
        if (w == 0) continue;
        for (const uint64_t t : {before, before + w - 1}) {
            cmd.write(pearl::make_axis128(t, uint64_t(replay::OP_SAMPLE) << 56, false));
            expected.push_back(pearl::make_axis128(w, (uint64_t(replay::OP_SAMPLE) << 56) | i, false));
            n++;
        }
        before += w;
    }
    cmd.write(pearl::make_axis128(0, uint64_t(replay::OP_IDENTITY) << 56, false));
    expected.push_back(pearl::make_axis128(s.capacity, (uint64_t(replay::OP_IDENTITY) << 56) | s.fanout, false));
    cmd.write(pearl::make_axis128(0, uint64_t(replay::OP_TOTAL) << 56, true));
    expected.push_back(pearl::make_axis128(model.total(), uint64_t(replay::OP_TOTAL) << 56, true));
    replay_top(cmd, resp, n + 2, capacity, fanout, total);
    CHECK(resp.size() == expected.size(), "top read-back: %zu responses, expected %zu", resp.size(), expected.size());
    for (size_t k = 0; k < expected.size() && !resp.empty(); k++) {
        const pearl::axis128 r = resp.read();
        CHECK(pearl::axis_hi(r) == pearl::axis_hi(expected[k]) && pearl::axis_lo(r) == pearl::axis_lo(expected[k]),
              "top read-back %zu: hi %016llx lo %llu, expected hi %016llx lo %llu", k,
              (unsigned long long)pearl::axis_hi(r), (unsigned long long)pearl::axis_lo(r),
              (unsigned long long)pearl::axis_hi(expected[k]), (unsigned long long)pearl::axis_lo(expected[k]));
    }
}

// 2. The core functions at a runtime shape, batched as the CPU backend calls them.
void test_core(uint32_t capacity, uint32_t fanout, uint64_t seed) {
    const replay::TreeShape s = replay::make_shape(capacity, fanout);
    std::vector<std::vector<uint64_t>> levels(s.depth);
    std::vector<uint64_t*> sums(s.depth);
    for (uint32_t d = 0; d < s.depth; d++) {
        levels[d].assign(s.level_size[d], 0);
        sums[d] = levels[d].data();
    }
    std::vector<uint32_t> leaves(s.level_size[s.depth], 0);
    std::mt19937_64 rng(seed);
    Model model(capacity);
    char where[64];
    std::snprintf(where, sizeof where, "core cap=%u K=%u", capacity, fanout);

    for (int round = 0; round < 30; round++) {
        const uint32_t n = 1 + rng() % (round % 5 == 0 ? replay::MAX_BATCH : 64);
        std::vector<uint32_t> idx(n), words(n);
        std::vector<uint64_t> scratch(n);
        for (uint32_t b = 0; b < n; b++) {
            idx[b] = rng() % 4 == 0 && b > 0 ? idx[rng() % b] : uint32_t(rng() % capacity);  // repeats
            words[b] = random_word(rng);
            model.update(idx[b], words[b]);
        }
        replay::tree_update(s, sums.data(), leaves.data(), idx.data(), words.data(), n, scratch.data());
        CHECK(replay::tree_total(sums.data()) == model.total(), "%s round %d: total", where, round);

        const uint64_t total = model.total();
        if (total == 0) continue;
        const uint32_t m = 1 + rng() % 256;
        std::vector<uint64_t> targets(m), rem(m);
        std::vector<uint32_t> out_idx(m), out_words(m);
        for (uint32_t b = 0; b < m; b++) targets[b] = random_target(rng, total);
        replay::tree_sample(s, sums.data(), leaves.data(), targets.data(), m, out_idx.data(), out_words.data(),
                            rem.data());
        for (uint32_t b = 0; b < m; b++) {
            const uint32_t expect = model.sample(targets[b]);
            CHECK(out_idx[b] == expect && out_words[b] == model.leaves[expect] && out_words[b] != 0,
                  "%s round %d: target %llu -> leaf %u word %u, model leaf %u", where, round,
                  (unsigned long long)targets[b], out_idx[b], out_words[b], expect);
        }
    }
    check_structure(s, sums.data(), leaves.data(), model, where);
    replay::tree_clear(s, sums.data(), leaves.data());
    check_structure(s, sums.data(), leaves.data(), Model(capacity), where);
}

}  // namespace

int main() {
    test_top(1);
    test_top(2);
    const uint32_t capacities[] = {1, 2, 3, 15, 16, 17, 255, 256, 257, 1000, 4097};
    const uint32_t fanouts[] = {2, 4, 8, 16};
    uint64_t seed = 100;
    int cases = 2;
    for (uint32_t k : fanouts) {
        for (uint32_t c : capacities) {
            test_core(c, k, seed++);
            cases++;
        }
    }
    if (g_failures) {
        std::printf("replay csim: FAIL (%d mismatches in %d cases)\n", g_failures, cases);
        return 1;
    }
    std::printf("replay csim: PASS (%d cases; top at capacity %u fanout %u)\n", cases, replay::TOP_SHAPE.capacity,
                replay::TOP_SHAPE.fanout);
    return 0;
}
