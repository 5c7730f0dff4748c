// hls_compat.h: the few HLS types the kernels use, so that the same source compiles with g++ for the
// CPU backend and C simulation, and with Vitis HLS for hardware.
//
// Under Vitis HLS (__SYNTHESIS__ defined) the vendor headers are used. Under g++ a minimal FIFO
// stands in for hls::stream: read() on an empty stream is a testbench bug and aborts loudly
// instead of hanging.
#pragma once

#include <cstdint>

#ifdef __SYNTHESIS__
#include <ap_int.h>
#include <hls_stream.h>
namespace pearl {
template <typename T>
using stream = hls::stream<T>;
}
#else
#include <cstdio>
#include <cstdlib>
#include <deque>

namespace pearl {

template <typename T>
class stream {
   public:
    void write(const T& v) { fifo_.push_back(v); }
    T read() {
        if (fifo_.empty()) {
            std::fprintf(stderr, "pearl::stream: read from an empty stream\n");
            std::abort();
        }
        T v = fifo_.front();
        fifo_.pop_front();
        return v;
    }
    bool empty() const { return fifo_.empty(); }
    std::size_t size() const { return fifo_.size(); }

   private:
    std::deque<T> fifo_;
};

}  // namespace pearl
#endif

namespace pearl {

// One beat of an AXI4-Stream with a 128-bit payload held as two 64-bit halves (the CPU build has no
// ap_uint<128>); `last` is TLAST.
struct axis128 {
    uint64_t lo;
    uint64_t hi;
    bool last;
};

// One beat of an AXI4-Stream with a 16-bit payload.
struct axis16 {
    int16_t data;
    bool last;
};

}  // namespace pearl
