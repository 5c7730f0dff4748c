"""`ActorLoop`: envs, policy and exploration, transitions out, weights in. The same loop acts for the
inline engine (in the learner's process), the actor worker processes (runtime.workers) and the Ray env
actors (engines.env_actor); only where it runs and how its transitions travel differ.

Exploration is driven by the global env-step index a run starts from (SB3's schedule: random actions
before learning_starts, then the algorithm's actor head), so an actor granted steps n..n+k acts as the
sequential loop would at those steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.replay.transitions import Transitions
from pearl_fpga.runtime.envs import EnvGroup
from pearl_fpga.runtime.placement import Placement
from pearl_fpga.runtime.policy import ActorPolicy
from pearl_fpga.runtime.timers import TaskTimer


@dataclass
class Rollout:
    """What actors hand the learner for `n` env steps: the transitions (pearl_fpga.replay.Transitions;
    None when the actor already stored them in its replay shard), the episodes that ended in them as
    (return, length), the actor's task times, and (from ActorLoop.run) for each finished episode the env
    steps of these n counted up to the end of its env group."""

    n: int
    transitions: Transitions | None
    finished: list[tuple[float, int]]
    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    ended_at: list[int] = field(default_factory=list)


class ActorFailed(Exception):
    """The env (or the policy) raised inside ActorLoop.run: `partial` holds the whole env-group steps
    taken before it (kept, not lost with the error), `__cause__` the error itself."""

    def __init__(self, cause: BaseException, partial: Rollout) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause, self.partial = cause, partial

    def __reduce__(self) -> Any:  # picklable with its arguments (a Ray actor's error travels pickled)
        return type(self), (self.cause, self.partial)


class ActorLoop:
    """Steps `envs` with `policy`'s exploration actions; `rng` draws the exploration."""

    def __init__(self, config: TrainConfig, envs: EnvGroup, policy: ActorPolicy, rng: np.random.Generator) -> None:
        self.config = config
        self.envs = envs
        self.policy = policy
        self.rng = rng

    @classmethod
    def build(cls, config: TrainConfig, placement: Placement, calibration: np.ndarray, seed: int,
              weights: dict[str, Any] | None = None) -> ActorLoop:
        """An actor of its own (a worker process, a Ray actor): envs seeded with `seed`, exploration with
        seed + 1, a fresh policy network holding `weights` (when given) on the act device."""
        from pearl_fpga.algos.registry import learner_class

        envs = EnvGroup(config.env_id, config.n_envs, seed)
        spec = envs.spec
        learner = learner_class(config.algo)
        module = learner.policy_network(spec.obs_dim, spec.action_dim, config)
        if weights is not None:
            module.load_state_dict(weights)
        policy = ActorPolicy(module, placement, learner.actor_head(config, spec.action_dim), calibration)
        return cls(config, envs, policy, np.random.default_rng(seed + 1))

    def set_weights(self, weights: dict[str, Any]) -> None:
        """New policy weights from the learner (re-quantized for a kernel actor)."""
        self.policy.load_weights(weights)

    def run(self, n_steps: int, start_step: int, timer: TaskTimer | None = None) -> Rollout:
        """Step at least `n_steps` env steps (whole env groups) from global step `start_step`. ActorFailed
        (with the steps taken before it) when the env or the policy raises."""
        timer = timer if timer is not None else TaskTimer()
        parts: list[Transitions] = []  # EnvGroup.step returns fresh arrays: kept without a copy
        finished: list[tuple[float, int]] = []
        ended_at: list[int] = []
        done = 0
        clock = time.perf_counter
        act_s = env_s = 0.0  # summed here and added once: cheaper per step than a timer block each
        failure: Exception | None = None
        try:
            while done < n_steps:
                start = clock()
                actions = self.policy.explore(self.envs.obs, start_step + done, self.rng)
                stepped = clock()
                act_s += stepped - start
                transitions, ended = self.envs.step(actions)
                env_s += clock() - stepped
                parts.append(transitions)
                done += len(actions)
                if ended:
                    finished += ended
                    ended_at += [done] * len(ended)
        except Exception as exc:  # noqa: BLE001 - any env error: the steps before it are kept
            failure = exc
        finally:
            timer.add("act", act_s, len(parts))
            timer.add("env_step", env_s, len(parts))
        if not parts:  # nothing asked for, or the first step failed
            out = Rollout(0, None, [], dict(timer.seconds), dict(timer.calls))
        else:
            out = Rollout(done, Transitions.concatenate(parts), finished, dict(timer.seconds), dict(timer.calls),
                          ended_at)
        if failure is not None:
            raise ActorFailed(failure, out) from failure
        return out
