"""The readable specification of the learners: DQN, DDPG and TD3 written with plain torch autograd
and torch.optim, in the style of cleanrl. The fast learners (algos/dqn.py with its fused CPU step,
algos/td3.py and its special case algos/ddpg.py) must compute the same updates; tests/test_reference.py
checks them against these over many steps. Nothing here is used for training.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.config import TrainConfig
from pearl_fpga.algos.common import Batch


class ReferenceDQN:
    """DQN with a Huber loss, optional double-DQN target and PER weights, clipped Adam steps."""

    def __init__(self, q: nn.Module, q_target: nn.Module, config: TrainConfig) -> None:
        self.q, self.q_target = copy.deepcopy(q), copy.deepcopy(q_target)
        self.config = config
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=config.learning_rate)

    def update(self, b: Batch) -> tuple[float, torch.Tensor]:
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


class ReferenceTD3:
    """TD3 (Stable-Baselines3's): the TD target on the smaller of the target critics at the target actor's
    action plus clipped Gaussian noise (`noise`: a torch.Generator), the sum of the critics' MSE losses,
    and every `policy_delay` steps (counted from 1) the actor loss -Q1(s, pi(s)) and Polyak updates of all
    targets. `concurrent` takes the actor's gradient on Q1 as it was at the start of the step (OpenAI
    Baselines); otherwise after the critics' update (Stable-Baselines3)."""

    def __init__(self, actor: nn.Module, critics: list[nn.Module], actor_target: nn.Module,
                 critic_targets: list[nn.Module], config: TrainConfig, policy_delay: int, target_noise: float,
                 noise_clip: float, noise: torch.Generator | None = None) -> None:
        self.actor, self.actor_target = copy.deepcopy(actor), copy.deepcopy(actor_target)
        self.critics = [copy.deepcopy(c) for c in critics]
        self.critic_targets = [copy.deepcopy(c) for c in critic_targets]
        self.config, self.policy_delay, self.target_noise, self.noise_clip = config, policy_delay, target_noise, noise_clip
        self.noise = noise
        self.updates = 0
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.learning_rate)
        self.critic_optimizer = torch.optim.Adam([p for c in self.critics for p in c.parameters()],
                                                 lr=config.learning_rate)

    def update(self, b: Batch) -> tuple[float, torch.Tensor]:
        cfg = self.config
        self.updates += 1
        with torch.no_grad():
            next_action = self.actor_target(b.next_obs)
            if self.target_noise > 0:
                eps = torch.empty_like(next_action).normal_(0, self.target_noise, generator=self.noise)
                next_action = (next_action + eps.clamp(-self.noise_clip, self.noise_clip)).clamp(-1, 1)
            x_next = torch.cat([b.next_obs, next_action], dim=1)
            next_q = torch.min(torch.cat([q(x_next) for q in self.critic_targets], dim=1), dim=1, keepdim=True).values
            target = b.reward + cfg.gamma * (1 - b.done) * next_q
        x = torch.cat([b.obs, b.action], dim=1)
        qs = [q(x) for q in self.critics]
        critic_loss = torch.stack([F.mse_loss(q, target) for q in qs]).sum()
        q1_before = copy.deepcopy(self.critics[0]) if cfg.concurrent_updates else None
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        if self.updates % self.policy_delay == 0:
            q1 = q1_before if q1_before is not None else self.critics[0]
            actor_loss = -q1(torch.cat([b.obs, self.actor(b.obs)], dim=1)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            with torch.no_grad():
                for net, target_net in ((self.actor, self.actor_target), *zip(self.critics, self.critic_targets)):
                    for p, t in zip(net.parameters(), target_net.parameters(), strict=True):
                        t.lerp_(p, cfg.tau)
        return float(critic_loss.detach()), (qs[0] - target).abs().squeeze(1).detach()


class ReferenceDDPG(ReferenceTD3):
    """DDPG: TD3 with one critic, an actor step and Polyak updates at every step, no target smoothing."""

    def __init__(self, actor: nn.Module, critic: nn.Module, actor_target: nn.Module, critic_target: nn.Module,
                 config: TrainConfig) -> None:
        super().__init__(actor, [critic], actor_target, [critic_target], config, policy_delay=1, target_noise=0.0,
                         noise_clip=0.0)
        self.critic, self.critic_target = self.critics[0], self.critic_targets[0]
