"""The CPU learner step with its small ops fused: torch GEMMs into preallocated buffers, and the
element-wise work around them in one native call per group (pearl_fpga._learner_native).

On a 64-sample CartPole batch, DQN's gradient step is four or five 64x256x256 GEMMs and some 40 small
torch ops (TD target, Huber loss, bias gradients, ReLU masks, norm clip, Adam, allocations, and the
thin 4x256 and 256x2 layers, which MKL dispatches slower than it computes them); the small ops cost
about as much as the GEMMs. Here the square GEMMs stay in torch (MKL) writing into buffers allocated
once per batch size, and the rest is native functions over numpy views of the same memory:
`dqn_loss_grad`, `bias_grad`, `relu_backward`, `linear_thin`, `weight_grad_thin`, `input_grad_thin`
and `clip_adam` (clip + Adam on torch.optim.Adam's own state). The arithmetic is that of the torch path
(DQN.learn with fused=False, tested against autograd and torch.optim.Adam in tests/test_fused_learner.py);
sums are in a different order, so the two paths agree to float rounding, not bit for bit.

With a `precision` (torch.bfloat16) the square GEMMs run in that dtype on copies of the weights made at
the start of each step; their float32 results land in the same buffers, and everything else (thin
layers, loss, clip, Adam, the master weights) stays float32.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.common import THIN, Batch, LeanAdam, is_thin

Beside = Callable[..., "Future[Any]"]  # beside(fn, *args): fn(*args) on another thread, as a Future


def native_learner() -> Any:
    """The compiled module, or None when the package was built without it (then torch ops are used)."""
    try:
        from pearl_fpga import _learner_native
    except ImportError:
        return None
    return _learner_native


@dataclass
class _Buffers:
    """Every tensor one DQN step writes, for one batch size (torch tensors + numpy views of them)."""

    x: torch.Tensor  # (rows, obs_dim): obs, then next_obs when the online net also values next states
    np_x: np.ndarray
    np_online: list[np.ndarray]
    np_target: list[np.ndarray]
    online: list[torch.Tensor]  # output of each online layer, (rows, width)
    target: list[torch.Tensor]  # output of each target layer, (B, width)
    d_out: torch.Tensor  # (B, n_actions) dLoss/dQ
    d_hidden: list[torch.Tensor]  # (B, width) dLoss/d(hidden output) of each hidden layer
    grads: list[torch.Tensor]  # W0, b0, W1, b1, ... (the parameters' order)
    abs_td: torch.Tensor  # (B,)
    np_grads: list[np.ndarray]
    np_hidden_in: list[np.ndarray]  # first B rows of each hidden layer's output (the ReLU masks)
    np_d_hidden: list[np.ndarray]
    np_d_out: np.ndarray
    np_abs_td: np.ndarray
    np_q: np.ndarray
    np_q_next_online: np.ndarray | None
    np_q_next_target: np.ndarray


@dataclass(frozen=True)
class DQNStepSettings:
    """The hyper-parameters one fused DQN step reads."""

    gamma: float
    double_q: bool
    max_grad_norm: float  # 0 = no clipping


class FusedDQNStep:
    """One DQN gradient step on the given networks (double or vanilla target), the torch path's result
    to rounding. Its inputs are explicit: the online and target layers as (weight, bias) pairs, the
    LeanAdam over the online parameters (in layer order), and the step's settings."""

    def __init__(self, online: list[tuple[torch.Tensor, torch.Tensor]], target: list[tuple[torch.Tensor, torch.Tensor]],
                 adam: LeanAdam, settings: DQNStepSettings, native: Any, precision: torch.dtype | None = None,
                 beside: Beside | None = None) -> None:
        """beside(fn, *args): runs fn(*args) on a second thread (a Future), for the parts of the step that
        no other part reads or writes while they run: the target network's forward pass and each wide
        layer's weight gradient (the learner's schedule decides whether it really is another thread)."""
        self.beside = beside
        self.settings = settings
        self.precision = precision
        self.adam = adam
        self.native = native
        # views of the live parameters, made once (detached: no autograd): torch W^T for the GEMMs,
        # numpy for the native thin-layer loops
        self._online = [(w.detach().t(), b.detach()) for w, b in online]
        self._online_w = [w.detach() for w, _ in online]
        self._target = [(w.detach().t(), b.detach()) for w, b in target]
        self._online_np = [(w.detach().numpy(), b.detach().numpy()) for w, b in online]
        self._target_np = [(w.detach().numpy(), b.detach().numpy()) for w, b in target]
        # thin layers (a side <= THIN: the input and output layers) run native, the others in torch
        self._thin = [is_thin(w) for w, _ in online]
        self._buffers: dict[int, _Buffers] = {}
        # a lower precision: the float32 masters of the wide layers, and their low copies, refreshed per step
        self._masters: list[torch.Tensor] = []
        self._low: list[torch.Tensor] = []
        if precision is not None:
            self._online = self._low_copies(self._online, self._online_w)
            self._target = self._low_copies(self._target, None)

    def _low_copies(self, layers: list[tuple[torch.Tensor, torch.Tensor]],
                    weights: list[torch.Tensor] | None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """`layers` (W^T, b) with each wide one replaced by `precision` copies (and `weights`, W, likewise)."""
        out = []
        for i, (wt, b) in enumerate(layers):
            if self._thin[i]:
                out.append((wt, b))
                continue
            w_low, b_low = wt.t().to(self.precision), b.to(self.precision)
            self._masters += [wt.t(), b]
            self._low += [w_low, b_low]
            out.append((w_low.t(), b_low))
            if weights is not None:
                weights[i] = w_low
        return out

    def _make_buffers(self, batch_size: int, obs_dim: int) -> _Buffers:
        double_q = self.settings.double_q
        rows = 2 * batch_size if double_q else batch_size
        widths = [w.shape[1] for w, _ in self._online]
        x = torch.empty(rows, obs_dim)
        online = [torch.empty(rows, n) for n in widths]
        target = [torch.empty(batch_size, n) for n in widths]
        d_out = torch.empty(batch_size, widths[-1])
        d_hidden = [torch.empty(batch_size, n) for n in widths[:-1]]
        grads = [torch.empty_like(p) for p in self.adam.params]
        abs_td = torch.empty(batch_size)
        q_all = online[-1].numpy()
        return _Buffers(
            x=x, np_x=x.numpy(), np_online=[o.numpy() for o in online], np_target=[t.numpy() for t in target],
            online=online, target=target, d_out=d_out, d_hidden=d_hidden, grads=grads, abs_td=abs_td,
            np_grads=[g.numpy() for g in grads], np_hidden_in=[h[:batch_size].numpy() for h in online[:-1]],
            np_d_hidden=[d.numpy() for d in d_hidden], np_d_out=d_out.numpy(), np_abs_td=abs_td.numpy(),
            np_q=q_all[:batch_size], np_q_next_online=q_all[batch_size:] if double_q else None,
            np_q_next_target=target[-1].numpy(),
        )

    def __call__(self, batch: Batch) -> tuple[float, torch.Tensor]:
        """One gradient step; returns (loss, |TD error| per sample)."""
        settings, native = self.settings, self.native
        n = len(batch.reward)
        buf = self._buffers.get(n)
        if buf is None or buf.x.shape[1] != batch.obs.shape[1]:
            buf = self._buffers[n] = self._make_buffers(n, batch.obs.shape[1])
        last = len(self._online) - 1
        with torch.no_grad():
            if self._low:
                torch_ops.foreach_copy_(self._low, self._masters)
            # forward passes: target on next_obs (beside), online on [obs; next_obs] in one GEMM per layer
            pending = [self._beside(self._forward, self._target, self._target_np, batch.next_obs, buf.target,
                                    buf.np_target)]
            torch.cat((batch.obs, batch.next_obs) if settings.double_q else (batch.obs,), out=buf.x)
            self._forward(self._online, self._online_np, buf.x, buf.online, buf.np_online)
            pending.pop().result()
            weights = None if batch.weights is None else batch.weights.numpy()
            loss = native.dqn_loss_grad(buf.np_q, buf.np_q_next_online, buf.np_q_next_target,
                                        batch.action.numpy().reshape(-1), batch.reward.numpy(), batch.done.numpy(),
                                        weights, settings.gamma, settings.double_q, buf.np_d_out, buf.np_abs_td)
            # backward pass: per layer dW = d^T a_in, db = column sums of d, d <- (d W) * (a_in > 0)
            d, np_d = buf.d_out, buf.np_d_out
            for i in range(last, -1, -1):
                if self._thin[i]:
                    native.weight_grad_thin(np_d, buf.np_x[:n] if i == 0 else buf.np_hidden_in[i - 1],
                                            buf.np_grads[2 * i])
                else:  # dW reads d and a_in, which nothing writes until the step ends: beside the rest
                    pending.append(self._beside(self._mm, d.t(), buf.x[:n] if i == 0 else buf.online[i - 1][:n],
                                                buf.grads[2 * i]))
                native.bias_grad(np_d, buf.np_grads[2 * i + 1])
                if i > 0:
                    if self._online_w[i].shape[0] <= THIN:  # few outputs: one native pass, mask included
                        native.input_grad_thin(np_d, self._online_np[i][0], buf.np_hidden_in[i - 1],
                                               buf.np_d_hidden[i - 1])
                    else:
                        self._mm(d, self._online_w[i], buf.d_hidden[i - 1])
                        native.relu_backward(buf.np_d_hidden[i - 1], buf.np_hidden_in[i - 1])
                    d, np_d = buf.d_hidden[i - 1], buf.np_d_hidden[i - 1]
            for done in pending:
                done.result()
            self.adam.native_step(native, buf.np_grads, settings.max_grad_norm)
        return loss, buf.abs_td.clone()

    def _beside(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """fn(*args) through `beside`, or here at once (a done Future) without one."""
        if self.beside is not None:
            return self.beside(fn, *args)
        done: Future[Any] = Future()
        done.set_result(fn(*args))
        return done

    def _forward(self, layers: list[tuple[torch.Tensor, torch.Tensor]], layers_np: list[tuple[np.ndarray, np.ndarray]],
                 x: torch.Tensor, outs: list[torch.Tensor], outs_np: list[np.ndarray]) -> None:
        """The MLP's forward pass into `outs` (`outs_np`: their numpy views); ReLU on all but the last layer."""
        last = len(layers) - 1
        x_np = None
        for i, ((wt, b), (w_np, b_np)) in enumerate(zip(layers, layers_np)):
            if self._thin[i]:
                if x_np is None:
                    x_np = np.ascontiguousarray(x.numpy())
                self.native.linear_thin(x_np, w_np, b_np, outs_np[i], i < last)
            elif self.precision is None:
                torch.addmm(b, x, wt, out=outs[i])
            else:
                outs[i].copy_(torch.addmm(b, x.to(self.precision), wt))
            if not self._thin[i] and i < last:
                torch.relu_(outs[i])
            x, x_np = outs[i], outs_np[i]

    def _mm(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        """out = a @ b, in float32 or with the operands cast to the step's precision."""
        if self.precision is None:
            torch.mm(a, b, out=out)
        else:
            out.copy_(torch.mm(a.to(self.precision), b.to(self.precision)))
