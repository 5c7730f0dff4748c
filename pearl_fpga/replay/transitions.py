"""`Transitions`: the one type env steps have from the actors to every replay (uniform, prioritized, the
Ray replay shards), as `Batch` is the one type from the replay to the learner.

A block of n env steps (n >= 0), one row each: obs (n, obs_dim), action (n, ...) as the policy chose
it (int64 for a discrete action space), reward (n,) float32, next_obs (n, obs_dim) and done (n,)
float32, 1.0 where the episode terminated (a truncated episode is not done). An `EnvGroup.step` makes
one; actors concatenate theirs and hand them on unchanged (in a worker's pipe message or a Ray call).
Non-finite rows are found once, at insertion (`nonfinite_rows`), by the replay that stores them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FIELDS = ("obs", "action", "reward", "next_obs", "done")


@dataclass(frozen=True)
class Transitions:
    """n env steps: row i of every array is step i (see the module docstring)."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    done: np.ndarray

    def __len__(self) -> int:
        return len(self.reward)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The five arrays, in FIELDS order."""
        return self.obs, self.action, self.reward, self.next_obs, self.done

    @classmethod
    def concatenate(cls, parts: Sequence[Transitions]) -> Transitions:
        """The rows of several blocks, in order (the one block itself when there is one)."""
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate(column) for column in zip(*(p.arrays() for p in parts), strict=True)))

    def rows(self, keep: np.ndarray | slice) -> Transitions:
        """The rows `keep` selects (a boolean mask, an index array or a slice)."""
        return Transitions(*(np.asarray(a)[keep] for a in self.arrays()))


def nonfinite_rows(t: Transitions, td_errors: np.ndarray | None = None) -> tuple[np.ndarray, str] | None:
    """None when every float in `t` (and `td_errors`) is finite; else the mask of rows holding a NaN or
    an infinity, and the first field (in FIELDS order, then "td_errors") that holds one.

    One sum per float field is the scan (a NaN or inf anywhere makes it non-finite); only when it is
    not finite (or finite values overflow it) is each row examined. Integer actions are finite."""
    fields = [(name, np.asarray(a)) for name, a in zip(FIELDS, t.arrays(), strict=True)]
    if td_errors is not None:
        fields.append(("td_errors", np.asarray(td_errors)))
    total = 0.0
    for name, a in fields:
        if a.dtype.kind in "fc":
            total += np.add.reduce(a, axis=None, dtype=np.float64)
    if math.isfinite(total):
        return None
    bad: np.ndarray | None = None
    first = ""
    for name, a in fields:
        if a.dtype.kind not in "fc" or np.isfinite(a).all():
            continue
        rows = ~np.isfinite(a.reshape(len(a), -1)).all(axis=1)
        if bad is None:
            bad, first = rows, name
        else:
            bad |= rows
    return None if bad is None else (bad, first)
