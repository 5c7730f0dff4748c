// mlp_driver_tb.cpp: mlp_top behind the C ABI of common/driver_tb.h, so that the board driver
// (pearl_fpga/board/mlp_driver.py) runs against the HLS C++ through the C-simulation transport.
// Registers (SPEC.md): 0x10 mode, 0x18 batch in; 0x20 lanes, 0x28 max_width, 0x30 max_layers, 0x38 error out.
#include "common/driver_tb.h"
#include "mlp.h"

extern "C" int pearl_csim_call(uint32_t* regs, const uint8_t* in, size_t in_bytes, uint8_t* out, size_t out_capacity,
                               size_t* out_bytes, uint8_t* out_last) {
    pearl::stream<pearl::axis16> s_in, s_out;
    pearl::words_to_stream16(in, in_bytes, s_in);
    uint32_t lanes = 0, max_width = 0, max_layers = 0, error = 0;
    try {
        mlp_top(s_in, s_out, regs[0x10 / 4], regs[0x18 / 4], lanes, max_width, max_layers, error);
    } catch (const pearl::starved&) {
        return pearl::CSIM_STARVED;
    }
    regs[0x20 / 4] = lanes;
    regs[0x28 / 4] = max_width;
    regs[0x30 / 4] = max_layers;
    regs[0x38 / 4] = error;
    return pearl::stream16_to_words(s_out, out, out_capacity, out_bytes, out_last);
}
