// mlp_config.h: GENERATED from hls/mlp/kernel.json by `python -m pearl_fpga.spec.descriptor --write`;
// do not edit by hand (tests/test_kernel_descriptor.py fails when it differs from the descriptor).
//
// The mlp kernel's synthesis parameters: the descriptor's defaults, each overridable with -D<MACRO>
// (a board's sizes: `python -m pearl_fpga.board.catalog get BOARD hls_defines mlp`; the cpu
// extension's: setup.py), the range a board may ask for, and the constants shared with Python.
#pragma once

#include <cstdint>

#include "common/kernel_config.h"

#ifndef MLP_LANES
#define MLP_LANES 16
#endif
#ifndef MLP_MAX_WIDTH
#define MLP_MAX_WIDTH 256
#endif
#ifndef MLP_MAX_LAYERS
#define MLP_MAX_LAYERS 4
#endif
#ifndef MLP_MAX_BATCH
#define MLP_MAX_BATCH 4096
#endif

namespace mlp {
namespace config {

constexpr uint32_t LANES = MLP_LANES;  // parallel MAC lanes, a power of two
constexpr pearl::Range LANES_RANGE{1, 256};  // one of 1, 2, 4, 8, 16, 32, 64, 128, 256
constexpr uint32_t MAX_WIDTH = MLP_MAX_WIDTH;  // widest layer input or output
constexpr pearl::Range MAX_WIDTH_RANGE{1, 256};
constexpr uint32_t MAX_LAYERS = MLP_MAX_LAYERS;  // linear layers
constexpr pearl::Range MAX_LAYERS_RANGE{1, 4};
constexpr uint32_t MAX_BATCH = MLP_MAX_BATCH;  // observations of one INFER call
constexpr pearl::Range MAX_BATCH_RANGE{1, 4096};

constexpr uint32_t MAX_SHIFT = 40;  // largest requantization shift of a layer (SPEC.md)
constexpr uint32_t TANH_FRAC_BITS = 12;  // fractional bits of the tanh head's input (Q3.12)
constexpr uint32_t TANH_SEGMENT_BITS = 6;  // the tanh table's segments are 2^6 LSB wide (1024 segments)

}  // namespace config
}  // namespace mlp
