// hls_compat.h: the few HLS types the kernels use, so that the same source compiles with g++ for the
// CPU backend and C simulation, and with Vitis HLS for hardware.
//
// Under Vitis HLS (synthesis, and C/co-simulation, where hls/build.mk defines PEARL_VENDOR_HLS so the
// testbench sees the same types as the synthesized top) the vendor headers are used. Under g++ a minimal FIFO
// stands in for hls::stream: read() on an empty stream is a testbench bug and aborts loudly
// instead of hanging; with PEARL_STREAM_THROWS it throws pearl::starved instead (the C-simulation
// transport's build, pearl_fpga/board/csim_transport.py: a top starved of input is a kernel that
// never finishes, reported as a timeout).
#pragma once

#include <cstdint>

// A scalar argument's AXI4-Lite register at a fixed offset: the register map of the kernel's SPEC.md,
// which the Zynq drivers address. In the Vitis kernel flow (PEARL_VITIS_FLOW, which the generated HLS
// configuration of an Alveo build defines) the tool assigns the offsets and the option must not be
// given (UG1399, "S_AXILITE Offset Option"); XRT sets the arguments by index.
#define PEARL_HLS_PRAGMA(x) _Pragma(#x)
#ifdef PEARL_VITIS_FLOW
#define PEARL_AXILITE_REGISTER(name, at) PEARL_HLS_PRAGMA(HLS INTERFACE mode = s_axilite port = name bundle = control)
#else
#define PEARL_AXILITE_REGISTER(name, at) \
    PEARL_HLS_PRAGMA(HLS INTERFACE mode = s_axilite port = name offset = at bundle = control)
#endif

#if defined(__SYNTHESIS__) || defined(PEARL_VENDOR_HLS)
#include <ap_int.h>
#include <hls_stream.h>
#ifdef PEARL_OPEN_HLS_HEADERS
// make csim-vendor compiles against the open copies of ap_int.h and hls_stream.h (the hls4ml wheel);
// no open package ships ap_axi_sdata.h, so the beat types used below are declared here with the
// fields its side-channel flags enable (2022.2+: ap_axiu<D, U, TI, TD, EnableSignals>); a disabled
// signal has no member here, so code that drives one does not compile. Vitis HLS never defines this
// macro and uses its own header.
constexpr uint8_t AXIS_ENABLE_KEEP = 0x08, AXIS_ENABLE_LAST = 0x10, AXIS_ENABLE_STRB = 0x20;
template <int D, int U, int TI, int TD, uint8_t E>
struct ap_axiu {
    static_assert(E == (AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST), "the stand-in models TDATA, TKEEP and TLAST only");
    ap_uint<D> data;
    ap_uint<(D + 7) / 8> keep;
    ap_uint<1> last;
};
template <int D, int U, int TI, int TD, uint8_t E>
struct ap_axis {
    static_assert(E == (AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST), "the stand-in models TDATA, TKEEP and TLAST only");
    ap_int<D> data;
    ap_uint<(D + 7) / 8> keep;
    ap_uint<1> last;
};
#else
#include <ap_axi_sdata.h>
#endif
namespace pearl {
template <typename T>
using stream = hls::stream<T>;
// AXI4-Stream beats with the TKEEP and TLAST side channels (a plain struct would be packed into TDATA
// with no TLAST, which AXI DMA and the Alveo stream links need), and no TSTRB: the AXI DMA's stream
// ports have none (PG021, "AXI4-Stream Interface"), so a TSTRB port would be left unconnected.
constexpr uint8_t AXIS_SIGNALS = AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST;
using axis128 = ap_axiu<128, 0, 0, 0, AXIS_SIGNALS>;
using axis16 = ap_axis<16, 0, 0, 0, AXIS_SIGNALS>;
inline axis128 make_axis128(uint64_t lo, uint64_t hi, bool last) {
    axis128 beat;
    beat.data = (ap_uint<128>(hi) << 64) | ap_uint<128>(lo);
    beat.keep = -1;
    beat.last = last;
    return beat;
}
inline uint64_t axis_lo(const axis128& beat) { return beat.data.range(63, 0).to_uint64(); }
inline uint64_t axis_hi(const axis128& beat) { return beat.data.range(127, 64).to_uint64(); }
inline axis16 make_axis16(int16_t data, bool last) {
    axis16 beat;
    beat.data = data;
    beat.keep = -1;
    beat.last = last;
    return beat;
}
}  // namespace pearl
#else  // g++: the stand-ins below
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <stdexcept>

namespace pearl {

struct starved : std::runtime_error {
    starved() : std::runtime_error("read from an empty stream") {}
};

template <typename T>
class stream {
   public:
    void write(const T& v) { fifo_.push_back(v); }
    T read() {
        if (fifo_.empty()) {
#ifdef PEARL_STREAM_THROWS
            throw starved();
#else
            std::fprintf(stderr, "pearl::stream: read from an empty stream\n");
            std::abort();
#endif
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

namespace pearl {

// One beat of an AXI4-Stream with a 128-bit payload held as two 64-bit halves (the CPU build has no
// ap_uint<128>); `last` is TLAST. Kernels build and read beats only through the helpers below, so
// the same code compiles against ap_axiu under Vitis HLS.
struct axis128 {
    uint64_t lo;
    uint64_t hi;
    bool last;
};
inline axis128 make_axis128(uint64_t lo, uint64_t hi, bool last) { return axis128{lo, hi, last}; }
inline uint64_t axis_lo(const axis128& beat) { return beat.lo; }
inline uint64_t axis_hi(const axis128& beat) { return beat.hi; }

// One beat of an AXI4-Stream with a 16-bit payload (`data`, `last` as in ap_axis).
struct axis16 {
    int16_t data;
    bool last;
};
inline axis16 make_axis16(int16_t data, bool last) { return axis16{data, last}; }

}  // namespace pearl
#endif
