"""DDPG: deterministic tanh actor, Q critic on (obs, action), Polyak-averaged targets.

Matches Stable-Baselines3's DDPG (its TD3 with one critic, no target smoothing, policy delay 1):
MSE critic loss, actor loss -Q(s, pi(s)), both target networks Polyak-averaged with `tau` after
every gradient step. Actions live in the actor's [-1, 1] scale; the runtime maps them to the
environment's bounds. Leaner than SB3: the critic's parameters do not accumulate gradients during
the actor step (only the input gradient is needed), and target updates use fused foreach ops.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.algos.common import Batch, mlp, optimizer_state_to_device


class DDPG:
    """The DDPG learner: `learn(batch)` runs one critic and one actor step and the target updates."""

    discrete = False

    def __init__(self, config: Any, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0) -> None:
        self.config = config
        self.device = torch.device(device)
        torch.manual_seed(seed)
        self.actor = mlp(obs_dim, config.net_arch, action_dim, tanh_head=True).to(self.device)
        self.critic = mlp(obs_dim + action_dim, config.net_arch, 1).to(self.device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.learning_rate, fused=True)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=config.learning_rate, fused=True)
        self._critic_params = list(self.critic.parameters())
        self._targets = list(self.actor_target.parameters()) + list(self.critic_target.parameters())
        self._online = list(self.actor.parameters()) + self._critic_params
        self.gamma = float(config.gamma)
        self.updates = 0

    @property
    def policy_module(self) -> nn.Sequential:
        """The network the actors run (tanh output in [-1, 1])."""
        return self.actor

    def learn(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """One gradient step; returns the critic loss (0-d tensor) and |TD error| per sample."""
        with torch.no_grad():
            next_action = self.actor_target(batch.next_obs)
            next_q = self.critic_target(torch.cat([batch.next_obs, next_action], dim=1))
            target = batch.reward + (1.0 - batch.done) * self.gamma * next_q
        current = self.critic(torch.cat([batch.obs, batch.action], dim=1))
        if batch.weights is None:
            critic_loss = F.mse_loss(current, target)
        else:
            critic_loss = (batch.weights * (current - target).pow(2)).mean()
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()

        # Actor step: gradients flow through the critic's input only.
        for p in self._critic_params:
            p.requires_grad_(False)
        actor_loss = -self.critic(torch.cat([batch.obs, self.actor(batch.obs)], dim=1)).mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        for p in self._critic_params:
            p.requires_grad_(True)

        with torch.no_grad():
            torch._foreach_lerp_(self._targets, self._online, self.config.tau)
        self.updates += 1
        return critic_loss.detach(), (current.detach() - target).abs().squeeze(1)

    def update_target(self) -> None:
        """No-op: DDPG's targets are averaged inside learn()."""

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers and update counter."""
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "actor_target": self.actor_target.state_dict(), "critic_target": self.critic_target.state_dict(),
                "actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() returned (strict: shapes must match)."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        optimizer_state_to_device(self.actor_optimizer, self.device)
        optimizer_state_to_device(self.critic_optimizer, self.device)
        self.updates = int(state["updates"])

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        """Actor outputs in [-1, 1] of the float network."""
        with torch.no_grad():
            a = self.actor(torch.as_tensor(obs, dtype=torch.float32, device=self.device).reshape(len(obs), -1))
        return a.cpu().numpy()
