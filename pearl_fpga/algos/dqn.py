"""Double DQN: online and target Q-networks, Huber loss, gradient-norm clip, optional PER weights.

Matches Stable-Baselines3's DQN update (Adam, smooth L1 loss, clip_grad_norm_ at max_grad_norm,
hard target copy every `target_update_interval` env steps, driven by the runtime) except for the
double-DQN target (`config.double_q`, on by default): the online network chooses the next action,
the target network values it.

Lean update, same arithmetic as the plain nn.Module + torch.optim code: module-free forward passes,
the MLP's backward pass written out (no autograd graph), a foreach norm for the clip, and the fused
Adam kernel without torch.optim's Python wrapper (algos/common.py; LeanAdam is tested bit-exact
against torch.optim.Adam(fused=True), the whole step within 1e-5 of a written-out reference).

Options (off by default): `precision=torch.bfloat16` (placement learn=cpu-bf16) runs the wide GEMMs in
bfloat16 on float32 master weights (common.cast_layers); `config.learner_compile` runs the torch step
as one torch.compile'd unit (common.CompiledStep) instead of the fused one.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from pearl_fpga.config import TrainConfig
from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.api import UpdateResult
from pearl_fpga.algos.common import (Batch, CompiledStep, LeanAdam, cast_layers, clip_grad_norm, forward,
                                     linear_layers, load_named_state, mlp, named_state, subnormals_flushed)
from pearl_fpga.algos.fused import DQNStepSettings, FusedDQNStep, native_learner
from pearl_fpga.algos.heads import ActorHead, EpsilonGreedy
from pearl_fpga.algos.step_threads import TwoThreadLearner, update_schedule
from pearl_fpga.errors import BackendUnavailable


def target_copy_due(config: TrainConfig, needed: int, checked: int) -> bool:
    """Copy the target before a gradient step needing `needed` env steps when a multiple of
    target_update_interval lies in (checked, needed]: SB3 copies every target_update_interval env steps
    during collection, while the online net is frozen, so one copy before the round's first step is the
    same."""
    return needed // config.target_update_interval > checked // config.target_update_interval


class DQN(TwoThreadLearner):
    """The DQN learner: `update(batch)` runs one gradient step and returns (loss, |TD errors|)."""

    discrete = True

    @classmethod
    def policy_network(cls, obs_dim: int, action_dim: int, config: TrainConfig) -> nn.Sequential:
        """The Q-network: obs -> one value per action."""
        return mlp(obs_dim, config.net_arch, action_dim)

    @classmethod
    def actor_head(cls, config: TrainConfig, action_dim: int) -> ActorHead:
        """Greedy on the Q-values, epsilon-greedy while exploring."""
        return EpsilonGreedy(config, action_dim)

    def __init__(self, config: TrainConfig, obs_dim: int, n_actions: int, device: str = "cpu", seed: int = 0,
                 fused: bool | None = None, precision: torch.dtype | None = None) -> None:
        """precision: the dtype of the wide GEMMs (torch.bfloat16), None for float32 throughout; the
        parameters, Adam's state, the loss and the gradients' clip stay float32 either way."""
        self.config = config
        self.precision = precision
        self.device = torch.device(device)
        torch.manual_seed(seed)
        self.q = mlp(obs_dim, config.net_arch, n_actions).to(self.device)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.adam = LeanAdam(self.q.parameters(), lr=config.learning_rate)
        self.optimizer = self.adam.optimizer
        self._layers = linear_layers(self.q)
        self._target_layers = linear_layers(self.q_target)
        self.gamma = float(config.gamma)
        self.updates = 0
        self.target_checked = 0  # env step up to which target copies have been applied
        # The fused CPU step (algos/fused.py) unless asked for the torch ops, a compiled step or running on a GPU.
        compiled = bool(getattr(config, "learner_compile", False))
        if fused and compiled:
            raise ValueError("DQN: fused=True and config.learner_compile are exclusive: the compiled step is the torch one")
        native = (native_learner() if self.device.type == "cpu" and fused is not False and not compiled
                  else None)
        if fused and native is None:
            raise BackendUnavailable("the fused learner step needs a CPU learner and pearl_fpga._learner_native; "
                                     "rebuild the package (make native) or pass fused=False")
        self._compiled = None
        if compiled:
            self.adam.traceable = True
            self.adam.init_state()
            self._compiled = CompiledStep(self._torch_step, "DQN learner step")
        settings = DQNStepSettings(gamma=self.gamma, double_q=bool(config.double_q),
                                   max_grad_norm=float(config.max_grad_norm))
        # the fused step's target forward pass and wide weight gradients may run on a second thread
        # (update_schedule; algos/step_threads.py): the same code on the same data, the same bits
        self._init_schedules(native is not None, "the torch step (no native fused step: fused=False, learner_compile, "
                             "a GPU or an unbuilt extension) runs on one thread")
        self._fused = (FusedDQNStep(self._layers, self._target_layers, self.adam, settings, native, precision,
                                    pair_threads=self._threads)
                       if native is not None else None)

    @property
    def policy_module(self) -> nn.Sequential:
        """The network the actors run (argmax of its outputs is the greedy action)."""
        return self.q

    @classmethod
    def callers(cls, config: TrainConfig) -> int:
        """2 where the fused step may run its target pass and weight gradients on a second thread (the
        schedule not fixed to serial, no compiled step), else 1."""
        return 1 if config.learner_compile or update_schedule(config) == "serial" else 2

    @classmethod
    def baseline_kwargs(cls, config: TrainConfig, action_space: Any, jax: bool) -> dict[str, Any]:
        clip = {} if jax else {"max_grad_norm": config.max_grad_norm}  # SBX's DQN does not clip gradients
        return dict(target_update_interval=config.target_update_interval, exploration_fraction=config.exploration_fraction,
                    exploration_initial_eps=config.exploration_initial_eps,
                    exploration_final_eps=config.exploration_final_eps, tau=config.tau, **clip)

    def before_update(self, env_steps: int) -> None:
        """SB3 copies the target every target_update_interval env steps during collection, while the online
        net is frozen: one copy before the first gradient step of such a round."""
        if target_copy_due(self.config, env_steps, self.target_checked):
            self.update_target()
        self.target_checked = max(self.target_checked, env_steps)

    def progress_state(self) -> dict[str, int]:
        return {"target_checked": self.target_checked}

    def load_progress_state(self, counters: dict[str, Any]) -> None:
        self.target_checked = int(counters["target_checked"])

    def update(self, batch: Batch) -> UpdateResult:
        """One gradient step; returns the loss (a float on the fused CPU path, else a 0-d tensor, not
        synced) and |TD error| per sample.

        The backward pass is written out for the MLP (the same GEMMs autograd would run, without its
        graph: about 1.25x faster per step here): dL/dq is the Huber derivative clamp(q - y, -1, 1)
        times the importance weight over B at the taken action, then per layer dW = d^T a_in,
        db = sum(d), d <- (d W) * (a_in > 0). tests/test_algos.py checks it against autograd. On a
        CPU the same step runs fused (algos/fused.py, same arithmetic to float rounding). Subnormals
        are flushed to zero during the step unless `config.flush_subnormals` is False.
        """
        with subnormals_flushed(self.config.flush_subnormals):
            return self._update(batch)

    def _update(self, batch: Batch) -> UpdateResult:
        result: tuple[float | torch.Tensor, torch.Tensor]
        if self._fused is not None:
            result = self._fused(batch)
        elif self._compiled is not None:
            result = self._compiled(batch)
        else:
            result = self._torch_step(batch)
        self.updates += 1
        return UpdateResult(*result)

    def _torch_step(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The step in torch ops (the written-out backward of learn()'s docstring)."""
        # cast_layers and the .to()/.float() below are no-ops for a float32 learner (the same tensors)
        layers = cast_layers(self._layers, self.precision)
        with torch.no_grad():
            next_q_target = forward(cast_layers(self._target_layers, self.precision), batch.next_obs)
            if self.config.double_q:
                next_action = forward(layers, batch.next_obs).argmax(dim=1, keepdim=True)
                next_q = next_q_target.gather(1, next_action)
            else:
                next_q = next_q_target.max(dim=1, keepdim=True).values
            target = batch.reward + (1.0 - batch.done) * self.gamma * next_q
            inputs = []  # the input of each layer, kept for the backward pass
            x = batch.obs
            for i, (weight, bias) in enumerate(layers):
                x = x.to(weight.dtype)
                inputs.append(x)
                x = torch.addmm(bias, x, weight.t())
                if i < len(layers) - 1:
                    x.clamp_min_(0.0)
            x = x.float()
            current = x.gather(1, batch.action)
            td = current - target
            abs_td = td.abs()
            huber = torch.where(abs_td < 1.0, 0.5 * td * td, abs_td - 0.5)  # smooth L1, beta = 1
            d_current = td.clamp(-1.0, 1.0)
            if batch.weights is not None:
                huber = huber * batch.weights
                d_current = d_current * batch.weights
            loss = huber.mean()
            d = torch.zeros_like(x).scatter_(1, batch.action, d_current.div_(len(td)))
            grads: list[torch.Tensor] = [torch.empty(0)] * (2 * len(layers))
            for i in range(len(layers) - 1, -1, -1):
                a_in, weight = inputs[i], layers[i][0]
                grads[2 * i] = d.t().to(weight.dtype).mm(a_in).float()
                grads[2 * i + 1] = d.sum(0)
                if i > 0:
                    d = d.to(weight.dtype).mm(weight).float().mul_(a_in > 0)
            if self.config.max_grad_norm > 0:
                clip_grad_norm(grads, self.config.max_grad_norm)
            self.adam.step(grads)
        return loss, abs_td.squeeze(1)

    def update_target(self) -> None:
        """Copy (tau = 1) or Polyak-average the online network into the target network."""
        tau = self.config.tau
        with torch.no_grad():
            target = list(self.q_target.parameters())
            online = list(self.q.parameters())
            if tau >= 1.0:
                torch_ops.foreach_copy_(target, online)
            else:
                torch_ops.foreach_lerp_(target, online, tau)

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizer and update counter."""
        return {**named_state(self, ("q", "q_target", "optimizer")), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() returned (strict: shapes must match)."""
        load_named_state(self, state, ("q", "q_target", "optimizer"), self.device)
        self.adam.reset_cache()
        self.updates = int(state["updates"])
