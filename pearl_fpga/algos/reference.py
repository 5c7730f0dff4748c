"""The readable specification of the learners: DQN and DDPG written with plain torch autograd and
torch.optim, in the style of cleanrl. The fast learners (algos/dqn.py with its fused CPU step,
algos/ddpg.py) must compute the same updates; tests/test_reference.py checks them against these
over many steps. Nothing here is used for training.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.algos.common import Batch


class ReferenceDQN:
    """DQN with a Huber loss, optional double-DQN target and PER weights, clipped Adam steps."""

    def __init__(self, q: nn.Module, q_target: nn.Module, config: Any) -> None:
        self.q, self.q_target = copy.deepcopy(q), copy.deepcopy(q_target)
        self.config = config
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=config.learning_rate)

    def learn(self, b: Batch) -> tuple[float, torch.Tensor]:
        cfg = self.config
        with torch.no_grad():
            if cfg.double_q:  # the online net picks the next action, the target net values it
                next_action = self.q(b.next_obs).argmax(dim=1, keepdim=True)
                next_q = self.q_target(b.next_obs).gather(1, next_action)
            else:
                next_q = self.q_target(b.next_obs).max(dim=1, keepdim=True).values
            target = b.reward + cfg.gamma * (1 - b.done) * next_q
        q_taken = self.q(b.obs).gather(1, b.action)
        huber = F.smooth_l1_loss(q_taken, target, reduction="none")
        loss = (huber if b.weights is None else b.weights * huber).mean()
        self.optimizer.zero_grad()
        loss.backward()
        if cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.q.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        return float(loss.detach()), (q_taken - target).abs().squeeze(1).detach()

    def update_target(self) -> None:
        self.q_target.load_state_dict(self.q.state_dict())


class ReferenceDDPG:
    """DDPG: MSE critic loss on the Polyak-averaged targets, actor loss -Q(s, pi(s)), Adam, then Polyak
    updates of both targets. `concurrent` takes the actor's gradient on the critic as it was at the
    start of the step (OpenAI Baselines); otherwise after the critic's update (Stable-Baselines3)."""

    def __init__(self, actor: nn.Module, critic: nn.Module, actor_target: nn.Module, critic_target: nn.Module,
                 config: Any) -> None:
        self.actor, self.critic = copy.deepcopy(actor), copy.deepcopy(critic)
        self.actor_target, self.critic_target = copy.deepcopy(actor_target), copy.deepcopy(critic_target)
        self.config = config
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=config.learning_rate)

    def learn(self, b: Batch) -> tuple[float, torch.Tensor]:
        cfg = self.config
        with torch.no_grad():
            next_q = self.critic_target(torch.cat([b.next_obs, self.actor_target(b.next_obs)], dim=1))
            target = b.reward + cfg.gamma * (1 - b.done) * next_q
        q = self.critic(torch.cat([b.obs, b.action], dim=1))
        critic_loss = F.mse_loss(q, target)
        critic_before = copy.deepcopy(self.critic) if cfg.concurrent_updates else None
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        critic = critic_before if critic_before is not None else self.critic
        actor_loss = -critic(torch.cat([b.obs, self.actor(b.obs)], dim=1)).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()

        with torch.no_grad():
            for net, target_net in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
                for p, t in zip(net.parameters(), target_net.parameters(), strict=True):
                    t.lerp_(p, cfg.tau)
        return float(critic_loss.detach()), (q - target).abs().squeeze(1).detach()
