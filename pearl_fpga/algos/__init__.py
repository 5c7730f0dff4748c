"""Lean torch update code of the off-policy algorithms (one module each)."""

from __future__ import annotations

from pearl_fpga.algos.common import Batch, mlp
from pearl_fpga.algos.ddpg import DDPG
from pearl_fpga.algos.dqn import DQN

__all__ = ["Batch", "DDPG", "DQN", "mlp", "make_algo"]


def make_algo(config, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0):
    """The learner of `config.algo`: DQN (action_dim = number of discrete actions) or DDPG."""
    cls = DQN if config.algo == "dqn" else DDPG
    return cls(config, obs_dim, action_dim, device=device, seed=seed)
