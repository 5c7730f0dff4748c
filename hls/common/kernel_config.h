// kernel_config.h: what every generated hls/<kernel>/<kernel>_config.h shares (pearl_fpga/spec/descriptor.py).
#pragma once

#include <cstdint>

namespace pearl {

// The values of a synthesis parameter a board may ask for (its descriptor's min and max).
struct Range {
    uint32_t min;
    uint32_t max;
};

}  // namespace pearl
