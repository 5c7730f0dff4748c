// mlp_tb.cpp: C simulation of mlp_top (make csim). Drives LOAD then INFER through the AXI streams and
// compares every output word with a direct evaluation of the SPEC.md formulas; exits non-zero on a
// mismatch.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "mlp.h"

namespace {

struct RefLayer {
    int n, m, shift;
    bool relu;
    std::vector<int16_t> w;  // m x n
    std::vector<int32_t> b;
};

struct RefNet {
    std::vector<RefLayer> layers;
    bool tanh_head;
};

int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::printf("FAIL: %s\n", what);
        ++failures;
    }
}

// SPEC.md, written out plainly (int64, no tricks).
int16_t ref_tanh(int16_t y) {
    auto T = [](int k) {
        double v = std::floor(std::tanh((64.0 * k - 32768.0) / 4096.0) * 32768.0 + 0.5);
        return (int64_t)std::fmin(std::fmax(v, -32767.0), 32767.0);
    };
    int64_t u = int64_t(y) + 32768, k = u >> 6, r = u & 63;
    return int16_t(T(k) + (((T(k + 1) - T(k)) * r + 32) >> 6));
}

std::vector<int16_t> ref_forward(const RefNet& net, std::vector<int16_t> a, int32_t* argmax) {
    for (const RefLayer& L : net.layers) {
        std::vector<int16_t> out(L.m);
        for (int i = 0; i < L.m; ++i) {
            int64_t acc = L.b[i];
            for (int j = 0; j < L.n; ++j) acc += int64_t(L.w[i * L.n + j]) * int64_t(a[j]);
            int64_t y = L.shift > 0 ? (acc + (int64_t(1) << (L.shift - 1))) >> L.shift : acc;
            y = y > 32767 ? 32767 : (y < -32768 ? -32768 : y);
            if (L.relu && y < 0) y = 0;
            out[i] = int16_t(y);
        }
        a = out;
    }
    int best = 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] > a[best]) best = int(i);
    *argmax = net.tanh_head ? -1 : best;
    if (net.tanh_head)
        for (auto& v : a) v = ref_tanh(v);
    return a;
}

// The LOAD stream of SPEC.md.
void encode(const RefNet& net, pearl::stream<pearl::axis16>& s) {
    std::vector<uint16_t> words{uint16_t(net.layers.size())};
    for (size_t l = 0; l < net.layers.size(); ++l) {
        const RefLayer& L = net.layers[l];
        bool last = l + 1 == net.layers.size();
        uint16_t flags = (L.relu ? mlp::FLAG_RELU : 0) | (last ? (net.tanh_head ? mlp::FLAG_TANH : mlp::FLAG_RAW) : 0);
        words.insert(words.end(), {uint16_t(L.n), uint16_t(L.m), uint16_t(L.shift), flags});
    }
    for (const RefLayer& L : net.layers) {
        for (int16_t v : L.w) words.push_back(uint16_t(v));
        for (int32_t v : L.b) {
            words.push_back(uint16_t(uint32_t(v) & 0xFFFF));
            words.push_back(uint16_t(uint32_t(v) >> 16));
        }
    }
    for (size_t k = 0; k < words.size(); ++k) s.write(pearl::make_axis16(int16_t(words[k]), k + 1 == words.size()));
}

RefNet random_net(std::mt19937_64& rng, std::vector<int> widths, bool tanh_head, int wbits, int shift_lo,
                  int shift_hi) {
    RefNet net{{}, tanh_head};
    std::uniform_int_distribution<int> w(-(1 << (wbits - 1)), (1 << (wbits - 1)) - 1);
    std::uniform_int_distribution<int> sh(shift_lo, shift_hi);
    std::uniform_int_distribution<int64_t> b(INT32_MIN, INT32_MAX);
    for (size_t l = 0; l + 1 < widths.size(); ++l) {
        RefLayer L{widths[l], widths[l + 1], sh(rng), l + 2 < widths.size(), {}, {}};
        for (int k = 0; k < L.n * L.m; ++k) L.w.push_back(int16_t(w(rng)));
        for (int k = 0; k < L.m; ++k) L.b.push_back(int32_t(b(rng) >> (rng() % 24)));
        net.layers.push_back(L);
    }
    return net;
}

uint32_t run_load(const RefNet& net) {
    pearl::stream<pearl::axis16> in, out;
    uint32_t lanes, width, layers, error;
    encode(net, in);
    mlp_top(in, out, mlp::MODE_LOAD, 0, lanes, width, layers, error);
    check(in.empty(), "LOAD consumed the whole stream");
    check(out.empty(), "LOAD wrote no output");
    check(lanes == uint32_t(mlp::LANES) && width == uint32_t(mlp::MAX_WIDTH) && layers == uint32_t(mlp::MAX_LAYERS),
          "parameter registers");
    return error;
}

// INFER `batch` observations (with saturating extremes) through the streams; compare word by word.
void run_infer(const RefNet& net, std::mt19937_64& rng, int batch, const char* name) {
    const int n0 = net.layers.front().n, m = net.layers.back().m;
    pearl::stream<pearl::axis16> in, out;
    std::vector<std::vector<int16_t>> obs(batch);
    std::uniform_int_distribution<int> full(-32768, 32767);
    for (int b = 0; b < batch; ++b) {
        for (int j = 0; j < n0; ++j) {
            int kind = int(rng() % 8);
            int16_t v = kind == 0 ? int16_t(-32768) : kind == 1 ? int16_t(32767) : kind == 2 ? int16_t(0)
                                                                                         : int16_t(full(rng));
            obs[b].push_back(v);
            in.write(pearl::make_axis16(v, j == n0 - 1));
        }
    }
    uint32_t lanes, width, layers, error;
    mlp_top(in, out, mlp::MODE_INFER, batch, lanes, width, layers, error);
    check(error == 0, "INFER error register is 0");
    check(in.empty(), "INFER consumed every observation");
    int mismatches = 0;
    for (int b = 0; b < batch; ++b) {
        int32_t argmax;
        std::vector<int16_t> want = ref_forward(net, obs[b], &argmax);
        const int words = m + (net.tanh_head ? 0 : 1);
        for (int k = 0; k < words; ++k) {
            if (out.empty()) {
                check(false, "INFER output too short");
                return;
            }
            pearl::axis16 got = out.read();
            int16_t expect = k < m ? want[k] : int16_t(argmax);
            if (got.data != expect || got.last != (b == batch - 1 && k == words - 1)) ++mismatches;  // one tlast per batch
        }
    }
    check(out.empty(), "INFER output has no extra words");
    if (mismatches) std::printf("  %s: %d mismatching words\n", name, mismatches);
    check(mismatches == 0, name);
}

// One IDENTITY call: its four words (lanes, max_width, max_layers, status), tlast on the last only.
std::vector<int> identity() {
    pearl::stream<pearl::axis16> in, out;
    uint32_t lanes, width, layers, error;
    mlp_top(in, out, mlp::MODE_IDENTITY, 0, lanes, width, layers, error);
    std::vector<int> words;
    while (!out.empty()) {
        const pearl::axis16 w = out.read();
        check(bool(w.last) == out.empty(), "IDENTITY: tlast on the last word only");
        words.push_back(w.data);
    }
    check(error == 0 && words.size() == 4, "IDENTITY answers four words, no error");
    return words;
}

}  // namespace

