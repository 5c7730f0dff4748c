// mlp_simd.h: an AVX-512 (or AVX2) MAC array for the cpu backend of the MLP kernel (x86-64 only).
//
// It computes exactly what mlp::forward_one (hls/mlp/mlp.cpp) computes, the exact integer sum, but it
// splits each activation into lo (a & 255, 0..255) and hi (a >> 8, -128..127): over 256 products
// sum W*lo < 2^31 and |sum W*hi| <= 2^30, so vpmaddwd's int32 partial sums are exact and the sum is
// 256 * S_hi + S_lo in int64 (mlp.h says why not one vpmaddwd per pair). The outputs are in the
// vector lanes instead of the inputs: weights are repacked at load as input pairs
// (W[i][2p] | W[i][2p+1] << 16, one int32 lane per output i), so vpmaddwd with a broadcast activation
// pair adds two products to 16 outputs at once and no horizontal sum is needed. Requantization is
// vectorized too: arithmetic shift (vpsraq), signed saturation to int16 (vpmovsqw), ReLU (vpmaxsw).
// The heads use the kernel's own scalar code (mlp::tanh_pwl).
//
// Layout of SimdModel::w, per layer: npairs rows of mvec * 16 int32 (row p holds input pair p for
// every output, outputs padded to a multiple of 16 with zero weights and zero bias).
// Tests check this path bit for bit against the HLS code path and the numpy reference.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "isa.h"
#include "mlp.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// GCC 12 reports its own _mm*_undefined_* placeholders inside the intrinsics as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define MLP_SIMD_X86 1
#else
#define MLP_SIMD_X86 0
#endif

namespace mlp_simd {

constexpr int VEC = 16;         // int32 lanes per 512-bit vector
constexpr int BLOCK_PAIRS = 128;  // input pairs per exact int32 partial sum (256 products)
constexpr int MAX_PAIRS = mlp::MAX_WIDTH / 2;

struct Layer {
    int n_in, m_out, npairs, mvec, shift;
    bool relu;
    std::size_t w_off;  // in int32 words
    std::size_t b_off;  // in int64 words
};

struct AlignedFree {
    void operator()(void* p) const { std::free(p); }
};

struct SimdModel {
    int n_layers = 0;
    bool tanh_head = false;
    Layer layer[mlp::MAX_LAYERS];
    std::unique_ptr<int32_t[], AlignedFree> w;
    std::unique_ptr<int64_t[], AlignedFree> bias;
};

template <typename T>
std::unique_ptr<T[], AlignedFree> aligned_array(std::size_t n) {
    std::size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes ? bytes : 64);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes ? bytes : 64);
    return std::unique_ptr<T[], AlignedFree>(static_cast<T*>(p));
}

// Instruction sets of the MAC array, best first. PLAIN means: use the kernel's own loops instead.
enum class Isa { AVX512, AVX2, PLAIN };

inline bool supported(Isa isa) {
    if (isa == Isa::PLAIN) return true;
    return MLP_SIMD_X86 && pearl_isa::cpu_has(isa == Isa::AVX512 ? pearl_isa::Isa::AVX512 : pearl_isa::Isa::AVX2);
}

// The widest MAC array the CPU has, within PEARL_FPGA_NATIVE_ISA's cap (isa.h).
inline Isa best_isa() {
    if (!MLP_SIMD_X86) return Isa::PLAIN;
    const pearl_isa::Isa isa = pearl_isa::best();
    return isa == pearl_isa::Isa::AVX512 ? Isa::AVX512 : isa == pearl_isa::Isa::AVX2 ? Isa::AVX2 : Isa::PLAIN;
}

// Repacks a loaded model (after a successful mlp::load_model) into the pair-interleaved layout.
inline std::unique_ptr<SimdModel> pack(const mlp::Model& m) {
    auto s = std::make_unique<SimdModel>();
    s->n_layers = m.n_layers;
    const mlp::LayerDesc& last = m.layer[m.n_layers - 1];
    s->tanh_head = (last.flags & mlp::FLAG_TANH) != 0;
    std::size_t w_total = 0, b_total = 0;
    for (int l = 0; l < m.n_layers; ++l) {
        const mlp::LayerDesc& d = m.layer[l];
        Layer& L = s->layer[l];
        L.n_in = d.n_in;
        L.m_out = d.m_out;
        L.npairs = (d.n_in + 1) / 2;
        L.mvec = (d.m_out + VEC - 1) / VEC;
        L.shift = d.shift;
        L.relu = (d.flags & mlp::FLAG_RELU) != 0;
        L.w_off = w_total;
        L.b_off = b_total;
        w_total += std::size_t(L.npairs) * L.mvec * VEC;
        b_total += std::size_t(L.mvec) * VEC;
    }
    s->w = aligned_array<int32_t>(w_total);
    s->bias = aligned_array<int64_t>(b_total);
    for (int l = 0; l < m.n_layers; ++l) {
        const mlp::LayerDesc& d = m.layer[l];
        const Layer& L = s->layer[l];
        for (int p = 0; p < L.npairs; ++p) {
            int32_t* row = s->w.get() + L.w_off + std::size_t(p) * L.mvec * VEC;
            for (int i = 0; i < d.m_out; ++i) {
                const int16_t* wi = &m.weight[d.w_offset + i * d.stride];
                uint16_t w0 = uint16_t(wi[2 * p]);
                uint16_t w1 = 2 * p + 1 < d.n_in ? uint16_t(wi[2 * p + 1]) : 0;
                row[i] = int32_t(uint32_t(w0) | (uint32_t(w1) << 16));
            }
        }
        for (int i = 0; i < d.m_out; ++i) s->bias[L.b_off + i] = m.bias[d.b_offset + i];
    }
    return s;
}

#if MLP_SIMD_X86

#define MLP_AVX512 __attribute__((target("avx512f,avx512bw")))

typedef int32_t alias_i32 __attribute__((may_alias));

// Requantization of 8 int64 accumulators to int16: round half up, arithmetic shift, signed
// saturation, optional ReLU (exactly mlp::requantize).
struct Requant {
    __m512i round;
    __m128i count;
    bool relu;
};

