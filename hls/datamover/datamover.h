// datamover.h: Alveo data movers (see datamover.cpp). Word formats: hls/replay/SPEC.md and
// hls/tabular/SPEC.md (128-bit, bits [63:0] first in memory) and hls/mlp/SPEC.md (16-bit).
#pragma once

#include <cstdint>

#include "common/hls_compat.h"

// The most words one call moves (the loops' trip counts, the m_axi depths for co-simulation): a batch
// of replay or tabular commands or responses (MAX_BATCH of hls/replay/replay.h, the catalog's largest
// tabular max_batch), and an MLP LOAD frame or INFER batch (hls/mlp/mlp.h: MAX_BATCH observations of
// MAX_WIDTH inputs).
#define DM_128_MAX_WORDS 4096
#define DM_MLP_MAX_WORDS (4096 * 256)

// One 128-bit replay stream word as it lies in device memory, bits [63:0] first: one m_axi beat of
// a 128-bit port, so the movers take a word per clock.
struct word128 {
    uint64_t lo;
    uint64_t hi;
};

extern "C" {
void mm2s_replay(const word128* in, pearl::stream<pearl::axis128>& out, uint32_t n);
void s2mm_replay(pearl::stream<pearl::axis128>& in, word128* out, uint32_t n);
void mm2s_mlp(const int16_t* in, pearl::stream<pearl::axis16>& out, uint32_t n);
void s2mm_mlp(pearl::stream<pearl::axis16>& in, int16_t* out, uint32_t n);
void mm2s_tabular(const word128* in, pearl::stream<pearl::axis128>& out, uint32_t n);
void s2mm_tabular(pearl::stream<pearl::axis128>& in, word128* out, uint32_t n);
}
