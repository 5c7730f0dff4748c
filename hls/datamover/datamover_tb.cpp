// datamover_tb.cpp: C simulation of the data movers (returns non-zero on a mismatch; run by make csim).
// A round trip memory -> stream -> memory must give back the words, with TLAST only on the last one.
#include <cstdio>
#include <vector>

#include "datamover.h"

int main() {
    int errors = 0;
    const uint32_t n = 37;
    std::vector<uint64_t> words(2 * n), back(2 * n, 0);
    for (uint32_t i = 0; i < 2 * n; i++) words[i] = 0x9E3779B97F4A7C15ull * (i + 1);
    pearl::stream<pearl::axis128> s128;
    mm2s_replay(words.data(), s128, n);
    for (uint32_t i = 0; i < n; i++) {
        const pearl::axis128 w = s128.read();
        if (w.last != (i + 1 == n)) errors++;
        s128.write(w);
    }
    s2mm_replay(s128, back.data(), n);
    for (uint32_t i = 0; i < 2 * n; i++) errors += back[i] != words[i];

    std::vector<int16_t> obs(n), out(n, 0);
    for (uint32_t i = 0; i < n; i++) obs[i] = int16_t(i * 977 - 16000);
    pearl::stream<pearl::axis16> s16;
    mm2s_mlp(obs.data(), s16, n);
    s2mm_mlp(s16, out.data(), n);
    for (uint32_t i = 0; i < n; i++) errors += out[i] != obs[i];
    errors += !s16.empty();
    std::printf("datamover: %s (%d errors)\n", errors ? "FAIL" : "ok", errors);
    return errors != 0;
}
