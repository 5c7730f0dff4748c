"""Tolerances that follow the arithmetic, not one CPU's rounding.

Two float32 implementations of the same formula (a fused step against autograd, another SIMD path,
another BLAS) may round each operand differently by a few units in the last place (ulp). A value
computed as a difference a - b then carries an absolute error of a few ulps of max(|a|, |b|), which can
be any fraction of |a - b| itself: a relative tolerance on the difference describes one machine's luck,
not the arithmetic. These helpers derive each element's tolerance from its operands."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from pearl_fpga.algos.common import THIN

EPS32 = float(np.finfo(np.float32).eps)
U_BF16 = 2.0**-9
"""bfloat16 keeps 8 significant bits: rounding to it is off by at most 2^-9 relative."""


def difference_tolerance(a: np.ndarray, b: np.ndarray, ulps: float = 8.0) -> np.ndarray:
    """Per-element absolute tolerance of a - b: `ulps` units in the last place of its larger operand."""
    return ulps * EPS32 * np.maximum(np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64)))


def assert_difference_close(actual: np.ndarray, a: np.ndarray, b: np.ndarray, ulps: float = 8.0,
                            absolute: bool = False) -> None:
    """`actual` equals a - b (or |a - b|) within `ulps` units in the last place of the operands."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    expected = np.abs(a64 - b64) if absolute else a64 - b64
    error = np.abs(np.asarray(actual, np.float64) - expected)
    tol = difference_tolerance(a64, b64, ulps)
    worst = int(np.argmax(error - tol))
    assert np.all(error <= tol), (f"element {worst}: {float(np.ravel(actual)[worst])!r} against "
                                  f"{float(np.ravel(expected)[worst])!r} (error {float(np.ravel(error)[worst]):.3g}, "
                                  f"allowed {float(np.ravel(tol)[worst]):.3g} = {ulps} ulp of the operands)")


def huber_mean_tolerance(cur: np.ndarray, target: np.ndarray, weights: np.ndarray | None = None,
                         ulps: float = 8.0) -> float:
    """Absolute tolerance of mean(w * huber(cur - target)): each TD error's own tolerance times the
    Huber slope there (min(|td|, 1)), plus the rounding of the sum (n ulps of the result)."""
    cur64, target64 = np.asarray(cur, np.float64).ravel(), np.asarray(target, np.float64).ravel()
    w = np.ones_like(cur64) if weights is None else np.asarray(weights, np.float64).ravel()
    td = np.abs(cur64 - target64)
    huber = np.where(td < 1, 0.5 * td ** 2, td - 0.5)
    per_term = w * np.minimum(td, 1.0) * difference_tolerance(cur64, target64, ulps)
    return float(per_term.mean() + len(td) * EPS32 * abs((w * huber).mean()))


def bf16_forward_bound(layers: Sequence[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor,
                       err: torch.Tensor | None = None) -> torch.Tensor:
    """Per output, a first-order bound on |bf16 forward - float32 forward| (`err`: a bound on the
    input's own error).

    A bf16 layer rounds its input and its weights (each off by <= u relative) and its output (<= u): its
    pre-activation is off by at most 2u * (|a| @ |W|^T) + u * |z|, plus the incoming error e carried
    through |W|. ReLU and tanh do not grow an error; a float32 layer only carries it."""
    err = torch.zeros_like(x) if err is None else err
    a = x
    for i, (w, b) in enumerate(layers):
        z = a @ w.t() + b
        carried = err @ w.abs().t()
        if min(w.shape) > THIN:  # a wide layer: bf16
            carried = carried + 2 * U_BF16 * (a.abs() @ w.abs().t()) + U_BF16 * z.abs()
        err = carried
        a = torch.relu(z) if i < len(layers) - 1 else z
    return err
