"""Envs that fail on purpose, for the fault-injection tests. Registered at import, so that worker
processes can create them from ids such as "fault_envs:DiesAt300-v0" (gymnasium imports this module).

- DiesAt300-v0: CartPole whose step raises RuntimeError on the 300th step of each env instance (every
  new worker process dies again after 300 steps); DiesAt1200-v0 the same on the 1,200th;
- NaNObsAt400-v0: CartPole whose 400th step returns a NaN observation (once per env instance);
- InfObsAt200-v0: CartPole whose 200th step returns an infinite observation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class EnvBroke(RuntimeError):
    """What DiesAt300-v0 raises."""


class FailingCartPole(gym.Wrapper):
    """CartPole that, on its `at`-th step, raises (`fault` "raise") or returns an observation of `fault`."""

    def __init__(self, fault: str = "raise", at: int = 300) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.fault, self.at, self.steps = fault, at, 0

    def step(self, action):
        ob, r, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.fault == "raise":
                raise EnvBroke(f"the simulator broke at step {self.steps}")
            ob = np.full_like(ob, float(self.fault))
        return ob, r, terminated, truncated, info


for _name, _fault, _at in (("DiesAt300-v0", "raise", 300), ("DiesAt1200-v0", "raise", 1200), ("NaNObsAt400-v0", "nan", 400),
                           ("InfObsAt200-v0", "inf", 200)):
    if _name not in gym.registry:
        gym.register(_name, entry_point=FailingCartPole, kwargs={"fault": _fault, "at": _at}, max_episode_steps=500)
