"""SAC: squashed Gaussian policy, twin critics, automatic entropy tuning (Stable-Baselines3's SAC).

Per gradient step, in SB3's order (sac/sac.py, `train`):

1. the actor samples actions a~pi(.|s) with their log-probabilities (reparametrized: tanh(mu + sigma * eps),
   log pi corrected for the tanh squashing, as SB3's SquashedDiagGaussianDistribution with epsilon 1e-6);
2. with `ent_coef="auto"`, alpha = exp(log_alpha) is read, then log_alpha steps on
   -log_alpha * (log pi + target_entropy) (target_entropy "auto" = -(action size));
3. the TD target is r + gamma * (1 - done) * (min of the target critics at (s', a'~pi(.|s')) - alpha * log pi(a'|s'));
4. both critics step on 0.5 * the sum of their MSEs to it (one Adam over both; importance-weighted with PER);
5. the actor steps on mean(alpha * log pi(a|s) - min_i Q_i(s, a)) at the actions of step 1;
6. every `target_update_interval` gradient steps the target critics are Polyak-averaged with `tau`.

The policy network is one MLP obs -> net_arch -> (mu, log_sigma) (SB3's two output layers as one, the same
function); the actors run it, on the MLP kernel (its raw head) or in torch, and draw their actions on the
host (`SquashedGaussian`): tanh(mu + exp(clip(log_sigma, -20, 2)) * eps) from the actor's seeded generator,
tanh(mu) when greedy. So the kernel computes the policy head, and for a seed every kernel backend gives the
same actions. The learner's noise comes from a torch generator of its own, saved with its state.
Float32 throughout (a bfloat16 learn target is refused with the reason).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.algos.api import DeepLearner, UpdateResult
from pearl_fpga.algos.common import Batch, load_named_state, mlp, named_state
from pearl_fpga.algos.heads import ActorHead, PolicyOutputs
from pearl_fpga.errors import BackendUnavailable

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # SB3's clamp of the policy's log standard deviation
SQUASH_EPS = 1e-6  # SB3's epsilon in the tanh correction of log pi


class SquashedGaussian(ActorHead):
    """SAC's actor head: the network gives (mu, log_sigma); greedy tanh(mu), exploring a tanh-squashed
    Gaussian sample (uniform random actions before learning_starts, as SB3)."""

    kernel_options = {"head": "raw"}
    action_rule = "tanh-mean"

    def _split(self, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        outputs = np.asarray(outputs, dtype=np.float32)
        return outputs[:, :self.action_dim], np.clip(outputs[:, self.action_dim:], LOG_STD_MIN, LOG_STD_MAX)

    def greedy(self, outputs: np.ndarray) -> np.ndarray:
        return np.tanh(self._split(outputs)[0]).astype(np.float32)

    def sample(self, policy: PolicyOutputs, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A squashed Gaussian sample of the policy per observation."""
        mean, log_std = self._split(policy.outputs(obs))
        return np.tanh(mean + np.exp(log_std) * rng.standard_normal(mean.shape)).astype(np.float32)

    def explore(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        if step < self.config.learning_starts:
            return rng.uniform(-1.0, 1.0, size=(len(obs), self.action_dim)).astype(np.float32)
        return self.sample(policy, obs, rng)

    def stochastic(self, policy: PolicyOutputs, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        return self.sample(policy, obs, rng)


class TwinQ(nn.Module):
    """Two Q(s, a) networks of the same shape."""

    def __init__(self, obs_dim: int, action_dim: int, net_arch: list[int]) -> None:
        super().__init__()
        self.q1 = mlp(obs_dim + action_dim, net_arch, 1)
        self.q2 = mlp(obs_dim + action_dim, net_arch, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([obs, action], dim=1)
        return self.q1(x), self.q2(x)


class SAC(DeepLearner):
    """The SAC learner: `update(batch)` runs one step of the entropy coefficient, the critics, the actor and
    (every target_update_interval steps) the target critics; see the module docstring."""

    precisions = ("float32",)

    def __init__(self, config: Any, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0,
                 precision: torch.dtype | None = None) -> None:
        if precision is not None:
            raise BackendUnavailable("SAC's learner runs in float32 only; use placement learn=cpu (or cuda)")
        self.config = config
        self.device = torch.device(device)
        self.action_dim = action_dim
        torch.manual_seed(seed)
        self.actor = self.policy_network(obs_dim, action_dim, config).to(self.device)
        self.critic = TwinQ(obs_dim, action_dim, config.net_arch).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        lr = config.learning_rate
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr)
        self.target_entropy = (-float(action_dim) if config.target_entropy == "auto" else float(config.target_entropy))
        self.auto_entropy = config.ent_coef == "auto"
        start = config.ent_coef_init if self.auto_entropy else config.ent_coef
        self.log_ent_coef = torch.tensor([math.log(start)], device=self.device, requires_grad=self.auto_entropy)
        self.ent_coef_optimizer = (torch.optim.Adam([self.log_ent_coef], lr=lr) if self.auto_entropy else None)
        self.noise = torch.Generator(device=self.device)
        self.noise.manual_seed(seed)
        self.gamma, self.tau = float(config.gamma), float(config.tau)
        self.updates = 0

    @classmethod
    def policy_network(cls, obs_dim: int, action_dim: int, config: Any) -> nn.Sequential:
        """obs -> net_arch -> (mu, log_sigma) per action component (raw outputs; the head squashes)."""
        return mlp(obs_dim, config.net_arch, 2 * action_dim)

    @classmethod
    def actor_head(cls, config: Any, action_dim: int) -> ActorHead:
        return SquashedGaussian(config, action_dim)

    @classmethod
    def baseline_kwargs(cls, config: Any, action_space: Any, jax: bool) -> dict[str, Any]:
        ent_coef = f"auto_{config.ent_coef_init}" if config.ent_coef == "auto" else config.ent_coef
        own = dict(tau=config.tau, ent_coef=ent_coef, target_entropy=config.target_entropy)
        if not jax:
            return dict(own, target_update_interval=config.target_update_interval)
        if config.target_update_interval != 1:  # SBX's SAC moves its targets after every gradient step
            raise ValueError(f"target_update_interval={config.target_update_interval}: SBX's SAC has no such setting "
                             "(it updates its targets every gradient step); compare with --set target_update_interval=1 "
                             "or skip SBX with --no-sbx")
        return own

    @property
    def policy_module(self) -> nn.Sequential:
        return self.actor

    def _action_log_prob(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparametrized squashed Gaussian sample of the policy and its log-probability (B, 1)."""
        out = self.actor(obs)
        mean, log_std = out[:, :self.action_dim], out[:, self.action_dim:].clamp(LOG_STD_MIN, LOG_STD_MAX)
        std = log_std.exp()
        eps = torch.randn(mean.shape, generator=self.noise, device=self.device)
        pre_tanh = mean + std * eps
        action = torch.tanh(pre_tanh)
        gaussian = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=1, keepdim=True)
        return action, gaussian - torch.log(1.0 - action.pow(2) + SQUASH_EPS).sum(dim=1, keepdim=True)

    def update(self, batch: Batch) -> UpdateResult:
        actions_pi, log_prob = self._action_log_prob(batch.obs)
        if self.ent_coef_optimizer is not None:
            ent_coef = self.log_ent_coef.detach().exp()
            ent_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
            self.ent_coef_optimizer.zero_grad()
            ent_loss.backward()
            self.ent_coef_optimizer.step()
        else:
            ent_coef = self.log_ent_coef.detach().exp()
        with torch.no_grad():
            next_actions, next_log_prob = self._action_log_prob(batch.next_obs)
            next_q = torch.min(*self.critic_target(batch.next_obs, next_actions)) - ent_coef * next_log_prob
            target = batch.reward + (1.0 - batch.done) * self.gamma * next_q
        q1, q2 = self.critic(batch.obs, batch.action)
        if batch.weights is None:
            critic_loss = 0.5 * (F.mse_loss(q1, target) + F.mse_loss(q2, target))
        else:
            critic_loss = 0.5 * (batch.weights * ((q1 - target).pow(2) + (q2 - target).pow(2))).mean()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        # the actor's gradient through the critics (their own gradients are dropped: only the actor steps)
        self.critic.requires_grad_(False)
        actor_loss = (ent_coef * log_prob - torch.min(*self.critic(batch.obs, actions_pi))).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        self.critic.requires_grad_(True)
        self.updates += 1
        if self.updates % self.config.target_update_interval == 0:
            with torch.no_grad():
                torch._foreach_lerp_(list(self.critic_target.parameters()), list(self.critic.parameters()), self.tau)
        return UpdateResult(critic_loss.detach(), (q1 - target).detach().abs().squeeze(1))

    @property
    def ent_coef(self) -> float:
        """The current entropy coefficient alpha."""
        return float(self.log_ent_coef.detach().exp())

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers, alpha and its optimizer, update counter and the sampling noise's generator."""
        return {**named_state(self, self._parts()), "log_ent_coef": self.log_ent_coef.detach().clone(),
                "noise": self.noise.get_state(), "updates": self.updates}

    def _parts(self) -> list[str]:
        """The networks and optimizers a checkpoint holds, by attribute name."""
        parts = ["actor", "critic", "critic_target", "actor_optimizer", "critic_optimizer"]
        return parts + ["ent_coef_optimizer"] if self.ent_coef_optimizer is not None else parts

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_named_state(self, state, self._parts(), self.device)
        log_ent = torch.as_tensor(state["log_ent_coef"], dtype=torch.float32)
        if log_ent.shape != self.log_ent_coef.shape or not bool(torch.isfinite(log_ent).all()):
            raise ValueError(f"log_ent_coef must be one finite float, got {log_ent!r}")
        with torch.no_grad():
            self.log_ent_coef.copy_(log_ent.to(self.device))
        self.noise.set_state(state["noise"])
        self.updates = int(state["updates"])
