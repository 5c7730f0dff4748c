// replay_config.h: GENERATED from hls/replay/kernel.json by `python -m pearl_fpga.spec.descriptor --write`;
// do not edit by hand (tests/test_kernel_descriptor.py fails when it differs from the descriptor).
//
// The replay kernel's synthesis parameters: the descriptor's defaults, each overridable with -D<MACRO>
// (a board's sizes: `python -m pearl_fpga.board.catalog get BOARD hls_defines replay`; the cpu
// extension's: setup.py), the range a board may ask for, and the constants shared with Python.
#pragma once

#include <cstdint>

#ifndef REPLAY_CAPACITY
#define REPLAY_CAPACITY 8192
#endif
#ifndef REPLAY_FANOUT
#define REPLAY_FANOUT 16
#endif

namespace replay {
namespace config {

struct Range {
    uint32_t min;
    uint32_t max;
};

// capacity: leaves of the sum tree (1..1048576)
constexpr uint32_t CAPACITY = REPLAY_CAPACITY;
constexpr Range CAPACITY_RANGE{1, 1048576};
// fanout: children per node (one of 2, 4, 8, 16)
constexpr uint32_t FANOUT = REPLAY_FANOUT;
constexpr Range FANOUT_RANGE{2, 16};
// max_batch: commands of one kind in one call (1..4096)
constexpr uint32_t MAX_BATCH = 4096;
constexpr Range MAX_BATCH_RANGE{1, 4096};

}  // namespace config
}  // namespace replay
