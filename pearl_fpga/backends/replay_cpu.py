"""The "cpu" replay backend: the HLS C++ sum tree (hls/replay/replay.cpp) compiled into the package."""

from __future__ import annotations

import importlib

import numpy as np

from pearl_fpga.errors import BackendUnavailable


def _native():
    try:
        native = importlib.import_module("pearl_fpga._replay_native")
    except ImportError as exc:
        raise BackendUnavailable(
            f"the cpu replay backend needs the native extension pearl_fpga._replay_native ({exc}); build it "
            "with `make native` (or `pip install -e .`, which needs a C++17 compiler), or use backend='numpy'"
        ) from exc
    return native


class ReplayCPUBackend:
    """Sum tree in the HLS C++ core, batched and GIL-free; bit-exact with the numpy reference."""

    last_cycles: int | None = None

    def __init__(self, capacity: int, fanout: int) -> None:
        self._tree = _native().SumTree(capacity, fanout)

    def update(self, indices: np.ndarray, words: np.ndarray) -> None:
        self._tree.update(indices, words)

    def sample(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._tree.sample(targets)

    def total(self) -> int:
        return self._tree.total()

    def clear(self) -> None:
        self._tree.clear()

    def leaves(self) -> np.ndarray:
        return self._tree.leaves()
