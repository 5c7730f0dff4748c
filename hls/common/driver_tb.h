// driver_tb.h: what every <kernel>_driver_tb.cpp exports, so that pearl_fpga/board/csim_transport.py
// can run the board drivers against the HLS top compiled by g++ (the design that ships, not the RTL).
//
//   int pearl_csim_call(uint32_t* regs, const uint8_t* in, size_t in_bytes,
//                       uint8_t* out, size_t out_capacity, size_t* out_bytes, uint8_t* out_last)
//
// One ap_start call: `regs` is the AXI4-Lite register file (regs[offset / 4]); the input registers
// are read from it and the top's output registers written back, as the HLS interface does at the end
// of a call. `in` holds the input stream's words (little-endian), `out` receives the output stream's
// and out_last[i] the tlast of output word i (an AXI DMA ends an S2MM transfer there).
// Returns 0 when the call finished, 1 when the top waited for input words that were never sent (a
// kernel that never finishes; its state is then undefined, as a hung kernel's), 2 when the output did
// not fit `out`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/hls_compat.h"

#ifndef PEARL_STREAM_THROWS
#error "build the driver testbenches with -DPEARL_STREAM_THROWS (pearl_fpga/board/csim_transport.py does)"
#endif

namespace pearl {

enum CsimStatus : int { CSIM_DONE = 0, CSIM_STARVED = 1, CSIM_OVERFLOW = 2 };

// Little-endian 128-bit words to and from stream beats (tlast on the last input word).
inline void words_to_stream128(const uint8_t* in, size_t in_bytes, stream<axis128>& s) {
    const size_t n = in_bytes / 16;
    for (size_t i = 0; i < n; i++) {
        uint64_t lo, hi;
        std::memcpy(&lo, in + 16 * i, 8);
        std::memcpy(&hi, in + 16 * i + 8, 8);
        s.write(make_axis128(lo, hi, i + 1 == n));
    }
}

inline int stream128_to_words(stream<axis128>& s, uint8_t* out, size_t cap, size_t* out_bytes, uint8_t* out_last) {
    size_t n = 0;
    while (!s.empty()) {
        if (n + 16 > cap) return CSIM_OVERFLOW;
        const axis128 w = s.read();
        const uint64_t lo = axis_lo(w), hi = axis_hi(w);
        std::memcpy(out + n, &lo, 8);
        std::memcpy(out + n + 8, &hi, 8);
        out_last[n / 16] = w.last ? 1 : 0;
        n += 16;
    }
    *out_bytes = n;
    return CSIM_DONE;
}

inline void words_to_stream16(const uint8_t* in, size_t in_bytes, stream<axis16>& s) {
    const size_t n = in_bytes / 2;
    for (size_t i = 0; i < n; i++) {
        int16_t v;
        std::memcpy(&v, in + 2 * i, 2);
        s.write(make_axis16(v, i + 1 == n));
    }
}

inline int stream16_to_words(stream<axis16>& s, uint8_t* out, size_t cap, size_t* out_bytes, uint8_t* out_last) {
    size_t n = 0;
    while (!s.empty()) {
        if (n + 2 > cap) return CSIM_OVERFLOW;
        const axis16 w = s.read();
        const int16_t v = w.data;
        std::memcpy(out + n, &v, 2);
        out_last[n / 2] = w.last ? 1 : 0;
        n += 2;
    }
    *out_bytes = n;
    return CSIM_DONE;
}

}  // namespace pearl
