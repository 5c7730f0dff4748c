// tabular.cpp: the tabular update kernel's batch loop (see tabular.h for the arithmetic). The cpu
// backend (pearl_fpga/native/tabular_ext.cpp) runs this function; the reference RTL of the pipelined
// update is rtl/tabular_core.sv. An HLS top with AXI4-Stream transitions and AXI4-Lite control is
// still to come (README.md).
#include "tabular.h"

namespace tabular {

void update_batch(int32_t* q, uint32_t n_actions, uint32_t alpha, uint32_t gamma, bool sarsa, const uint32_t* s,
                  const uint32_t* a, const int32_t* r, const uint32_t* s2, const uint32_t* a2, const uint8_t* done,
                  uint32_t n) {
TRANSITIONS:
    for (uint32_t i = 0; i < n; i++) {
#pragma HLS LOOP_TRIPCOUNT min = 1 max = MAX_BATCH
        update_one(q + uint64_t(s[i]) * n_actions + a[i], q + uint64_t(s2[i]) * n_actions, n_actions,
                   sarsa ? a2[i] : 0, r[i], done[i] != 0, alpha, gamma, sarsa);
    }
}

}  // namespace tabular
