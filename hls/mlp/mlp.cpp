// mlp.cpp: the MLP inference kernel (HLS top and the functions the cpu backend calls). See mlp.h.
#include "mlp.h"

// The CPU clones of forward_batch must inline the whole per-observation path to be vectorized.
#if defined(__GNUC__) && !defined(__SYNTHESIS__)
#define MLP_INLINE inline __attribute__((always_inline))
#else
#define MLP_INLINE inline
#endif

namespace mlp {

namespace {

constexpr int MAX_LAYER_CHUNKS = MAX_WIDTH * (MAX_WIDTH / LANES);  // for LOOP_TRIPCOUNT (report only)

// One layer: out[0..m) from in[0..stride) (zero padded); pads out up to the next multiple of ROW_ALIGN.
// One pipelined loop over every (row, chunk) of the layer, so a row's MACs start while the previous
// row's sum is still being requantized: m * stride / LANES cycles plus one pipeline fill per layer.
// Per chunk, LANES 16x16 multiplies (one DSP each) added as a tree into a wide accumulator; a row's
// chunks are consecutive in the weight memory, so the layer's chunk t is weight chunk base + t.
// Indices are written as chunk * LANES + u so that, with weight and in partitioned cyclic by LANES,
// lane u always reads bank u.
MLP_INLINE void layer_forward(const LayerDesc& d, const int16_t weight[WEIGHT_WORDS], const int32_t bias[BIAS_WORDS],
                              const int16_t in[MAX_WIDTH], int16_t out[MAX_WIDTH]) {
#pragma HLS INLINE  // in and out are halves of forward_core's act: inlined, the DEPENDENCE pragmas below bind to act
    const bool relu = (d.flags & FLAG_RELU) != 0;
    const int row_chunks = d.stride / LANES;  // exact: stride is a multiple of ROW_ALIGN >= LANES
    const int base = d.w_offset / LANES;      // exact: offsets are multiples of LANES
    const int chunks = d.m_out * row_chunks;
    int64_t acc = 0;  // |sum| < MAX_WIDTH * 2^30 + 2^31: 48 bits suffice (a DSP48 cascade in hardware)
    int row = 0, c = 0;
LAYER_MACS:
    for (int t = 0; t < chunks; ++t) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MAX_LAYER_CHUNKS
#pragma HLS PIPELINE II = 1  // one chunk of LANES products per clock; acc, row and c are the carried state
        // in and out are the two halves of forward_core's act (act[l & 1] and act[(l + 1) & 1]), one
        // array to HLS, which cannot prove they never overlap: this loop only reads in and only writes
        // out, so no write of one iteration reaches a read of a later one.
#pragma HLS DEPENDENCE variable = in type = inter false
#pragma HLS DEPENDENCE variable = out type = inter false
        int64_t chunk_sum = 0;
    MAC_LANES:
        for (int u = 0; u < LANES; ++u) {
#pragma HLS UNROLL  // the LANES parallel multipliers (factor LANES = the whole loop); Vitis adds them as a tree
            const int32_t product = int32_t(weight[(base + t) * LANES + u]) * int32_t(in[c * LANES + u]);
            chunk_sum += product;  // exact: |W * a| <= 2^30
        }
        acc = (c == 0 ? int64_t(bias[d.b_offset + row]) : acc) + chunk_sum;
        if (c == row_chunks - 1) {
            out[row] = requantize(acc, d.shift, relu);
            ++row;
            c = 0;
        } else {
            ++c;
        }
    }
LAYER_PAD:
    for (int i = d.m_out; i < round_up(d.m_out, ROW_ALIGN); ++i) {
#pragma HLS LOOP_TRIPCOUNT min = 0 max = ROW_ALIGN
        out[i] = 0;
    }
}

MLP_INLINE int16_t tanh_lookup(int16_t y) {
#pragma HLS INLINE  // a ROM read and one multiply-add inside FORWARD_HEAD
    int u = int(y) + 32768;
    int k = u >> TANH_SEGMENT_BITS;
    int r = u & ((1 << TANH_SEGMENT_BITS) - 1);
    int t = TANH_TABLE[k] + (((TANH_TABLE[k + 1] - TANH_TABLE[k]) * r + 32) >> TANH_SEGMENT_BITS);
    return int16_t(t);
}

MLP_INLINE int32_t forward_core(int n_layers, const LayerDesc layer[MAX_LAYERS], const int16_t weight[WEIGHT_WORDS],
                                const int32_t bias[BIAS_WORDS], const int16_t* x, int16_t* y) {
#pragma HLS INLINE  // into mlp_top's datapath (through forward_one): its arrays keep their partitions
    // Ping-pong activations as one array indexed by layer parity: no pointer swapping, which Vitis
    // would have to turn into a multiplexer between two memories. HLS sees one memory read and written
    // by LAYER_MACS, hence the DEPENDENCE pragmas there.
    alignas(64) int16_t act[2][MAX_WIDTH];
#pragma HLS ARRAY_PARTITION variable = act type = cyclic factor = MLP_LANES dim = 2  // lane u reads bank u, as the weights
    const LayerDesc& first = layer[0];
FORWARD_INPUT:
    for (int j = 0; j < first.stride; ++j) {
#pragma HLS LOOP_TRIPCOUNT min = ROW_ALIGN max = MLP_MAX_WIDTH
        act[0][j] = j < first.n_in ? x[j] : int16_t(0);
    }
FORWARD_LAYERS:
    for (int l = 0; l < n_layers; ++l) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_LAYERS
        layer_forward(layer[l], weight, bias, act[l & 1], act[(l + 1) & 1]);
    }
    const int16_t* in = act[n_layers & 1];
    const LayerDesc& last = layer[n_layers - 1];
    const bool tanh_head = (last.flags & FLAG_TANH) != 0;
    int best = 0;
    int16_t best_value = in[0];
FORWARD_HEAD:
    for (int i = 0; i < last.m_out; ++i) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_WIDTH
        y[i] = tanh_head ? tanh_lookup(in[i]) : in[i];
        if (in[i] > best_value) {
            best = i;
            best_value = in[i];
        }
    }
    return tanh_head ? -1 : best;
}

}  // namespace

