// mlp.cpp: the MLP inference kernel (HLS top and the functions the cpu backend calls). See mlp.h.
#include "mlp.h"

#include <cmath>

// The CPU clones of forward_batch must inline the whole per-observation path to be vectorized.
#if defined(__GNUC__) && !defined(__SYNTHESIS__)
#define MLP_INLINE inline __attribute__((always_inline))
#else
#define MLP_INLINE inline
#endif

namespace mlp {

namespace {

struct TanhTable {
    int16_t t[TANH_SEGMENTS + 1];
    TanhTable() {
    TANH_TABLE:
        for (int k = 0; k <= TANH_SEGMENTS; ++k) {
            double v = std::floor(std::tanh((64.0 * k - 32768.0) / 4096.0) * 32768.0 + 0.5);
            t[k] = int16_t(v > 32767.0 ? 32767.0 : (v < -32767.0 ? -32767.0 : v));
        }
    }
};

// Exact sum of W[j] * a[j] for j < n (n a multiple of ROW_ALIGN, <= MAC_BLOCK) from the split
// activations (mlp.h: why the split is exact in int32).
MLP_INLINE int64_t mac_block(const int16_t* w, const int16_t* lo, const int16_t* hi, int n) {
    int32_t s_lo = 0, s_hi = 0;
MAC_LANES:
    for (int j = 0; j < n; ++j) {
#pragma HLS PIPELINE II = 1
#pragma HLS UNROLL factor = MLP_LANES
        s_lo += int32_t(w[j]) * int32_t(lo[j]);
        s_hi += int32_t(w[j]) * int32_t(hi[j]);
    }
    return int64_t(s_hi) * 256 + s_lo;
}

// One layer: out[0..m) from in[0..stride) (zero padded); pads out up to the next multiple of ROW_ALIGN.
MLP_INLINE void layer_forward(const Model& model, const LayerDesc& d, const int16_t* in, int16_t* out) {
    alignas(64) int16_t lo[MAX_WIDTH];
    alignas(64) int16_t hi[MAX_WIDTH];
LAYER_SPLIT:
    for (int j = 0; j < d.stride; ++j) {
        lo[j] = int16_t(in[j] & 0xFF);
        hi[j] = int16_t(in[j] >> 8);
    }
    const bool relu = (d.flags & FLAG_RELU) != 0;
LAYER_ROWS:
    for (int i = 0; i < d.m_out; ++i) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_WIDTH
        const int16_t* w = &model.weight[d.w_offset + i * d.stride];
        int64_t acc = model.bias[d.b_offset + i];
    LAYER_BLOCKS:
        for (int jb = 0; jb < d.stride; jb += MAC_BLOCK) {
            int n = d.stride - jb < MAC_BLOCK ? d.stride - jb : MAC_BLOCK;
            acc += mac_block(w + jb, lo + jb, hi + jb, n);
        }
        out[i] = requantize(acc, d.shift, relu);
    }
LAYER_PAD:
    for (int i = d.m_out; i < round_up(d.m_out, ROW_ALIGN); ++i) out[i] = 0;
}

MLP_INLINE int16_t tanh_lookup(const int16_t* T, int16_t y) {
    int u = int(y) + 32768;
    int k = u >> TANH_SEGMENT_BITS;
    int r = u & ((1 << TANH_SEGMENT_BITS) - 1);
    int t = T[k] + (((T[k + 1] - T[k]) * r + 32) >> TANH_SEGMENT_BITS);
    return int16_t(t);
}

const TanhTable& table() {
    static const TanhTable t;  // computed once (thread-safe static initialization)
    return t;
}

MLP_INLINE void forward_core(const Model& model, const int16_t* T, const int16_t* x, int16_t* y, int32_t* argmax) {
    alignas(64) int16_t buf_a[MAX_WIDTH];
    alignas(64) int16_t buf_b[MAX_WIDTH];
    const LayerDesc& first = model.layer[0];
FORWARD_INPUT:
    for (int j = 0; j < first.stride; ++j) buf_a[j] = j < first.n_in ? x[j] : int16_t(0);
    int16_t* in = buf_a;
    int16_t* out = buf_b;
FORWARD_LAYERS:
    for (int l = 0; l < model.n_layers; ++l) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_LAYERS
        layer_forward(model, model.layer[l], in, out);
        int16_t* t = in;
        in = out;
        out = t;
    }
    const LayerDesc& last = model.layer[model.n_layers - 1];
    const bool tanh_head = (last.flags & FLAG_TANH) != 0;
    int best = 0;
FORWARD_HEAD:
    for (int i = 0; i < last.m_out; ++i) {
        y[i] = tanh_head ? tanh_lookup(T, in[i]) : in[i];
        if (in[i] > in[best]) best = i;
    }
    if (argmax) *argmax = tanh_head ? -1 : best;
}

}  // namespace

const int16_t* tanh_table() { return table().t; }

int16_t tanh_pwl(int16_t y) { return tanh_lookup(tanh_table(), y); }

