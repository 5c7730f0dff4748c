"""A tiny custom env registered at import, as docs/training.md's custom-env recipe says: worker
processes create it from the id "corridor_env:Corridor-v0", which makes gymnasium import this module."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Walk right (action 1) to the end of a corridor of `length` cells; -1 per step, 0 at the end."""

    def __init__(self, length: int = 5) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.pos / self.length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if int(action) == 1 else -1))
        done = self.pos >= self.length
        return self._obs(), 0.0 if done else -1.0, done, False, {}


gym.register(id="Corridor-v0", entry_point=Corridor, max_episode_steps=50)
