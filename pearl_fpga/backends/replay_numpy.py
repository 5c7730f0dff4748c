"""Golden reference of the replay kernel (hls/replay/SPEC.md) in numpy: short and obviously right.

It keeps only the leaves and rebuilds the level sums from them on every sample, then follows the
SPEC's descent literally (first child j with target < c_0 + ... + c_j), vectorized over the batch.
"""

from __future__ import annotations

import numpy as np

from pearl_fpga.spec.replay import tree_depth


class ReplayNumpyBackend:
    """Reference sum tree; every other backend must match it bit for bit."""

    last_cycles: int | None = None

    def __init__(self, capacity: int, fanout: int) -> None:
        self.capacity = capacity
        self.fanout = fanout
        self.depth = tree_depth(capacity, fanout)
        self._leaves = np.zeros(fanout**self.depth, dtype=np.uint64)  # padding beyond capacity stays 0

    def update(self, indices: np.ndarray, words: np.ndarray) -> None:
        bad = np.flatnonzero(np.asarray(indices, dtype=np.int64) >= self.capacity)
        if bad.size:  # as the cpu backend: a padding leaf (capacity .. K^depth - 1) would be sampled
            raise ValueError(f"index {int(indices[bad[0]])} is out of range for capacity {self.capacity}; "
                             "the tree was not changed")
        for i, w in zip(indices.tolist(), words.tolist()):  # in order: the last of a repeated index wins
            self._leaves[i] = w

    def _levels(self) -> list[np.ndarray]:
        """Sums of every level, root first; the last one is the leaves."""
        levels = [self._leaves]
        while len(levels[0]) > 1:
            levels.insert(0, levels[0].reshape(-1, self.fanout).sum(axis=1, dtype=np.uint64))
        return levels

    def sample(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        levels = self._levels()
        rows = np.arange(len(targets))
        node = np.zeros(len(targets), dtype=np.int64)
        rem = np.array(targets, dtype=np.uint64)
        for level in levels[1:]:
            children = level.reshape(-1, self.fanout)[node]  # (B, K) child sums of each current node
            prefix = np.cumsum(children, axis=1, dtype=np.uint64)
            chosen = np.argmax(rem[:, None] < prefix, axis=1)  # first child whose prefix exceeds rem
            rem = rem - (prefix[rows, chosen] - children[rows, chosen])  # minus the sums before it
            node = node * self.fanout + chosen
        return node, self._leaves[node].astype(np.uint32)

    def total(self) -> int:
        return int(self._leaves.sum(dtype=np.uint64))

    def clear(self) -> None:
        self._leaves[:] = 0

    def leaves(self) -> np.ndarray:
        return self._leaves[: self.capacity].astype(np.uint32)
