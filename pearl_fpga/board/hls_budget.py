"""On-chip memory of the HLS designs that `make bitstream` / `make xclbin` synthesize, per board.

A model of the storage each HLS top declares (hls/<kernel>/<kernel>.h describes it), counted the way
Vivado maps memories: each partitioned memory (depth x width) takes the fewest block RAMs over the
BRAM36 shapes (32K x 1 ... 512 x 72), or, where a pragma binds it to UltraRAM, URAM288 blocks of
4K x 72 (cascaded in depth); a memory of at most 64 words, or under 1 Kbit, goes to registers or LUT
RAM. It is a model, stated so (no csynth or Vivado report was available here); `python -m
pearl_fpga.board.hls_budget` prints it for every board of the catalog, and the catalog's sizes are
checked against it (tests/test_hls_budget.py): with the catalog's margin free on the part, and on an
Alveo card in every SLR (each kernel's compute units sit in the SLR the catalog assigns them).

    replay   the tree levels (K memories per level, u64 sums, u32 leaves) and the front copy of the
             leaves (u32, one memory): replay.h "HLS top"; the leaf level and the front copy in URAM
             where the catalog's replay_leaf_memory is "uram" (the Alveo cards), the front copy banked
             so that no bank cascades more than URAM_CASCADE_BLOCKS blocks (replay.cpp)
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
from pearl_fpga.spec.descriptor import descriptor
from pearl_fpga.spec.replay import tree_depth

# (depth, width) shapes of one BRAM36 (simple dual port, as ram_s2p)
BRAM36_SHAPES = ((32768, 1), (16384, 2), (8192, 4), (4096, 9), (2048, 18), (1024, 36), (512, 72))
LUTRAM_BITS = 1024  # memories smaller than this are registers or LUT RAM
LUTRAM_DEPTH = 64  # and so are memories this shallow
DMA_BRAM36 = 2  # nominal, per AXI DMA or data-mover pair
MARGIN = 0.10  # the share of the part the catalog leaves free for routing and the PS interconnect
URAM_DEPTH, URAM_WIDTH = 4096, 72  # one URAM288 block
URAM_CASCADE = descriptor("replay").constant("URAM_CASCADE_BLOCKS")  # blocks one bank of the replay's leaves cascades


def _in_fabric(depth: int, width: int) -> bool:
    return depth * width < LUTRAM_BITS or depth <= LUTRAM_DEPTH


def bram36(depth: int, width: int) -> int:
    """Block RAMs of one memory of `depth` words of `width` bits."""
    if _in_fabric(depth, width):
        return 0
    return min(math.ceil(width / w) * math.ceil(depth / d) for d, w in BRAM36_SHAPES)


def uram288(depth: int, width: int) -> int:
    """UltraRAM blocks (4K x 72 each, cascaded in depth) of one memory bound to URAM."""
    if _in_fabric(depth, width):
        return 0
    return math.ceil(width / URAM_WIDTH) * math.ceil(depth / URAM_DEPTH)


@dataclass(frozen=True)
class Blocks:
    """Block RAM and UltraRAM of one kernel (or the DMAs)."""

    bram36: int = 0
    uram: int = 0

    def __add__(self, other: Blocks) -> Blocks:
        return Blocks(self.bram36 + other.bram36, self.uram + other.uram)


def _memory(depth: int, width: int, uram: bool = False) -> Blocks:
    return Blocks(uram=uram288(depth, width)) if uram else Blocks(bram36=bram36(depth, width))


def _replay(capacity: int, fanout: int, leaves_in_uram: bool = False) -> Blocks:
    log2k = fanout.bit_length() - 1
    depth = tree_depth(capacity, fanout)
    total = Blocks()
    for d in range(1, depth + 1):
        shift = log2k * (depth - d)
        nodes = (capacity + (1 << shift) - 1) >> shift
        groups = (nodes + fanout - 1) // fanout
        leaf = d == depth
        for _ in range(fanout):
            total += _memory(groups, 32 if leaf else 64, uram=leaf and leaves_in_uram)
        if leaf:  # the front copy of the leaves: in UltraRAM, banks of at most URAM_CASCADE_BLOCKS blocks (replay.cpp)
            words = groups * fanout
            banks = -(-words // (URAM_DEPTH * URAM_CASCADE)) if leaves_in_uram else 1
            for _ in range(banks):
                total += _memory(-(-words // banks), 32, uram=leaves_in_uram)
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
    """Block RAM and UltraRAM of each kernel's HLS storage on one board, per SLR, and what the part has."""

    board: str
    kernels: dict[str, Blocks]
    slr_of: dict[str, int]  # kernel (and "dma:<kernel>") -> SLR; all 0 on a single-die part
    slr_available: Blocks  # one SLR's share of the part
    slr_count: int

    @property
    def used(self) -> Blocks:
        total = Blocks()
        for blocks in self.kernels.values():
            total += blocks
        return total

    @property
    def available(self) -> Blocks:
        return Blocks(self.slr_available.bram36 * self.slr_count, self.slr_available.uram * self.slr_count)

    def slr_used(self, slr: int) -> Blocks:
        total = Blocks()
        for name, blocks in self.kernels.items():
            if self.slr_of[name] == slr:
                total += blocks
        return total

    def problems(self) -> list[str]:
        """Each SLR whose block RAM or UltraRAM goes past the catalog's margin, said in words (empty: fits)."""
        out = []
        for slr in range(self.slr_count):
            used, has = self.slr_used(slr), self.slr_available
            where = f"SLR{slr}" if self.slr_count > 1 else "the part"
            for kind in ("bram36", "uram"):
                need, limit = getattr(used, kind), (1 - MARGIN) * getattr(has, kind)
                if need > limit:
                    out.append(f"{where} needs {need} {kind.upper()} of {getattr(has, kind)} (over {100 * (1 - MARGIN):.0f}%)")
        return out

    @property
    def fits(self) -> bool:
        """Whether every SLR (the part, on a single die) keeps the catalog's margin of its BRAM and URAM free."""
        return not self.problems()


