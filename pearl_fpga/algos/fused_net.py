"""One `mlp()` network's fused CPU passes (`FusedNet`, into per-batch-size buffers: `NetPass`), and several
networks of one shape at once (`forward_together`, `backward_together`): the pieces every fused actor-critic
step is built from (algos/fused_critics.py: the critics; fused_ac.py: DDPG's and TD3's actor; and a stochastic actor's learner).

A network's wide layers stay torch GEMMs (MKL; bfloat16 on copies of the weights with a `precision`)
writing into buffers allocated once per batch size; the thin layers (a side of at most `common.THIN`: the
input layer, the heads), the bias and ReLU after each wide GEMM, bias gradients and ReLU masks run as native
calls over numpy views of the same memory (pearl_fpga._learner_native), and nothing builds an autograd graph.

In float32 with torch's MKL, the `*_together` pieces run several networks of one shape (TD3's twin critics)
layer by layer, every wide GEMM of a layer as one call of native tasks (algos/fused.py native_gemms), on the
native pool's helper beside the caller in a concurrent schedule.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pearl_fpga.algos.common import is_thin

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
    which also narrows its float32 result for the next GEMM (a weight gradient is widened into its float32
    buffer from one made once).

    Each pass is recorded into a native Program (`prog`: the caller's, which runs it with others, the GIL
    released once for all; None: a program of its own, run at once). Its GEMMs are torch's own (at::mm_out),
    so a pass gives the bits of the same torch and native calls made one by one."""

    def __init__(self, layers: Layers, native: Any, precision: torch.dtype | None) -> None:
        self.native, self.precision = native, precision
        self.thin = [is_thin(w) for w, _ in layers]
        self.widths = [int(w.shape[0]) for w, _ in layers]
        self.inputs = [int(w.shape[1]) for w, _ in layers]
        self._np = [(w.detach().numpy(), b.detach().numpy()) for w, b in layers]
        # the GEMMs' weights (numpy): the live ones, or the bits of their `precision` copies refreshed per step
        # (the bias is added natively, in float32)
        self._gemm = [w for w, _ in self._np]
        self._masters: list[np.ndarray] = []
        self._low: list[np.ndarray] = []
        self._wgrad_low: list[np.ndarray | None] = [None] * len(layers)  # a wide layer's weight gradient
        if precision is not None:
            for i, (w, _) in enumerate(layers):
                if not self.thin[i]:
                    self._masters.append(self._np[i][0])
                    self._gemm[i] = _bits(w.detach().to(precision))
                    self._low.append(self._gemm[i])
                    self._wgrad_low[i] = _bits(torch.empty(w.shape, dtype=precision))

    def refresh(self, prog: Any = None) -> None:
        """Copy the master weights into the low-precision copies (no-op in float32), rounded as torch's copy."""
        if self._low:
            with recording(self.native, prog) as rec:
                for master, low in zip(self._masters, self._low, strict=True):
                    rec.narrow(master, low)

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

    def forward(self, x: torch.Tensor, p: NetPass, prog: Any = None) -> None:
        """p.outs[-1] = the network at x (a contiguous float32 (rows, inputs) tensor); ReLU on the hidden layers."""
        last = len(self._gemm) - 1
        x_np = x.numpy()
        with recording(self.native, prog) as rec:
            for i, w in enumerate(self._gemm):
                relu = i < last
                if self.thin[i]:
                    rec.linear_thin(x_np, *self._np[i], p.np_outs[i], relu, self._next_low_in(p, i))
                elif self.precision is None:
                    rec.gemm(x_np, False, w, True, p.np_outs[i])
                    rec.bias_relu(p.np_outs[i], self._np[i][1], relu)
                else:
                    if i == 0:  # the network's input: no layer below narrowed it
                        rec.narrow(x_np, p.low_in_bits[0])
                    rec.gemm(p.low_in_bits[i], False, w, True, p.low_out_bits[i])
                    rec.bias_relu(p.np_outs[i], self._np[i][1], relu, p.low_out_bits[i], self._next_low_in(p, i))
                x_np = p.np_outs[i]

    def backward(self, d_out: torch.Tensor, x: torch.Tensor, p: NetPass, grads: Sequence[torch.Tensor] | None,
                 d_in: torch.Tensor | None = None, prog: Any = None, threads: int = 1) -> None:
        """From dLoss/d(output) `d_out` of the pass `p` at input `x`: the weight and bias gradients into
        `grads` (W0, b0, W1, ...; None skips them: only the input's gradient is wanted) and, when `d_in`
        is given, dLoss/dx into it. threads 2: the top wide hidden layer's weight-gradient GEMM runs beside
        the rest (a program beside this one: on the native pool's helper when the program runs on 2 threads;
        it reads d and that layer's input, which nothing below writes)."""
        native_grads = None if grads is None else [g.numpy() for g in grads]
        d, x_np, d_in_np = d_out.numpy(), x.numpy(), None if d_in is None else d_in.numpy()
        with recording(self.native, prog, threads) as rec:
            side = None
            for i in range(len(self._gemm) - 1, -1, -1):
                a_in = x_np if i == 0 else p.np_outs[i - 1]
                d_low = p.low_d_bits[i]
                if d_low is not None and i == len(self._gemm) - 1:  # the output: no layer above narrowed it
                    rec.narrow(d, d_low)
                d_gemm = d if d_low is None else d_low
                if native_grads is not None:
                    if self.thin[i]:
                        rec.weight_grad_thin(d, a_in, native_grads[2 * i])
                    else:
                        to = rec
                        if threads > 1 and i > 0 and side is None:
                            to = side = rec.beside()
                        wgrad_low = self._wgrad_low[i]
                        if wgrad_low is None:
                            to.gemm(d_gemm, True, a_in, False, native_grads[2 * i])
                        else:  # a product of two low-precision operands, widened into the float32 gradient
                            to.gemm(d_gemm, True, p.low_in_bits[i], False, wgrad_low)
                            to.widen(wgrad_low, native_grads[2 * i])
                    rec.bias_grad(d, native_grads[2 * i + 1])
                if i == 0 and d_in_np is None:
                    break
                if i > 0:
                    out, mask = p.np_d_hidden[i - 1], p.np_outs[i - 1]
                else:
                    assert d_in_np is not None  # else the loop ended above
                    out, mask = d_in_np, None
                below_low = p.low_d_bits[i - 1] if i > 0 else None  # the wide layer below's GEMM operand
                if self.thin[i]:  # one native pass, the ReLU's mask included
                    rec.input_grad_thin(d, self._np[i][0], mask, out, below_low)
                elif self.precision is None:
                    rec.gemm(d_gemm, False, self._gemm[i], False, out)
                    if mask is not None:
                        rec.relu_backward(out, mask)
                else:
                    d_in_low = p.low_d_in_bits[i]
                    rec.gemm(d_gemm, False, self._gemm[i], False, d_in_low)
                    if mask is not None:  # widened, masked and narrowed again for the layer below, in one pass
                        rec.relu_backward(out, mask, d_in_low, below_low)
                    else:
                        rec.widen(d_in_low, out)
                d = out
            if side is not None:
                rec.join()


def _bits(t: torch.Tensor) -> np.ndarray:
    """A 16-bit tensor's bits as a numpy int16 array (the same memory)."""
    return t.view(torch.int16).numpy()


@contextmanager
def recording(native: Any, prog: Any, threads: int = 1) -> Iterator[Any]:
    """`prog` to record into; or, when None, a Program of its own, run on leaving (on `threads` threads)."""
    if prog is not None:
        yield prog
        return
    own = native.Program()
    yield own
    own.run(threads)


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
