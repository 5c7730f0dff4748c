// tabular_config.h: GENERATED from hls/tabular/kernel.json by `python -m pearl_fpga.spec.descriptor --write`;
// do not edit by hand (tests/test_kernel_descriptor.py fails when it differs from the descriptor).
//
// The tabular kernel's synthesis parameters: the descriptor's defaults, each overridable with -D<MACRO>
// (a board's sizes: `python -m pearl_fpga.board.catalog get BOARD hls_defines tabular`; the cpu
// extension's: setup.py), the range a board may ask for, and the constants shared with Python.
#pragma once

#include <cstdint>

#include "common/kernel_config.h"

#ifndef TABULAR_STATES
#define TABULAR_STATES 1024
#endif
#ifndef TABULAR_ACTIONS
#define TABULAR_ACTIONS 8
#endif
#ifndef TABULAR_MAX_BATCH
#define TABULAR_MAX_BATCH 4096
#endif

namespace tabular {
namespace config {

constexpr uint32_t STATES = TABULAR_STATES;  // rows of the synthesized Q table
constexpr pearl::Range STATES_RANGE{1, 1048576};
constexpr uint32_t ACTIONS = TABULAR_ACTIONS;  // columns of the synthesized Q table
constexpr pearl::Range ACTIONS_RANGE{1, 64};
constexpr uint32_t MAX_BATCH = TABULAR_MAX_BATCH;  // commands of one ap_start call
constexpr pearl::Range MAX_BATCH_RANGE{1, 4096};
constexpr uint32_t INSTANCES = 1;  // copies of the kernel in a bitstream
constexpr pearl::Range INSTANCES_RANGE{1, 16};

constexpr uint32_t MAX_ENTRIES = 16777216;  // states x actions at most (2^24), on a board and in the host API
constexpr uint32_t HAZARD_WINDOW = 16;  // HLS top: issue slots between a write and a read of its row (SPEC.md, Pipeline hazards)
constexpr uint32_t II1_MAX_MHZ = 200;  // HLS top: the fastest kernel clock at which COMMANDS issues at II = 1; above it, II = 2 (SPEC.md, Initiation interval)

}  // namespace config
}  // namespace tabular
