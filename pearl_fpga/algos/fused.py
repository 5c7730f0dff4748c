"""The CPU learner step with its small ops fused: DQN's (`FusedDQNStep`), and what every fused step shares
(the compiled module, `native_learner`; native GEMM tasks, `native_gemms`).

On a 64-sample CartPole batch, DQN's gradient step is four or five 64x256x256 GEMMs and some 40 small
torch ops (TD target, Huber loss, bias gradients, ReLU masks, norm clip, Adam, allocations, and the
thin 4x256 and 256x2 layers, which MKL dispatches slower than it computes them); the small ops cost
about as much as the GEMMs. Here the whole step is one native program (pearl_fpga._learner_native.Program)
over buffers allocated once per batch size: the square GEMMs are torch's own (at::addmm / at::mm on the
same memory, through pearl_fpga._aten_gemm: torch's bits), the rest native functions (`dqn_loss_grad`,
`bias_grad`, `relu_backward`, `linear_thin`, `weight_grad_thin`, `input_grad_thin`, and `clip_adam`: clip +
Adam on torch.optim.Adam's own state), and the program runs with the GIL released once, its independent
parts (the target network's pass, a weight gradient) on the native pool's helper beside the caller in the
concurrent schedule. The arithmetic is that of the torch path (DQN.learn with fused=False, tested against
autograd and torch.optim.Adam in tests/test_fused_learner.py); sums are in a different order, so the two
paths agree to float rounding, not bit for bit.

With a `precision` (torch.bfloat16) the square GEMMs run in that dtype on copies of the weights made at
the start of each step (torch.addmm's bias in that dtype too); their results are widened into the same
float32 buffers, and everything else (thin layers, loss, clip, Adam, the master weights) stays float32.

`native_gemms` runs independent float32 GEMMs as native tasks through MKL's sgemm_ (torch.mm's own routine),
for TD3's twin critics (algos/fused_net.py forward_together / backward_together).
"""

from __future__ import annotations

import ctypes
import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pearl_fpga.algos.common import Batch, LeanAdam, is_thin


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
    LeanAdam over the online parameters (in layer order), and the step's settings.

    The step is one native program (pearl_fpga._learner_native.Program, the GIL released once): the wide
    layers' GEMMs are torch's own (torch.addmm with the bias, torch.mm; in a low `precision` on copies of the
    weights refreshed at each step's start, their operands narrowed and results widened), the thin layers,
    the loss, ReLU and its mask, bias gradients, clipping and Adam native. The target network's forward pass
    runs beside the online one's, and the top wide layer's weight gradient beside the rest of the backward
    pass, on the native pool's helper when `pair_threads()` gives 2 (the learner's concurrent schedule):
    the same bits on one thread or two."""

    def __init__(self, online: list[tuple[torch.Tensor, torch.Tensor]], target: list[tuple[torch.Tensor, torch.Tensor]],
                 adam: LeanAdam, settings: DQNStepSettings, native: Any, precision: torch.dtype | None = None,
                 pair_threads: Callable[[], int] | None = None) -> None:
        """pair_threads(): the threads (1 or 2) the step's program runs on."""
        self.pair_threads: Callable[[], int] = pair_threads or (lambda: 1)
        self.settings = settings
        self.precision = precision
        self.adam = adam
        self.native = native
        # numpy views of the live parameters, made once (detached: no autograd)
        self._online_np = [(w.detach().numpy(), b.detach().numpy()) for w, b in online]
        self._target_np = [(w.detach().numpy(), b.detach().numpy()) for w, b in target]
        # thin layers (a side <= THIN: the input and output layers) run native, the others as GEMMs
        self._thin = [is_thin(w) for w, _ in online]
        self._buffers: dict[int, _Buffers] = {}
        self._low_buffers: dict[int, _LowBuffers] = {}
        # each wide layer's GEMM operands per network (W, and b as one row): the live weights, or the bits of
        # their `precision` copies, with the (master, copy) pairs to refresh those from
        self._gemm_np: list[list[tuple[np.ndarray, np.ndarray] | None]] = [[], []]
        self._refresh: list[tuple[np.ndarray, np.ndarray]] = []
        for net, layers in zip(self._gemm_np, (online, target), strict=True):
            for i, (w, b) in enumerate(layers):
                if self._thin[i]:
                    net.append(None)
                elif precision is None:
                    net.append((w.detach().numpy(), b.detach().numpy().reshape(1, -1)))
                else:
                    low = (_bits(w.detach().to(precision)), _bits(b.detach().to(precision)).reshape(1, -1))
                    self._refresh += [(w.detach().numpy(), low[0]), (b.detach().numpy().reshape(1, -1), low[1])]
                    net.append(low)

    def _make_buffers(self, batch_size: int, obs_dim: int) -> _Buffers:
        double_q = self.settings.double_q
        rows = 2 * batch_size if double_q else batch_size
        widths = [w.shape[0] for w, _ in self._online_np]
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
        """One gradient step (see the class docstring); returns (loss, |TD error| per sample)."""
        settings, n = self.settings, len(batch.reward)
        buf = self._buffers.get(n)
        if buf is None or buf.x.shape[1] != batch.obs.shape[1]:
            buf = self._buffers[n] = self._make_buffers(n, batch.obs.shape[1])
            self._low_buffers[n] = self._make_low_buffers(buf, n)
        low = self._low_buffers[n]
        threads = self.pair_threads()
        torch.cat((batch.obs, batch.next_obs) if settings.double_q else (batch.obs,), out=buf.x)
        prog = self.native.Program()
        for master, copy in self._refresh:
            prog.narrow(master, copy)
        # forward passes: target on next_obs beside online on [obs; next_obs] (one GEMM per layer)
        self._record_forward(prog.beside(), 1, np.ascontiguousarray(batch.next_obs.numpy()), buf.np_target,
                             low.target_in, low.target_out)
        self._record_forward(prog, 0, buf.np_x, buf.np_online, low.online_in, low.online_out)
        prog.join()
        weights = None if batch.weights is None else batch.weights.numpy()
        loss = prog.dqn_loss_grad(buf.np_q, buf.np_q_next_online, buf.np_q_next_target,
                                  batch.action.numpy().reshape(-1), batch.reward.numpy(), batch.done.numpy(), weights,
                                  settings.gamma, settings.double_q, buf.np_d_out, buf.np_abs_td)
        # backward pass: per layer dW = d^T a_in, db = column sums of d, d <- (d W) * (a_in > 0)
        np_d, side = buf.np_d_out, None
        for i in range(len(self._online_np) - 1, -1, -1):
            a_in = buf.np_x[:n] if i == 0 else buf.np_hidden_in[i - 1]
            layer, d_low, a_low = self._gemm_np[0][i], low.d[i], low.online_in[i]
            d_op = np_d
            if layer is None:
                prog.weight_grad_thin(np_d, a_in, buf.np_grads[2 * i])
            else:
                if d_low is not None and a_low is not None:  # the low precision's operands
                    prog.narrow(np_d, d_low)
                    d_op, a_in = d_low, a_low[:n]
                # dW reads d and the layer's input, which nothing below writes: beside the rest (the top one)
                to = prog
                if side is None:
                    to = side = prog.beside()
                w_grad = low.w_grad[i]
                if w_grad is None:
                    to.gemm(d_op, True, a_in, False, buf.np_grads[2 * i])
                else:  # a product of two low-precision operands, widened into the float32 gradient
                    to.gemm(d_op, True, a_in, False, w_grad)
                    to.widen(w_grad, buf.np_grads[2 * i])
            prog.bias_grad(np_d, buf.np_grads[2 * i + 1])
            if i > 0:
                mask, d_hidden, d_in_low = buf.np_hidden_in[i - 1], buf.np_d_hidden[i - 1], low.d_in[i]
                if layer is None:  # one native pass, mask included
                    prog.input_grad_thin(np_d, self._online_np[i][0], mask, d_hidden)
                elif d_in_low is None:
                    prog.gemm(d_op, False, layer[0], False, d_hidden)
                    prog.relu_backward(d_hidden, mask)
                else:  # widened and masked in one pass
                    prog.gemm(d_op, False, layer[0], False, d_in_low)
                    prog.relu_backward(d_hidden, mask, d_in_low)
                np_d = d_hidden
        if side is not None:
            prog.join()
        self.adam.native_step(prog, buf.np_grads, settings.max_grad_norm, threads=threads)
        values = prog.run(threads)
        return values[loss], buf.abs_td.clone()

    def _record_forward(self, prog: Any, net: int, x: np.ndarray, outs: list[np.ndarray], ins_low: list[Any],
                        outs_low: list[Any]) -> None:
        """Network `net`'s (0 online, 1 target) forward pass at x into `outs`: a wide layer is torch.addmm(b, x,
        W^T) (in a low precision on the copies, its input narrowed and its output widened), then ReLU."""
        layers_np, last = (self._online_np, self._target_np)[net], len(self._online_np) - 1
        for i, (w_np, b_np) in enumerate(layers_np):
            layer = self._gemm_np[net][i]
            if layer is None:
                prog.linear_thin(x, w_np, b_np, outs[i], i < last)
            elif ins_low[i] is None:
                prog.gemm(x, False, layer[0], True, outs[i], layer[1])
            else:
                prog.narrow(x, ins_low[i])
                prog.gemm(ins_low[i], False, layer[0], True, outs_low[i], layer[1])
                prog.widen(outs_low[i], outs[i])
            if layer is not None and i < last:
                prog.relu(outs[i])
            x = outs[i]

    def _make_low_buffers(self, buf: _Buffers, n: int) -> _LowBuffers:
        """The low precision's GEMM operands and results (all None in float32)."""
        def each(shape: Callable[[int, int], tuple[int, int]]) -> list[np.ndarray | None]:
            return [None if self._thin[i] or self.precision is None
                    else _bits(torch.empty(shape(*w.shape), dtype=self.precision))
                    for i, (w, _) in enumerate(self._online_np)]

        rows = len(buf.x)
        return _LowBuffers(online_in=each(lambda m, k: (rows, k)), online_out=each(lambda m, k: (rows, m)),
                           target_in=each(lambda m, k: (n, k)), target_out=each(lambda m, k: (n, m)),
                           d=each(lambda m, k: (n, m)), d_in=each(lambda m, k: (n, k)), w_grad=each(lambda m, k: (m, k)))
