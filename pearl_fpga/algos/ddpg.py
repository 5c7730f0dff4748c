"""DDPG: deterministic tanh actor, Q critic on (obs, action), Polyak-averaged targets.

Matches Stable-Baselines3's DDPG (its TD3 with one critic, no target smoothing, policy delay 1):
MSE critic loss, actor loss -Q(s, pi(s)), both target networks Polyak-averaged with `tau` after
every gradient step. One difference by default (`concurrent_updates`): the actor's gradient uses the
critic of the step's start, as in OpenAI Baselines' DDPG, so both gradients are computed at once.
Actions live in the actor's [-1, 1] scale; the runtime maps them to the environment's bounds.
Leaner than SB3: the actor step's backward pass skips the critic's weight gradients (only the input
gradient is needed), target updates use fused foreach ops, and the update runs without nn.Module
calls or torch.optim's Python wrapper (pearl_fpga.algos.common).
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.common import (Batch, LeanAdam, forward, linear_layers, mlp, optimizer_state_to_device,
                                     subnormals_flushed)


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
        self.actor_adam = LeanAdam(self.actor.parameters(), lr=config.learning_rate)
        self.critic_adam = LeanAdam(self.critic.parameters(), lr=config.learning_rate)
        self.actor_optimizer = self.actor_adam.optimizer
        self.critic_optimizer = self.critic_adam.optimizer
        self._targets = list(self.actor_target.parameters()) + list(self.critic_target.parameters())
        self._online = self.actor_adam.params + self.critic_adam.params
        self._actor, self._critic = linear_layers(self.actor), linear_layers(self.critic)
        self._actor_target, self._critic_target = linear_layers(self.actor_target), linear_layers(self.critic_target)
        self.gamma = float(config.gamma)
        self.updates = 0
        # one persistent thread for the actor's half of a concurrent update (torch's intra-op threads
        # stay as configured; this is a second caller, not a bigger pool)
        self._grad_thread = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="pearl-ddpg-actor")
                             if config.concurrent_updates else None)

    @property
    def policy_module(self) -> nn.Sequential:
        """The network the actors run (tanh output in [-1, 1])."""
        return self.actor

    def learn(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """One gradient step; returns the critic loss (0-d tensor) and |TD error| per sample.

        With `config.concurrent_updates` the actor's gradient is taken on the critic as it was at the
        start of the step, on a second thread while this one computes the critic's (as OpenAI
        Baselines' DDPG does): the two halves are about equal GEMM work and torch releases the GIL in
        them. Otherwise the actor's gradient follows the critic's update (SB3's order). Subnormals are
        flushed to zero on both threads during the step unless `config.flush_subnormals` is False."""
        with subnormals_flushed(self.config.flush_subnormals):
            return self._learn(batch)

    def _learn(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        if self._grad_thread is not None:
            actor_grads = self._grad_thread.submit(self._actor_grads_flushed, batch)
            critic_loss, td, critic_grads = self._critic_grads(batch)
            actor_grads = actor_grads.result()  # re-raises an error of the actor's half
            self.critic_adam.step(critic_grads)
            self.actor_adam.step(actor_grads)
        else:
            critic_loss, td, critic_grads = self._critic_grads(batch)
            self.critic_adam.step(critic_grads)
            self.actor_adam.step(self._actor_grads(batch))
        with torch.no_grad():
            torch_ops.foreach_lerp_(self._targets, self._online, self.config.tau)
        self.updates += 1
        return critic_loss, td

    def _critic_grads(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """Critic loss (MSE to the target networks' TD target), |TD error| and the critic's gradients."""
        with torch.no_grad():
            next_action = forward(self._actor_target, batch.next_obs, tanh_head=True)
            next_q = forward(self._critic_target, torch.cat([batch.next_obs, next_action], dim=1))
            target = batch.reward + (1.0 - batch.done) * self.gamma * next_q
        current = forward(self._critic, torch.cat([batch.obs, batch.action], dim=1))
        if batch.weights is None:
            critic_loss = F.mse_loss(current, target)
        else:
            critic_loss = (batch.weights * (current - target).pow(2)).mean()
        grads = torch.autograd.grad(critic_loss, self.critic_adam.params)
        return critic_loss.detach(), (current.detach() - target).abs().squeeze(1), grads

    def _actor_grads_flushed(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        with subnormals_flushed(self.config.flush_subnormals):  # the mode is per thread
            return self._actor_grads(batch)

    def _actor_grads(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """The actor's gradients of -Q(s, pi(s)). Asking autograd for the actor's gradients only, the
        backward pass through the critic computes input gradients and skips the critic's weight gradients."""
        actor_action = forward(self._actor, batch.obs, tanh_head=True)
        actor_loss = -forward(self._critic, torch.cat([batch.obs, actor_action], dim=1)).mean()
        return torch.autograd.grad(actor_loss, self.actor_adam.params)

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
        self.actor_adam.reset_cache()
        self.critic_adam.reset_cache()
        self.updates = int(state["updates"])

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        """Actor outputs in [-1, 1] of the float network."""
        with torch.no_grad():
            a = self.actor(torch.as_tensor(obs, dtype=torch.float32, device=self.device).reshape(len(obs), -1))
        return a.cpu().numpy()
