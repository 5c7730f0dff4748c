// datamover.cpp: the Alveo data movers between device memory and the kernels' AXI4-Streams.
//
// On a Zynq board an AXI DMA carries the streams (hls/scripts/zynq_bd.tcl). On Alveo the host cannot
// stream into a kernel directly, so each kernel gets two small kernels, linked to it by
// hls/scripts/alveo_connectivity.cfg:
//   mm2s_<k>: read n words from a device buffer and send them on the kernel's input stream, TLAST on
//             the last word (the replay kernel echoes it on the response to the last command);
//   s2mm_<k>: write the next n words of the kernel's output stream into a device buffer. It counts
//             words and ignores TLAST, so a TLAST before the last word (the MLP kernel's interface 1
//             set one per observation) does not end the transfer early.
// Each moves one word per clock (II=1): the replay and tabular movers read and write 128-bit memory
// words.
// pearl_fpga/board/xrt_transport.py runs them around each ap_start of the kernel.
#include "datamover.h"

namespace {

// The 128-bit movers' loops, shared by the replay and tabular kernels' movers (the interface pragmas
// must sit in each top function).
void words_to_stream(const word128* in, pearl::stream<pearl::axis128>& out, uint32_t n) {
#pragma HLS INLINE
MM2S_128:
    for (uint32_t i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = DM_128_MAX_WORDS
#pragma HLS PIPELINE II = 1
        const word128 w = in[i];
        out.write(pearl::make_axis128(w.lo, w.hi, i + 1 == n));
    }
}

void stream_to_words(pearl::stream<pearl::axis128>& in, word128* out, uint32_t n) {
#pragma HLS INLINE
S2MM_128:
    for (uint32_t i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = DM_128_MAX_WORDS
#pragma HLS PIPELINE II = 1
        const pearl::axis128 w = in.read();
        out[i] = word128{pearl::axis_lo(w), pearl::axis_hi(w)};
    }
}

}  // namespace

extern "C" {

void mm2s_replay(const word128* in, pearl::stream<pearl::axis128>& out, uint32_t n) {
#pragma HLS INTERFACE mode = m_axi port = in bundle = gmem depth = DM_128_MAX_WORDS
#pragma HLS INTERFACE mode = axis port = out
    words_to_stream(in, out, n);
}

void s2mm_replay(pearl::stream<pearl::axis128>& in, word128* out, uint32_t n) {
#pragma HLS INTERFACE mode = axis port = in
#pragma HLS INTERFACE mode = m_axi port = out bundle = gmem depth = DM_128_MAX_WORDS
    stream_to_words(in, out, n);
}

void mm2s_tabular(const word128* in, pearl::stream<pearl::axis128>& out, uint32_t n) {
#pragma HLS INTERFACE mode = m_axi port = in bundle = gmem depth = DM_128_MAX_WORDS
#pragma HLS INTERFACE mode = axis port = out
    words_to_stream(in, out, n);
}

void s2mm_tabular(pearl::stream<pearl::axis128>& in, word128* out, uint32_t n) {
#pragma HLS INTERFACE mode = axis port = in
#pragma HLS INTERFACE mode = m_axi port = out bundle = gmem depth = DM_128_MAX_WORDS
    stream_to_words(in, out, n);
}

void mm2s_mlp(const int16_t* in, pearl::stream<pearl::axis16>& out, uint32_t n) {
#pragma HLS INTERFACE mode = m_axi port = in bundle = gmem depth = DM_MLP_MAX_WORDS
#pragma HLS INTERFACE mode = axis port = out
MM2S_MLP:
    for (uint32_t i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = DM_MLP_MAX_WORDS
#pragma HLS PIPELINE II = 1
        out.write(pearl::make_axis16(in[i], i + 1 == n));
    }
}

void s2mm_mlp(pearl::stream<pearl::axis16>& in, int16_t* out, uint32_t n) {
#pragma HLS INTERFACE mode = axis port = in
#pragma HLS INTERFACE mode = m_axi port = out bundle = gmem depth = DM_MLP_MAX_WORDS
S2MM_MLP:
    for (uint32_t i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = DM_MLP_MAX_WORDS
#pragma HLS PIPELINE II = 1
        out[i] = in.read().data;
    }
}

}  // extern "C"
