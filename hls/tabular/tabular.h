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
// transition. An update may read the row the previous one wrote, so the loop is a chain through the
// table; the hardware pipelines it with forwarding of in-flight writes.
#pragma once

#include <cstdint>

namespace tabular {

constexpr int FRAC_BITS = 16;
constexpr int64_t HALF = int64_t(1) << (FRAC_BITS - 1);
constexpr uint32_t ONE = uint32_t(1) << FRAC_BITS;
// Trip-count bounds for the synthesis reports (the cpu build accepts any size the host validates).
constexpr uint32_t MAX_ACTIONS = 64;
constexpr uint32_t MAX_BATCH = 1u << 20;

// The store's saturation to int32.
inline int32_t sat32(int64_t x) {
    return x > INT32_MAX ? INT32_MAX : (x < INT32_MIN ? INT32_MIN : int32_t(x));
}

// One update of the contract above; `row2` is Q[s2][*].
inline void update_one(int32_t* q_sa, const int32_t* row2, uint32_t n_actions, uint32_t a2, int32_t r, bool done,
                       uint32_t alpha, uint32_t gamma, bool sarsa) {
    int64_t boot = 0;
    if (!done) {
        if (sarsa) {
            boot = row2[a2];
        } else {
            int32_t best = row2[0];
        ROW_MAX:
            for (uint32_t b = 1; b < n_actions; b++) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = MAX_ACTIONS
                best = row2[b] > best ? row2[b] : best;
            }
            boot = best;
        }
    }
    const int64_t target = int64_t(r) + ((int64_t(gamma) * boot + HALF) >> FRAC_BITS);
    const int64_t old = *q_sa;
    *q_sa = sat32(old + ((int64_t(alpha) * (target - old) + HALF) >> FRAC_BITS));
}

// A batch of n transitions applied in order to the table q (n_states x n_actions). Indices are
// trusted (the host validates them); a2 is read only for SARSA.
void update_batch(int32_t* q, uint32_t n_actions, uint32_t alpha, uint32_t gamma, bool sarsa, const uint32_t* s,
                  const uint32_t* a, const int32_t* r, const uint32_t* s2, const uint32_t* a2, const uint8_t* done,
                  uint32_t n);

}  // namespace tabular
