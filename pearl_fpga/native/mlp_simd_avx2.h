// mlp_simd_avx2.h: the AVX2 MAC array of mlp_simd.h: the AVX-512 one on 256-bit vectors.
//
// Included twice by mlp_simd.h like mlp_simd_avx512.h: MLP_TARGET is the target attribute,
// MLP_DOT256(acc, w, b) the pairwise int16 dot product (vpmaddwd + vpaddd, or AVX-VNNI's vpdpwssd).
// No include guard: that is deliberate.

// The same MAC array on 256-bit vectors (AVX2): each 16-output group of the packed rows is two ymm
// halves; one observation at a time; requantization per output with the kernel's mlp::requantize
// (AVX2 has no 64-bit arithmetic shift or saturating narrow).
// Two partial sums per output over interleaved pairs keep enough independent dot products in flight
// to hide their latency; the int32 sums wrap, so any order is exact.
template <int NH>  // NH ymm halves of 8 outputs
MLP_TARGET inline void mac_block(const int32_t* w, std::size_t row, const alias_i32* lo, const alias_i32* hi,
                                    int p0, int p1, int64_t* acc) {
    constexpr int K = 2;
    __m256i s_lo[K][NH], s_hi[K][NH];
    for (int k = 0; k < K; ++k)
        for (int h = 0; h < NH; ++h) s_lo[k][h] = s_hi[k][h] = _mm256_setzero_si256();
    auto pair = [&](int p, __m256i(&sl)[NH], __m256i(&sh)[NH]) MLP_TARGET {
        const __m256i bl = _mm256_set1_epi32(lo[p]);
        const __m256i bh = _mm256_set1_epi32(hi[p]);
        const int32_t* wr = w + std::size_t(p) * row;
        for (int h = 0; h < NH; ++h) {
            const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(wr + h * 8));
            sl[h] = MLP_DOT256(sl[h], wv, bl);
            sh[h] = MLP_DOT256(sh[h], wv, bh);
        }
    };
    int p = p0;
    for (; p + K <= p1; p += K)
        for (int k = 0; k < K; ++k) pair(p + k, s_lo[k], s_hi[k]);
    for (; p < p1; ++p) pair(p, s_lo[0], s_hi[0]);
    for (int k = 1; k < K; ++k)
        for (int h = 0; h < NH; ++h) {
            s_lo[0][h] = _mm256_add_epi32(s_lo[0][h], s_lo[k][h]);
            s_hi[0][h] = _mm256_add_epi32(s_hi[0][h], s_hi[k][h]);
        }
    for (int h = 0; h < NH; ++h) {
        for (int q = 0; q < 2; ++q) {  // 256 * hi + lo in int64, 4 lanes at a time
            const __m128i l32 = q ? _mm256_extracti128_si256(s_lo[0][h], 1) : _mm256_castsi256_si128(s_lo[0][h]);
            const __m128i h32 = q ? _mm256_extracti128_si256(s_hi[0][h], 1) : _mm256_castsi256_si128(s_hi[0][h]);
            const __m256i sum =
                _mm256_add_epi64(_mm256_cvtepi32_epi64(l32), _mm256_slli_epi64(_mm256_cvtepi32_epi64(h32), 8));
            __m256i* a = reinterpret_cast<__m256i*>(acc + h * 8 + q * 4);
            _mm256_store_si256(a, _mm256_add_epi64(_mm256_load_si256(a), sum));
        }
    }
}

MLP_TARGET inline void forward_one(const SimdModel& s, const int16_t* x, int16_t* y, int32_t* argmax) {
    alignas(64) int16_t act[mlp::MAX_WIDTH + 64];
    alignas(64) int16_t lo16[mlp::MAX_WIDTH + 64];
    alignas(64) int16_t hi16[mlp::MAX_WIDTH + 64];
    alignas(64) int64_t acc[mlp::MAX_WIDTH + VEC];
    const alias_i32* lo = reinterpret_cast<const alias_i32*>(lo16);
    const alias_i32* hi = reinterpret_cast<const alias_i32*>(hi16);
    const int n0 = s.layer[0].n_in;
    for (int j = 0; j < n0; ++j) act[j] = x[j];
    for (int j = n0; j < mlp::round_up(n0, 32); ++j) act[j] = 0;  // an odd count pairs its last value with 0
    const __m256i mask = _mm256_set1_epi16(0xFF);
    for (int l = 0; l < s.n_layers; ++l) {
        const Layer& L = s.layer[l];
        for (int j = 0; j < 2 * L.npairs; j += 16) {  // lo = a & 255, hi = a >> 8
            const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(act + j));
            _mm256_store_si256(reinterpret_cast<__m256i*>(lo16 + j), _mm256_and_si256(a, mask));
            _mm256_store_si256(reinterpret_cast<__m256i*>(hi16 + j), _mm256_srai_epi16(a, 8));
        }
        const int nout = L.mvec * VEC;
        std::memcpy(acc, s.bias.get() + L.b_off, sizeof(int64_t) * std::size_t(nout));
        const int32_t* w = s.w.get() + L.w_off;
        for (int p0 = 0; p0 < L.npairs; p0 += BLOCK_PAIRS) {
            const int p1 = L.npairs - p0 < BLOCK_PAIRS ? L.npairs : p0 + BLOCK_PAIRS;
            for (int v = 0; v < L.mvec; ++v) mac_block<2>(w + L.group_at(v), L.group_row(v), lo, hi, p0, p1, acc + v * VEC);
        }
        for (int i = 0; i < nout; ++i) act[i] = mlp::requantize(acc[i], L.shift, L.relu);
    }
    const Layer& last = s.layer[s.n_layers - 1];
    int best = 0;
    for (int i = 0; i < last.m_out; ++i) {
        if (act[i] > act[best]) best = i;
        y[i] = s.tanh_head ? mlp::tanh_pwl(act[i]) : act[i];
    }
    if (argmax) *argmax = s.tanh_head ? -1 : best;
}

MLP_TARGET inline void forward_batch(const SimdModel& s, const int16_t* x, int batch, int16_t* y,
                                        int32_t* argmax) {
    const int n0 = s.layer[0].n_in, m = s.layer[s.n_layers - 1].m_out;
    for (int b = 0; b < batch; ++b)
        forward_one(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
}
