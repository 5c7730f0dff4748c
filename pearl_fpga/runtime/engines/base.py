"""The engine interface: where a run's actors and replay live. An engine returns data; the Trainer
owns the one training loop (sample, add, learn as the schedule allows, update priorities, sync
weights) and never hands itself to an engine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pearl_fpga.config import ENGINES, TrainConfig
from pearl_fpga.runtime.actor import Rollout
from pearl_fpga.runtime.envs import EnvSpec
from pearl_fpga.runtime.placement import Placement, resolve_engine
from pearl_fpga.replay.manager import Replay


class Messages(Protocol):
    """Where an engine reports a fault it recovered from (the run's logger)."""

    def message(self, text: str) -> None: ...


@dataclass(frozen=True)
class RunSetup:
    """What every engine needs to know of a run to place its actors and replay."""

    config: TrainConfig
    placement: Placement
    spec: EnvSpec
    seed: int
    calibration: np.ndarray  # observations the MLP kernel's quantizer is calibrated on
    log: Messages | None = None
    logdir: Path | None = None  # the run's log directory (the ray engine writes Ray's driver-side log there)

    @property
    def action_shape(self) -> tuple[int, ...]:
        return () if self.spec.discrete else (self.spec.action_dim,)

    def actor_seed(self, env_steps: int) -> int:
        """Seed of the actors started at global env step `env_steps` (worker i adds its own offset)."""
        return self.seed + 7919 * (1 + env_steps)

    def note(self, text: str) -> None:
        if self.log is not None:
            self.log.message(text)

    def make_replay(self, config: TrainConfig | None = None, seed_offset: int = 0) -> Replay:
        """A buffer in this process on the placement's replay device (`config`: a shard's, else the run's),
        its importance exponent annealed over the run's gradient steps."""
        from pearl_fpga.replay.manager import make_replay
        from pearl_fpga.runtime.emulation import replay_sizes
        from pearl_fpga.runtime.schedule import allowed_gradient_steps

        config = config or self.config
        return make_replay(config, self.spec.obs_dim, self.action_shape, self.spec.discrete,
                           self.seed + 1 + seed_offset, self.placement.replay_backends(), self.placement.replay,
                           replay_sizes(self.placement), beta_steps=allowed_gradient_steps(config, config.total_steps))


class Engine(Protocol):
    """Runs the acting side of training and holds the replay. One instance per Trainer."""

    name: str
    lockstep: bool
    """True: acting waits for the learner (inline; the learner catches up after every batch of
    transitions, in SB3's order). False: actors run while the learner learns, one gradient step per
    poll, granted at most `config.actor_lag` env steps ahead."""
    refill_steps: int
    """Env steps the actors may run past the lag limit while the replay has nothing to sample (the Ray
    engine's shards, all restarted empty); 0 where the replay never loses its data."""

    @property
    def replay(self) -> Replay:
        """The replay the learner samples and writes priorities to."""

    def start(self, env_steps: int, weights: dict[str, Any]) -> None:
        """Start the actors of one train() call at global env step `env_steps`, holding `weights`."""

    def sample(self, upto: int, wait: bool) -> list[Rollout]:
        """The rollouts collected since the last call, the actors granted env steps up to global step
        `upto`; `wait`: the learner has nothing to do, so wait briefly for the first."""

    def set_weights(self, weights: dict[str, Any]) -> None:
        """New policy weights for the actors."""

    def faults(self) -> dict[str, int]:
        """Fault counters: actor restarts, and for sharded replay shard restarts and transitions lost."""

    def stop(self) -> None:
        """End of a train() call: stop the actors (the replay stays)."""

    def close(self) -> None:
        """Release everything (replay shards, the Ray connection)."""


__all__ = ["ENGINES", "Engine", "Messages", "RunSetup", "resolve_engine"]
