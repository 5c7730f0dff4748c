"""Actor heads: what an actor does with its policy network's outputs (numpy, on the act device's result).

A head gives the greedy action and the exploring one (Stable-Baselines3's schedule: uniform random
actions before `learning_starts`, then the algorithm's own exploration), and tells the MLP kernel which
head to build (`kernel_options`). Actions of continuous heads live in the actor's [-1, 1] scale; the
runtime maps them to the env's bounds. The draws come from the actor's seeded generator, in a fixed
order, so a run is reproducible and every act backend (torch, the kernel's numpy, cpu, rtl builds)
returns the same actions for a seed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

import numpy as np


class PolicyOutputs(Protocol):
    """The actor's policy on its device (runtime.policy.ActorPolicy)."""

    def outputs(self, obs: np.ndarray) -> np.ndarray:
        """The network's outputs (float32, (n, out)); the kernel's dequantized ones on a kernel actor."""

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        """The head's greedy action per observation."""


class ActorHead(ABC):
    """See the module docstring. `action_dim`: discrete actions' count, or a continuous action's size."""

    kernel_options: dict[str, Any] = {}
    """MLPInfer.from_torch's head options for this head."""
    action_rule: str | None = None
    """How an exported kernel policy acts greedily from the outputs (kernels.mlp_artifact.ACTION_RULES)."""
    discrete = False

    def __init__(self, config: Any, action_dim: int) -> None:
        self.config = config
        self.action_dim = action_dim

    @abstractmethod
    def greedy(self, outputs: np.ndarray) -> np.ndarray:
        """Greedy actions from the network's outputs."""

    def greedy_kernel(self, kernel: Any, obs: np.ndarray) -> np.ndarray:
        """Greedy actions on the MLP kernel (its own head where it has one)."""
        return self.greedy(np.asarray(kernel(obs), dtype=np.float32))

    @abstractmethod
    def explore(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        """Exploring actions at global env step `step` (the actors' behaviour while training)."""

    def inference_share(self) -> float:
        """Share of the env steps after learning_starts whose action needs the policy network (the planner's
        act_fraction): 1 unless the exploration skips it."""
        return 1.0

    def stochastic(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        """SB3's predict(deterministic=False) at env step `step`; DDPG's and TD3's ignore the flag, as SB3's."""
        return policy.deterministic(obs)


class EpsilonGreedy(ActorHead):
    """DQN: argmax of the Q-values; epsilon-greedy at the config's linear schedule."""

    kernel_options = {"head": "raw"}
    action_rule = "argmax"
    discrete = True

    def greedy(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(outputs).argmax(axis=1).astype(np.int64)

    def greedy_kernel(self, kernel: Any, obs: np.ndarray) -> np.ndarray:
        return np.asarray(kernel.act(obs)).astype(np.int64)

    def inference_share(self) -> float:
        """1 - the mean epsilon over the run after learning_starts: a random action needs no inference."""
        config = self.config
        if config.total_steps <= config.learning_starts:
            return 1.0
        steps = np.linspace(config.learning_starts, config.total_steps, 257)
        return float(1.0 - np.mean([config.epsilon(int(s)) for s in steps]))

    def explore(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        config, n, n_actions = self.config, len(obs), self.action_dim
        if n == 1:  # one env: scalar draws, the same stream as arrays of one without their per-call cost
            if step < config.learning_starts:
                return np.array([rng.integers(0, n_actions)])
            explore = rng.random() < config.epsilon(step)
            drawn = rng.integers(0, n_actions)
            if explore:
                return np.array([drawn], dtype=np.int64)
            return policy.deterministic(obs).astype(np.int64, copy=False)
        if step < config.learning_starts:
            return rng.integers(0, n_actions, size=n)
        random_mask = rng.random(n) < config.epsilon(step)
        actions = rng.integers(0, n_actions, size=n)
        if not random_mask.all():
            actions = np.where(random_mask, actions, policy.deterministic(obs))
        return actions.astype(np.int64)


    def stochastic(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        actions = policy.deterministic(obs)
        explore = rng.random(len(obs)) < self.config.epsilon(step)
        return np.where(explore, rng.integers(0, self.action_dim, len(obs)), actions)


class GaussianNoise(ActorHead):
    """DDPG, TD3: the tanh actor's output plus Gaussian noise of std `action_noise_std`, clipped to [-1, 1]."""

    kernel_options = {"head": "tanh", "action_low": -1.0, "action_high": 1.0}
    action_rule = "scaled-tanh"

    def greedy(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(outputs, dtype=np.float32)

    def greedy_kernel(self, kernel: Any, obs: np.ndarray) -> np.ndarray:
        return np.asarray(kernel.act(obs)).astype(np.float32).reshape(len(obs), -1)

    def explore(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        n = len(obs)
        if step < self.config.learning_starts:
            return rng.uniform(-1.0, 1.0, size=(n, self.action_dim)).astype(np.float32)
        action = policy.deterministic(obs)
        noise = rng.normal(0.0, self.config.action_noise_std, size=action.shape)
        return np.clip(action + noise, -1.0, 1.0).astype(np.float32)
