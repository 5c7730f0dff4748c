// mlp.h: fixed-point MLP inference kernel (DQN Q-networks, DDPG actors). Contract: hls/mlp/SPEC.md.
//
// Formats: observations, weights and activations int16 (per-layer fractional bits chosen by the host),
// biases int32, accumulators exact (int64 in C++, 48-bit DSP cascades in hardware); a TANH head takes
// Q3.12 and returns Q0.15.
//
// Arithmetic (exactly SPEC.md; every backend is bit-identical):
//   layer l: acc_i = b[i] + sum_j W[i][j] * a[j]          exact integer sum (int16 x int16, int32 bias)
//            s = shift_l (0..40); y = (acc + 2^(s-1)) >> s when s > 0 (round half up, arithmetic shift)
//            y = clamp(y, -32768, 32767); hidden layers: y = max(y, 0) (ReLU)
//   head:    RAW  -> the m values plus argmax (first index of the maximum)
//            TANH -> input Q3.12, output Q0.15: piecewise-linear tanh over 1024 segments of 64 LSB,
//                    t = T[k] + (((T[k+1] - T[k]) * r + 32) >> 6), u = y + 32768, k = u >> 6, r = u & 63,
//                    T[k] = clamp(floor(tanh((64k - 32768) / 4096) * 32768 + 0.5), +-32767).
//            T is the constant TANH_TABLE of mlp_tanh_table.h (generated from the Python formula and
//            committed; a ROM in hardware, no std::tanh anywhere in the kernel).
//
// The MAC: one 16x16 multiply per weight (one DSP per lane), LANES products added as a tree into a
// wide accumulator (|W * a| <= 2^30, so a row of MAX_WIDTH products needs under 48 bits: int64 here, a
// DSP48 cascade in hardware). The cpu backend's SIMD MAC array (pearl_fpga/native/mlp_simd.h) computes
// the same exact sum another way: it splits each activation into 8-bit halves so that vpmaddwd's int32
// partial sums stay exact over 256 products; one vpmaddwd per pair would need every pair sum widened to
// int64, which costs more instructions than the second vpmaddwd it saves.
//
// Memory layout (on-chip; the HLS top holds these as separate static arrays, the cpu build in Model):
//   weight[]: layer after layer, each m_out rows of `stride` words (stride = n_in rounded up to
//             ROW_ALIGN, a multiple of LANES, padding = 0), so a row is a whole number of LANES-word
//             chunks and chunk c of the memory is word c*LANES+u in bank u of the cyclic partition:
//     layer 0: | row 0: W00 .. W0(n-1) 0 0 | row 1: ... | ... | row m-1 |  layer 1: | row 0 | ...
//     bank u (u = 0..LANES-1) holds words u, u+LANES, u+2*LANES, ...: one chunk = one read per bank.
//   bias[]:   layer after layer, m_out int32 words each.
//   activations: act[2][MAX_WIDTH] ping-pong int16 (zero padded to the next stride), partitioned
//             like the weights, so lane u reads bank u of both.
//
// Expected cycles per inference (HLS schedule, estimated: no Vitis run here; the planner's stated
// model, pearl_fpga/planner/hls_schedule.py): per layer m_l * stride_l / LANES chunks at II = 1, rows
// back to back, plus one MAC pipeline fill (about 10), plus the stream reads, the input copy, the
// head and the writes; e.g. 4-64-64-2, LANES 16: 64*2 + 64*4 + 2*4 + 3*10 + 30 padding + 47 = 499.
// The reference RTL also overlaps the layers and the streams (target MACs / LANES + 8 * L + 16: 320
// for that network). The cpu backend runs these same functions ("plain" path, vectorized by
// g++, one clone per x86-64 level) or, where the CPU has AVX-512/AVX2, an equivalent MAC array with
// the outputs in the vector lanes (pearl_fpga/native/mlp_simd.h); tests hold all of them bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/hls_compat.h"
#include "mlp_config.h"  // the synthesis parameters (MLP_LANES, MLP_MAX_WIDTH, ...), generated from kernel.json
#include "mlp_tanh_table.h"

#if defined(__GNUC__) && !defined(__SYNTHESIS__)
#pragma GCC diagnostic ignored "-Wunused-label"  // loop labels name loops for HLS directives and reports
#endif

// Synthesis parameters (mlp_config.h; override with -D): the same defaults for every compiler, so that
// the C simulation checks what Vitis HLS builds; the cpu extension is built with the descriptor's
// "native" MLP_MAX_WIDTH (512, setup.py) so that the rl-zoo DDPG actor (400x300) fits; boards default
// to 256 (SPEC.md).
// The CPU build compiles the hot loop once per x86-64 level; Vitis HLS sees no attribute.
#if !defined(__SYNTHESIS__) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MLP_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MLP_CPU_CLONES
#endif

