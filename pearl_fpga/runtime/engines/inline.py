"""The `inline` engine: acting and learning alternate in the learner's process, in Stable-Baselines3's
exact order (deterministic for a seed): each sample() steps the env group up to the step the Trainer
names (where the next gradient step, evaluation or checkpoint is due), after which the Trainer runs
the gradient steps the schedule allows.

An env that raises ends the run cleanly: the steps taken before the error are returned, and the next
sample() raises EnvFailed at a step boundary, so the Trainer checkpoints all the work done and the
error names the env and its exception."""

from __future__ import annotations

import traceback
from typing import Any

from pearl_fpga.errors import EngineError
from pearl_fpga.runtime.actor import ActorFailed, ActorLoop, Rollout
from pearl_fpga.runtime.engines.base import RunSetup


class EnvFailed(EngineError):
    """The env raised in the learner's process (inline engine). Raised at a step boundary, after the
    steps taken before the error were handed over, so the Trainer checkpoints them."""

    at_boundary = True


class InlineEngine:
    name = "inline"
    lockstep = True
    refill_steps = 0

    def __init__(self, setup: RunSetup, actor: ActorLoop) -> None:
        self.actor = actor  # the Trainer's own: its envs, policy and exploration draws are checkpointed
        self.replay = setup.make_replay()
        self.granted = 0
        self.failure: EnvFailed | None = None

    def start(self, env_steps: int, weights: dict[str, Any]) -> None:
        self.granted = env_steps  # the actor holds the learner's weights already
        self.failure = None

    def sample(self, upto: int, wait: bool) -> list[Rollout]:
        if self.failure is not None:
            raise self.failure
        if self.granted >= upto:
            return []
        group = self.actor.envs.n  # whole env groups, at least one, none past `upto` but the first
        try:
            out = self.actor.run(max(group, (upto - self.granted) // group * group), self.granted)
        except ActorFailed as exc:
            out = exc.partial
            where = traceback.extract_tb(exc.cause.__traceback__)[-1]
            self.failure = EnvFailed(
                f"the env {self.actor.config.env_id} raised {exc} (at {where.filename}:{where.lineno}) at env step "
                f"{self.granted + out.n:,}; the run stops with a checkpoint of the {self.granted + out.n:,} env steps "
                "taken before it (when a checkpoint directory is set). Fix the env, then resume the run")
            self.failure.__cause__ = exc.cause
        self.granted += out.n
        return [out] if out.n else []

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.actor.set_weights(weights)

    def faults(self) -> dict[str, int]:
        return {"actor_restarts": 0}

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass
