// replay_driver_tb.cpp: replay_top behind the C ABI of common/driver_tb.h, so that the board driver
// (pearl_fpga/board/replay_driver.py) runs against the HLS C++ through the C-simulation transport.
// Registers (SPEC.md): 0x10 n_cmds in; 0x18 capacity, 0x20 fanout, 0x28/0x2c total out.
#include "common/driver_tb.h"
#include "replay.h"

extern "C" int pearl_csim_call(uint32_t* regs, const uint8_t* in, size_t in_bytes, uint8_t* out, size_t out_capacity,
                               size_t* out_bytes, uint8_t* out_last) {
    pearl::stream<pearl::axis128> cmd, resp;
    pearl::words_to_stream128(in, in_bytes, cmd);
    uint32_t capacity = 0, fanout = 0;
    uint64_t total = 0;
    try {
        replay_top(cmd, resp, regs[0x10 / 4], capacity, fanout, total);
    } catch (const pearl::starved&) {
        return pearl::CSIM_STARVED;
    }
    regs[0x18 / 4] = capacity;
    regs[0x20 / 4] = fanout;
    regs[0x28 / 4] = uint32_t(total);
    regs[0x2c / 4] = uint32_t(total >> 32);
    return pearl::stream128_to_words(resp, out, out_capacity, out_bytes, out_last);
}
