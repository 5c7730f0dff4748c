// datamover.h: Alveo data movers (see datamover.cpp). Word formats: hls/replay/SPEC.md (128-bit,
// bits [63:0] first in memory) and hls/mlp/SPEC.md (16-bit).
#pragma once

#include <cstdint>

#include "common/hls_compat.h"

extern "C" {
void mm2s_replay(const uint64_t* in, pearl::stream<pearl::axis128>& out, uint32_t n);
void s2mm_replay(pearl::stream<pearl::axis128>& in, uint64_t* out, uint32_t n);
void mm2s_mlp(const int16_t* in, pearl::stream<pearl::axis16>& out, uint32_t n);
void s2mm_mlp(pearl::stream<pearl::axis16>& in, int16_t* out, uint32_t n);
}