def budget(spec: BoardSpec) -> Budget:
    k = spec.kernels
    tab = k["tabular"]
    kernels = {
        "replay": _replay(k["replay"]["capacity"], k["replay"]["fanout"], spec.replay_leaf_memory == "uram"),
        "mlp": Blocks(bram36=_mlp(k["mlp"]["lanes"], k["mlp"]["max_width"], k["mlp"]["max_layers"])),
        "tabular": Blocks(bram36=_tabular(tab["states"], tab["actions"], tab["instances"])),
    }
    # one AXI DMA (Zynq) or pair of data movers (Alveo) per kernel copy, in its kernel's SLR
    for name in list(kernels):
        kernels[f"dma:{name}"] = Blocks(bram36=DMA_BRAM36 * k[name].get("instances", 1))
    slr = spec.slr_of or {}
    slr_of = {name: slr.get(name.removeprefix("dma:"), 0) for name in kernels}
    share = spec.slr_resources()
    return Budget(spec.name, kernels, slr_of, Blocks(share["bram36"], share["uram"]), spec.slr_count)


def main(argv: list[str] | None = None) -> int:
    """Print the model for every board of the catalog: BRAM36 (and URAM where used) per kernel and per SLR."""
    print(f"{'board':<12} {'replay':>11} {'mlp':>6} {'tabular':>8} {'dma':>5} {'total':>11} {'part':>11}  fits (<= 90% per SLR)")
    for spec in load_catalog().values():
        b = budget(spec)
        k = b.kernels

        def show(x: Blocks) -> str:
            return f"{x.bram36}" + (f"+{x.uram}U" if x.uram else "")

        dma = sum(v.bram36 for name, v in k.items() if name.startswith("dma:"))
        verdict = "yes" if b.fits else "NO: " + "; ".join(b.problems())
        print(f"{b.board:<12} {show(k['replay']):>11} {show(k['mlp']):>6} {show(k['tabular']):>8} {dma:>5} "
              f"{show(b.used):>11} {show(b.available):>11}  {verdict}")
        if b.slr_count > 1:
            for slr in range(b.slr_count):
                names = [n for n in k if b.slr_of[n] == slr and not n.startswith("dma:")]
                print(f"{'':<12} SLR{slr}: {show(b.slr_used(slr))} of {show(b.slr_available)} ({', '.join(names) or 'no kernel'})")
    print("BRAM36 counts; +NU: URAM288 blocks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
