"""The `inline` engine: acting and learning alternate in the learner's process, in Stable-Baselines3's
exact order (deterministic for a seed)."""

from __future__ import annotations

from typing import Any

from pearl_fpga.runtime.engines.base import LearnerHost
from pearl_fpga.runtime.schedule import allowed_gradient_steps


class InlineEngine:
    name = "inline"

    def make_replay(self, host: LearnerHost, build: Any) -> Any:
        return build(0)

    def run(self, host: LearnerHost, end: int) -> None:
        cfg, envs, timer = host.config, host.envs, host.timer
        adim = host.spec.action_dim
        while host.env_steps < end:
            with timer.time("act"):
                actions = host.policy.explore(envs.obs, host.env_steps, cfg, host.rng, adim)
            with timer.time("env_step"):
                transitions, finished = envs.step(actions)
            with timer.time("replay_insert"):
                host.replay.add(transitions)
            host.record_env_steps(len(actions), finished)
            host.learn_until(allowed_gradient_steps(cfg, host.env_steps))
            host.periodic(len(actions))

    def broadcast(self, host: LearnerHost, weights: dict[str, Any]) -> None:
        host.policy.load_weights(weights)

    def report(self) -> dict[str, int]:
        return {"actor_restarts": 0}

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass
