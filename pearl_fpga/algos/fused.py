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

In float32 with torch's MKL (native_gemms) the square GEMMs are native tasks instead (`gemms`: MKL's
sgemm_, torch.mm's own routine and bits), run a wide layer's two independent ones at a time: on the
calling thread alone in the serial schedule, with the native pool's helper thread in the concurrent one,
which, unlike a Python thread, needs no GIL and spins between calls rather than waiting for a wake.

With a `precision` (torch.bfloat16) the square GEMMs run in that dtype on copies of the weights made at
the start of each step; their float32 results land in the same buffers, and everything else (thin
layers, loss, clip, Adam, the master weights) stays float32.
"""

from __future__ import annotations

import ctypes
import functools
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pearl_fpga.algos import torch_ops
from pearl_fpga.algos.common import THIN, Batch, LeanAdam, is_thin

Beside = Callable[..., "Future[Any]"]  # beside(fn, *args): fn(*args) on another thread, as a Future


@functools.lru_cache(maxsize=1)
def native_learner() -> Any:
    """The compiled module, its programs' GEMM set to torch's (pearl_fpga._aten_gemm), or None when the package
    was built without either (then torch ops are used)."""
    try:
        from pearl_fpga import _aten_gemm, _learner_native
    except ImportError:
        return None
    _learner_native.set_mm(_aten_gemm.address())
    return _learner_native


GEMMS_EVENT = "pearl_fpga::gemms"
"""The profiler's name for a call of native GEMM tasks (bench learner --profile counts it as GEMM time)."""


class NativeGemms:
    """The compiled module's `gemms`, which a torch profile sees as one event per call while `profiled`."""

    profiled = False  # set by `bench learner --profile` while it records (bench/learner_profile.py)

    def __init__(self, native: Any) -> None:
        self.native = native

    def gemms(self, tasks: list[tuple[Any, ...]], threads: int, blas_threads: int) -> int:
        """native.gemms: the tasks on up to `threads` threads; returns how many the helper ran."""
        if not NativeGemms.profiled:
            return int(self.native.gemms(tasks, threads, blas_threads))
        with torch.profiler.record_function(GEMMS_EVENT):
            return int(self.native.gemms(tasks, threads, blas_threads))


@functools.lru_cache(maxsize=1)
def native_gemms() -> NativeGemms | None:
    """The compiled module's `gemms`, ready (GEMM tasks on a native helper thread beside the caller, no
    GIL), or None where it cannot be: no compiled module, torch's BLAS not MKL (aarch64 wheels), or
    MKL's routines not found in torch's library. Its GEMM is the sgemm_ that torch.mm itself calls; a
    probe checks that a task gives torch's bits, else it is not used (and a warning says so)."""
    native = native_learner()
    library = next(iter((Path(torch.__file__).parent / "lib").glob("libtorch_cpu.*")), None)
    if native is None or library is None or not torch.backends.mkl.is_available():
        return None
    try:
        blas = ctypes.CDLL(str(library))  # already loaded by torch: this only looks the symbols up
        native.set_blas(ctypes.cast(blas.sgemm_, ctypes.c_void_p).value,
                        ctypes.cast(blas.MKL_Set_Num_Threads_Local, ctypes.c_void_p).value)
    except (OSError, AttributeError):
        return None
    if not _gemms_match_torch(native):
        warnings.warn("pearl_fpga: the native GEMM tasks do not give torch.mm's bits with this torch build; the "
                      "learner's second thread runs torch ops instead", stacklevel=2)
        return None
    return NativeGemms(native)


