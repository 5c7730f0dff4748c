"""Lean torch update code of the off-policy algorithms (one module each)."""

from __future__ import annotations

from pearl_fpga.algos.common import Batch, mlp
from pearl_fpga.algos.ddpg import DDPG
from pearl_fpga.algos.dqn import DQN
from pearl_fpga.algos.td3 import TD3

__all__ = ["Batch", "DDPG", "DQN", "TD3", "mlp", "make_algo"]


def make_algo(config, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0):
    """The learner of `config.algo`: DQN (action_dim = number of discrete actions), DDPG or TD3.

    device: the placement's learn target ("cpu", "cpu-bf16", "cuda", "cuda-bf16") or a torch device.
    A "-bf16" target runs the wide GEMMs in bfloat16 (float32 master weights, optimizer state and loss);
    BackendUnavailable says what is missing where the hardware has no bfloat16 arithmetic."""
    import torch

    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.host import bf16_unsupported, learn_target

    torch_device, precision = learn_target(device)
    low = None
    if precision == "bfloat16":
        reason = bf16_unsupported(torch_device)
        if reason is not None:
            raise BackendUnavailable(f"placement learn={device}: {reason}")
        low = torch.bfloat16
    cls = {"dqn": DQN, "ddpg": DDPG, "td3": TD3}[config.algo]
    return cls(config, obs_dim, action_dim, device=torch_device, seed=seed, precision=low)
