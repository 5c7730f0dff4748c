"""The critics' part of an actor-critic learner's fused CPU step.

`FusedCritics` holds the twin critics as `FusedNet`s (algos/fused_net.py: the wide layers as torch GEMMs, the thin
layers, bias, ReLU and their gradients as native calls) and their pieces of a step: target values, the TD target,
each critic's MSE gradient (IS weights included) and Adam step, a critic's input gradient (an actor's step), the
per-batch-size buffers, and the bookkeeping of the low-precision weight copies (begin_step / end_step). Nothing
builds an autograd graph. algos/fused_ac.py extends it with DDPG's and TD3's deterministic actor and their step;
a learner with a stochastic actor extends it with its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.common import Batch, LeanAdam
from pearl_fpga.algos.fused import native_gemms
from pearl_fpga.algos.fused_net import FusedNet, Layers, NetPass, recording, backward_together, forward_together


@dataclass
class CriticBuffers:
    """Every tensor the critics' part of one actor-critic step writes, for one batch size."""

    next_in: torch.Tensor  # (B, obs + action): next_obs and the next action
    x: torch.Tensor  # (B, obs + action): obs and the batch's action
    target_passes: list[NetPass]  # each critic target's
    critic_passes: list[NetPass]
    target: torch.Tensor  # (B, 1) TD target
    d_q: list[torch.Tensor]  # (B, 1) dLoss/dQ of each critic
    abs_td: torch.Tensor  # (B,) Q1's |TD error|
    critic_grads: list[torch.Tensor]  # every critic's W0, b0, W1, ..., in the critic Adam's order


BufT = TypeVar("BufT", bound=CriticBuffers)


def parameters(nets: Iterable[Layers]) -> list[torch.Tensor]:
    """The weights and biases of the networks, layer by layer."""
    return [t for layers in nets for layer in layers for t in layer]


def polyak_average(pairs: Iterable[tuple[list[torch.Tensor], list[torch.Tensor]]], tau: float) -> None:
    """target <- (1 - tau) target + tau online over every (targets, online) pair of parameter lists, in one call."""
    targets, online = [], []
    for t, o in pairs:
        targets += t
        online += o
    with torch.no_grad():
        torch_ops.foreach_lerp_(targets, online, tau)


class FusedCritics(Generic[BufT]):
    """The critics' pieces of one actor-critic step on the given networks ((weight, bias) layers of `mlp()`
    critics on (obs, action), their targets, and the LeanAdam over all critics' parameters in layer order):
    target values, the TD target, each critic's loss gradient and Adam step, and a critic's gradient with
    respect to its input (the actor's step). Each critic's loss is `loss_scale` times its (importance-
    weighted) MSE to the TD target; the pieces take the critics by index, so that a caller can run each
    critic on a thread of its own. A step's buffers (`buffers`) are the subclass's `new_buffers`, which adds its
    own to `critic_buffers`."""

    def __init__(self, critics: Sequence[Layers], critic_targets: Sequence[Layers], critic_adam: LeanAdam,
                 action_dim: int, gamma: float, tau: float, native: Any, precision: torch.dtype | None = None,
                 loss_scale: float = 1.0, together: bool = False) -> None:
        """tau: the target critics' Polyak coefficient. together: the *_together pieces may run (float32 twin
        critics; their native GEMM tasks are then set up, `gemms`, where torch's BLAS allows: algos/fused.py
        native_gemms)."""
        self.native = native
        self.gamma, self.tau, self.loss_scale = gamma, tau, loss_scale
        self.critic_adam = critic_adam
        self.critics = [FusedNet(c, native, precision) for c in critics]
        self.critic_targets = [FusedNet(c, native, precision) for c in critic_targets]
        sizes = [2 * len(c) for c in critics]  # each critic's slice of the critic Adam's parameters
        self._critic_parts = [slice(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(len(sizes))]
        # each critic's (target, online) parameters: its Polyak average's (average_critics)
        self._critic_pairs = [(parameters([t]), parameters([c])) for t, c in zip(critic_targets, critics)]
        self.input_width = int(critics[0][0][0].shape[1])
        self.obs_dim = self.input_width - action_dim
        self._buffers: dict[int, BufT] = {}
        # float32 twin critics: each wide layer's GEMMs of every critic as one call of native tasks (the
        # *_together pieces), on the native pool's helper beside the caller in a concurrent schedule
        self.gemms = native_gemms() if together and precision is None and len(critics) > 1 else None
        self.stale = True
        """The low-precision weight copies may differ from their masters (begin_step); a learner that loads a
        state sets it."""

    def new_buffers(self, n: int) -> BufT:
        """Every tensor one step writes, for batch size n."""
        raise NotImplementedError

    def buffers(self, batch: Batch) -> BufT:
        """The step's buffers for this batch size (made at the first batch of that size)."""
        n = len(batch.reward)
        buf = self._buffers.get(n)
        if buf is None:
            if batch.obs.shape[1] != self.obs_dim:
                raise ValueError(f"batch obs has {batch.obs.shape[1]} features, the networks take {self.obs_dim}")
            buf = self._buffers[n] = self.new_buffers(n)
        return buf

    def critic_buffers(self, n: int) -> dict[str, Any]:
        """The CriticBuffers fields for batch size n (a subclass's buffers add their own)."""
        width = self.input_width
        return dict(next_in=torch.empty(n, width), x=torch.empty(n, width),
                    target_passes=[net.new_pass(n) for net in self.critic_targets],
                    critic_passes=[c.new_pass(n) for c in self.critics], target=torch.empty(n, 1),
                    d_q=[torch.empty(n, 1) for _ in self.critics], abs_td=torch.empty(n),
                    critic_grads=[torch.empty_like(p) for p in self.critic_adam.params])

    def nets(self) -> list[FusedNet]:
        """Every network of the step (a subclass adds its own): begin_step refreshes their low-precision copies."""
        return [*self.critics, *self.critic_targets]

    def adams(self) -> list[LeanAdam]:
        """Every LeanAdam whose native step the step takes (a subclass adds its own)."""
        return [self.critic_adam]

    def begin_step(self) -> None:
        """At the start of a step, on the calling thread: the low-precision weight copies from their masters where
        they may be stale (no-op in float32), and the Adams' native views (their state made if new). A step
        refreshes each copy where its weights change (after an Adam step or a Polyak average) and calls end_step
        when it ends; so all are refreshed here only at the first step, after a step that did not end, or after
        the learner loaded a state (which sets `stale`)."""
        if self.stale:
            for net in self.nets():
                net.refresh()
        self.stale = True  # until end_step
        for adam in self.adams():
            adam.native_views()

    def end_step(self) -> None:
        """The step ended: every low-precision copy was refreshed where the step changed its weights."""
        self.stale = False

    def average_critics(self, indices: Iterable[int] | None = None) -> None:
        """Polyak-average the target critics `indices` (default: all) toward their online critics with tau (element-
        wise: any grouping gives the same bits), then refresh those targets' low-precision copies."""
        chosen = range(len(self.critics)) if indices is None else tuple(indices)
        polyak_average([self._critic_pairs[i] for i in chosen], self.tau)
        for i in chosen:
            self.critic_targets[i].refresh()

    def target_values(self, buf: CriticBuffers, indices: Iterable[int], prog: Any = None) -> None:
        """The target critics `indices` at buf.next_in (into their passes' outputs). prog: as FusedNet's."""
        for i in indices:
            self.critic_targets[i].forward(buf.next_in, buf.target_passes[i], prog)

    def td_target(self, buf: CriticBuffers, batch: Batch, next_penalty: torch.Tensor | None = None,
                  inputs: bool = True) -> None:
        """buf.target = reward + (1 - done) gamma (min_i Q'_i - next_penalty), and buf.x = [obs, action] unless
        `inputs` is False (made already) (next_penalty: an entropy term per sample, (B, 1), or None)."""
        values = [p.outs[-1] for p in buf.target_passes]
        next_q = values[0]
        for value in values[1:]:
            next_q = torch.minimum(next_q, value)
        if next_penalty is not None:
            next_q = next_q - next_penalty
        torch.add(batch.reward, (1.0 - batch.done) * self.gamma * next_q, out=buf.target)
        if inputs:
            torch.cat([batch.obs, batch.action], dim=1, out=buf.x)

    def critic_grads(self, buf: CriticBuffers, batch: Batch, indices: Iterable[int], prog: Any = None,
                     forward: bool = True) -> list[Any]:
        """Each critic's loss to buf.target (returned; recorded into `prog`: the indices of the losses among the
        values its run() returns) and its gradients into buf.critic_grads. forward False: the critics' passes
        at buf.x were run already (critic_forward)."""
        weights = None if batch.weights is None else batch.weights.numpy()
        losses = []
        for i in indices:
            net, p = self.critics[i], buf.critic_passes[i]
            if forward:
                net.forward(buf.x, p, prog)
            losses.append((prog if prog is not None else self.native).mse_loss_grad(
                p.np_outs[-1], buf.target.numpy(), weights, buf.d_q[i].numpy(), buf.abs_td.numpy() if i == 0 else None,
                self.loss_scale))
            net.backward(buf.d_q[i], buf.x, p, buf.critic_grads[self._critic_parts[i]], prog=prog)
        return losses

    def critic_forward(self, buf: CriticBuffers, indices: Iterable[int], prog: Any = None) -> None:
        """The critics `indices` at buf.x (critic_grads' first part, which needs no TD target)."""
        for i in indices:
            self.critics[i].forward(buf.x, buf.critic_passes[i], prog)

    def input_grad(self, i: int, x: torch.Tensor, p: NetPass, d_q: torch.Tensor, d_x: torch.Tensor,
                   prog: Any = None) -> None:
        """Critic i's value at x (into the pass p) and, from dLoss/dQ d_q, dLoss/dx into d_x (the critic's own
        weight gradients are not computed: only the actor steps on this loss). prog: as FusedNet's."""
        self.critics[i].forward(x, p, prog)
        self.critics[i].backward(d_q, x, p, None, d_x, prog=prog)

    def step_critics(self, buf: CriticBuffers, indices: Iterable[int], prog: Any = None) -> None:
        """One Adam step of the critics `indices` (no clipping: the actor-critic learners do not clip), each
        critic's low-precision copy refreshed after it; recorded into `prog` when given."""
        with recording(self.native, prog) as rec:
            for i in indices:
                part = self._critic_parts[i]
                self.critic_adam.native_step(rec, [g.numpy() for g in buf.critic_grads[part]], 0.0, part)
                self.critics[i].refresh(rec)

    def target_values_together(self, buf: CriticBuffers, threads: int) -> None:
        """target_values of every critic, their wide GEMMs as native tasks at once (needs self.gemms)."""
        forward_together(self.critic_targets, [buf.next_in] * len(self.critics), buf.target_passes, self.gemms, threads)

    def critic_grads_together(self, buf: CriticBuffers, batch: Batch, threads: int) -> list[float]:
        """critic_grads of every critic, their wide GEMMs as native tasks at once (needs self.gemms)."""
        n = len(self.critics)
        forward_together(self.critics, [buf.x] * n, buf.critic_passes, self.gemms, threads)
        weights = None if batch.weights is None else batch.weights.numpy()
        losses = [self.native.mse_loss_grad(p.np_outs[-1], buf.target.numpy(), weights, buf.d_q[i].numpy(),
                                            buf.abs_td.numpy() if i == 0 else None, self.loss_scale)
                  for i, p in enumerate(buf.critic_passes)]
        backward_together(self.critics, buf.d_q, [buf.x] * n, buf.critic_passes,
                          [buf.critic_grads[part] for part in self._critic_parts], self.gemms, threads)
        return losses

    def step_critics_together(self, buf: CriticBuffers, threads: int) -> None:
        """One Adam step of every critic, its element-wise update in chunks on up to `threads` threads."""
        self.critic_adam.native_step(self.native, [g.numpy() for g in buf.critic_grads], 0.0, threads=threads)