def _gemms_match_torch(native: Any) -> bool:
    """Whether `native.gemms` gives torch.addmm's and torch.mm's bits (at this thread's torch threads) for each
    transposition, bias and ReLU, run on the calling thread and beside it."""
    gen = torch.Generator().manual_seed(0)
    a, w, b = (torch.randn(*shape, generator=gen) for shape in ((37, 29), (53, 29), (53,)))
    d, mask = torch.randn(37, 53, generator=gen), torch.randn(37, 29, generator=gen)
    with torch.no_grad():
        expected = [torch.addmm(b, a, w.t()).relu_(), d.t().mm(a), d.mm(w) * (mask > 0)]
    for threads in (1, 2):
        outs = [torch.empty_like(e) for e in expected]
        native.gemms([(a.numpy(), False, w.numpy(), True, outs[0].numpy(), b.numpy(), True, None),
                      (d.numpy(), True, a.numpy(), False, outs[1].numpy(), None, False, None),
                      (d.numpy(), False, w.numpy(), False, outs[2].numpy(), None, False, mask.numpy())],
                     threads, torch.get_num_threads())
        if not all(torch.equal(o, e) for o, e in zip(outs, expected)):
            return False
    return True


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


@dataclass
class _LowBuffers:
    """A low-precision step's GEMM operands and results for one batch size, per wide layer (None for a thin
    one), as the bits of bfloat16 tensors: each network's input and output, the gradient at the output, its
    input-gradient product and the weight gradient's."""

    online_in: list[np.ndarray | None]  # (rows, in)
    online_out: list[np.ndarray | None]  # (rows, out)
    target_in: list[np.ndarray | None]  # (B, in)
    target_out: list[np.ndarray | None]  # (B, out)
    d: list[np.ndarray | None]  # (B, out)
    d_in: list[np.ndarray | None]  # (B, in)
    w_grad: list[np.ndarray | None]  # (out, in)