const int16_t* tanh_table() { return TANH_TABLE; }

int16_t tanh_pwl(int16_t y) { return tanh_lookup(y); }

uint32_t plan_layers(int n_layers, LayerDesc* desc) {
    if (n_layers < 1 || n_layers > MAX_LAYERS) return ERR_BAD_LOAD;
    int w_offset = 0, b_offset = 0;
PLAN_LAYERS:
    for (int l = 0; l < n_layers; ++l) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_LAYERS
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

int32_t forward_one(int n_layers, const LayerDesc layer[MAX_LAYERS], const int16_t weight[WEIGHT_WORDS],
                    const int32_t bias[BIAS_WORDS], const int16_t x[MAX_WIDTH], int16_t y[MAX_WIDTH]) {
#pragma HLS INLINE  // part of mlp_top's datapath: the static arrays keep their partitions
    return forward_core(n_layers, layer, weight, bias, x, y);
}

MLP_CPU_CLONES
void forward_batch(const Model& model, const int16_t* x, int batch, int16_t* y, int32_t* argmax) {
    const int n0 = model.layer[0].n_in;
    const int m = model.layer[model.n_layers - 1].m_out;
FORWARD_BATCH:
    for (int b = 0; b < batch; ++b) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_BATCH
        int32_t best = forward_core(model.n_layers, model.layer, model.weight, model.bias, x + std::size_t(b) * n0,
                                    y + std::size_t(b) * m);
        if (argmax) argmax[b] = best;
    }
}

}  // namespace mlp

