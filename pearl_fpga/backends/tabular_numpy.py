"""The "numpy" tabular backend: the golden reference of the Q-learning/SARSA update (TABULAR.md,
hls/tabular/SPEC.md), one transition at a time in Python ints so that it is obviously right."""

from __future__ import annotations

import numpy as np

_HALF = 1 << 15
_LO, _HI = -(1 << 31), (1 << 31) - 1


class TabularNumpyBackend:
    """int32 Q16.16 table; inputs arrive validated by TabularQ (uint32 indices, int32 reward words)."""

    last_cycles: int | None = None

    def __init__(self, n_states: int, n_actions: int) -> None:
        self._q = np.zeros((n_states, n_actions), dtype=np.int32)
        self._alpha, self._gamma, self._sarsa = 0, 0, False

    def configure(self, alpha_word: int, gamma_word: int, sarsa: bool) -> None:
        self._alpha, self._gamma, self._sarsa = int(alpha_word), int(gamma_word), bool(sarsa)

    def update(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, a2: np.ndarray,
               done: np.ndarray) -> None:
        q, alpha, gamma, sarsa = self._q, self._alpha, self._gamma, self._sarsa
        for si, ai, ri, ni, bi, di in zip(s.tolist(), a.tolist(), r.tolist(), s2.tolist(), a2.tolist(), done.tolist()):
            if di:
                boot = 0
            elif sarsa:
                boot = int(q[ni, bi])
            else:
                boot = int(q[ni].max())
            target = ri + ((gamma * boot + _HALF) >> 16)  # Python ints: exact, >> floors like the hardware
            old = int(q[si, ai])
            q[si, ai] = min(max(old + ((alpha * (target - old) + _HALF) >> 16), _LO), _HI)

    def table(self) -> np.ndarray:
        return self._q.copy()

    def load(self, table: np.ndarray) -> None:
        self._q[...] = table

    def clear(self) -> None:
        self._q[...] = 0
