"""DDPG's and TD3's CPU learner step with its small ops fused, as DQN's (pearl_fpga.algos.fused).

Each network's wide layers stay torch GEMMs (MKL; bfloat16 on copies of the weights with a
`precision`) writing into buffers allocated once per batch size; the thin layers (the (obs, action)
-> 400 input layer, the 300 -> 1 critic head, the actor's 300 -> action head), the bias and ReLU after
each wide GEMM, bias gradients, ReLU masks, the critics' MSE gradient (IS weights included) and Adam
run as native calls over numpy views of the same memory (pearl_fpga._learner_native), and nothing
builds an autograd graph. The small (B, action) and (B, 1) pieces (tanh, smoothing noise, TD target)
are the torch path's own ops.

The order of the step is TD3's (pearl_fpga.algos.td3), which drives these pieces and its threads (the
critics one per thread, DDPG's concurrent actor gradient); the arithmetic is the torch path's, with
sums in another order, so the two agree to float rounding (tests/test_fused_learner.py checks both
against autograd and torch.optim.Adam).

The pieces are in two layers: `FusedNet` (one network's passes) and `FusedCritics` (the twin critics' part
of any actor-critic step: target values, TD target, loss gradient, Adam step, a critic's input gradient,
the per-batch-size buffers), which `FusedActorCriticStep` extends with DDPG's and TD3's deterministic
actor, and a learner with a stochastic actor extends with its own.

In float32 with torch's MKL, the `*_together` pieces run several networks of one shape (TD3's twin
critics) layer by layer, every wide GEMM of a layer as one call of native tasks (algos/fused.py
native_gemms), on the native pool's helper beside the caller in a concurrent schedule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.common import Batch, LeanAdam, is_thin
from pearl_fpga.algos.fused import Beside, native_gemms

Layers = Sequence[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class NetPass:
    """One forward pass of one network at one batch size: each layer's output, and the gradient at each
    hidden layer's output (torch tensors and numpy views of them). With a precision (bfloat16), per wide layer
    i: its input in that precision (`low_in`, written by the layer below in its own pass), its GEMM's result
    (`low_out`, widened into outs[i] with the bias), the gradient at its output in that precision (`low_d`,
    written by the layer above's input gradient), and its input gradient's GEMM result (`low_d_in`); numpy
    views of the bits of each as 16-bit integers (`*_bits`: what the native passes read and write; made once,
    since a view is a torch op, which releases the GIL)."""

    outs: list[torch.Tensor]
    np_outs: list[np.ndarray]
    d_hidden: list[torch.Tensor]
    np_d_hidden: list[np.ndarray]
    low_in: list[torch.Tensor | None]
    low_out: list[torch.Tensor | None]
    low_d: list[torch.Tensor | None]
    low_d_in: list[torch.Tensor | None]
    low_in_bits: list[np.ndarray | None] = field(init=False)
    low_out_bits: list[np.ndarray | None] = field(init=False)
    low_d_bits: list[np.ndarray | None] = field(init=False)
    low_d_in_bits: list[np.ndarray | None] = field(init=False)

    def __post_init__(self) -> None:
        def bits(buffers: list[torch.Tensor | None]) -> list[np.ndarray | None]:
            return [None if t is None else t.view(torch.int16).numpy() for t in buffers]

        self.low_in_bits, self.low_out_bits = bits(self.low_in), bits(self.low_out)
        self.low_d_bits, self.low_d_in_bits = bits(self.low_d), bits(self.low_d_in)


class FusedNet:
    """An `mlp()` network's forward and backward passes into caller-held buffers (`new_pass`): the wide
    layers as torch GEMMs, the thin ones (a side <= THIN) as native loops, ReLU after each hidden layer.
    With a precision, a wide layer's GEMMs run on copies of its weights in that precision, their results
    widened to float32 in the native pass that adds the bias (forward) or applies the ReLU mask (backward),
    which also narrows its float32 result for the next GEMM: no torch cast or copy around them (only a wide
    input or output layer's operand is cast, and a weight gradient copied into its float32 buffer)."""

    def __init__(self, layers: Layers, native: Any, precision: torch.dtype | None) -> None:
        self.native, self.precision = native, precision
        self.thin = [is_thin(w) for w, _ in layers]
        self.widths = [int(w.shape[0]) for w, _ in layers]
        self.inputs = [int(w.shape[1]) for w, _ in layers]
        self._np = [(w.detach().numpy(), b.detach().numpy()) for w, b in layers]
        # the GEMMs' weights: the live ones, or their `precision` copies refreshed per step (the bias is
        # added natively, in float32)
        self._gemm = [w.detach() for w, _ in layers]
        self._masters: list[torch.Tensor] = []
        self._low: list[torch.Tensor] = []
        if precision is not None:
            for i, w in enumerate(self._gemm):
                if not self.thin[i]:
                    self._masters.append(w)
                    self._gemm[i] = w.to(precision)
                    self._low.append(self._gemm[i])

    def refresh(self) -> None:
        """Copy the master weights into the low-precision copies (no-op in float32)."""
        if self._low:
            torch_ops.foreach_copy_(self._low, self._masters)

    def new_pass(self, rows: int) -> NetPass:
        outs = [torch.empty(rows, n) for n in self.widths]
        d_hidden = [torch.empty(rows, n) for n in self.widths[:-1]]

        def low(widths: Sequence[int]) -> list[torch.Tensor | None]:
            return [torch.empty(rows, n, dtype=self.precision) if self.precision is not None and not thin else None
                    for n, thin in zip(widths, self.thin, strict=True)]

        return NetPass(outs, [o.numpy() for o in outs], d_hidden, [d.numpy() for d in d_hidden],
                       low_in=low(self.inputs), low_out=low(self.widths), low_d=low(self.widths),
                       low_d_in=low(self.inputs))

    def _next_low_in(self, p: NetPass, i: int) -> np.ndarray | None:
        """Where layer i's output is narrowed for layer i + 1's GEMM (None: layer i + 1 is thin, or float32)."""
        return p.low_in_bits[i + 1] if i + 1 < len(self.thin) else None

    def forward(self, x: torch.Tensor, p: NetPass) -> None:
        """p.outs[-1] = the network at x (a contiguous float32 (rows, inputs) tensor); ReLU on the hidden layers."""
        last = len(self._gemm) - 1
        for i, w in enumerate(self._gemm):
            relu = i < last
            if self.thin[i]:
                self.native.linear_thin(x.numpy(), *self._np[i], p.np_outs[i], relu, self._next_low_in(p, i))
            elif self.precision is None:
                torch.mm(x, w.t(), out=p.outs[i])
                self.native.bias_relu(p.np_outs[i], self._np[i][1], relu)
            else:
                x_low, low_out = p.low_in[i], p.low_out[i]
                assert x_low is not None and low_out is not None  # a wide layer's, made by new_pass
                if i == 0:  # the network's input: no layer below narrowed it
                    x_low.copy_(x)
                torch.mm(x_low, w.t(), out=low_out)
                self.native.bias_relu(p.np_outs[i], self._np[i][1], relu, p.low_out_bits[i],
                                      self._next_low_in(p, i))
            x = p.outs[i]

    def backward(self, d_out: torch.Tensor, x: torch.Tensor, p: NetPass, grads: Sequence[torch.Tensor] | None,
                 d_in: torch.Tensor | None = None, beside: Beside | None = None) -> None:
        """From dLoss/d(output) `d_out` of the pass `p` at input `x`: the weight and bias gradients into
        `grads` (W0, b0, W1, ...; None skips them: only the input's gradient is wanted) and, when `d_in`
        is given, dLoss/dx into it. `beside(fn, *args)`: runs fn on another thread (a Future), there
        each wide hidden layer's weight-gradient GEMM while this thread takes its input gradient."""
        native, low = self.native, self.precision
        d = d_out
        pending: list[Future[None]] = []
        for i in range(len(self._gemm) - 1, -1, -1):
            a_in = x if i == 0 else p.outs[i - 1]
            d_low = p.low_d[i]
            if d_low is not None and i == len(self._gemm) - 1:  # the output: no layer above narrowed it
                d_low.copy_(d)
            d_gemm = d if d_low is None else d_low
            if grads is not None:
                if self.thin[i]:
                    native.weight_grad_thin(d.numpy(), a_in.numpy(), grads[2 * i].numpy())
                else:
                    args = (d_gemm.t(), a_in if low is None else p.low_in[i], grads[2 * i])
                    if beside is not None and i > 0:  # reads d and a_in, which this thread does not write
                        pending.append(beside(self._mm, *args))
                    else:
                        self._mm(*args)
                native.bias_grad(d.numpy(), grads[2 * i + 1].numpy())
            if i == 0 and d_in is None:
                break
            out, mask = (p.d_hidden[i - 1], p.np_outs[i - 1]) if i > 0 else (d_in, None)
            assert out is not None
            below_low = p.low_d_bits[i - 1] if i > 0 else None  # the wide layer below's GEMM operand
            if self.thin[i]:  # one native pass, the ReLU's mask included
                native.input_grad_thin(d.numpy(), self._np[i][0], mask, out.numpy(), below_low)
            elif low is None:
                torch.mm(d_gemm, self._gemm[i], out=out)
                if mask is not None:
                    native.relu_backward(out.numpy(), mask)
            else:
                d_in_low = p.low_d_in[i]
                assert d_in_low is not None  # a wide layer's, made by new_pass
                torch.mm(d_gemm, self._gemm[i], out=d_in_low)
                if mask is not None:  # widened, masked and narrowed again for the layer below, in one pass
                    native.relu_backward(out.numpy(), mask, p.low_d_in_bits[i], below_low)
                else:
                    out.copy_(d_in_low)
            d = out
        for future in pending:
            future.result()

    @staticmethod
    def _mm(a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor) -> None:
        """out = a @ b: float32 into `out`, or a product of two low-precision operands cast into it."""
        assert b is not None  # a wide layer's input in the step's precision, kept by forward()
        if a.dtype == torch.float32:
            torch.mm(a, b, out=out)
        else:
            out.copy_(torch.mm(a, b))


def forward_together(nets: Sequence[FusedNet], xs: Sequence[torch.Tensor], passes: Sequence[NetPass], gemms: Any,
                     threads: int) -> None:
    """Networks of one shape (twin critics, or one network), each at its input into its pass, layer by layer:
    the thin layers' native loops here, each wide layer's GEMMs (bias and ReLU included, one task per
    network, a lone network's in two halves of rows) as one call of native tasks on up to `threads` threads
    (algos/fused.py native_gemms; float32 only)."""
    native, last = nets[0].native, len(nets[0].thin) - 1
    inputs = [np.ascontiguousarray(x.numpy()) for x in xs]
    for i in range(last + 1):
        relu = i < last
        if nets[0].thin[i]:
            for net, x, p in zip(nets, inputs, passes, strict=True):
                native.linear_thin(x, *net._np[i], p.np_outs[i], relu)
        else:
            _run_tasks(gemms, [(x, False, net._np[i][0], True, p.np_outs[i], net._np[i][1], relu, None)
                               for net, x, p in zip(nets, inputs, passes, strict=True)], threads)
        inputs = [p.np_outs[i] for p in passes]


def backward_together(nets: Sequence[FusedNet], d_outs: Sequence[torch.Tensor], xs: Sequence[torch.Tensor],
                      passes: Sequence[NetPass], grads: Sequence[Sequence[torch.Tensor]] | None, gemms: Any,
                      threads: int, d_ins: Sequence[torch.Tensor] | None = None) -> None:
    """FusedNet.backward of each network (weight and bias gradients into its `grads`, None: none; dLoss/dx
    into its `d_ins`, None: none), layer by layer: each wide layer's weight and input gradients, of every
    network, as one call of native tasks on up to `threads` threads."""
    native = nets[0].native
    ds = [d.numpy() for d in d_outs]
    inputs = [np.ascontiguousarray(x.numpy()) for x in xs]
    for i in range(len(nets[0].thin) - 1, -1, -1):
        if i == 0 and grads is None and d_ins is None:
            break
        tasks: list[tuple[Any, ...]] = []
        for k, (net, d, x, p) in enumerate(zip(nets, ds, inputs, passes, strict=True)):
            a_in = x if i == 0 else p.np_outs[i - 1]
            if grads is not None:
                g = grads[k]
                native.bias_grad(d, g[2 * i + 1].numpy())
                if net.thin[i]:
                    native.weight_grad_thin(d, a_in, g[2 * i].numpy())
                else:
                    tasks.append((d, True, a_in, False, g[2 * i].numpy(), None, False, None))
            if i > 0:
                out, mask = p.np_d_hidden[i - 1], p.np_outs[i - 1]
            elif d_ins is not None:
                out, mask = d_ins[k].numpy(), None
            else:
                continue
            if net.thin[i]:
                native.input_grad_thin(d, net._np[i][0], mask, out)
            else:
                tasks.append((d, False, net._np[i][0], False, out, None, False, mask))
        _run_tasks(gemms, tasks, threads)
        if i > 0:
            ds = [p.np_d_hidden[i - 1] for p in passes]


def _run_tasks(gemms: Any, tasks: list[tuple[Any, ...]], threads: int) -> None:
    """`tasks` as one call of native GEMM tasks; a lone task split into two halves of its rows where it can
    be (an untransposed left operand), so that two threads have work: the split is the same in every
    schedule, so the bits do not depend on the thread count."""
    if len(tasks) == 1 and not tasks[0][1] and len(tasks[0][0]) > 1:
        a, _, b, trans_b, out, bias, relu, mask = tasks[0]
        half = len(a) // 2
        tasks = [(a[rows], False, b, trans_b, out[rows], bias, relu, None if mask is None else mask[rows])
                 for rows in (slice(0, half), slice(half, None))]
    if tasks:
        gemms.gemms(tasks, threads, torch.get_num_threads())


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


class FusedCritics(Generic[BufT]):
    """The critics' pieces of one actor-critic step on the given networks ((weight, bias) layers of `mlp()`
    critics on (obs, action), their targets, and the LeanAdam over all critics' parameters in layer order):
    target values, the TD target, each critic's loss gradient and Adam step, and a critic's gradient with
    respect to its input (the actor's step). Each critic's loss is `loss_scale` times its (importance-
    weighted) MSE to the TD target; the pieces take the critics by index, so that a caller can run each
    critic on a thread of its own. A step's buffers (`buffers`) are the subclass's `new_buffers`, which adds its
    own to `critic_buffers`."""

    def __init__(self, critics: Sequence[Layers], critic_targets: Sequence[Layers], critic_adam: LeanAdam,
                 action_dim: int, gamma: float, native: Any, precision: torch.dtype | None = None,
                 loss_scale: float = 1.0) -> None:
        self.native = native
        self.gamma, self.loss_scale = gamma, loss_scale
        self.critic_adam = critic_adam
        self.critics = [FusedNet(c, native, precision) for c in critics]
        self.critic_targets = [FusedNet(c, native, precision) for c in critic_targets]
        sizes = [2 * len(c) for c in critics]  # each critic's slice of the critic Adam's parameters
        self._critic_parts = [slice(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(len(sizes))]
        self.input_width = int(critics[0][0][0].shape[1])
        self.obs_dim = self.input_width - action_dim
        self._buffers: dict[int, BufT] = {}
        # float32 twin critics: each wide layer's GEMMs of every critic as one call of native tasks (the
        # *_together pieces), on the native pool's helper beside the caller in a concurrent schedule
        self.gemms = native_gemms() if precision is None and len(critics) > 1 else None

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

    def refresh_critics(self) -> None:
        """At the start of a step, on the calling thread: the critics' low-precision weight copies (no-op in
        float32) and the critic Adam's native views (its state made if new)."""
        for net in (*self.critics, *self.critic_targets):
            net.refresh()
        self.critic_adam.native_views()

    def target_values(self, buf: CriticBuffers, indices: Iterable[int]) -> None:
        """The target critics `indices` at buf.next_in (into their passes' outputs)."""
        for i in indices:
            self.critic_targets[i].forward(buf.next_in, buf.target_passes[i])

    def td_target(self, buf: CriticBuffers, batch: Batch, next_penalty: torch.Tensor | None = None) -> None:
        """buf.target = reward + (1 - done) gamma (min_i Q'_i - next_penalty), and buf.x = [obs, action]
        (next_penalty: an entropy term per sample, (B, 1), or None)."""
        values = [p.outs[-1] for p in buf.target_passes]
        next_q = values[0]
        for value in values[1:]:
            next_q = torch.minimum(next_q, value)
        if next_penalty is not None:
            next_q = next_q - next_penalty
        torch.add(batch.reward, (1.0 - batch.done) * self.gamma * next_q, out=buf.target)
        torch.cat([batch.obs, batch.action], dim=1, out=buf.x)

    def critic_grads(self, buf: CriticBuffers, batch: Batch, indices: Iterable[int]) -> list[float]:
        """Each critic's loss to buf.target (returned) and its gradients into buf.critic_grads."""
        weights = None if batch.weights is None else batch.weights.numpy()
        losses = []
        for i in indices:
            net, p = self.critics[i], buf.critic_passes[i]
            net.forward(buf.x, p)
            losses.append(self.native.mse_loss_grad(p.np_outs[-1], buf.target.numpy(), weights, buf.d_q[i].numpy(),
                                                    buf.abs_td.numpy() if i == 0 else None, self.loss_scale))
            net.backward(buf.d_q[i], buf.x, p, buf.critic_grads[self._critic_parts[i]])
        return losses

    def input_grad(self, i: int, x: torch.Tensor, p: NetPass, d_q: torch.Tensor, d_x: torch.Tensor) -> None:
        """Critic i's value at x (into the pass p) and, from dLoss/dQ d_q, dLoss/dx into d_x (the critic's own
        weight gradients are not computed: only the actor steps on this loss)."""
        self.critics[i].forward(x, p)
        self.critics[i].backward(d_q, x, p, None, d_x)

    def step_critics(self, buf: CriticBuffers, indices: Iterable[int]) -> None:
        """One Adam step of the critics `indices` (no clipping: the actor-critic learners do not clip)."""
        for i in indices:
            part = self._critic_parts[i]
            self.critic_adam.native_step(self.native, [g.numpy() for g in buf.critic_grads[part]], 0.0, part)

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


@dataclass
class ActorCriticBuffers(CriticBuffers):
    """Every tensor one DDPG/TD3 step writes, for one batch size: the critics' and the actor's."""

    actor_target_pass: NetPass
    x_pi: torch.Tensor  # (B, obs + action): obs and the actor's action
    actor_pass: NetPass
    q1_pass: NetPass  # Q1 on the actor's action (its own: the concurrent update runs it beside the critics')
    d_q_pi: torch.Tensor  # (B, 1) dLoss/dQ1 of the actor's loss: -1/B
    d_x_pi: torch.Tensor  # (B, obs + action) dLoss/d(Q1's input)
    actor_grads: list[torch.Tensor]


class FusedActorCriticStep(FusedCritics[ActorCriticBuffers]):
    """The pieces of one DDPG/TD3 step on the given networks ((weight, bias) layers of `mlp()` networks,
    their targets, and the LeanAdams over the actor's and over all critics' parameters in layer order)."""

    def __init__(self, actor: Layers, actor_target: Layers, critics: Sequence[Layers], critic_targets: Sequence[Layers],
                 actor_adam: LeanAdam, critic_adam: LeanAdam, gamma: float, noise_clip: float, native: Any,
                 precision: torch.dtype | None = None) -> None:
        super().__init__(critics, critic_targets, critic_adam, int(actor[-1][0].shape[0]), gamma, native, precision)
        self.noise_clip = noise_clip
        self.actor_adam = actor_adam
        self.actor = FusedNet(actor, native, precision)
        self.actor_target = FusedNet(actor_target, native, precision)

    def new_buffers(self, n: int) -> ActorCriticBuffers:
        return ActorCriticBuffers(
            **self.critic_buffers(n), actor_target_pass=self.actor_target.new_pass(n),
            x_pi=torch.empty(n, self.input_width), actor_pass=self.actor.new_pass(n),
            q1_pass=self.critics[0].new_pass(n), d_q_pi=torch.full((n, 1), -1.0 / n),
            d_x_pi=torch.empty(n, self.input_width), actor_grads=[torch.empty_like(p) for p in self.actor_adam.params])

    def refresh(self) -> None:
        """At the start of a step, on the calling thread: the low-precision weight copies from the masters
        (no-op in float32), and the Adams' native views (their state made if new)."""
        for net in (self.actor, self.actor_target):
            net.refresh()
        self.refresh_critics()
        self.actor_adam.native_views()

    def next_input(self, buf: ActorCriticBuffers, batch: Batch, noise: torch.Tensor | None,
                   threads: int | None = None) -> None:
        """buf.next_in = [next_obs, target actor's action (+ clipped smoothing noise, clipped to [-1, 1])].
        threads: the target actor's wide GEMMs as native tasks on up to this many threads (needs self.gemms)."""
        p = buf.actor_target_pass
        if threads is None:
            self.actor_target.forward(batch.next_obs, p)
        else:
            forward_together([self.actor_target], [batch.next_obs], [p], self.gemms, threads)
        action = torch.tanh_(p.outs[-1])
        if noise is not None:
            action.add_(noise.clamp_(-self.noise_clip, self.noise_clip)).clamp_(-1.0, 1.0)
        torch.cat([batch.next_obs, action], dim=1, out=buf.next_in)

    def actor_grads(self, buf: ActorCriticBuffers, batch: Batch, refresh_q1: bool) -> None:
        """The actor's gradients of -mean Q1(s, pi(s)) into buf.actor_grads (actor_forward, then
        actor_backward)."""
        self.actor_forward(buf, batch)
        self.actor_backward(buf, batch, refresh_q1)

    def actor_forward(self, buf: ActorCriticBuffers, batch: Batch, threads: int | None = None) -> None:
        """pi(s) and buf.x_pi = [obs, pi(s)]: the actor's part that no critic update changes. threads: as
        next_input's."""
        if threads is None:
            self.actor.forward(batch.obs, buf.actor_pass)
        else:
            forward_together([self.actor], [batch.obs], [buf.actor_pass], self.gemms, threads)
        torch.cat([batch.obs, torch.tanh_(buf.actor_pass.outs[-1])], dim=1, out=buf.x_pi)

    def actor_backward(self, buf: ActorCriticBuffers, batch: Batch, refresh_q1: bool,
                       beside: Beside | None = None) -> None:
        """After actor_forward: the actor's gradients through Q1's input gradient (Q1's own weight
        gradients are not computed). refresh_q1: Q1 changed since refresh() (SB3's order). beside: as
        FusedNet.backward's, for the actor's wide layers."""
        if refresh_q1:
            self.critics[0].refresh()
        self.input_grad(0, buf.x_pi, buf.q1_pass, buf.d_q_pi, buf.d_x_pi)
        self.actor.backward(self._d_actor_out(buf), batch.obs, buf.actor_pass, buf.actor_grads, beside=beside)

    def actor_backward_together(self, buf: ActorCriticBuffers, batch: Batch, threads: int) -> None:
        """actor_backward on the updated Q1 (float32), every wide GEMM as native tasks on up to `threads`
        threads (needs self.gemms)."""
        q1 = self.critics[0]
        forward_together([q1], [buf.x_pi], [buf.q1_pass], self.gemms, threads)
        backward_together([q1], [buf.d_q_pi], [buf.x_pi], [buf.q1_pass], None, self.gemms, threads, [buf.d_x_pi])
        backward_together([self.actor], [self._d_actor_out(buf)], [batch.obs], [buf.actor_pass], [buf.actor_grads],
                          self.gemms, threads)

    def _d_actor_out(self, buf: ActorCriticBuffers) -> torch.Tensor:
        """dLoss/d(actor's pre-tanh output) from dLoss/d(Q1's input) (its action columns)."""
        action = buf.actor_pass.outs[-1]
        return torch.ops.aten.tanh_backward(buf.d_x_pi[:, self.obs_dim:], action).contiguous()

    def step_actor(self, buf: ActorCriticBuffers, threads: int = 1) -> None:
        self.actor_adam.native_step(self.native, [g.numpy() for g in buf.actor_grads], 0.0, threads=threads)