int main() {
    std::mt19937_64 rng(20261123);

    // Tanh head over every int16 input against the formula.
    int tanh_bad = 0;
    for (int y = -32768; y <= 32767; ++y) tanh_bad += mlp::tanh_pwl(int16_t(y)) != ref_tanh(int16_t(y));
    check(tanh_bad == 0, "tanh_pwl matches SPEC.md on all 65536 inputs");

    // A DQN-sized network with moderate weights, then one that saturates everywhere.
    RefNet dqn = random_net(rng, {4, 64, 64, 2}, false, 12, 10, 16);
    check(run_load(dqn) == 0, "LOAD 4-64-64-2");
    run_infer(dqn, rng, 64, "INFER 4-64-64-2 raw");

    RefNet sat = random_net(rng, {8, 40, 3}, false, 16, 0, 3);
    check(run_load(sat) == 0, "LOAD saturating net");
    run_infer(sat, rng, 32, "INFER saturating net");

    RefNet actor = random_net(rng, {3, 48, 33, 2}, true, 14, 12, 18);
    check(run_load(actor) == 0, "LOAD tanh actor");
    run_infer(actor, rng, 48, "INFER tanh actor");

    // Rows longer than one MAC block, extreme shifts (0 and 40), a hidden layer without ReLU.
    if (mlp::MAX_WIDTH >= 300) {
        RefNet wide = random_net(rng, {300, 7, 5}, false, 16, 0, 0);
        wide.layers[0].relu = false;
        wide.layers[1].shift = 40;
        check(run_load(wide) == 0, "LOAD 300-7-5");
        run_infer(wide, rng, 16, "INFER 300-7-5");
    }
    RefNet four = random_net(rng, {5, 17, 31, 9, 6}, false, 13, 8, 20);
    check(run_load(four) == 0, "LOAD 4 layers");
    run_infer(four, rng, 20, "INFER 4 layers");

    // Rejected LOADs leave the previous weights in place.
    RefNet too_wide = random_net(rng, {4, mlp::MAX_WIDTH + 1, 2}, false, 8, 8, 8);
    check(run_load(too_wide) == mlp::ERR_BAD_LOAD, "LOAD wider than MAX_WIDTH is rejected");
    RefNet too_deep = random_net(rng, std::vector<int>(mlp::MAX_LAYERS + 2, 3), false, 8, 8, 8);
    check(run_load(too_deep) == mlp::ERR_BAD_LOAD, "LOAD deeper than MAX_LAYERS is rejected");
    RefNet bad_shift = random_net(rng, {4, 4, 2}, false, 8, 41, 41);
    check(run_load(bad_shift) == mlp::ERR_BAD_LOAD, "LOAD with shift > 40 is rejected");
    {
        RefNet mismatch = random_net(rng, {4, 6, 2}, false, 8, 8, 8);
        pearl::stream<pearl::axis16> in, out;
        encode(mismatch, in);
        // Corrupt layer 1's n_in (word 1 + 4 + 0) so that consecutive layers disagree.
        std::vector<pearl::axis16> words;
        while (!in.empty()) words.push_back(in.read());
        words[5].data = 7;
        for (auto& w : words) in.write(w);
        uint32_t lanes, width, layers, error;
        mlp_top(in, out, mlp::MODE_LOAD, 0, lanes, width, layers, error);
        check(error == mlp::ERR_BAD_LOAD && in.empty(), "LOAD with n_in != previous m_out is rejected and drained");
    }
    run_infer(four, rng, 8, "INFER after rejected LOADs uses the old weights");
    check(identity() == std::vector<int>({mlp::LANES, mlp::MAX_WIDTH, mlp::MAX_LAYERS,
                                           int(mlp::STATUS_LOADED | mlp::STATUS_LOAD_REJECTED)}),
          "IDENTITY after a rejected LOAD: weights held, the LOAD rejected");
    check(run_load(four) == 0, "LOAD 4 layers again");
    check(identity() == std::vector<int>({mlp::LANES, mlp::MAX_WIDTH, mlp::MAX_LAYERS, int(mlp::STATUS_LOADED)}),
          "IDENTITY after a LOAD: weights held");

    // A truncated LOAD leaves no weights: INFER then reports an error.
    {
        pearl::stream<pearl::axis16> full_stream, in, out;
        encode(dqn, full_stream);
        std::vector<pearl::axis16> words;
        while (!full_stream.empty()) words.push_back(full_stream.read());
        words.resize(words.size() / 2);
        words.back().last = true;
        for (auto& w : words) in.write(w);
        uint32_t lanes, width, layers, error;
        mlp_top(in, out, mlp::MODE_LOAD, 0, lanes, width, layers, error);
        check(error == mlp::ERR_BAD_LOAD, "truncated LOAD is rejected");
        mlp_top(in, out, mlp::MODE_INFER, 1, lanes, width, layers, error);
        check(error == mlp::ERR_BAD_LOAD && out.empty(), "INFER without weights reports an error");
        check(identity() == std::vector<int>({mlp::LANES, mlp::MAX_WIDTH, mlp::MAX_LAYERS, int(mlp::STATUS_LOAD_REJECTED)}),
              "IDENTITY after a truncated LOAD: no weights, the LOAD rejected");
    }

    if (failures) {
        std::printf("mlp csim: %d check(s) FAILED\n", failures);
        return 1;
    }
    std::printf("mlp csim: all checks passed (LANES=%d, MAX_WIDTH=%d, MAX_LAYERS=%d)\n", mlp::LANES, mlp::MAX_WIDTH,
                mlp::MAX_LAYERS);
    return 0;
}
