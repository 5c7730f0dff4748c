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

`precision=torch.bfloat16` (placement learn=cpu-bf16) runs the wide GEMMs in bfloat16 on float32 master
weights, as DDPG's and TD3's (common.cast_layers on the torch path, FusedNet's copies on the fused one): the
thin input and output layers, the squashed Gaussian, the losses, alpha and every Adam stay float32.

On a CPU with the native module built, the step runs fused (`fused=None` takes it where it runs;
`fused=False` runs the torch ops above, with autograd and torch.optim.Adam: the reference, and the CUDA
path). The fused step is the same arithmetic in the same order, with sums in another order, so the two
agree to float rounding (tests/test_sac_fused.py): the networks' wide layers are torch GEMMs into
buffers made once per batch size, the thin layers, bias, ReLU, the critics' MSE gradient and every Adam
step are native (FusedNet of algos/fused_net.py and FusedCritics of fused_critics.py, as DDPG's and TD3's), and
nothing builds an autograd graph. The squashed Gaussian is native too, one pass each way: the sample and its log-probability
are `squash` evaluated in float64 and rounded once (more accurate than its float32 ops, whose 1 - a^2
cancels where tanh saturates), and the gradient at the actor's outputs is the torch step's float32 ops
bit for bit where ATen's tanh_backward is vectorized (1 - a^2 rounded once; its scalar path rounds a^2 first,
one rounding apart) (tanh correction, the log_std clamp passing no gradient outside [-20, 2]). The actor's
gradient through min(Q1, Q2) is each critic's input gradient at -1/B, the smaller critic's row taken per
sample (half of each on a tie, as torch.minimum's gradient). Each critic's target value, its
loss gradient, Adam step and Polyak average, and its input gradient run on a thread of its own in the
`update_schedule` concurrent (one per critic, as TD3's; algos/step_threads.py), the actor's next-state
pass beside its current-state pass; serial runs the same calls in the same order on one thread, so both
schedules give the same bits and `auto` measures them while training.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.algos.api import UpdateResult
from pearl_fpga.algos.common import (Batch, LeanAdam, cast_layers, forward, linear_layers, load_named_state, mlp,
                                     named_state, subnormals_flushed)
from pearl_fpga.algos.fused import native_learner
from pearl_fpga.algos.fused_critics import CriticBuffers, FusedCritics
from pearl_fpga.algos.fused_net import FusedNet, NetPass
from pearl_fpga.algos.heads import ActorHead, PolicyOutputs
from pearl_fpga.algos.step_threads import TwoThreadLearner, update_schedule
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


def squash(out: torch.Tensor, eps: torch.Tensor,
           action_dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The squashed Gaussian sample tanh(mu + sigma * eps) of the policy network's outputs `out` (B, 2 action)
    at the standard normal noise `eps`, its log-probability (B, 1), and log_sigma (clamped) and sigma."""
    mean, log_std = out[:, :action_dim], out[:, action_dim:].clamp(LOG_STD_MIN, LOG_STD_MAX)
    std = log_std.exp()
    action = torch.tanh(mean + std * eps)
    gaussian = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=1, keepdim=True)
    return action, gaussian - torch.log(1.0 - action.pow(2) + SQUASH_EPS).sum(dim=1, keepdim=True), log_std, std


@dataclass
class _Squashed:
    """One squashed Gaussian sample of a batch (the native squash_sample's outputs, (B, action) each but
    log_prob (B, 1)), with the noise it was drawn at."""

    eps: torch.Tensor
    action: torch.Tensor
    std: torch.Tensor
    log_prob: torch.Tensor

    @classmethod
    def new(cls, n: int, action_dim: int) -> _Squashed:
        return cls(eps=torch.empty(n, action_dim), action=torch.empty(n, action_dim), std=torch.empty(n, action_dim),
                   log_prob=torch.empty(n, 1))


@dataclass
class _Buffers(CriticBuffers):
    """Every tensor one fused step writes, for one batch size: the critics' (CriticBuffers) and the actor's."""

    pi_pass: NetPass  # the actor at obs
    next_pass: NetPass  # the actor at next_obs
    samples: list[_Squashed]  # a~pi(.|s) (the actor's step), a'~pi(.|s') (the TD target)
    x_pi: torch.Tensor  # (B, obs + action): obs and the sampled action a~pi(.|s)
    pi_passes: list[NetPass]  # each critic at x_pi
    d_q_pi: torch.Tensor  # (B, 1) dLoss/dQ_i of the actor's loss where Q_i is the smaller: -1/B
    d_x_pi: list[torch.Tensor]  # each critic's dLoss/d(x_pi) at d_q_pi
    d_pi_out: torch.Tensor  # (B, 2 action) dLoss/d(the actor's outputs at obs)
    actor_grads: list[torch.Tensor]


class SAC(TwoThreadLearner):
    """The SAC learner: `update(batch)` runs one step of the entropy coefficient, the critics, the actor and
    (every target_update_interval steps) the target critics; see the module docstring."""

    def __init__(self, config: Any, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0,
                 precision: torch.dtype | None = None, fused: bool | None = None) -> None:
        """precision: the dtype of the wide GEMMs (torch.bfloat16), None for float32 throughout; the
        parameters, Adam's state and the losses stay float32 either way (common.cast_layers).
        fused: the fused CPU step; None takes it where it runs (a CPU learner, the native module built),
        False runs the torch ops."""
        self.config = config
        self.precision = precision
        self.device = torch.device(device)
        self.action_dim = action_dim
        torch.manual_seed(seed)
        self.actor = self.policy_network(obs_dim, action_dim, config).to(self.device)
        self.critic = TwinQ(obs_dim, action_dim, config.net_arch).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.target_entropy = (-float(action_dim) if config.target_entropy == "auto" else float(config.target_entropy))
        self.auto_entropy = config.ent_coef == "auto"
        start = config.ent_coef_init if self.auto_entropy else config.ent_coef
        self.log_ent_coef = torch.tensor([math.log(start)], device=self.device, requires_grad=self.auto_entropy)
        native = native_learner() if self.device.type == "cpu" and fused is not False else None
        if fused and native is None:
            raise BackendUnavailable("SAC's fused learner step needs a CPU learner and pearl_fpga._learner_native; "
                                     "rebuild the package (make native) or pass fused=False")
        lr = config.learning_rate
        self._adams: list[LeanAdam] = []  # the fused step's: actor, critics, then alpha with ent_coef auto
        if native is None:  # the torch ops: torch.optim.Adam, as SB3
            self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr)
            self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr)
            self.ent_coef_optimizer = torch.optim.Adam([self.log_ent_coef], lr=lr) if self.auto_entropy else None
        else:  # the same optimizers' state (the checkpoint format), stepped natively
            self._adams = [LeanAdam(self.actor.parameters(), lr), LeanAdam(self.critic.parameters(), lr)]
            self._adams += [LeanAdam([self.log_ent_coef], lr)] if self.auto_entropy else []
            self.actor_optimizer, self.critic_optimizer = self._adams[0].optimizer, self._adams[1].optimizer
            self.ent_coef_optimizer = self._adams[2].optimizer if self.auto_entropy else None
        self.noise = torch.Generator()  # on the CPU on every learn device (TD3's generator says why)
        self.noise.manual_seed(seed)
        self.gamma, self.tau = float(config.gamma), float(config.tau)
        self.updates = 0
        self._fused = None if native is None else _FusedStep(self, native)
        # the critics one per thread: the fused step's
        self._init_schedules(self._fused is not None, "only the native fused step has a part for a second thread, and this "
                             "learner runs the torch step")

    @classmethod
    def policy_network(cls, obs_dim: int, action_dim: int, config: Any) -> nn.Sequential:
        """obs -> net_arch -> (mu, log_sigma) per action component (raw outputs; the head squashes)."""
        return mlp(obs_dim, config.net_arch, 2 * action_dim)

    @classmethod
    def actor_head(cls, config: Any, action_dim: int) -> ActorHead:
        return SquashedGaussian(config, action_dim)

    @classmethod
    def callers(cls, config: Any) -> int:
        """2: the fused step's critics run one per thread, unless the schedule is serial."""
        return 1 if update_schedule(config) == "serial" else 2

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

    def _net(self, net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
        """`net` at x, its wide layers in the learner's precision (the module's own ops in float32)."""
        return forward(cast_layers(linear_layers(net), self.precision), x)

    def _q_values(self, twin: TwinQ, obs: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both critics of `twin` at (obs, action), in the learner's precision."""
        x = torch.cat([obs, action], dim=1)
        return self._net(twin.q1, x), self._net(twin.q2, x)

    def _action_log_prob(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparametrized squashed Gaussian sample of the policy and its log-probability (B, 1)."""
        out = self._net(self.actor, obs)
        eps = torch.randn((len(out), self.action_dim), generator=self.noise).to(self.device)
        action, log_prob, _, _ = squash(out, eps, self.action_dim)
        return action, log_prob

    def update(self, batch: Batch) -> UpdateResult:
        """One gradient step (see the module docstring); returns the critic loss (0-d tensor) and Q1's |TD
        error| per sample. Subnormals are flushed to zero during the step unless `config.flush_subnormals`
        is False."""
        with subnormals_flushed(self.config.flush_subnormals):
            result = self._fused.update(batch) if self._fused is not None else self._torch_update(batch)
        self.updates += 1
        return result

    def _polyak_due(self) -> bool:
        """Whether this step (counted from 1, as SB3) averages the target critics."""
        return (self.updates + 1) % self.config.target_update_interval == 0

    def _torch_update(self, batch: Batch) -> UpdateResult:
        actions_pi, log_prob = self._action_log_prob(batch.obs)
        ent_coef = self.log_ent_coef.detach().exp()
        if self.ent_coef_optimizer is not None:
            ent_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()
            self.ent_coef_optimizer.zero_grad()
            ent_loss.backward()
            self.ent_coef_optimizer.step()
        with torch.no_grad():
            next_actions, next_log_prob = self._action_log_prob(batch.next_obs)
            next_q = (torch.min(*self._q_values(self.critic_target, batch.next_obs, next_actions))
                      - ent_coef * next_log_prob)
            target = batch.reward + (1.0 - batch.done) * self.gamma * next_q
        q1, q2 = self._q_values(self.critic, batch.obs, batch.action)
        if batch.weights is None:
            critic_loss = 0.5 * (F.mse_loss(q1, target) + F.mse_loss(q2, target))
        else:
            critic_loss = 0.5 * (batch.weights * ((q1 - target).pow(2) + (q2 - target).pow(2))).mean()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        # the actor's gradient through the critics (their own gradients are dropped: only the actor steps)
        self.critic.requires_grad_(False)
        actor_loss = (ent_coef * log_prob - torch.min(*self._q_values(self.critic, batch.obs, actions_pi))).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()
        self.critic.requires_grad_(True)
        if self._polyak_due():
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
        for adam in self._adams:
            adam.reset_cache()  # the optimizers' state tensors were replaced
        if self._fused is not None:
            self._fused.stale = True  # the networks' low-precision copies
        self.noise.set_state(state["noise"])
        self.updates = int(state["updates"])


class _FusedStep(FusedCritics[_Buffers]):
    """SAC's fused CPU step on a learner's networks (see the module docstring), its parts one per critic
    on the learner's threads (`_on_grad_thread`)."""

    def __init__(self, learner: SAC, native: Any) -> None:
        critic, target = learner.critic, learner.critic_target
        critics = [linear_layers(critic.q1), linear_layers(critic.q2)]
        super().__init__(critics, [linear_layers(target.q1), linear_layers(target.q2)], learner._adams[1],
                         learner.action_dim, learner.gamma, learner.tau, native, learner.precision,
                         loss_scale=0.5)  # the critic loss is half the sum of the MSEs
        self.learner = learner
        self.actor = FusedNet(linear_layers(learner.actor), native, learner.precision)
        self.actor_adam, self.ent_adam = learner._adams[0], learner._adams[2] if learner.auto_entropy else None

    def new_buffers(self, n: int) -> _Buffers:
        action_dim = self.learner.action_dim
        return _Buffers(**self.critic_buffers(n), pi_pass=self.actor.new_pass(n), next_pass=self.actor.new_pass(n),
                        samples=[_Squashed.new(n, action_dim) for _ in range(2)],
                        x_pi=torch.empty(n, self.input_width), pi_passes=[c.new_pass(n) for c in self.critics],
                        d_q_pi=torch.full((n, 1), -1.0 / n),
                        d_x_pi=[torch.empty(n, self.input_width) for _ in self.critics],
                        d_pi_out=torch.empty(n, 2 * action_dim),
                        actor_grads=[torch.empty_like(p) for p in self.actor_adam.params])

    def nets(self) -> list[FusedNet]:
        return [self.actor, *super().nets()]

    def adams(self) -> list[LeanAdam]:
        return [*super().adams(), self.actor_adam]

    def update(self, batch: Batch) -> UpdateResult:
        learner = self.learner
        on_thread = learner._on_grad_thread
        buf = self.buffers(batch)
        self.begin_step()  # every network's low-precision copy is refreshed where this step changes its weights
        # the noise of both samples first, in the torch step's order (the same bits for a seed)
        next_sample = buf.samples[1]
        for drawn in buf.samples:
            torch.randn(drawn.eps.shape, generator=learner.noise, out=drawn.eps)
        ent_coef = float(learner.log_ent_coef.detach().exp())  # read before its own step, as SB3
        # the next action and the target critics' values there, beside the current action and the critics at
        # the batch's (obs, action), which need no TD target
        targets = on_thread(self._target_values, buf, batch)
        self._sample(buf, batch)
        prog = self.native.Program()
        prog.concat(buf.x.numpy(), batch.obs.numpy(), batch.action.numpy())
        self.critic_forward(buf, range(len(self.critics)), prog)
        prog.run()
        targets.result()
        self.td_target(buf, batch, ent_coef * next_sample.log_prob, inputs=False)
        average = learner._polyak_due()
        later_critic = on_thread(self._critic_step, buf, batch, 1, average)
        loss = self._critic_step(buf, batch, 0, average) + later_critic.result()
        self._actor_step(buf, batch, ent_coef)
        self.end_step()
        return UpdateResult(torch.tensor(loss, dtype=torch.float32), buf.abs_td.clone())

    def _target_values(self, buf: _Buffers, batch: Batch) -> None:
        """a'~pi(.|s') with log pi(a'|s') into buf.samples[1], buf.next_in = [next_obs, a'], and every target
        critic's value there: one program."""
        prog, drawn = self.native.Program(), buf.samples[1]
        self.actor.forward(batch.next_obs, buf.next_pass, prog)
        self._squash(prog, buf.next_pass, drawn)
        prog.concat(buf.next_in.numpy(), batch.next_obs.numpy(), drawn.action.numpy())
        self.target_values(buf, range(len(self.critics)), prog)
        prog.run()

    def _squash(self, prog: Any, p: NetPass, drawn: _Squashed) -> None:
        """The squashed Gaussian sample of the actor's outputs in pass p at drawn.eps, and its log-probability,
        into `drawn` (natively, squash() in float64 rounded once)."""
        prog.squash_sample(p.np_outs[-1], drawn.eps.numpy(), drawn.action.numpy(), drawn.std.numpy(),
                           drawn.log_prob.numpy())

    def _sample(self, buf: _Buffers, batch: Batch) -> None:
        """a~pi(.|s) into buf.samples[0] and buf.x_pi = [obs, a], and with ent_coef auto the entropy
        coefficient's step."""
        prog, sample = self.native.Program(), buf.samples[0]
        self.actor.forward(batch.obs, buf.pi_pass, prog)
        self._squash(prog, buf.pi_pass, sample)
        prog.concat(buf.x_pi.numpy(), batch.obs.numpy(), sample.action.numpy())
        prog.run()
        if self.ent_adam is not None:  # d/d log_alpha of -mean(log_alpha * (log pi + target entropy))
            grad = (sample.log_prob + self.learner.target_entropy).mean().neg_().reshape(1)
            self.ent_adam.native_step(self.native, [grad.numpy()], 0.0)

    def _critic_step(self, buf: _Buffers, batch: Batch, i: int, average: bool) -> float:
        """Critic i's loss gradient (its pass at buf.x made) and Adam step, then its input gradient at x_pi for
        the actor (the updated critic's, SB3's order): one program; then its target's Polyak average when due,
        and that target's low-precision copy. Returns its loss."""
        prog = self.native.Program()
        (loss,) = self.critic_grads(buf, batch, (i,), prog, forward=False)
        self.step_critics(buf, (i,), prog)  # and its low-precision copy of the updated weights
        self.input_grad(i, buf.x_pi, buf.pi_passes[i], buf.d_q_pi, buf.d_x_pi[i], prog)
        value = float(prog.run()[loss])
        if average:
            self.average_critics((i,))
        return value

    def _actor_step(self, buf: _Buffers, batch: Batch, ent_coef: float) -> None:
        """The actor's gradient of mean(alpha log pi(a|s) - min_i Q_i(s, a)) at step 1's sample (the gradient at
        its outputs natively, in the float32 ops of the torch step), and its Adam step: one program, its
        weight-gradient GEMM beside the rest in the concurrent schedule."""
        sample, (q1, q2) = buf.samples[0], (p.np_outs[-1] for p in buf.pi_passes)
        threads = self.learner._threads()
        prog = self.native.Program()
        prog.squash_backward(q1, q2, buf.d_x_pi[0].numpy(), buf.d_x_pi[1].numpy(), sample.action.numpy(),
                             sample.eps.numpy(), sample.std.numpy(), buf.pi_pass.np_outs[-1],
                             ent_coef / len(batch.reward), buf.d_pi_out.numpy())
        self.actor.backward(buf.d_pi_out, batch.obs, buf.pi_pass, buf.actor_grads, prog=prog, threads=threads)
        self.actor_adam.native_step(prog, [g.numpy() for g in buf.actor_grads], 0.0, threads=threads)
        self.actor.refresh(prog)
        prog.run(threads)
