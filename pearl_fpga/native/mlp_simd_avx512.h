// mlp_simd_avx512.h: the AVX-512 MAC array of mlp_simd.h, whose comment describes it.
//
// mlp_simd.h includes this file twice, inside two namespaces: MLP_TARGET is the target attribute of
// every function and MLP_DOT512(acc, w, b) adds the two int16 products of each int32 lane of w and b
// to acc (vpmaddwd + vpaddd, or VNNI's vpdpwssd, which computes the same wrapping int32 sum in one
// instruction). No include guard: that is deliberate.

// Requantization of 8 int64 accumulators to int16: round half up, arithmetic shift, signed
// saturation, optional ReLU (exactly mlp::requantize).
struct Requant {
    __m512i round;
    __m128i count;
    bool relu;
};

MLP_TARGET inline void store_requantized(__m512i acc, const Requant& r, int16_t* dst) {
    __m128i q = _mm512_cvtsepi64_epi16(_mm512_sra_epi64(_mm512_add_epi64(acc, r.round), r.count));
    if (r.relu) q = _mm_max_epi16(q, _mm_setzero_si128());
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), q);
}

// Per observation: its split activations (input pair p = int16 elements 2p, 2p+1 as one int32) and
// where its outputs go.
struct Obs {
    const alias_i32* lo;
    const alias_i32* hi;
    int64_t* acc;  // multi-block layers: int64 running sums (bias preloaded)
    int16_t* out;  // single-block layers: requantized outputs
};

// NV vectors of 16 outputs for OB observations over input pairs [p0, p1) (at most BLOCK_PAIRS, so
// the int32 sums are exact). Weight vectors are loaded once for all OB observations. With `bias`,
// this is the whole layer: add the bias and write int16 outputs; else add into the int64 sums.
// Small blocks keep K partial sums per output over interleaved pairs, so that enough independent
// dot products are in flight to hide their latency; the int32 sums wrap, so any order is exact.
template <int NV, int OB>
MLP_TARGET inline void mac_block(const int32_t* w, std::size_t row, const Obs* obs, int p0, int p1,
                                 const int64_t* bias, const Requant& rq) {
    constexpr int K = NV * OB >= 8 ? 1 : std::min(4, 8 / (NV * OB));
    __m512i s_lo[K][OB][NV], s_hi[K][OB][NV];
    for (int k = 0; k < K; ++k)
        for (int o = 0; o < OB; ++o)
            for (int v = 0; v < NV; ++v) s_lo[k][o][v] = s_hi[k][o][v] = _mm512_setzero_si512();
    auto pair = [&](int p, __m512i(&lo)[OB][NV], __m512i(&hi)[OB][NV]) MLP_TARGET {
        __m512i bl[OB], bh[OB];
        for (int o = 0; o < OB; ++o) {
            bl[o] = _mm512_set1_epi32(obs[o].lo[p]);
            bh[o] = _mm512_set1_epi32(obs[o].hi[p]);
        }
        const int32_t* wr = w + std::size_t(p) * row;
        for (int v = 0; v < NV; ++v) {
            const __m512i wv = _mm512_load_si512(wr + v * VEC);
            for (int o = 0; o < OB; ++o) {
                lo[o][v] = MLP_DOT512(lo[o][v], wv, bl[o]);
                hi[o][v] = MLP_DOT512(hi[o][v], wv, bh[o]);
            }
        }
    };
    int p = p0;
    for (; p + K <= p1; p += K)
        for (int k = 0; k < K; ++k) pair(p + k, s_lo[k], s_hi[k]);
    for (; p < p1; ++p) pair(p, s_lo[0], s_hi[0]);
    for (int k = 1; k < K; ++k)
        for (int o = 0; o < OB; ++o)
            for (int v = 0; v < NV; ++v) {
                s_lo[0][o][v] = _mm512_add_epi32(s_lo[0][o][v], s_lo[k][o][v]);
                s_hi[0][o][v] = _mm512_add_epi32(s_hi[0][o][v], s_hi[k][o][v]);
            }
    for (int o = 0; o < OB; ++o) {
        for (int v = 0; v < NV; ++v) {
            for (int half = 0; half < 2; ++half) {  // 256 * hi + lo in int64, 8 lanes at a time
                const __m256i l32 = half ? _mm512_extracti64x4_epi64(s_lo[0][o][v], 1) : _mm512_castsi512_si256(s_lo[0][o][v]);
                const __m256i h32 = half ? _mm512_extracti64x4_epi64(s_hi[0][o][v], 1) : _mm512_castsi512_si256(s_hi[0][o][v]);
                const __m512i sum =
                    _mm512_add_epi64(_mm512_cvtepi32_epi64(l32), _mm512_slli_epi64(_mm512_cvtepi32_epi64(h32), 8));
                const int k = v * VEC + half * 8;
                if (bias) {
                    store_requantized(_mm512_add_epi64(sum, _mm512_load_si512(bias + k)), rq, obs[o].out + k);
                } else {
                    int64_t* a = obs[o].acc + k;
                    _mm512_store_si512(a, _mm512_add_epi64(_mm512_load_si512(a), sum));
                }
            }
        }
    }
}

