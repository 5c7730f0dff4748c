// datamover_tb.cpp: C simulation of the data movers (returns non-zero on a mismatch; run by make csim).
// A round trip memory -> stream -> memory must give back the words, with TLAST only on the last one.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "datamover.h"

int main() {
    int errors = 0;
    const uint32_t n = 37;
    std::vector<word128> words(n), back(n, word128{0, 0});
    for (uint32_t i = 0; i < n; i++) words[i] = {0x9E3779B97F4A7C15ull * (2 * i + 1), 0x9E3779B97F4A7C15ull * (2 * i + 2)};
    using Mover = void (*)(const word128*, pearl::stream<pearl::axis128>&, uint32_t);
    using Sink = void (*)(pearl::stream<pearl::axis128>&, word128*, uint32_t);
    const Mover movers[] = {mm2s_replay, mm2s_tabular};
    const Sink sinks[] = {s2mm_replay, s2mm_tabular};
    for (int m = 0; m < 2; m++) {
        std::fill(back.begin(), back.end(), word128{0, 0});
        pearl::stream<pearl::axis128> s128;
        movers[m](words.data(), s128, n);
        for (uint32_t i = 0; i < n; i++) {
            const pearl::axis128 w = s128.read();
            if (w.last != (i + 1 == n)) errors++;
            if (pearl::axis_lo(w) != words[i].lo || pearl::axis_hi(w) != words[i].hi) errors++;  // bits [63:0] first
            s128.write(w);
        }
        sinks[m](s128, back.data(), n);
        for (uint32_t i = 0; i < n; i++) errors += back[i].lo != words[i].lo || back[i].hi != words[i].hi;
    }

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
