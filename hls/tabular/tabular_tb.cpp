// tabular_tb.cpp: C simulation of the tabular update (returns non-zero on a mismatch; run by make
// csim). Checks the batch loop against a straightforward transcription of the contract with wide
// integers, on a random stream and on adversarial cases: the same (s, a) many times in a row,
// s2 == s, done flags, saturation at both int32 ends, alpha = gamma = 1.
#include <cstdio>
#include <random>
#include <vector>

#include "tabular.h"

namespace {

struct Case {
    uint32_t n_states, n_actions, alpha, gamma;
    bool sarsa;
};

// Independent transcription: floor division by 2^16 written out, no shifts.
int64_t floor_div_65536(__int128 x) {
    __int128 d = 65536, q = x / d;
    if ((x % d != 0) && (x < 0)) q -= 1;
    return int64_t(q);
}

void reference(std::vector<int32_t>& q, const Case& c, uint32_t s, uint32_t a, int32_t r, uint32_t s2, uint32_t a2,
               bool done) {
    __int128 boot = 0;
    if (!done) {
        if (c.sarsa) {
            boot = q[s2 * c.n_actions + a2];
        } else {
            boot = q[s2 * c.n_actions];
            for (uint32_t b = 1; b < c.n_actions; b++) boot = std::max<__int128>(boot, q[s2 * c.n_actions + b]);
        }
    }
    const __int128 target = __int128(r) + floor_div_65536(__int128(c.gamma) * boot + 32768);
    const __int128 old = q[s * c.n_actions + a];
    const __int128 upd = old + floor_div_65536(__int128(c.alpha) * (target - old) + 32768);
    q[s * c.n_actions + a] = upd > INT32_MAX ? INT32_MAX : (upd < INT32_MIN ? INT32_MIN : int32_t(upd));
}

int run(const Case& c, std::mt19937_64& rng, uint32_t n, bool adversarial) {
    std::vector<int32_t> q(c.n_states * c.n_actions), ref;
    std::vector<uint32_t> s(n), a(n), s2(n), a2(n);
    std::vector<int32_t> r(n);
    std::vector<uint8_t> done(n);
    for (auto& v : q) v = int32_t(rng());
    ref = q;
    for (uint32_t i = 0; i < n; i++) {
        s[i] = adversarial ? 0 : uint32_t(rng() % c.n_states);
        a[i] = adversarial ? 0 : uint32_t(rng() % c.n_actions);
        s2[i] = adversarial && (i % 3) ? s[i] : uint32_t(rng() % c.n_states);
        a2[i] = uint32_t(rng() % c.n_actions);
        const uint64_t pick = rng() % 4;
        r[i] = pick == 0 ? INT32_MAX : pick == 1 ? INT32_MIN : int32_t(rng());
        done[i] = (rng() % 5) == 0;
    }
    tabular::update_batch(q.data(), c.n_actions, c.alpha, c.gamma, c.sarsa, s.data(), a.data(), r.data(), s2.data(),
                          a2.data(), done.data(), n);
    for (uint32_t i = 0; i < n; i++) reference(ref, c, s[i], a[i], r[i], s2[i], a2[i], done[i]);
    int errors = 0;
    for (size_t i = 0; i < q.size(); i++) errors += q[i] != ref[i];
    return errors;
}

}  // namespace

int main() {
    std::mt19937_64 rng(7);
    const Case cases[] = {{7, 3, 19661, 62259, false}, {7, 3, 19661, 62259, true}, {1, 1, 65536, 65536, false},
                          {2, 2, 65536, 65536, true},  {500, 6, 6554, 58982, false}, {64, 4, 1, 0, true}};
    int errors = 0, runs = 0;
    for (const Case& c : cases) {
        for (bool adversarial : {false, true}) {
            errors += run(c, rng, 2000, adversarial);
            runs++;
        }
    }
    std::printf("tabular csim: %s (%d cases, %d mismatches)\n", errors ? "FAIL" : "PASS", runs, errors);
    return errors != 0;
}
