// replay_config.h: GENERATED from hls/replay/kernel.json by `python -m pearl_fpga.spec.descriptor --write`;
// do not edit by hand (tests/test_kernel_descriptor.py fails when it differs from the descriptor).
//
// The replay kernel's synthesis parameters: the descriptor's defaults, each overridable with -D<MACRO>
// (a board's sizes: `python -m pearl_fpga.board.catalog get BOARD hls_defines replay`; the cpu
// extension's: setup.py), the range a board may ask for, and the constants shared with Python.
#pragma once

#include <cstdint>

#include "common/kernel_config.h"

#ifndef REPLAY_CAPACITY
#define REPLAY_CAPACITY 8192
#endif
#ifndef REPLAY_FANOUT
#define REPLAY_FANOUT 16
#endif

namespace replay {
namespace config {

constexpr uint32_t CAPACITY = REPLAY_CAPACITY;  // leaves of the sum tree
constexpr pearl::Range CAPACITY_RANGE{1, 1048576};
constexpr uint32_t FANOUT = REPLAY_FANOUT;  // children per node
constexpr pearl::Range FANOUT_RANGE{2, 16};  // one of 2, 4, 8, 16
constexpr uint32_t MAX_BATCH = 4096;  // commands of one kind in one call
constexpr pearl::Range MAX_BATCH_RANGE{1, 4096};

constexpr uint32_t URAM_READ_LATENCY = 3;  // HLS top on an Alveo card: read latency of the leaf words in UltraRAM, output and cascade registers included (UG573, UG949)
constexpr uint32_t URAM_CASCADE_BLOCKS = 8;  // HLS top: URAM288 blocks one leaf memory bank may cascade (UG949's default cascade height)
constexpr uint32_t II1_MAX_MHZ = 200;  // HLS top: the fastest kernel clock at which COMMANDS issues at II = 1; above it, II = 2 (SPEC.md, Initiation interval)

}  // namespace config
}  // namespace replay
