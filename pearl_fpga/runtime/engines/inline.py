"""The `inline` engine: acting and learning alternate in the learner's process, in Stable-Baselines3's
exact order (deterministic for a seed): each sample() steps the env group up to the step the Trainer
names (where the next gradient step, evaluation or checkpoint is due), after which the Trainer runs
the gradient steps the schedule allows."""

from __future__ import annotations

from typing import Any

from pearl_fpga.runtime.actor import ActorLoop, Transitions
from pearl_fpga.runtime.engines.base import RunSetup


class InlineEngine:
    name = "inline"
    lockstep = True
    refill_steps = 0

    def __init__(self, setup: RunSetup, actor: ActorLoop) -> None:
        self.actor = actor  # the Trainer's own: its envs, policy and exploration draws are checkpointed
        self.replay = setup.make_replay()
        self.granted = 0

    def start(self, env_steps: int, weights: dict[str, Any]) -> None:
        self.granted = env_steps  # the actor holds the learner's weights already

    def sample(self, upto: int, wait: bool) -> list[Transitions]:
        if self.granted >= upto:
            return []
        group = self.actor.envs.n  # whole env groups, at least one, none past `upto` but the first
        out = self.actor.run(max(group, (upto - self.granted) // group * group), self.granted)
        self.granted += out.n
        return [out]

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.actor.set_weights(weights)

    def faults(self) -> dict[str, int]:
        return {"actor_restarts": 0}

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass
