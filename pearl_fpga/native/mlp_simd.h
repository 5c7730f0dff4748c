// mlp_simd.h: an AVX-512 (or AVX2) MAC array for the cpu backend of the MLP kernel (x86-64 only),
// each with the VNNI dot product (vpdpwssd) in place of vpmaddwd + vpaddd where the CPU has it.
//
// It computes exactly what mlp::forward_one (hls/mlp/mlp.cpp) computes, the exact integer sum, but it
// splits each activation into lo (a & 255, 0..255) and hi (a >> 8, -128..127): over 256 products
// sum W*lo < 2^31 and |sum W*hi| <= 2^30, so vpmaddwd's int32 partial sums are exact and the sum is
// 256 * S_hi + S_lo in int64 (mlp.h says why not one vpmaddwd per pair). The outputs are in the
// vector lanes instead of the inputs: weights are repacked at load as input pairs
// (W[i][2p] | W[i][2p+1] << 16, one int32 lane per output i), so vpmaddwd with a broadcast activation
// pair adds two products to 16 outputs at once and no horizontal sum is needed. Requantization is
// vectorized too: arithmetic shift (vpsraq), signed saturation to int16 (vpmovsqw), ReLU (vpmaxsw).
// The heads use the kernel's own scalar code (mlp::tanh_pwl). The loops are in mlp_simd_avx512.h and
// mlp_simd_avx2.h, each compiled twice (with and without VNNI) under the matching target attribute.
//
// Layout of SimdModel::w, per layer: the outputs (padded to a multiple of 16 with zero weights and
// zero bias) in column blocks of GROUP_VECS vectors (the last block narrower), each block npairs rows
// of its vectors' 16 int32 (row p holds input pair p), one block after the other: the MAC array reads
// a block row by row, as one sequential stream.
// Tests check this path bit for bit against the HLS code path and the numpy reference.
#pragma once

#include <algorithm>
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
constexpr int BLOCK_OBS = 3;  // observations the AVX-512 MAC array computes together (mlp_simd_avx512.h)
constexpr int GROUP_VECS = 4;  // output vectors per column block of the packed weights

struct Layer {
    int n_in, m_out, npairs, mvec, shift;
    bool relu;
    std::size_t w_off;  // in int32 words
    std::size_t b_off;  // in int64 words
    // The packed weights of output vector v (pair 0), from the layer's; rows of its block are
    // group_row(v) words apart.
    std::size_t group_at(int v) const {
        const int first = v / GROUP_VECS * GROUP_VECS;
        return std::size_t(first) * VEC * npairs + std::size_t(v - first) * VEC;
    }
    std::size_t group_row(int v) const { return std::size_t(std::min(GROUP_VECS, mvec - v / GROUP_VECS * GROUP_VECS)) * VEC; }
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

// The MAC arrays, best first. PLAIN means: use the kernel's own loops instead.
enum class Isa { AVX512_VNNI, AVX512, AVX2_VNNI, AVX2, PLAIN };
constexpr Isa ALL_ISAS[] = {Isa::AVX512_VNNI, Isa::AVX512, Isa::AVX2_VNNI, Isa::AVX2, Isa::PLAIN};

inline const char* name(Isa isa) {
    switch (isa) {
        case Isa::AVX512_VNNI: return "avx512vnni";
        case Isa::AVX512: return "avx512";
        case Isa::AVX2_VNNI: return "avx2vnni";
        case Isa::AVX2: return "avx2";
        case Isa::PLAIN: break;
    }
    return "plain";
}

inline bool supported(Isa isa) {
    constexpr pearl_isa::Isa AVX512 = pearl_isa::Isa::AVX512, AVX2 = pearl_isa::Isa::AVX2;
    if (!MLP_SIMD_X86) return isa == Isa::PLAIN;
    switch (isa) {
        case Isa::AVX512_VNNI: return pearl_isa::cpu_has_vnni(AVX512);
        case Isa::AVX512: return pearl_isa::cpu_has(AVX512);
        case Isa::AVX2_VNNI: return pearl_isa::cpu_has_vnni(AVX2);
        case Isa::AVX2: return pearl_isa::cpu_has(AVX2);
        case Isa::PLAIN: break;
    }
    return true;
}

// The fastest MAC array the CPU has, within PEARL_FPGA_NATIVE_ISA's cap (isa.h).
inline Isa best_isa() {
    if (!MLP_SIMD_X86) return Isa::PLAIN;
    const pearl_isa::Isa width = pearl_isa::best();
    const bool vnni = pearl_isa::has_vnni();
    if (width == pearl_isa::Isa::AVX512) return vnni ? Isa::AVX512_VNNI : Isa::AVX512;
    if (width == pearl_isa::Isa::AVX2) return vnni ? Isa::AVX2_VNNI : Isa::AVX2;
    return Isa::PLAIN;
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
        for (int i = 0; i < d.m_out; ++i) {
            const int16_t* wi = &m.weight[d.w_offset + i * d.stride];
            int32_t* col = s->w.get() + L.w_off + L.group_at(i / VEC) + i % VEC;
            const std::size_t row = L.group_row(i / VEC);
            for (int p = 0; p < L.npairs; ++p) {
                uint16_t w0 = uint16_t(wi[2 * p]);
                uint16_t w1 = 2 * p + 1 < d.n_in ? uint16_t(wi[2 * p + 1]) : 0;
                col[std::size_t(p) * row] = int32_t(uint32_t(w0) | (uint32_t(w1) << 16));
            }
        }
        for (int i = 0; i < d.m_out; ++i) s->bias[L.b_off + i] = m.bias[d.b_offset + i];
    }
    return s;
}

