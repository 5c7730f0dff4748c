"""A stated model of the HLS schedule of the kernels that `make bitstream` / `make xclbin` ship.

The planner times the FPGA targets by the design that ships, the HLS C++ tops: from a Vitis csynth
report when one exists (pearl_fpga.planner.csynth), else from this model. It is a model, not a
report (no Vitis HLS run was available where it was written); its assumptions are stated here and in
the comments of the sources it follows (hls/replay/replay.h and hls/mlp/mlp.h, "HLS top" and
"Expected cycles"). The reference RTL's counts are a different design's and are reported beside it.

replay_top (hls/replay/replay.cpp): one pipelined COMMANDS loop at II = 1 up to the descriptor's
II1_MAX_MHZ and II = 2 above it (pearl_fpga.spec.kernels.commands_ii; SPEC.md, "Initiation interval"),
so B commands take (B - 1) * II + PipelineDepth cycles, as csynth's figures are read. PipelineDepth = 3
(the command read, the front-leaf update, the response write) + DEPTH levels of (1 registered read +
the prefix compare of the K children), the leaf words' reads (front copy and leaf level) taking
LEAF_LATENCY cycles instead of 1: 1 in block RAM, the descriptor's URAM_READ_LATENCY in UltraRAM. choose_child chains the K 64-bit prefix adds and compares; the model lets a clock
period hold two of them at the 7-series clocks (<= 150 MHz) and one at the UltraScale+ clocks
(200-300 MHz), so a level costs 1 + ceil(K / adds_per_cycle) cycles.

mlp_top (hls/mlp/mlp.cpp): per observation, in order, nothing overlapped (no DATAFLOW):
- INFER_READ: n_0 stream words at II = 1, + 2 cycles of pipeline;
- FORWARD_INPUT: one activation word per cycle over stride_0 (n_0 rounded up to ROW_ALIGN);
- per layer, LAYER_MACS: one loop over the layer's m_l * stride_l / LANES chunks at II = 1 (rows
  back to back) plus its pipeline depth MAC_DEPTH (1 read, 3 multiply stages of a DSP48,
  ceil(log2(LANES) / 2) adder-tree stages, 1 accumulate, 2 requantize, 1 write), then LAYER_PAD: one
  cycle per padding word up to the next ROW_ALIGN;
- FORWARD_HEAD: one cycle per output (+ 2 of pipeline); INFER_WRITE: one word per cycle (the RAW head's
  argmax one more) + 2.

tabular_top (hls/tabular/tabular.cpp): one pipelined COMMANDS loop at II (as replay's), one issue slot per II clocks,
in order; an UPDATE waits while a write to its row s or s2 is in flight, up to HAZARD_WINDOW - 1
slots (hls/tabular/SPEC.md, "Pipeline hazards"), so n UPDATEs take spec.tabular.hls_issue_slots(s, s2)
slots plus the drain of the last update (at most HAZARD_WINDOW - 1 cycles). The C model of the top
counts the same slots (tests/test_board_csim.py), and the reference RTL issues on the same slots
(its drain is spec.tabular.rtl_latency, 12 cycles at 8 actions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pearl_fpga.spec.descriptor import descriptor
from pearl_fpga.spec.kernels import commands_ii
from pearl_fpga.spec.tabular import HAZARD_WINDOW, hls_issue_slots

REPLAY_FRONT_CYCLES = 3  # command read, front-leaf update, response write
MLP_STREAM_PIPELINE = 2  # fill of a pipelined stream loop (INFER_READ, FORWARD_HEAD, INFER_WRITE)


def prefix_adds_per_cycle(clock_mhz: float) -> int:
    """Chained 64-bit adds (with their compare) one clock period holds, by the model's assumption."""
    return 2 if clock_mhz <= 150 else 1


def replay_level_cycles(fanout: int, clock_mhz: float) -> int:
    """Cycles of one tree level in replay_top's pipeline: the registered read, then the prefix compare."""
    return 1 + math.ceil(fanout / prefix_adds_per_cycle(clock_mhz))


def replay_leaf_latency(leaf_memory: str) -> int:
    """Read latency of replay_top's leaf words: 1 in block RAM, URAM_READ_LATENCY in UltraRAM ("uram",
    the catalog's replay_leaf_memory), as hls/replay/replay.cpp binds them."""
    return descriptor("replay").constant("URAM_READ_LATENCY") if leaf_memory == "uram" else 1


def replay_pipeline_depth(depth: int, fanout: int, clock_mhz: float, leaf_latency: int = 1) -> int:
    """PipelineDepth of replay_top's COMMANDS loop: the front copy's and the leaf level's reads take
    leaf_latency cycles each instead of 1."""
    return REPLAY_FRONT_CYCLES + depth * replay_level_cycles(fanout, clock_mhz) + 2 * (leaf_latency - 1)


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def row_align(lanes: int) -> int:
    """ROW_ALIGN of hls/mlp/mlp.h: rows are padded to whole 512-bit vectors and whole LANES chunks."""
    return max(lanes, 32)


def mac_depth(lanes: int) -> int:
    """Pipeline depth of a layer's LAYER_MACS loop (its LANES-wide chunks, row after row)."""
    return 1 + 3 + math.ceil(math.log2(lanes) / 2) + 1 + 2 + 1


def mlp_infer_cycles(layers: Sequence[tuple[int, int]], lanes: int, raw_head: bool = True) -> int:
    """Cycles of one observation through mlp_top: layers are (n_in, m_out), first to last."""
    align = row_align(lanes)
    n0, m_last = layers[0][0], layers[-1][1]
    cycles = n0 + MLP_STREAM_PIPELINE + round_up(n0, align)  # INFER_READ, FORWARD_INPUT
    for n, m in layers:
        cycles += m * round_up(n, align) // lanes + mac_depth(lanes) + (round_up(m, align) - m)
    cycles += m_last + MLP_STREAM_PIPELINE  # FORWARD_HEAD
    cycles += m_last + (1 if raw_head else 0) + MLP_STREAM_PIPELINE  # INFER_WRITE
    return cycles


def tabular_update_cycles(s: Any, s2: Any, clock_mhz: float = 100.0) -> int:
    """Cycles of the HLS tabular top for one run of UPDATEs (rows s, bootstrap rows s2), fill and drain
    included: its issue slots, then the last update's write at most HAZARD_WINDOW - 1 slots later, each
    slot II clocks at `clock_mhz`."""
    return (hls_issue_slots(s, s2) + HAZARD_WINDOW - 1) * commands_ii("tabular", clock_mhz)

