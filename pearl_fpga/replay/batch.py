"""`Batch`: the one type a sampled batch has, from every buffer (uniform, prioritized, the Ray replay
shards) to every learner, as Stable-Baselines3's ReplayBufferSamples.

A buffer returns it with numpy arrays (one row per transition: reward, done and weights 1-D); the
learner takes `batch.to_torch(device)`, the same type with float32 tensors shaped as the learners index
them (reward, done and weights as (B, 1) columns, discrete actions (B, 1) int64). `indices` stay numpy
in both: they go back, with the learner's |TD errors| as numpy, to the buffer's `update_priorities`.
"""

from __future__ import annotations

from collections.abc import Sequence
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch

Array = TypeVar("Array")


@dataclass
class Batch(Generic[Array]):
    """One batch: row b of every array belongs to transition indices[b]."""

    obs: Array
    action: Array
    reward: Array  # float32
    next_obs: Array
    done: Array  # float32, 1.0 where the episode terminated (not truncated)
    weights: Array | None = None  # float32 importance weights, max 1 (prioritized replay only)
    indices: np.ndarray | None = None  # int64, for update_priorities (None for a batch made by hand)

    def __len__(self) -> int:
        return len(self.reward)  # type: ignore[arg-type]

    def split(self, size: int) -> list[Batch[Array]]:
        """Consecutive batches of `size` rows (the last may be shorter), as views (numpy or torch slices)."""
        starts = range(0, len(self), size)

        def parts(x: Any) -> Any:
            if x is None:
                return [None] * len(starts)
            if isinstance(x, np.ndarray):
                return [x[i : i + size] for i in starts]
            return x.split(size)  # a torch tensor: all the views in one call

        return [Batch(*fields) for fields in zip(*(parts(getattr(self, f.name)) for f in dataclasses.fields(self)),
                                                 strict=True)]

    def to_torch(self, device: Any = "cpu", discrete: bool = False) -> Batch[torch.Tensor]:
        """The learner's view: float32 tensors on `device` (int64 actions when `discrete`)."""
        import torch

        n = len(self)

        def t(x: Any, cols: int, dtype: np.dtype = np.dtype(np.float32)) -> torch.Tensor:
            # Samples are fresh contiguous arrays of the right dtype: shaped in numpy and wrapped without
            # a copy (torch.from_numpy: a third of torch.as_tensor's call overhead).
            a = np.ascontiguousarray(x, dtype=dtype).reshape(n, cols)
            return torch.from_numpy(a).to(device)

        return Batch(obs=t(self.obs, -1),
                     action=t(self.action, -1, np.dtype(np.int64) if discrete else np.dtype(np.float32)),
                     reward=t(self.reward, 1), next_obs=t(self.next_obs, -1), done=t(self.done, 1),
                     weights=None if self.weights is None else t(self.weights, 1), indices=self.indices)

    @staticmethod
    def concatenate(batches: Sequence[Batch[np.ndarray]]) -> Batch[np.ndarray]:
        """The rows of several numpy batches, in order (weights and indices only where all have them)."""

        def cat(name: str) -> Any:
            parts = [getattr(b, name) for b in batches]
            return None if any(p is None for p in parts) else np.concatenate(parts)

        return Batch(obs=cat("obs"), action=cat("action"), reward=cat("reward"), next_obs=cat("next_obs"),
                   done=cat("done"), weights=cat("weights"), indices=cat("indices"))
