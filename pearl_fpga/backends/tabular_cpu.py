"""The "cpu" tabular backend: the kernel's C++ (hls/tabular/tabular.cpp) compiled into the package
(pearl_fpga._tabular_native), bit-exact with the numpy reference; it releases the GIL, and runs the
partitioned mode's slices on native threads of its own."""

from __future__ import annotations

import numpy as np

from pearl_fpga import _tabular_native as _native
from pearl_fpga.backends.tabular_numpy import TabularNumpyBackend


class TabularCPUBackend(TabularNumpyBackend):
    """int32 Q16.16 table in host memory (the numpy reference's state and table methods); inputs arrive
    validated by TabularQ. Only the updates are native."""

    def update(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, a2: np.ndarray,
               done: np.ndarray) -> None:
        _native.update(self._q, self._alpha, self._gamma, self._sarsa, s, a, r, s2, a2, done)

    def update_checked(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, done: np.ndarray,
                       a2: np.ndarray | None) -> bool:
        """The usual arrays (int64 indices, float64 rewards, bool done) checked and applied in one native
        call; False, with the table unchanged, when any entry is out of range (TabularQ then names it)."""
        return _native.update_checked(self._q, self._alpha, self._gamma, self._sarsa, s, a, r, s2, a2, done)

    def update_partitioned(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, done: np.ndarray,
                           a2: np.ndarray | None, parts: int, threads: int) -> bool:
        """The partitioned mode in one native call over the same arrays as update_checked: `parts` slices,
        each on a private copy of the table, run by `threads` threads of a pool kept between calls (GIL
        released), then merged into the table; False, with the table unchanged, on a bad entry."""
        return _native.update_partitioned(self._q, self._alpha, self._gamma, self._sarsa, s, a, r, s2, a2, done,
                                          parts, threads)