// OB observations through every layer; y gets OB rows of m values (tanh applied for a TANH head).
template <int OB>
MLP_TARGET inline void forward_block(const SimdModel& s, const int16_t* x, int16_t* y, int32_t* argmax) {
    alignas(64) int16_t act[OB][mlp::MAX_WIDTH + 64];
    alignas(64) int16_t lo16[OB][mlp::MAX_WIDTH + 64];
    alignas(64) int16_t hi16[OB][mlp::MAX_WIDTH + 64];
    alignas(64) int64_t acc[OB][mlp::MAX_WIDTH + VEC];
    Obs obs[OB];
    const int n0 = s.layer[0].n_in;
    for (int o = 0; o < OB; ++o) {
        obs[o] = Obs{reinterpret_cast<const alias_i32*>(lo16[o]), reinterpret_cast<const alias_i32*>(hi16[o]), acc[o],
                     act[o]};
        for (int j = 0; j < n0; ++j) act[o][j] = x[std::size_t(o) * n0 + j];
        for (int j = n0; j < mlp::round_up(n0, 32); ++j) act[o][j] = 0;  // an odd count pairs its last value with 0
    }
    const __m512i mask = _mm512_set1_epi16(0xFF);
    for (int l = 0; l < s.n_layers; ++l) {
        const Layer& L = s.layer[l];
        // Split every activation: lo = a & 255, hi = a >> 8 (arithmetic), 32 at a time. Elements past
        // n_in are zero (layer 0 padding above; zero-weight padded outputs of the previous layer).
        for (int o = 0; o < OB; ++o) {
            for (int j = 0; j < 2 * L.npairs; j += 32) {
                const __m512i a = _mm512_load_si512(act[o] + j);
                _mm512_store_si512(lo16[o] + j, _mm512_and_si512(a, mask));
                _mm512_store_si512(hi16[o] + j, _mm512_srai_epi16(a, 8));
            }
        }
        const int nout = L.mvec * VEC;
        const int32_t* w = s.w.get() + L.w_off;
        const int64_t* bias = s.bias.get() + L.b_off;
        const Requant rq{_mm512_set1_epi64(L.shift > 0 ? int64_t(1) << (L.shift - 1) : 0), _mm_cvtsi32_si128(L.shift),
                         L.relu};
        const bool single = L.npairs <= BLOCK_PAIRS;  // n_in <= 256: one exact block, outputs straight out
        if (!single)
            for (int o = 0; o < OB; ++o) std::memcpy(acc[o], bias, sizeof(int64_t) * std::size_t(nout));
        for (int p0 = 0; p0 < L.npairs; p0 += BLOCK_PAIRS) {
            const int p1 = L.npairs - p0 < BLOCK_PAIRS ? L.npairs : p0 + BLOCK_PAIRS;
            for (int v = 0; v < L.mvec;) {
                Obs at[OB];
                for (int o = 0; o < OB; ++o)
                    at[o] = Obs{obs[o].lo, obs[o].hi, obs[o].acc + v * VEC, obs[o].out + v * VEC};
                const int64_t* b = single ? bias + v * VEC : nullptr;
                const int left = L.mvec - v;  // v starts a column block of the weights
                static_assert(GROUP_VECS == 4, "the widest block below is the weights' column block");
                if (left >= 4) {
                    mac_block<4, OB>(w + L.group_at(v), L.group_row(v), at, p0, p1, b, rq);
                    v += 4;
                } else if (left == 3) {
                    mac_block<3, OB>(w + L.group_at(v), L.group_row(v), at, p0, p1, b, rq);
                    v += 3;
                } else if (left == 2) {
                    mac_block<2, OB>(w + L.group_at(v), L.group_row(v), at, p0, p1, b, rq);
                    v += 2;
                } else {
                    mac_block<1, OB>(w + L.group_at(v), L.group_row(v), at, p0, p1, b, rq);
                    v += 1;
                }
            }
        }
        if (!single)
            for (int o = 0; o < OB; ++o)
                for (int i = 0; i < nout; i += 8) store_requantized(_mm512_load_si512(acc[o] + i), rq, act[o] + i);
    }
    const Layer& last = s.layer[s.n_layers - 1];
    for (int o = 0; o < OB; ++o) {
        const int16_t* a = act[o];
        int16_t* yo = y + std::size_t(o) * last.m_out;
        int best = 0;
        for (int i = 0; i < last.m_out; ++i) {
            if (a[i] > a[best]) best = i;
            yo[i] = s.tanh_head ? mlp::tanh_pwl(a[i]) : a[i];
        }
        if (argmax) argmax[o] = s.tanh_head ? -1 : best;
    }
}

MLP_TARGET inline void forward_batch(const SimdModel& s, const int16_t* x, int batch, int16_t* y, int32_t* argmax) {
    const int n0 = s.layer[0].n_in, m = s.layer[s.n_layers - 1].m_out;
    // BLOCK_OBS observations share every weight load: three, whose 24 sums of a 4-vector block, a weight
    // vector and six broadcast activations fill the 32 vector registers without spilling.
    static_assert(BLOCK_OBS == 3, "the tail below handles blocks of 3");
    int b = 0;
    for (; b + BLOCK_OBS <= batch; b += BLOCK_OBS)
        forward_block<BLOCK_OBS>(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
    if (batch - b == 2) forward_block<2>(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
    if (batch - b == 1) forward_block<1>(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
}