MLP_AVX512 inline void store_requantized(__m512i acc, const Requant& r, int16_t* dst) {
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
template <int NV, int OB>
MLP_AVX512 inline void mac_block(const int32_t* w, std::size_t row, const Obs* obs, int p0, int p1,
                                 const int64_t* bias, const Requant& rq) {
    __m512i s_lo[OB][NV], s_hi[OB][NV];
    for (int o = 0; o < OB; ++o)
        for (int v = 0; v < NV; ++v) s_lo[o][v] = s_hi[o][v] = _mm512_setzero_si512();
    for (int p = p0; p < p1; ++p) {
        __m512i bl[OB], bh[OB];
        for (int o = 0; o < OB; ++o) {
            bl[o] = _mm512_set1_epi32(obs[o].lo[p]);
            bh[o] = _mm512_set1_epi32(obs[o].hi[p]);
        }
        const int32_t* wr = w + std::size_t(p) * row;
        for (int v = 0; v < NV; ++v) {
            const __m512i wv = _mm512_load_si512(wr + v * VEC);
            for (int o = 0; o < OB; ++o) {
                s_lo[o][v] = _mm512_add_epi32(s_lo[o][v], _mm512_madd_epi16(wv, bl[o]));
                s_hi[o][v] = _mm512_add_epi32(s_hi[o][v], _mm512_madd_epi16(wv, bh[o]));
            }
        }
    }
    for (int o = 0; o < OB; ++o) {
        for (int v = 0; v < NV; ++v) {
            for (int half = 0; half < 2; ++half) {  // 256 * hi + lo in int64, 8 lanes at a time
                const __m256i l32 = half ? _mm512_extracti64x4_epi64(s_lo[o][v], 1) : _mm512_castsi512_si256(s_lo[o][v]);
                const __m256i h32 = half ? _mm512_extracti64x4_epi64(s_hi[o][v], 1) : _mm512_castsi512_si256(s_hi[o][v]);
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
MLP_AVX512 inline void forward_block(const SimdModel& s, const int16_t* x, int16_t* y, int32_t* argmax) {
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
        const std::size_t row = std::size_t(nout);
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
                const int left = L.mvec - v;
                if (left >= 4) {
                    mac_block<4, OB>(w + v * VEC, row, at, p0, p1, b, rq);
                    v += 4;
                } else if (left == 3) {
                    mac_block<3, OB>(w + v * VEC, row, at, p0, p1, b, rq);
                    v += 3;
                } else if (left == 2) {
                    mac_block<2, OB>(w + v * VEC, row, at, p0, p1, b, rq);
                    v += 2;
                } else {
                    mac_block<1, OB>(w + v * VEC, row, at, p0, p1, b, rq);
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

MLP_AVX512 inline void forward_batch(const SimdModel& s, const int16_t* x, int batch, int16_t* y, int32_t* argmax) {
    const int n0 = s.layer[0].n_in, m = s.layer[s.n_layers - 1].m_out;
    int b = 0;
    for (; b + 2 <= batch; b += 2)  // two observations share every weight load
        forward_block<2>(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
    if (b < batch) forward_block<1>(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
}

// The same MAC array on 256-bit vectors (AVX2): each 16-output group of the packed rows is two ymm
// halves; one observation at a time; requantization per output with the kernel's mlp::requantize
// (AVX2 has no 64-bit arithmetic shift or saturating narrow).
#define MLP_AVX2 __attribute__((target("avx2")))

template <int NH>  // NH ymm halves of 8 outputs
MLP_AVX2 inline void mac_block_avx2(const int32_t* w, std::size_t row, const alias_i32* lo, const alias_i32* hi,
                                    int p0, int p1, int64_t* acc) {
    __m256i s_lo[NH], s_hi[NH];
    for (int h = 0; h < NH; ++h) s_lo[h] = s_hi[h] = _mm256_setzero_si256();
    for (int p = p0; p < p1; ++p) {
        const __m256i bl = _mm256_set1_epi32(lo[p]);
        const __m256i bh = _mm256_set1_epi32(hi[p]);
        const int32_t* wr = w + std::size_t(p) * row;
        for (int h = 0; h < NH; ++h) {
            const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(wr + h * 8));
            s_lo[h] = _mm256_add_epi32(s_lo[h], _mm256_madd_epi16(wv, bl));
            s_hi[h] = _mm256_add_epi32(s_hi[h], _mm256_madd_epi16(wv, bh));
        }
    }
    for (int h = 0; h < NH; ++h) {
        for (int q = 0; q < 2; ++q) {  // 256 * hi + lo in int64, 4 lanes at a time
            const __m128i l32 = q ? _mm256_extracti128_si256(s_lo[h], 1) : _mm256_castsi256_si128(s_lo[h]);
            const __m128i h32 = q ? _mm256_extracti128_si256(s_hi[h], 1) : _mm256_castsi256_si128(s_hi[h]);
            const __m256i sum =
                _mm256_add_epi64(_mm256_cvtepi32_epi64(l32), _mm256_slli_epi64(_mm256_cvtepi32_epi64(h32), 8));
            __m256i* a = reinterpret_cast<__m256i*>(acc + h * 8 + q * 4);
            _mm256_store_si256(a, _mm256_add_epi64(_mm256_load_si256(a), sum));
        }
    }
}

MLP_AVX2 inline void forward_one_avx2(const SimdModel& s, const int16_t* x, int16_t* y, int32_t* argmax) {
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
            for (int v = 0; v < L.mvec; ++v) mac_block_avx2<2>(w + v * VEC, std::size_t(nout), lo, hi, p0, p1, acc + v * VEC);
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

MLP_AVX2 inline void forward_batch_avx2(const SimdModel& s, const int16_t* x, int batch, int16_t* y,
                                        int32_t* argmax) {
    const int n0 = s.layer[0].n_in, m = s.layer[s.n_layers - 1].m_out;
    for (int b = 0; b < batch; ++b)
        forward_one_avx2(s, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
}

#else

inline void forward_batch(const SimdModel&, const int16_t*, int, int16_t*, int32_t*) { std::abort(); }
inline void forward_batch_avx2(const SimdModel&, const int16_t*, int, int16_t*, int32_t*) { std::abort(); }

#endif

}  // namespace mlp_simd
