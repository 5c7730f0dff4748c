"""Lean torch update code of the off-policy algorithms (one module each)."""

from __future__ import annotations

from pearl_fpga.algos.common import Batch, mlp
from pearl_fpga.algos.ddpg import DDPG
from pearl_fpga.algos.dqn import DQN
from pearl_fpga.algos.td3 import TD3

__all__ = ["Batch", "DDPG", "DQN", "TD3", "mlp", "make_algo"]


def make_algo(config, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0):
    """The learner of `config.algo`: DQN (action_dim = number of discrete actions), DDPG or TD3."""
    cls = {"dqn": DQN, "ddpg": DDPG, "td3": TD3}[config.algo]
    return cls(config, obs_dim, action_dim, device=device, seed=seed)