namespace mlp {

constexpr int MAX_LAYERS = config::MAX_LAYERS;
constexpr int MAX_WIDTH = config::MAX_WIDTH;
constexpr int LANES = config::LANES;
constexpr int MAX_BATCH = config::MAX_BATCH;
constexpr int ROW_ALIGN = LANES > 32 ? LANES : 32;  // words; 32 int16 = one 512-bit vector
constexpr int MAX_SHIFT = config::MAX_SHIFT;
constexpr int TANH_FRAC_BITS = config::TANH_FRAC_BITS;  // Q3.12 input of the tanh head
constexpr int TANH_SEGMENTS = 1024;
constexpr int TANH_SEGMENT_BITS = config::TANH_SEGMENT_BITS;
constexpr int WEIGHT_WORDS = MAX_LAYERS * MAX_WIDTH * MAX_WIDTH;
constexpr int BIAS_WORDS = MAX_LAYERS * MAX_WIDTH;

static_assert(LANES >= 1 && (LANES & (LANES - 1)) == 0 && LANES <= int(config::LANES_RANGE.max), "LANES: a power of two <= 256");
static_assert(MAX_WIDTH % ROW_ALIGN == 0, "MAX_WIDTH must be a multiple of ROW_ALIGN");
static_assert(sizeof(TANH_TABLE) / sizeof(TANH_TABLE[0]) == TANH_SEGMENTS + 1, "regenerate mlp_tanh_table.h");
static_assert(MAX_LAYERS >= 1 && MAX_WIDTH <= 65535, "parameters out of range");

// LOAD stream flags (per layer)
constexpr uint16_t FLAG_RELU = 1u << 0;
constexpr uint16_t FLAG_TANH = 1u << 1;
constexpr uint16_t FLAG_RAW = 1u << 2;

// mode register
constexpr uint32_t MODE_LOAD = 0;
constexpr uint32_t MODE_INFER = 1;
constexpr uint32_t MODE_IDENTITY = 2;  // answers lanes, max_width, max_layers, loaded on the stream (XRT)

// IDENTITY's status word
constexpr uint32_t STATUS_LOADED = 1u << 0;         // the kernel holds weights
constexpr uint32_t STATUS_LOAD_REJECTED = 1u << 1;  // the last LOAD set the error register

// error register (0x38) bits
constexpr uint32_t ERR_BAD_LOAD = 1u << 0;  // LOAD rejected (or INFER without weights); see SPEC.md

struct LayerDesc {
    int n_in;
    int m_out;
    int stride;       // words per weight row (n_in rounded up to ROW_ALIGN)
    int shift;        // fw + fa_in - fa_out, 0..MAX_SHIFT
    uint16_t flags;   // FLAG_*
    int w_offset;     // first weight word of the layer in Model::weight
    int b_offset;     // first bias of the layer in Model::bias
};

// Everything a LOAD writes, for the cpu extension (one per MLPInfer on the heap, about 2 MB at
// MAX_WIDTH 512). The HLS top keeps the same four members as separate statics instead, so that each
// array gets its own ARRAY_PARTITION in the top's scope (mlp_top in mlp.cpp).
struct Model {
    int n_layers;  // 0: nothing loaded
    LayerDesc layer[MAX_LAYERS];
    alignas(64) int16_t weight[WEIGHT_WORDS];
    int32_t bias[BIAS_WORDS];
};

constexpr int round_up(int n, int k) { return (n + k - 1) / k * k; }

// The 1025-entry tanh table of SPEC.md (TANH_TABLE of mlp_tanh_table.h).
const int16_t* tanh_table();

// Q3.12 -> Q0.15 piecewise-linear tanh of SPEC.md.
int16_t tanh_pwl(int16_t y);

// Requantize one accumulator: round half up by `shift`, saturate to int16, optional ReLU.
inline int16_t requantize(int64_t acc, int shift, bool relu) {
    int64_t y = shift > 0 ? (acc + (int64_t(1) << (shift - 1))) >> shift : acc;
    if (y > 32767) y = 32767;
    if (y < -32768) y = -32768;
    if (relu && y < 0) y = 0;
    return int16_t(y);
}

// Checks a layer description list (from a LOAD header) against the kernel limits and the SPEC
// rules; fills stride/offsets. Returns 0 if it is loadable, else ERR_BAD_LOAD.
uint32_t plan_layers(int n_layers, LayerDesc* desc);

// Runs the network on one observation: x holds n_0 words, y receives m_{L-1} words (raw values or
// tanh outputs); returns the index of the first maximum for a RAW head, else -1. The arrays are what
// a successful LOAD wrote (n_layers > 0). The HLS top's entry (inlined into mlp_top).
int32_t forward_one(int n_layers, const LayerDesc layer[MAX_LAYERS], const int16_t weight[WEIGHT_WORDS],
                    const int32_t bias[BIAS_WORDS], const int16_t x[MAX_WIDTH], int16_t y[MAX_WIDTH]);

// forward_one over a batch (rows of n_0 / m words); argmax may be null. The CPU backend's entry.
void forward_batch(const Model& model, const int16_t* x, int batch, int16_t* y, int32_t* argmax);

// Parses one LOAD stream (SPEC.md) from any source with `pearl::axis16 read()`; writes the arrays
// only when the header is valid. Returns 0 or ERR_BAD_LOAD. A stream whose tlast comes early or late
// leaves n_layers_out = 0 (no weights) after draining to tlast. A template so that the cpu extension
// can feed a numpy array; under synthesis it is instantiated once, with pearl::stream (hls::stream)
// in mlp_top, so Vitis sees an ordinary AXI4-Stream read.
template <typename Source>
uint32_t load_arrays(Source& in, int& n_layers_out, LayerDesc layer[MAX_LAYERS], int16_t weight[WEIGHT_WORDS],
                     int32_t bias[BIAS_WORDS]) {
    LayerDesc desc[MAX_LAYERS];
    pearl::axis16 w = in.read();
    int n_layers = uint16_t(w.data);
    bool ended = w.last;
    // The header is read in full before any check so that the stream stays in step.
    int header_words = n_layers >= 1 && n_layers <= MAX_LAYERS ? 4 * n_layers : 0;
LOAD_HEADER:
    for (int k = 0; k < header_words && !ended; ++k) {
        pearl::axis16 h = in.read();
        ended = h.last;
        int v = uint16_t(h.data);
        LayerDesc& d = desc[k / 4];
        if (k % 4 == 0) d.n_in = v;
        if (k % 4 == 1) d.m_out = v;
        if (k % 4 == 2) d.shift = v;
        if (k % 4 == 3) d.flags = uint16_t(v);
    }
    bool ok = header_words > 0 && !ended && plan_layers(n_layers, desc) == 0;
    if (!ok) {
    LOAD_DRAIN:
        while (!ended) ended = in.read().last;
        return ERR_BAD_LOAD;  // old weights stay in place
    }
    n_layers_out = 0;  // invalid until the last word arrives
    // A frame that ends early stops the reads (the loops run on, writing zeros) and fails at the end:
    // no early return inside the pipelined loop, whose exit must stay its trip count.
    bool truncated = false;
LOAD_LAYERS:
    for (int l = 0; l < n_layers; ++l) {
        const LayerDesc& d = desc[l];
    LOAD_ROWS:
        for (int i = 0; i < d.m_out; ++i) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_WIDTH
        LOAD_COLS:
            for (int j = 0; j < d.stride; ++j) {
#pragma HLS LOOP_TRIPCOUNT min = ROW_ALIGN max = MLP_MAX_WIDTH
#pragma HLS PIPELINE II = 1  // one stream word per clock, the AXI4-Stream rate
                int16_t v = 0;
                if (j < d.n_in) {
                    truncated = truncated || ended;
                    if (!truncated) {
                        pearl::axis16 x = in.read();
                        ended = x.last;
                        v = x.data;
                    }
                }
                weight[d.w_offset + i * d.stride + j] = v;
            }
        }
    LOAD_BIASES:
        for (int i = 0; i < d.m_out; ++i) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_WIDTH
            truncated = truncated || ended;
            uint16_t lo = 0, hi = 0;
            if (!truncated) {
                const pearl::axis16 w0 = in.read();
                lo = uint16_t(w0.data);
                ended = w0.last;
                truncated = ended;  // a bias cut in half
            }
            if (!truncated) {
                const pearl::axis16 w1 = in.read();
                hi = uint16_t(w1.data);
                ended = w1.last;
                bias[d.b_offset + i] = int32_t(uint32_t(lo) | (uint32_t(hi) << 16));
            }
        }
    }
    if (truncated) return ERR_BAD_LOAD;  // the stream ended early: no weights
    if (!ended) {  // too long: drain, no weights
    LOAD_DRAIN_TAIL:
        while (!ended) ended = in.read().last;
        return ERR_BAD_LOAD;
    }
LOAD_COMMIT:
    for (int l = 0; l < n_layers; ++l) layer[l] = desc[l];
    n_layers_out = n_layers;
    return 0;
}

// load_arrays into a Model (the cpu extension's entry).
template <typename Source>
uint32_t load_model(Source& in, Model& model) {
    return load_arrays(in, model.n_layers, model.layer, model.weight, model.bias);
}

}  // namespace mlp

// HLS top. mode LOAD: reads one LOAD stream; mode INFER: reads `batch` observations of n_0 words and
// writes m words (+ argmax for a RAW head) per observation. Register map: SPEC.md.
extern "C" void mlp_top(pearl::stream<pearl::axis16>& s_axis_in, pearl::stream<pearl::axis16>& m_axis_out, uint32_t mode,
             uint32_t batch, uint32_t& lanes, uint32_t& max_width, uint32_t& max_layers, uint32_t& error);