uint32_t plan_layers(int n_layers, LayerDesc* desc) {
    if (n_layers < 1 || n_layers > MAX_LAYERS) return ERR_BAD_LOAD;
    int w_offset = 0, b_offset = 0;
PLAN_LAYERS:
    for (int l = 0; l < n_layers; ++l) {
        LayerDesc& d = desc[l];
        const bool last = l == n_layers - 1;
        if (d.n_in < 1 || d.n_in > MAX_WIDTH || d.m_out < 1 || d.m_out > MAX_WIDTH) return ERR_BAD_LOAD;
        if (d.shift < 0 || d.shift > MAX_SHIFT) return ERR_BAD_LOAD;
        if (l > 0 && d.n_in != desc[l - 1].m_out) return ERR_BAD_LOAD;
        const uint16_t head = d.flags & (FLAG_TANH | FLAG_RAW);
        if (d.flags & ~(FLAG_RELU | FLAG_TANH | FLAG_RAW)) return ERR_BAD_LOAD;
        if (!last && head != 0) return ERR_BAD_LOAD;                          // hidden: ReLU or linear
        if (last && (head != FLAG_TANH && head != FLAG_RAW)) return ERR_BAD_LOAD;  // exactly one head
        if (last && (d.flags & FLAG_RELU)) return ERR_BAD_LOAD;              // the output layer has no ReLU
        d.stride = round_up(d.n_in, ROW_ALIGN);
        d.w_offset = w_offset;
        d.b_offset = b_offset;
        w_offset += d.m_out * d.stride;
        b_offset += d.m_out;
    }
    return 0;
}

void forward_one(const Model& model, const int16_t* x, int16_t* y, int32_t* argmax) {
    forward_core(model, tanh_table(), x, y, argmax);
}

MLP_CPU_CLONES
void forward_batch(const Model& model, const int16_t* x, int batch, int16_t* y, int32_t* argmax) {
    const int16_t* T = tanh_table();
    const int n0 = model.layer[0].n_in;
    const int m = model.layer[model.n_layers - 1].m_out;
FORWARD_BATCH:
    for (int b = 0; b < batch; ++b) {
        forward_core(model, T, x + std::size_t(b) * n0, y + std::size_t(b) * m, argmax ? argmax + b : nullptr);
    }
}

}  // namespace mlp

void mlp_top(pearl::stream<pearl::axis16>& s_axis_in, pearl::stream<pearl::axis16>& m_axis_out, uint32_t mode,
             uint32_t batch, uint32_t& lanes, uint32_t& max_width, uint32_t& max_layers, uint32_t& error) {
#pragma HLS INTERFACE axis port = s_axis_in
#pragma HLS INTERFACE axis port = m_axis_out
#pragma HLS INTERFACE s_axilite port = mode offset = 0x10 bundle = control
#pragma HLS INTERFACE s_axilite port = batch offset = 0x18 bundle = control
#pragma HLS INTERFACE s_axilite port = lanes offset = 0x20 bundle = control
#pragma HLS INTERFACE s_axilite port = max_width offset = 0x28 bundle = control
#pragma HLS INTERFACE s_axilite port = max_layers offset = 0x30 bundle = control
#pragma HLS INTERFACE s_axilite port = error offset = 0x38 bundle = control
#pragma HLS INTERFACE s_axilite port = return bundle = control
    static mlp::Model model;  // on-chip weights, kept between calls
#pragma HLS ARRAY_PARTITION variable = model.weight cyclic factor = MLP_LANES
    lanes = mlp::LANES;
    max_width = mlp::MAX_WIDTH;
    max_layers = mlp::MAX_LAYERS;
    error = 0;
    if (mode == mlp::MODE_LOAD) {
        error = mlp::load_model(s_axis_in, model);
        return;
    }
    if (mode != mlp::MODE_INFER || model.n_layers == 0 || batch > uint32_t(mlp::MAX_BATCH)) {
        error = mlp::ERR_BAD_LOAD;
        return;
    }
    const mlp::LayerDesc& first = model.layer[0];
    const mlp::LayerDesc& last = model.layer[model.n_layers - 1];
    const bool raw_head = (last.flags & mlp::FLAG_RAW) != 0;
    int16_t x[mlp::MAX_WIDTH];
    int16_t y[mlp::MAX_WIDTH];
INFER_BATCH:
    for (uint32_t b = 0; b < batch; ++b) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_BATCH
    INFER_READ:
        for (int j = 0; j < first.n_in; ++j) x[j] = s_axis_in.read().data;
        int32_t argmax = -1;
        mlp::forward_one(model, x, y, &argmax);
    INFER_WRITE:
        for (int i = 0; i < last.m_out; ++i) {
            bool end = !raw_head && i == last.m_out - 1;
            m_axis_out.write(pearl::make_axis16(y[i], end));
        }
        if (raw_head) m_axis_out.write(pearl::make_axis16(int16_t(argmax), true));
    }
}
