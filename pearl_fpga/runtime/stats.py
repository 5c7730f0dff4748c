"""What a training run reports: counters and recent figures (to progress callbacks), the result of an
evaluation, and the learner's mean loss between reports; and what every trainer closes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class EvalResult:
    """Deterministic evaluation of a policy."""

    mean: float
    std: float
    returns: list[float]
    policy_step: int  # env step at which the evaluated weights were taken
    policy: str  # "best" (kept by periodic evaluation) or "current"

    def __str__(self) -> str:
        return (f"mean return {self.mean:.1f} +/- {self.std:.1f} over {len(self.returns)} episodes "
                f"({self.policy} policy from env step {self.policy_step})")


@dataclass
class Stats:
    """Counters and recent figures reported to progress callbacks."""

    env_steps: int = 0
    grad_steps: int = 0
    episodes: int = 0
    target_steps: int = 0
    elapsed: float = 0.0
    recent_return: float = float("nan")
    loss: float = float("nan")
    loss_known: bool = False  # False: no gradient step reported a loss yet (else a NaN loss is a real NaN)
    best_eval: float = float("nan")
    worker_restarts: int = 0  # actor restarts: worker processes or Ray env actors
    shard_restarts: int = 0  # Ray engine: replay shards restarted
    transitions_lost: int = 0  # transitions held by restarted shards (or unreported by restarted actors)
    env_steps_run: int = 0  # env steps of the current train() call
    grad_steps_run: int = 0  # gradient steps of the current train() call (a resumed run's own)

    @property
    def steps_per_s(self) -> float:
        """Env steps per second of the current train() call."""
        return self.env_steps_run / self.elapsed if self.elapsed > 0 else 0.0


class LossMeter:
    """The learner's losses between reports, summed without a device sync (a float on the fused CPU
    learner, a device tensor otherwise) and read only when a report or a divergence check asks."""

    def __init__(self) -> None:
        self.total: Any = 0.0
        self.count = 0
        self.last = float("nan")
        self.known = False  # whether any report had losses to average
        self.nonfinite: float | None = None  # a non-finite mean that a report consumed

    def add(self, loss: Any) -> None:
        self.total = self.total + loss
        self.count += 1

    def report(self) -> float:
        """The mean loss since the last report (the previous mean when there were no steps since)."""
        if self.count:
            self.last = float(self.total) / self.count
            self.total, self.count = 0.0, 0
            self.known = True
            if not math.isfinite(self.last):
                self.nonfinite = self.last
        return self.last

    def problem(self) -> str | None:
        """What shows that training diverged (a non-finite mean loss), or None."""
        if self.count:
            mean = float(self.total) / self.count
            if not math.isfinite(mean):
                return f"the mean loss of the last {self.count:,} gradient steps is {mean}"
        if self.nonfinite is not None:
            return f"the mean loss was {self.nonfinite}"
        return None


class ClosesRun:
    """close() and the context manager of a trainer: its own resources (`_release`), then the logs of
    `logdir=` (a logger the caller passed is the caller's to close)."""

    logdir: Any
    logger: Any

    def _release(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._release()
        if self.logdir is not None and self.logger is not None:
            self.logger.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

