"""Pieces shared by DQN, DDPG and TD3: network builder, the batch they learn from (pearl_fpga.replay's Batch,
as tensors), and the lean update helpers (module-free forward, fused gradient clipping, Adam without its
Python wrapper)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga.algos import torch_ops
from pearl_fpga.replay.batch import Batch as Batch  # the learners' batch type, re-exported

_SUBNORMAL = np.float32(np.finfo(np.float32).smallest_subnormal)

THIN = 16
"""Layers with a side (inputs or outputs) at most this wide are "thin": the fused step runs them as native
loops instead of MKL GEMMs, and a bfloat16 learner keeps them in float32 (the network's input layer, and
its output layer, whose values the loss compares: a Q-value of 100 is only 0.5 apart from its bfloat16
neighbours)."""


@contextmanager
def subnormals_flushed(on: bool = True) -> Iterator[None]:
    """Subnormal floats flushed to zero (FTZ and DAZ) on the calling thread for the block, and the
    thread's own mode restored after (torch.set_flush_denormal sets it; numpy tells which it was).

    Why: on many x86 CPUs every float operation on a subnormal takes a microcode assist, and a trained
    learner's Adam second moments (squares of small gradients) hold many of them, which can make its
    steps slower than a fresh learner's. XLA and TensorFlow flush them on the CPU for the same reason.
    A no-op where the CPU has no such mode (torch returns False)."""
    if not on:
        yield
        return
    was_on = bool(_SUBNORMAL * np.float32(1.0) == 0.0)
    if was_on or not torch.set_flush_denormal(True):
        yield
        return
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def mlp(n_in: int, hidden: Sequence[int], n_out: int, tanh_head: bool = False) -> nn.Sequential:
    """Linear/ReLU stack (the MLP kernel's shape): n_in -> hidden... -> n_out, optional Tanh last."""
    layers: list[nn.Module] = []
    width = n_in
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_out))
    if tanh_head:
        layers.append(nn.Tanh())
    return nn.Sequential(*layers)


def optimizer_state_to_device(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Move an optimizer's state tensors (after load_state_dict) to the parameters' device."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and key != "step":
                state[key] = value.to(device)


def named_state(owner: Any, names: Iterable[str]) -> dict[str, Any]:
    """{name: owner.<name>.state_dict()} of a learner's networks and optimizers (a checkpoint's keys are
    named as the attributes they hold, so the checkpoint checks find them)."""
    return {name: getattr(owner, name).state_dict() for name in names}


def load_named_state(owner: Any, state: dict[str, Any], names: Iterable[str], device: torch.device) -> None:
    """The inverse of named_state: state[name] into owner.<name>, strictly (shapes must match); an
    optimizer's state tensors then moved to `device`, its parameters' (a checkpoint written on another
    device loads)."""
    for name in names:
        part = getattr(owner, name)
        part.load_state_dict(state[name])
        if isinstance(part, torch.optim.Optimizer):
            optimizer_state_to_device(part, device)


def linear_layers(net: nn.Sequential) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight, bias) of each Linear of an `mlp()` network, in order (the live parameters)."""
    return [(m.weight, m.bias) for m in net if isinstance(m, nn.Linear)]


def is_thin(weight: torch.Tensor) -> bool:
    """Whether a Linear weight has a side of at most THIN."""
    return min(weight.shape) <= THIN


def cast_layers(layers: Sequence[tuple[torch.Tensor, torch.Tensor]],
                dtype: torch.dtype | None) -> Sequence[tuple[torch.Tensor, torch.Tensor]]:
    """`layers` with each wide (not thin) layer's weight and bias as a `dtype` copy, for a learner whose
    GEMMs run in a lower precision; `layers` itself when dtype is None (float32 throughout). The copies
    are differentiable: autograd casts their gradients back onto the float32 master parameters."""
    if dtype is None:
        return layers
    return [(w, b) if is_thin(w) else (w.to(dtype), b.to(dtype)) for w, b in layers]


def forward(layers: Sequence[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor, tanh_head: bool = False) -> torch.Tensor:
    """The `mlp()` network's forward pass without nn.Module call overhead (same ops, same results).

    ReLU runs in place on each Linear output: addmm's backward does not need its output. Layers from
    cast_layers() take their input in their own dtype; the output is float32 (casts to the dtype a tensor
    already has return it unchanged, so a float32 network runs exactly the ops it ran before)."""
    for weight, bias in layers[:-1]:
        x = torch.relu_(F.linear(x.to(weight.dtype), weight, bias))
    weight, bias = layers[-1]
    x = F.linear(x.to(weight.dtype), weight, bias).float()
    return torch.tanh(x) if tanh_head else x


def clip_grad_norm(grads: Sequence[torch.Tensor], max_norm: float) -> None:
    """Scale `grads` in place as torch.nn.utils.clip_grad_norm_ does (total L2 norm, coefficient
    max_norm / (norm + 1e-6) clamped at 1), with a foreach norm over the list and no host sync."""
    total = torch.linalg.vector_norm(torch.stack(torch_ops.foreach_norm(grads)))
    torch_ops.foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))


class LeanAdam:
    """torch.optim.Adam(fused=True) stepped with explicit gradient tensors.

    Runs the same fused CPU/CUDA Adam kernel on the same state tensors as `optimizer.step()`, without
    the per-call Python wrapper (grouping, hooks, state look-ups: ~20% of a small DQN gradient step).
    The gradients come from torch.autograd.grad, so parameters never hold `.grad` and nothing needs
    zeroing. `optimizer` is the real torch optimizer: its state_dict()/load_state_dict() are the
    checkpoint format (call `reset_cache()` after loading or moving its state).
    """

    def __init__(self, params: Iterable[torch.Tensor], lr: float) -> None:
        self.params = list(params)
        self.optimizer = torch.optim.Adam(self.params, lr=lr, fused=True)
        self.traceable = False  # True: step() with public ops only, which torch.compile traces (CompiledStep)
        self._state: tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]] | None = None
        self._views: tuple[list[np.ndarray], ...] | None = None

    def reset_cache(self) -> None:
        """Forget the cached state tensors (after optimizer.load_state_dict or a device move)."""
        self._state = None
        self._views = None

    def init_state(self) -> None:
        """Create Adam's state now (it is otherwise made at the first step)."""
        self._state_lists()

    def _state_lists(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        if self._state is None:
            for p in self.params:  # lazy initialization exactly as Adam._init_group does for fused=True
                state = self.optimizer.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            states = [self.optimizer.state[p] for p in self.params]
            self._state = ([s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                           [s["step"] for s in states])
        return self._state

    def step(self, grads: Sequence[torch.Tensor]) -> None:
        """One Adam update of `params` with `grads` (same order)."""
        exp_avgs, exp_avg_sqs, steps = self._state_lists()
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        torch_ops.foreach_add_(steps, 1)
        adam = torch_ops.adam_fallback_ if self.traceable else torch_ops.adam_
        adam(self.params, grads, exp_avgs, exp_avg_sqs, steps, lr=group["lr"], beta1=beta1, beta2=beta2,
                        weight_decay=group["weight_decay"], eps=group["eps"])

    def native_views(self) -> tuple[list[np.ndarray], ...]:
        """numpy views of the parameters, moments and step counters (Adam's state made first if new), cached
        until reset_cache(). Call it on one thread before native steps of parts run on several."""
        if self._views is None:
            exp_avgs, exp_avg_sqs, step_counts = self._state_lists()
            self._views = ([p.detach().numpy() for p in self.params], [m.numpy() for m in exp_avgs],
                           [v.numpy() for v in exp_avg_sqs], [s.numpy() for s in step_counts])
        return self._views

    def native_step(self, native: Any, grads: Sequence[np.ndarray], max_grad_norm: float,
                    part: slice | None = None, threads: int = 1) -> float:
        """Clip `grads` (numpy, in place; max_grad_norm <= 0 skips it) and take one Adam step with the
        native learner module (CPU parameters only), on the same parameter and state memory as step().
        `part`: step only these parameters (`grads` holds theirs), without clipping (a norm is over all);
        Adam is per parameter, so parts stepped one by one, or at once on several threads, give the bits
        of one step. `threads`: the update's chunks on up to this many threads (the native pool's helper
        beside this one), the same bits. Returns the gradient norm (of the part) before clipping."""
        if part is not None and max_grad_norm > 0:
            raise ValueError("LeanAdam.native_step: a part of the parameters cannot be clipped by the norm of all")
        params, ms, vs, steps = (view[part or slice(None)] for view in self.native_views())
        group = self.optimizer.param_groups[0]
        beta1, beta2 = group["betas"]
        return native.clip_adam(params, list(grads), ms, vs, steps, float(group["lr"]), beta1, beta2,
                                group["eps"], group["weight_decay"], max_grad_norm, threads)


RECOMPILE_LIMIT = 64
"""Graphs a CompiledStep may hold for one learner step function (dynamo's `recompile_limit`)."""


class CompiledStep:
    """A learner's whole gradient step (forward, backward, clip, optimizer, target update) as one
    torch.compile'd unit (inductor on the CPU), `torch.autograd.grad` traced into the graph.

    Compiling happens at the first call (seconds to a minute, cached by torch on disk for later runs)
    and again for a new batch shape. Where compiling fails (no C++ compiler, an op inductor cannot
    lower, an old torch), one warning line says so and the uncompiled `step` runs from then on: the
    run continues, only slower. The optimizers must be LeanAdam with `traceable` set."""

    def __init__(self, step: Callable[..., Any], name: str, backend: Any = "inductor") -> None:
        self.step = step
        self.name = name
        self._compiled: Callable[..., Any] | None = torch.compile(step, backend=backend)

    @property
    def compiled(self) -> bool:
        """False once compiling failed here (the uncompiled step runs)."""
        return self._compiled is not None

    def __call__(self, *args: Any) -> Any:
        if self._compiled is not None:
            import torch._dynamo

            try:
                # one graph per guard set: per batch shape, torch thread count (the adaptive threads switch
                # it) and TD3's actor/critic-only steps; dynamo's default limit of 8 would send the rest to
                # the uncompiled step
                with torch._dynamo.config.patch(trace_autograd_ops=True, recompile_limit=RECOMPILE_LIMIT):
                    return self._compiled(*args)
            except torch._dynamo.exc.TorchDynamoException as exc:
                cause = getattr(exc, "inner_exception", None) or exc  # the backend's own error
                first = (str(cause).strip().splitlines() or [""])[0][:200]
                warnings.warn(f"{self.name}: torch.compile failed here ({type(cause).__name__}: {first}); "
                              "running the step uncompiled", RuntimeWarning, stacklevel=2)
                self._compiled = None
        return self.step(*args)
