"""The interface every replay-sampler backend implements (numpy, cpu, rtl, pynq, xrt).

Backends are thin: `pearl_fpga.kernels.ReplaySampler` validates every argument before it calls one,
so a backend may assume (and need not re-check) that
- `indices` is a 1-D C-contiguous uint32 array with every value < capacity, `words` a uint32 array
  of the same length, and neither is longer than the sampler's max_batch;
- `targets` is a 1-D C-contiguous uint64 array, every value < total() (so total() > 0);
- a batch of updates is applied as the same updates one after another (a repeated index: the last
  one wins), as hls/replay/SPEC.md requires.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ReplayBackend(Protocol):
    """A sum tree of `capacity` Q16.16 leaves with fan-out `fanout` (hls/replay/SPEC.md)."""

    #: Clock cycles the last update/sample call took (cycle-accurate backends), else None.
    last_cycles: int | None

    def __init__(self, capacity: int, fanout: int) -> None: ...

    def update(self, indices: np.ndarray, words: np.ndarray) -> None:
        """Leaf indices[b] := words[b] for b in order (uint32 arrays)."""

    def sample(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each uint64 target: (leaf index as int64, leaf word as uint32), by the SPEC descent."""

    def total(self) -> int:
        """The root sum (sum of all leaf words) as a Python int."""

    def clear(self) -> None:
        """All leaves to 0."""

    def leaves(self) -> np.ndarray:
        """A uint32 copy of the `capacity` leaf words."""
