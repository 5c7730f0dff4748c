"""The batches of one round of gradient steps, drawn from the replay in the order the learner takes them."""

from __future__ import annotations

import time
from typing import Any

from pearl_fpga.replay.batch import Batch
from pearl_fpga.runtime.timers import TaskTimer

BULK_SAMPLE_ROWS = 16_384  # most replay rows drawn at once for the coming gradient steps (uniform replay)


class LearnerBatches:
    """Draws a round's batches. Uniform replay on a lockstep engine does not change while the learner runs:
    the batches of the next steps are drawn, converted and sliced at once (the same draws, in order), so that
    a step adds little to the learner's own code between two learner calls. Otherwise the next batch is
    sampled before the current step's priorities are written back (relaxed sample/update dependency, in a
    fixed order: deterministic)."""

    def __init__(self, replay: Any, bulk: bool, batch_size: int, device: Any, discrete: bool, timer: TaskTimer) -> None:
        self.replay, self.bulk, self.batch_size = replay, bulk, batch_size
        self.device, self.discrete, self.timer = device, discrete, timer
        self._drawn: list[Batch[Any]] = []
        self._next: Batch[Any] | None = None

    def take(self, g: int, allowed: int) -> tuple[Batch[Any] | None, Batch[Any] | None]:
        """(the replay's batch of step g, with its indices; None in bulk mode) and (its tensors, when already
        converted; else None: `to_learner` converts, inside the learner's timed block)."""
        if self.bulk:
            if not self._drawn:  # reversed: each step pops its batch off the end
                start = time.perf_counter()
                count = min(allowed - g, max(1, BULK_SAMPLE_ROWS // self.batch_size))
                stacked = self.replay.sample_many(self.batch_size, count).to_torch(self.device, discrete=self.discrete)
                self._drawn = stacked.split(self.batch_size)[::-1] if count > 1 else [stacked]
                self.timer.add("replay_sample", time.perf_counter() - start, calls=count)
            return None, self._drawn.pop()
        with self.timer.time("replay_sample"):
            batch = self._next if self._next is not None else self.replay.sample(self.batch_size)
            self._next = self.replay.sample(self.batch_size) if g + 1 < allowed else None
        return batch, None

    def to_learner(self, batch: Batch[Any]) -> Batch[Any]:
        """The learner's tensors of a replay batch."""
        return batch.to_torch(self.device, discrete=self.discrete)
