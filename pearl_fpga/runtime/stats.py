"""What a training run reports: counters and recent figures (to progress callbacks) and the result
of an evaluation."""

from __future__ import annotations

from dataclasses import dataclass


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

    @property
    def steps_per_s(self) -> float:
        """Env steps per second of the current train() call."""
        return self.env_steps_run / self.elapsed if self.elapsed > 0 else 0.0