#if MLP_SIMD_X86

typedef int32_t alias_i32 __attribute__((may_alias));

// vpdpwssd (acc += the two int16 products of each int32 lane of w and b, wrapping) as inline asm: GCC 12
// surrounds the builtins' tied accumulator with register copies in these loops, which cost more than
// the add the instruction saves. The AVX-VNNI form needs the VEX encoding, hence ymm0-15 ("x").
__attribute__((target("avx512f,avx512bw,avx512vnni"))) inline __m512i vnni_dot512(__m512i acc, __m512i w, __m512i b) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(b));
    return acc;
}
__attribute__((target("avx2,avxvnni"))) inline __m256i vnni_dot256(__m256i acc, __m256i w, __m256i b) {
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(b));
    return acc;
}

// Each MAC array twice: with vpmaddwd + vpaddd, and with the VNNI dot product vpdpwssd where the CPU
// has it (one instruction for the same wrapping int32 sum, so the same bits).
#define MLP_DOT512(acc, w, b) _mm512_add_epi32(acc, _mm512_madd_epi16(w, b))
#define MLP_TARGET __attribute__((target("avx512f,avx512bw")))
namespace avx512 {
#include "mlp_simd_avx512.h"
}
#undef MLP_TARGET
#undef MLP_DOT512
#define MLP_DOT512(acc, w, b) vnni_dot512(acc, w, b)
#define MLP_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
namespace avx512vnni {
#include "mlp_simd_avx512.h"
}
#undef MLP_TARGET
#undef MLP_DOT512

#define MLP_DOT256(acc, w, b) _mm256_add_epi32(acc, _mm256_madd_epi16(w, b))
#define MLP_TARGET __attribute__((target("avx2")))
namespace avx2 {
#include "mlp_simd_avx2.h"
}
#undef MLP_TARGET
#undef MLP_DOT256
#define MLP_DOT256(acc, w, b) vnni_dot256(acc, w, b)
#define MLP_TARGET __attribute__((target("avx2,avxvnni")))
namespace avx2vnni {
#include "mlp_simd_avx2.h"
}
#undef MLP_TARGET
#undef MLP_DOT256

#endif

// The batch through the MAC array `isa` (not PLAIN: the kernel's own mlp::forward_batch runs that).
inline void forward_batch(Isa isa, const SimdModel& s, const int16_t* x, int batch, int16_t* y, int32_t* argmax) {
#if MLP_SIMD_X86
    switch (isa) {
        case Isa::AVX512_VNNI: return avx512vnni::forward_batch(s, x, batch, y, argmax);
        case Isa::AVX512: return avx512::forward_batch(s, x, batch, y, argmax);
        case Isa::AVX2_VNNI: return avx2vnni::forward_batch(s, x, batch, y, argmax);
        case Isa::AVX2: return avx2::forward_batch(s, x, batch, y, argmax);
        case Isa::PLAIN: break;
    }
#endif
    (void)isa, (void)s, (void)x, (void)batch, (void)y, (void)argmax;
    std::abort();  // unreachable: callers run PLAIN through mlp::forward_batch
}

}  // namespace mlp_simd