void mlp_top(pearl::stream<pearl::axis16>& s_axis_in, pearl::stream<pearl::axis16>& m_axis_out, uint32_t mode,
             uint32_t batch, uint32_t& lanes, uint32_t& max_width, uint32_t& max_layers, uint32_t& error) {
#pragma HLS INTERFACE axis port = s_axis_in
#pragma HLS INTERFACE axis port = m_axis_out
PEARL_AXILITE_REGISTER(mode, 0x10)
PEARL_AXILITE_REGISTER(batch, 0x18)
PEARL_AXILITE_REGISTER(lanes, 0x20)
PEARL_AXILITE_REGISTER(max_width, 0x28)
PEARL_AXILITE_REGISTER(max_layers, 0x30)
PEARL_AXILITE_REGISTER(error, 0x38)
#pragma HLS INTERFACE s_axilite port = return bundle = control
// Vitis defaults kernels to a chained handshake that waits for ap_continue; the drivers speak ap_ctrl_hs.
#pragma HLS INTERFACE ap_ctrl_hs port = return
    // On-chip weights, kept between calls. Separate statics rather than one struct so that each
    // array's partition pragma sits in the scope that declares it (what Vitis requires).
    static int n_layers = 0;  // 0: nothing loaded
    static mlp::LayerDesc layer[mlp::MAX_LAYERS];
    static int16_t weight[mlp::WEIGHT_WORDS];
    static int32_t bias[mlp::BIAS_WORDS];
#pragma HLS ARRAY_PARTITION variable = layer type = complete  // a few registers, read every cycle by loop bounds
#pragma HLS ARRAY_PARTITION variable = weight type = cyclic factor = MLP_LANES  // LANES words of a row per clock
    lanes = mlp::LANES;
    max_width = mlp::MAX_WIDTH;
    max_layers = mlp::MAX_LAYERS;
    error = 0;
    static uint32_t last_load_error = 0;  // the error bits of the last LOAD, for IDENTITY
    if (mode == mlp::MODE_LOAD) {
        error = mlp::load_arrays(s_axis_in, n_layers, layer, weight, bias);
        last_load_error = error;
        return;
    }
    if (mode == mlp::MODE_IDENTITY) {
        // XRT cannot read output registers: the identity and the state of the weights come back on
        // the stream, one tlast on the last word (SPEC.md, IDENTITY).
        const uint32_t status = (n_layers != 0 ? mlp::STATUS_LOADED : 0) | (last_load_error != 0 ? mlp::STATUS_LOAD_REJECTED : 0);
        m_axis_out.write(pearl::make_axis16(int16_t(mlp::LANES), false));
        m_axis_out.write(pearl::make_axis16(int16_t(mlp::MAX_WIDTH), false));
        m_axis_out.write(pearl::make_axis16(int16_t(mlp::MAX_LAYERS), false));
        m_axis_out.write(pearl::make_axis16(int16_t(status), true));
        return;
    }
    if (mode != mlp::MODE_INFER || n_layers == 0 || batch > uint32_t(mlp::MAX_BATCH)) {
        error = mlp::ERR_BAD_LOAD;
        return;
    }
    const int n_in = layer[0].n_in;
    const int m_out = layer[n_layers - 1].m_out;
    const bool raw_head = (layer[n_layers - 1].flags & mlp::FLAG_RAW) != 0;
    int16_t x[mlp::MAX_WIDTH];
    int16_t y[mlp::MAX_WIDTH];
INFER_BATCH:
    for (uint32_t b = 0; b < batch; ++b) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_BATCH
    INFER_READ:
        for (int j = 0; j < n_in; ++j) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_WIDTH
#pragma HLS PIPELINE II = 1  // one stream word per clock
            x[j] = s_axis_in.read().data;
        }
        const int32_t argmax = mlp::forward_one(n_layers, layer, weight, bias, x, y);
    INFER_WRITE:
        for (int i = 0; i < m_out; ++i) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MLP_MAX_WIDTH
#pragma HLS PIPELINE II = 1  // one stream word per clock
            // One tlast per batch, on its last word: on a Zynq each tlast ends an S2MM transfer that the
            // host must re-arm, so a tlast per observation would cost a DMA round trip each.
            const bool end = b == batch - 1 && !raw_head && i == m_out - 1;
            m_axis_out.write(pearl::make_axis16(y[i], end));
        }
        if (raw_head) m_axis_out.write(pearl::make_axis16(int16_t(argmax), b == batch - 1));
    }
}
