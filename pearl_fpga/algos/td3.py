"""TD3: twin critics, delayed actor and target updates, target policy smoothing; DDPG is its special case.

Matches Stable-Baselines3's TD3 (whose DDPG is this class with one critic, policy delay 1 and no
smoothing, as `pearl_fpga.algos.ddpg.DDPG` is here). Per gradient step, counted from 1:

- the TD target takes the smallest of the target critics' values at the target actor's next action
  plus Gaussian noise (std `target_policy_noise`, clipped to +-`target_noise_clip`), the sum clipped
  to [-1, 1]; the noise comes from the learner's own seeded generator, saved in its state;
- every critic steps on the MSE to that target (the loss is the sum over critics; one Adam over all);
- on steps that are multiples of `policy_delay` only, the actor steps on -Q1(s, pi(s)) and both target
  networks are Polyak-averaged with `tau`.

One difference by default for DDPG (`concurrent_updates`): the actor's gradient uses the critic of the
step's start, as in OpenAI Baselines' DDPG, so both gradients can be computed at once. TD3's twin critics
can run on two threads (`split_critics`, on by default): the critic loss is a sum, so each critic's gradient
depends on its own loss alone, and the target critics' values and each critic's forward and backward
pass are computed one critic per thread, with the same bits as on one thread. Whether that second
thread runs is the step's schedule (`update_schedule`: "serial", "concurrent", or "auto", which the
runtime chooses by measurement while training, runtime/update_schedule.py): the same arithmetic and
the same bits either way, so a run may switch between them at any step. Actions live in
the actor's [-1, 1] scale; the runtime maps them to the environment's bounds. Leaner than SB3: the
actor step's backward pass skips the critic's weight gradients (only the input gradient is needed),
target updates use fused foreach ops, and the update runs without nn.Module calls or torch.optim's
Python wrapper (pearl_fpga.algos.common).

On a CPU with the native module built, the step runs fused (algos/fused_ac.py, FusedActorCriticStep.update:
the same order, the wide GEMMs torch's own, the thin layers, masks, loss gradient and Adam native, no autograd
graph; `fused=False` runs the torch ops above, which agree with it to float rounding), DDPG's concurrent
update included. In float32 with torch's MKL, TD3's step in SB3's order runs every wide GEMM as native tasks
instead (the twin critics' GEMMs of a layer at once, a lone network's in two halves of rows, on the native
pool's helper in the concurrent schedule, algos/fused.py native_gemms), so its second thread is a native one
that needs no GIL and no wake per hand-over.

Options (off by default): `precision=torch.bfloat16` (placement learn=cpu-bf16) runs the wide GEMMs in
bfloat16 on float32 master weights (common.cast_layers); `config.learner_compile` runs the whole step
as one torch.compile'd unit on one thread (common.CompiledStep, the torch path), the smoothing noise
drawn before it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.config import TrainConfig
from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.api import UpdateResult
from pearl_fpga.algos.common import (Batch, CompiledStep, LeanAdam, cast_layers, forward, linear_layers,
                                     load_named_state, mlp, named_state, subnormals_flushed)
from pearl_fpga.algos.fused import native_learner
from pearl_fpga.algos.fused_ac import FusedActorCriticStep
from pearl_fpga.algos.heads import ActorHead, GaussianNoise
from pearl_fpga.algos.step_threads import TwoThreadLearner, update_schedule
from pearl_fpga.errors import BackendUnavailable

_PARTS = ("actor", "critic", "actor_target", "critic_target", "actor_optimizer", "critic_optimizer")
"""The networks and optimizers a checkpoint holds, by attribute name (besides the extra critics)."""


class TD3(TwoThreadLearner):
    """The TD3 learner: `update(batch)` runs one step of the critics and, every `policy_delay` steps, one of
    the actor and the target updates."""

    discrete = False
    n_critics = 2

    def __init__(self, config: TrainConfig, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0,
                 precision: torch.dtype | None = None, fused: bool | None = None) -> None:
        """precision: the dtype of the wide GEMMs (torch.bfloat16), None for float32 throughout; the
        parameters, Adam's state and the losses stay float32 either way (common.cast_layers).
        fused: the fused CPU step (algos/fused_ac.py); None takes it where it runs (a CPU learner, the
        native module built, no `learner_compile`), False runs the torch ops."""
        self.config = config
        self.precision = precision
        self.device = torch.device(device)
        self.policy_delay, self.target_noise, self.noise_clip = self._delay_and_smoothing(config)
        torch.manual_seed(seed)
        self.actor = mlp(obs_dim, config.net_arch, action_dim, tanh_head=True).to(self.device)
        self.critics = [mlp(obs_dim + action_dim, config.net_arch, 1).to(self.device) for _ in range(self.n_critics)]
        self.critic = self.critics[0]  # Q1: the one the actor follows
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_targets = [copy.deepcopy(c).requires_grad_(False) for c in self.critics]
        self.critic_target = self.critic_targets[0]
        self.actor_adam = LeanAdam(self.actor.parameters(), lr=config.learning_rate)
        # one optimizer over every critic, as SB3 (Adam is per parameter: the same as one each)
        self.critic_adam = LeanAdam([p for c in self.critics for p in c.parameters()], lr=config.learning_rate)
        self.actor_optimizer = self.actor_adam.optimizer
        self.critic_optimizer = self.critic_adam.optimizer
        self._targets = list(self.actor_target.parameters()) + [p for c in self.critic_targets for p in c.parameters()]
        self._online = self.actor_adam.params + self.critic_adam.params
        self._actor, self._actor_target = linear_layers(self.actor), linear_layers(self.actor_target)
        self._critics = [linear_layers(c) for c in self.critics]
        self._critic_targets = [linear_layers(c) for c in self.critic_targets]
        self._critic = self._critics[0]
        # smoothing noise from a generator of its own: seeded, saved with the learner, and not shared
        # with whatever else draws from torch's global one. A CPU generator on every learn device: the
        # same stream on a GPU, and a checkpoint's generator state loads on either
        self._noise = torch.Generator()
        self._noise.manual_seed(seed)
        self.gamma = float(config.gamma)
        self.updates = 0
        compiled = bool(getattr(config, "learner_compile", False))
        self.split_critics = self.n_critics > 1 and not compiled
        """Each critic's target value, forward and backward pass on a thread of its own (same bits as one
        thread); False runs them all on the calling thread (a flop counter sees the calling thread only)."""
        # one persistent thread for the actor's half of a concurrent update and for the critics after Q1
        # (torch's intra-op threads stay as configured; this is a second caller, not a bigger pool)
        self._init_schedules((bool(config.concurrent_updates) or self.split_critics) and not compiled,
                             "learner_compile compiles the step into one graph" if compiled
                             else "one critic and concurrent_updates off leave no part for a second thread")
        self._compiled = None
        if compiled:  # one graph on one thread; concurrent_updates keeps its arithmetic (_update)
            for adam in (self.actor_adam, self.critic_adam):
                adam.traceable = True
                adam.init_state()
            self._compiled = CompiledStep(self._update, f"{type(self).__name__} learner step")
        if fused and compiled:
            raise ValueError(f"{type(self).__name__}: fused=True and config.learner_compile are exclusive: the compiled "
                             "step is the torch one")
        # auto (None): fused wherever it runs; either arithmetic is the same in both schedules, so the
        # schedule may change
        wanted = fused is not False
        native = native_learner() if self.device.type == "cpu" and wanted and not compiled else None
        if fused and native is None:
            raise BackendUnavailable("the fused learner step needs a CPU learner and pearl_fpga._learner_native; "
                                     "rebuild the package (make native) or pass fused=False")
        self._fused = (FusedActorCriticStep(self._actor, self._actor_target, self._critics, self._critic_targets,
                                            self.actor_adam, self.critic_adam, self.gamma, float(config.tau),
                                            self.noise_clip, native, precision) if native is not None else None)

    @staticmethod
    def _delay_and_smoothing(config: TrainConfig) -> tuple[int, float, float]:
        """(policy_delay, target policy noise std, noise clip) of this algorithm."""
        return int(config.policy_delay), float(config.target_policy_noise), float(config.target_noise_clip)

    @classmethod
    def policy_network(cls, obs_dim: int, action_dim: int, config: TrainConfig) -> nn.Sequential:
        """The deterministic actor: obs -> tanh action in [-1, 1]."""
        return mlp(obs_dim, config.net_arch, action_dim, tanh_head=True)

    @classmethod
    def actor_head(cls, config: TrainConfig, action_dim: int) -> ActorHead:
        """The actor's output, plus Gaussian noise while exploring."""
        return GaussianNoise(config, action_dim)

    @classmethod
    def callers(cls, config: TrainConfig) -> int:
        """2 for the concurrent actor and critic gradients and for twin critics, one per thread, unless the
        schedule is serial (a compiled step runs them in one graph, on one caller). Under `update_schedule`
        auto the step may run on two threads at any time, so it counts as two."""
        if config.learner_compile or update_schedule(config) == "serial":
            return 1
        return 2 if cls.n_critics > 1 or config.concurrent_updates else 1

    @classmethod
    def baseline_kwargs(cls, config: TrainConfig, action_space: Any, jax: bool) -> dict[str, Any]:
        from stable_baselines3.common.noise import NormalActionNoise

        dim = action_space.shape[0]
        noise = NormalActionNoise(np.zeros(dim), config.action_noise_std * np.ones(dim))
        smoothing = cls._delay_and_smoothing(config)
        extra = (dict(policy_delay=smoothing[0], target_policy_noise=smoothing[1], target_noise_clip=smoothing[2])
                 if cls.n_critics > 1 else {})
        return dict(action_noise=noise, tau=config.tau, **extra)

    @property
    def policy_module(self) -> nn.Sequential:
        """The network the actors run (tanh output in [-1, 1])."""
        return self.actor

    def update(self, batch: Batch) -> UpdateResult:
        """One gradient step; returns the critic loss (0-d tensor) and Q1's |TD error| per sample.

        With `config.concurrent_updates` the actor's gradient is taken on the critic as it was at the
        start of the step, on a second thread while this one computes the critics' (as OpenAI
        Baselines' DDPG does): the two halves are about equal GEMM work and torch releases the GIL in
        them. Otherwise the actor's gradient follows the critics' update (SB3's order). With
        `split_critics` (TD3) the critics after Q1 take their target values and gradients on the second
        thread. Subnormals are flushed to zero on both threads during the step unless
        `config.flush_subnormals` is False."""
        with subnormals_flushed(self.config.flush_subnormals):
            return UpdateResult(*self._gradient_step(batch))

    def _gradient_step(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        update_actor = (self.updates + 1) % self.policy_delay == 0  # SB3 counts its updates from 1
        noise = self._smoothing_noise(batch)  # drawn outside the compiled unit (it cannot trace a generator)
        if self._compiled is not None:
            result = self._compiled(batch, update_actor, noise)
        elif self._fused is not None:
            result = self._fused.update(batch, update_actor, noise, on_thread=self._on_grad_thread,
                                        concurrent=update_actor and bool(self.config.concurrent_updates),
                                        split=self.split_critics, threads=self._threads())
        elif update_actor and self.config.concurrent_updates:
            actor_future = self._on_grad_thread(self._actor_grads, batch)
            critic_loss, td, critic_grads = self._critic_grads(batch, noise)
            actor_grads = actor_future.result()  # re-raises an error of the actor's half
            self.critic_adam.step(critic_grads)
            self.actor_adam.step(actor_grads)
            self._update_targets()
            result = critic_loss, td
        else:
            result = self._update(batch, update_actor, noise)
        self.updates += 1
        return result

    def _smoothing_noise(self, batch: Batch) -> torch.Tensor | None:
        """The target policy smoothing noise of one step (None without smoothing), from the learner's generator."""
        if self.target_noise <= 0:
            return None
        out_features = int(self.actor_target[-2].out_features)  # type: ignore[arg-type]  # a Linear
        shape = (len(batch.reward), out_features)  # (B, action_dim): before the Tanh
        return torch.empty(shape).normal_(0.0, self.target_noise, generator=self._noise).to(self.device)

    def _update(self, batch: Batch, update_actor: bool,
                noise: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The step on one thread: with `concurrent_updates` the actor's gradient is taken first, on
        the critic of the step's start (the concurrent update's arithmetic), else after the critics'."""
        actor_grads = self._actor_grads(batch) if update_actor and self.config.concurrent_updates else None
        critic_loss, td, critic_grads = self._critic_grads(batch, noise)
        self.critic_adam.step(critic_grads)
        if update_actor:
            self.actor_adam.step(actor_grads if actor_grads is not None else self._actor_grads(batch))
            self._update_targets()
        return critic_loss, td

    def _update_targets(self) -> None:
        """Polyak-average the targets toward the online networks."""
        with torch.no_grad():
            torch_ops.foreach_lerp_(self._targets, self._online, self.config.tau)

    def _critic_grads(self, batch: Batch,
                      noise: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
        """Critic loss (sum over critics of the MSE to the TD target), Q1's |TD error| and the gradients.

        The critics after Q1 run on the second thread when `split_critics` is set: autograd's gradient of
        a sum is the gradient of each term, so the bits are those of one graph over all critics."""
        low = self.precision
        split = self.split_critics
        with torch.no_grad():
            next_action = forward(cast_layers(self._actor_target, low), batch.next_obs, tanh_head=True)
            if noise is not None:
                next_action = (next_action + noise.clamp_(-self.noise_clip, self.noise_clip)).clamp_(-1.0, 1.0)
            next_in = torch.cat([batch.next_obs, next_action], dim=1)
            later = self._critic_targets[1:]
            pending = self._on_grad_thread(self._target_values, later, next_in) if split and later else None
            next_q = forward(cast_layers(self._critic_targets[0], low), next_in)
            for value in (pending.result() if pending is not None else self._target_values(later, next_in)):
                next_q = torch.minimum(next_q, value)
            target = batch.reward + (1.0 - batch.done) * self.gamma * next_q
        x = torch.cat([batch.obs, batch.action], dim=1)
        later_critics = range(1, self.n_critics)
        pending_grads = self._on_grad_thread(self._critics_loss_grads, later_critics, x, target, batch.weights) \
            if split and self.n_critics > 1 else None
        (critic_loss, current, grads), = self._critics_loss_grads(range(1), x, target, batch.weights)
        for loss, _, more in (pending_grads.result() if pending_grads is not None
                              else self._critics_loss_grads(later_critics, x, target, batch.weights)):
            critic_loss, grads = critic_loss + loss, grads + more
        return critic_loss, (current - target).abs().squeeze(1), grads

    def _target_values(self, targets: Sequence[Sequence[tuple[torch.Tensor, torch.Tensor]]],
                       next_in: torch.Tensor) -> list[torch.Tensor]:
        """Each target critic's value of (next_obs, next_action), no gradient."""
        with torch.no_grad():
            return [forward(cast_layers(layers, self.precision), next_in) for layers in targets]

    def _critics_loss_grads(self, indices: Iterable[int], x: torch.Tensor, target: torch.Tensor,
                            weights: torch.Tensor | None
                            ) -> list[tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]]:
        """(MSE loss to the target, Q value, the critic's gradients) of each critic in `indices`."""
        out = []
        for i in indices:
            current = forward(cast_layers(self._critics[i], self.precision), x)
            if weights is None:
                loss = F.mse_loss(current, target)
            else:
                loss = (weights * (current - target).pow(2)).mean()
            params = [t for layer in self._critics[i] for t in layer]
            out.append((loss.detach(), current.detach(), torch.autograd.grad(loss, params)))
        return out

    def _actor_grads(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """The actor's gradients of -Q1(s, pi(s)). Asking autograd for the actor's gradients only, the
        backward pass through the critic computes input gradients and skips the critic's weight gradients."""
        actor_action = forward(cast_layers(self._actor, self.precision), batch.obs, tanh_head=True)
        critic = cast_layers(self._critic, self.precision)
        actor_loss = -forward(critic, torch.cat([batch.obs, actor_action], dim=1)).mean()
        return torch.autograd.grad(actor_loss, self.actor_adam.params)

    def update_target(self) -> None:
        """No-op: the targets are averaged inside update()."""

    def _extra_critics(self) -> Sequence[tuple[str, nn.Module, nn.Module]]:
        """(state key, critic, its target) of the critics after Q1: "critic2", ..."""
        return [(f"critic{i + 1}", c, t) for i, (c, t) in enumerate(zip(self.critics, self.critic_targets))][1:]

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizers, update counter (the phase of the policy delay) and the smoothing noise's generator."""
        state = {**named_state(self, _PARTS), "updates": self.updates}
        for key, critic, target in self._extra_critics():
            state[key], state[f"{key}_target"] = critic.state_dict(), target.state_dict()
        if self.target_noise > 0:
            state["noise_generator"] = self._noise.get_state()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() returned (strict: shapes and the number of critics must match)."""
        load_named_state(self, state, _PARTS, self.device)
        for key, critic, target in self._extra_critics():
            critic.load_state_dict(state[key])
            target.load_state_dict(state[f"{key}_target"])
        self.actor_adam.reset_cache()
        self.critic_adam.reset_cache()
        if self._fused is not None:
            self._fused.stale = True  # the fused step's low-precision weight copies
        if "noise_generator" in state:
            self._noise.set_state(state["noise_generator"])
        self.updates = int(state["updates"])

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        """Actor outputs in [-1, 1] of the float network."""
        with torch.no_grad():
            a = self.actor(torch.as_tensor(obs, dtype=torch.float32, device=self.device).reshape(len(obs), -1))
        return a.cpu().numpy()
