"""On-chip memory of the HLS designs that `make bitstream` / `make xclbin` synthesize, per board.

A model of the storage each HLS top declares (hls/<kernel>/<kernel>.h describes it), counted the way
Vivado maps memories: each partitioned memory (depth x width) takes the fewest block RAMs over the
BRAM36 shapes (32K x 1 ... 512 x 72); a memory of at most 64 words, or under 1 Kbit, goes to
registers or LUT RAM. No pragma
binds URAM, so everything is counted in BRAM36. It is a model, stated so (no csynth or Vivado
report was available here); `python -m pearl_fpga.board.hls_budget` prints it for every board of
the catalog, and the catalog's sizes are checked against it (tests/test_hls_budget.py).

    replay   the tree levels (K memories per level, u64 sums, u32 leaves) and the front copy of the
             leaves (u32, one memory): replay.h "HLS top"
    mlp      the weights (LANES memories, int16, cyclic), the biases (int32), the tanh ROM (int16),
             the activation buffers (int16, cyclic): mlp.h "Memory layout"
    tabular  per instance, the table twice (2 x ACTIONS memories of STATES x 32 bits): tabular.h
    dma      per AXI DMA (Zynq boards) or pair of data movers (Alveo): a nominal 2 BRAM36 for its
             FIFOs, an assumption, not a report
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pearl_fpga.board.catalog import BoardSpec, load_catalog
from pearl_fpga.spec.replay import tree_depth

# (depth, width) shapes of one BRAM36 (simple dual port, as ram_s2p)
BRAM36_SHAPES = ((32768, 1), (16384, 2), (8192, 4), (4096, 9), (2048, 18), (1024, 36), (512, 72))
LUTRAM_BITS = 1024  # memories smaller than this are registers or LUT RAM
LUTRAM_DEPTH = 64  # and so are memories this shallow
DMA_BRAM36 = 2  # nominal, per AXI DMA or data-mover pair
MARGIN = 0.10  # the share of the part the catalog leaves free for routing and the PS interconnect


def bram36(depth: int, width: int) -> int:
    """Block RAMs of one memory of `depth` words of `width` bits."""
    if depth * width < LUTRAM_BITS or depth <= LUTRAM_DEPTH:
        return 0
    return min(math.ceil(width / w) * math.ceil(depth / d) for d, w in BRAM36_SHAPES)


def _replay(capacity: int, fanout: int) -> int:
    log2k = fanout.bit_length() - 1
    depth = tree_depth(capacity, fanout)
    total = 0
    for d in range(1, depth + 1):
        shift = log2k * (depth - d)
        nodes = (capacity + (1 << shift) - 1) >> shift
        groups = (nodes + fanout - 1) // fanout
        total += fanout * bram36(groups, 32 if d == depth else 64)
        if d == depth:
            total += bram36(groups * fanout, 32)  # the front copy of the leaves
    return total


def _mlp(lanes: int, max_width: int, max_layers: int) -> int:
    weights = lanes * bram36(max_layers * max_width * max_width // lanes, 16)
    biases = bram36(max_layers * max_width, 32)
    tanh_rom = bram36(1025, 16)
    activations = 2 * lanes * bram36(max_width // lanes, 16) + 2 * bram36(max_width, 16)  # act ping-pong banks; the top's x, y
    return weights + biases + tanh_rom + activations


def _tabular(states: int, actions: int, instances: int) -> int:
    return instances * 2 * actions * bram36(states, 32)


@dataclass(frozen=True)
class Budget:
    """BRAM36 of each kernel's HLS storage on one board, and what the part has."""

    board: str
    kernels: dict[str, int]
    available: int

    @property
    def used(self) -> int:
        return sum(self.kernels.values())

    @property
    def fits(self) -> bool:
        """Whether the design leaves the catalog's margin of the part's BRAM free."""
        return self.used <= (1 - MARGIN) * self.available


def budget(spec: BoardSpec) -> Budget:
    k = spec.kernels
    tab = k["tabular"]
    dmas = 2 + tab["instances"]  # replay, mlp, and one per tabular instance
    return Budget(spec.name, {
        "replay": _replay(k["replay"]["capacity"], k["replay"]["fanout"]),
        "mlp": _mlp(k["mlp"]["lanes"], k["mlp"]["max_width"], k["mlp"]["max_layers"]),
        "tabular": _tabular(tab["states"], tab["actions"], tab["instances"]),
        "dma": DMA_BRAM36 * dmas,
    }, spec.resources["bram36"])


def main(argv: list[str] | None = None) -> int:
    """Print the model for every board of the catalog."""
    print(f"{'board':<12} {'replay':>7} {'mlp':>6} {'tabular':>8} {'dma':>5} {'total':>7} {'part':>6}  fits (<= 90%)")
    for spec in load_catalog().values():
        b = budget(spec)
        k = b.kernels
        print(f"{b.board:<12} {k['replay']:>7} {k['mlp']:>6} {k['tabular']:>8} {k['dma']:>5} {b.used:>7} {b.available:>6}  "
              f"{'yes' if b.fits else 'NO'} ({100 * b.used / b.available:.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
