"""The engine interface, and what an engine may use of the learner that hosts it."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from pearl_fpga.config import ENGINES


def resolve_engine(config: Any) -> str:
    """The engine a config runs on: its `engine`, or for "auto" `processes` when workers > 0, else `inline`."""
    if config.engine == "auto":
        return "processes" if config.workers > 0 else "inline"
    return config.engine


class LearnerHost(Protocol):
    """The learner side of a run (the Trainer), as engines see it: counters, the replay, and the three
    things an engine does with collected data (record it, run the learner as far as the schedule
    allows, run the periodic work)."""

    config: Any
    placement: Any
    spec: Any
    seed: int
    env_steps: int
    grad_steps: int
    replay: Any
    policy: Any
    envs: Any
    rng: np.random.Generator
    calibration: np.ndarray
    timer: Any
    logger: Any

    def record_env_steps(self, n: int, finished: list[tuple[float, int]]) -> None: ...

    def learn_until(self, allowed: int) -> None: ...

    def periodic(self, n: int) -> None: ...

    def policy_weights(self) -> dict[str, Any]: ...


class Engine(Protocol):
    """Runs the acting side of training and feeds the learner. One instance per Trainer."""

    name: str

    def make_replay(self, host: LearnerHost, build: Any) -> Any:
        """The replay the learner samples: `build(seed_offset)` makes one local buffer."""

    def run(self, host: LearnerHost, end: int) -> None:
        """Collect env steps (and learn as the schedule allows) until host.env_steps >= end."""

    def broadcast(self, host: LearnerHost, weights: dict[str, Any]) -> None:
        """New policy weights for the actors."""

    def report(self) -> dict[str, int]:
        """Fault counters: actor restarts, and for sharded replay shard restarts and transitions lost."""

    def stop(self) -> None:
        """End of a train() call: stop the actors (the replay stays)."""

    def close(self) -> None:
        """Release everything (replay shards, the Ray connection)."""
