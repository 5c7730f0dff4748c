"""The tabular Q-learning/SARSA kernel's numbers (TABULAR.md, hls/tabular/SPEC.md), shared by every
backend and driver: the Q16.16 words of alpha, gamma and rewards, the table limits, and the integer
mean that merges the tables of the partitioned (SwiftRL) mode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FRAC_BITS = 16
ONE = 1 << FRAC_BITS  # 1.0 in alpha/gamma words and in Q16.16
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
PIPELINE_DEPTH = 2  # the reference RTL's stages (read, update): n back-to-back transitions take n + 2 clocks
MAX_ENTRIES = 1 << 24  # n_states * n_actions the host API accepts; a board's bound is in its catalog entry


def to_word(x: Any, name: str, lo: int, hi: int, what: str) -> int:
    """floor(x * 65536 + 0.5) as an int in [lo, hi]; else a ValueError saying `what` to pass."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got a bool")
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__} {x!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}; pass {what}")
    word = int(np.floor(x * ONE + 0.5))
    if not lo <= word <= hi:
        raise ValueError(f"{name}={x} is out of range; pass {what}")
    return word


def alpha_word(alpha: Any) -> int:
    return to_word(alpha, "alpha", 1, ONE, "alpha in (0, 1] (at least 2**-17, to round to a word >= 1)")


def gamma_word(gamma: Any) -> int:
    return to_word(gamma, "gamma", 0, ONE, "gamma in [0, 1]")


def reward_word(r: Any) -> int:
    return to_word(r, "r", INT32_MIN, INT32_MAX, "a finite reward in the Q16.16 range [-32768, 32768)")


def reward_words(r: np.ndarray) -> np.ndarray:
    """A 1-D float or integer array of rewards as int32 Q16.16 words; ValueError naming the first bad one."""
    if r.dtype == np.bool_ or not (np.issubdtype(r.dtype, np.floating) or np.issubdtype(r.dtype, np.integer)):
        raise TypeError(f"r must be a float or integer array, got dtype {r.dtype}")
    x = r.astype(np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"r[{i}] is {x[i]}; rewards must be finite (drop or clip that transition)")
    words = np.floor(x * ONE + 0.5)
    out = (words < INT32_MIN) | (words > INT32_MAX)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise ValueError(f"r[{i}] = {x[i]} is outside the Q16.16 range [-32768, 32768); scale the rewards down")
    return words.astype(np.int32)


def merge_partitions(tables: list[np.ndarray]) -> np.ndarray:
    """The integer mean of K tables rounded half up: floor((sum_k Q_k + floor(K/2)) / K), summed in int64."""
    if not tables:
        raise ValueError("merge_partitions needs at least one table")
    k = len(tables)
    total = np.sum(np.stack([np.asarray(t, dtype=np.int64) for t in tables]), axis=0)
    return ((total + k // 2) // k).astype(np.int32)