def _bits(t: torch.Tensor) -> np.ndarray:
    """A 16-bit tensor's bits as a numpy int16 array (the same memory)."""
    return t.view(torch.int16).numpy()


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
                 beside: Beside | None = None, pair_threads: Callable[[], int] | None = None) -> None:
        """beside(fn, *args): runs fn(*args) on a second thread (a Future), for the parts of the step that
        no other part reads or writes while they run: the target network's forward pass and each wide
        layer's weight gradient (the learner's schedule decides whether it really is another thread).
        pair_threads(): the threads (1 or 2) for a wide layer's independent GEMMs where they run as native
        tasks (float32 with torch's MKL: native_gemms), which then replace `beside`: the online and the
        target GEMM of each wide layer at once, then its weight and input gradients at once."""
        self.beside = beside
        self.pair_threads: Callable[[], int] = pair_threads or (lambda: 1)
        self._gemms = native_gemms() if pair_threads is not None and precision is None else None
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
        # the low-precision step runs as one native program (the torch ops' bits): the low copies' bits, each
        # wide layer's (W, b as one row) per network, and (master, copy) pairs to refresh them from
        self._low_np: list[list[tuple[np.ndarray, np.ndarray] | None]] = [[], []]
        for net, layers in zip(self._low_np, (self._online, self._target), strict=True):
            for i, (wt, b) in enumerate(layers):
                net.append(None if self._thin[i] else (_bits(wt.t()), _bits(b).reshape(1, -1)))
        self._refresh = [(m.numpy().reshape(low.shape[0], -1), _bits(low).reshape(low.shape[0], -1))
                         for m, low in zip(self._masters, self._low, strict=True)]
        self._low_buffers: dict[int, _LowBuffers] = {}

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
        if self.precision is not None:
            return self._low_step(batch, buf)
        with torch.no_grad():
            # forward passes: target on next_obs (beside), online on [obs; next_obs] in one GEMM per layer
            torch.cat((batch.obs, batch.next_obs) if settings.double_q else (batch.obs,), out=buf.x)
            pending: list[Future[Any]] = []
            if self._gemms is not None:
                self._forward_pairs(batch.next_obs.numpy(), buf)
            else:
                pending.append(self._beside(self._forward, self._target, self._target_np, batch.next_obs, buf.target,
                                            buf.np_target))
                self._forward(self._online, self._online_np, buf.x, buf.online, buf.np_online)
                pending.pop().result()
            weights = None if batch.weights is None else batch.weights.numpy()
            loss = native.dqn_loss_grad(buf.np_q, buf.np_q_next_online, buf.np_q_next_target,
                                        batch.action.numpy().reshape(-1), batch.reward.numpy(), batch.done.numpy(),
                                        weights, settings.gamma, settings.double_q, buf.np_d_out, buf.np_abs_td)
            # backward pass: per layer dW = d^T a_in, db = column sums of d, d <- (d W) * (a_in > 0)
            d, np_d = buf.d_out, buf.np_d_out
            if self._gemms is not None:
                self._backward_pairs(buf, n)
                self.adam.native_step(native, buf.np_grads, settings.max_grad_norm, threads=self.pair_threads())
                return loss, buf.abs_td.clone()
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

    def _low_step(self, batch: Batch, buf: _Buffers) -> tuple[float, torch.Tensor]:
        """The step in the low precision as one native program (the torch ops the float32 path's code would
        run, with their bits): the low copies refreshed; the target network's forward pass beside the online
        one's; the loss; the backward pass, the top wide layer's weight gradient beside the rest; clip and Adam."""
        settings, n = self.settings, len(batch.reward)
        low = self._low_buffers.get(n)
        if low is None:
            low = self._low_buffers[n] = self._make_low_buffers(buf, n)
        threads = self.pair_threads()
        torch.cat((batch.obs, batch.next_obs) if settings.double_q else (batch.obs,), out=buf.x)
        prog = self.native.Program()
        for master, copy in self._refresh:
            prog.narrow(master, copy)
        self._record_forward(prog.beside(), 1, np.ascontiguousarray(batch.next_obs.numpy()), buf.np_target,
                             low.target_in, low.target_out)
        self._record_forward(prog, 0, buf.np_x, buf.np_online, low.online_in, low.online_out)
        prog.join()
        weights = None if batch.weights is None else batch.weights.numpy()
        loss = prog.dqn_loss_grad(buf.np_q, buf.np_q_next_online, buf.np_q_next_target,
                                  batch.action.numpy().reshape(-1), batch.reward.numpy(), batch.done.numpy(), weights,
                                  settings.gamma, settings.double_q, buf.np_d_out, buf.np_abs_td)
        np_d, side = buf.np_d_out, None
        for i in range(len(self._online) - 1, -1, -1):
            a_in = buf.np_x[:n] if i == 0 else buf.np_hidden_in[i - 1]
            layer = self._low_np[0][i]
            d_low, a_low, d_in_low, w_grad = low.d[i], low.online_in[i], low.d_in[i], low.w_grad[i]
            if layer is None:
                prog.weight_grad_thin(np_d, a_in, buf.np_grads[2 * i])
            else:
                assert d_low is not None and a_low is not None and w_grad is not None  # a wide layer's
                prog.narrow(np_d, d_low)
                # dW reads d and the layer's input, which nothing below writes: beside the rest (the top one)
                to = prog
                if side is None:
                    to = side = prog.beside()
                to.gemm(d_low, True, a_low[:n], False, w_grad)
                to.widen(w_grad, buf.np_grads[2 * i])
            prog.bias_grad(np_d, buf.np_grads[2 * i + 1])
            if i > 0:
                if layer is None:  # few outputs: one native pass, mask included
                    prog.input_grad_thin(np_d, self._online_np[i][0], buf.np_hidden_in[i - 1], buf.np_d_hidden[i - 1])
                else:
                    assert d_in_low is not None
                    prog.gemm(d_low, False, layer[0], False, d_in_low)
                    prog.relu_backward(buf.np_d_hidden[i - 1], buf.np_hidden_in[i - 1], d_in_low)
                np_d = buf.np_d_hidden[i - 1]
        if side is not None:
            prog.join()
        slot = self.adam.native_step(prog, buf.np_grads, settings.max_grad_norm, threads=threads)
        values = prog.run(threads)
        del slot  # the gradient norm: not reported
        return values[loss], buf.abs_td.clone()

    def _record_forward(self, prog: Any, net: int, x: np.ndarray, outs: list[np.ndarray], ins_low: list[Any],
                        outs_low: list[Any]) -> None:
        """Network `net`'s (0 online, 1 target) forward pass at x into `outs`, in the low precision: a wide
        layer is torch.addmm(b, x, W^T) on the low copies (its input narrowed, its output widened), then ReLU."""
        layers_np, last = (self._online_np, self._target_np)[net], len(self._online) - 1
        for i, (w_np, b_np) in enumerate(layers_np):
            layer = self._low_np[net][i]
            if layer is None:
                prog.linear_thin(x, w_np, b_np, outs[i], i < last)
            else:
                prog.narrow(x, ins_low[i])
                prog.gemm(ins_low[i], False, layer[0], True, outs_low[i], layer[1])
                prog.widen(outs_low[i], outs[i])
                if i < last:
                    prog.relu(outs[i])
            x = outs[i]

    def _make_low_buffers(self, buf: _Buffers, n: int) -> _LowBuffers:
        def each(shape: Callable[[int, int], tuple[int, int]]) -> list[np.ndarray | None]:
            return [None if self._thin[i] else _bits(torch.empty(shape(*w.shape), dtype=self.precision))
                    for i, (w, _) in enumerate(self._online_np)]

        rows = len(buf.x)
        return _LowBuffers(online_in=each(lambda m, k: (rows, k)), online_out=each(lambda m, k: (rows, m)),
                           target_in=each(lambda m, k: (n, k)), target_out=each(lambda m, k: (n, m)),
                           d=each(lambda m, k: (n, m)), d_in=each(lambda m, k: (n, k)), w_grad=each(lambda m, k: (m, k)))

    def _forward_pairs(self, next_obs: np.ndarray, buf: _Buffers) -> None:
        """Both forward passes, layer by layer: a thin layer's two native loops here, a wide layer's online
        and target GEMMs (bias and ReLU included) as one pair of native tasks."""
        native, last, threads, gemms = self.native, len(self._online) - 1, self.pair_threads(), self._gemms
        assert gemms is not None
        x_online, x_target = buf.np_x, np.ascontiguousarray(next_obs)
        for i, ((w, b), (w_t, b_t)) in enumerate(zip(self._online_np, self._target_np)):
            relu = i < last
            if self._thin[i]:
                native.linear_thin(x_online, w, b, buf.np_online[i], relu)
                native.linear_thin(x_target, w_t, b_t, buf.np_target[i], relu)
            else:
                gemms.gemms([(x_online, False, w, True, buf.np_online[i], b, relu, None),
                             (x_target, False, w_t, True, buf.np_target[i], b_t, relu, None)],
                            threads, torch.get_num_threads())
            x_online, x_target = buf.np_online[i], buf.np_target[i]

    def _backward_pairs(self, buf: _Buffers, n: int) -> None:
        """The backward pass from buf.d_out: per layer the bias gradient, then the weight gradient
        dW = d^T a_in and the input gradient (d W) * (a_in > 0), a wide layer's two as one pair of native
        tasks."""
        native, threads, gemms = self.native, self.pair_threads(), self._gemms
        assert gemms is not None
        np_d = buf.np_d_out
        for i in range(len(self._online) - 1, -1, -1):
            a_in = buf.np_x[:n] if i == 0 else buf.np_hidden_in[i - 1]
            w = self._online_np[i][0]
            native.bias_grad(np_d, buf.np_grads[2 * i + 1])
            if self._thin[i]:
                native.weight_grad_thin(np_d, a_in, buf.np_grads[2 * i])
                if i > 0:
                    native.input_grad_thin(np_d, w, a_in, buf.np_d_hidden[i - 1])
            else:
                tasks: list[tuple[Any, ...]] = [(np_d, True, a_in, False, buf.np_grads[2 * i], None, False, None)]
                if i > 0:
                    tasks.append((np_d, False, w, False, buf.np_d_hidden[i - 1], None, False, a_in))
                gemms.gemms(tasks, threads, torch.get_num_threads())
            if i > 0:
                np_d = buf.np_d_hidden[i - 1]

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
