"""Pieces shared by DQN and DDPG: network builder and the batch the replay hands to the learner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


def mlp(n_in: int, hidden: Sequence[int], n_out: int, tanh_head: bool = False) -> nn.Sequential:
    """Linear/ReLU stack (the MLP kernel's shape): n_in -> hidden... -> n_out, optional Tanh last."""
    layers: list[nn.Module] = []
    width = n_in
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_out))
    if tanh_head:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


@dataclass
class Batch:
    """One learner batch as float32 tensors on the learner device (weights None without PER)."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor  # (B, 1)
    next_obs: torch.Tensor
    done: torch.Tensor  # (B, 1), 1.0 where the episode terminated (not truncated)
    weights: torch.Tensor | None = None  # (B, 1) importance weights

    @classmethod
    def from_numpy(cls, data: Mapping[str, np.ndarray], device: torch.device | str = "cpu",
                   discrete: bool = False) -> Batch:
        """Convert a replay sample (obs, action, reward, next_obs, done[, weights]) to tensors."""
        def t(x: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.as_tensor(np.asarray(x), device=device).to(dtype)

        n = len(data["reward"])
        action = t(data["action"], torch.int64 if discrete else torch.float32).reshape(n, -1)
        weights = data.get("weights") if hasattr(data, "get") else None
        return cls(
            obs=t(data["obs"]).reshape(n, -1),
            action=action,
            reward=t(data["reward"]).reshape(n, 1),
            next_obs=t(data["next_obs"]).reshape(n, -1),
            done=t(data["done"]).reshape(n, 1),
            weights=None if weights is None else t(weights).reshape(n, 1),
        )


def optimizer_state_to_device(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Move an optimizer's state tensors (after load_state_dict) to the parameters' device."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and key != "step":
                state[key] = value.to(device)
