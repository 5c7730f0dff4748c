"""The interface every MLP-kernel backend implements (numpy, cpu, rtl, pynq/xrt boards).

A backend holds one loaded network (the kernel's on-chip weights) and runs int16 observations
through it exactly as hls/mlp/SPEC.md says; float quantization lives in `pearl_fpga.kernels.mlp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from pearl_fpga.kernels.mlp_format import QuantizedLayer


@runtime_checkable
class MLPBackend(Protocol):
    """One MLP kernel instance: `load` weights, then `infer` batches of int16 observations."""

    name: str
    """Backend name as accepted by `MLPInfer.from_torch(backend=...)`."""
    max_layers: int
    """Most linear layers a LOAD may hold (MAX_LAYERS)."""
    max_width: int
    """Widest layer input or output (MAX_WIDTH)."""
    max_batch: int
    """Most observations per `infer` call (MAX_BATCH)."""
    last_cycles: int | None
    """Clock cycles of the last `infer` (cycle-accurate backends), else None."""

    def load(self, layers: Sequence[QuantizedLayer], head: str) -> None:
        """Replace the weights; raises ValueError (old weights kept) when the kernel rejects them."""
        ...

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """int16 (B, n_0) -> (int16 (B, m) outputs, int64 (B,) argmax for a RAW head else None)."""
        ...


def check_observations(x_q: np.ndarray, n0: int, max_batch: int | None = None) -> np.ndarray:
    """The INFER input every backend accepts: int16 of shape (batch, n0), batch <= max_batch.

    Returns it as a C-contiguous array; raises ValueError naming the problem otherwise.
    """
    x = np.asarray(x_q)
    if x.dtype != np.int16 or x.ndim != 2 or x.shape[1] != n0:
        raise ValueError(f"observations must be int16 of shape (batch, {n0}), got {x.dtype} {x.shape}")
    if max_batch is not None and x.shape[0] > max_batch:
        raise ValueError(f"batch of {x.shape[0]} is over MAX_BATCH = {max_batch}: split it")
    return np.ascontiguousarray(x)


def check_layers(layers: Sequence[QuantizedLayer], head: str, max_layers: int, max_width: int) -> None:
    """The LOAD rules of SPEC.md, checked on the host so that every backend rejects the same networks.

    Raises ValueError naming the limit or rule; nothing is loaded then.
    """
    from pearl_fpga.kernels.mlp_format import HEAD_RAW, HEAD_TANH

    if head not in (HEAD_RAW, HEAD_TANH):
        raise ValueError(f"head must be {HEAD_RAW!r} or {HEAD_TANH!r}, not {head!r}")
    if not 1 <= len(layers) <= max_layers:
        raise ValueError(
            f"the network has {len(layers)} linear layers; the kernel holds 1 to {max_layers} (MAX_LAYERS)"
        )
    for i, layer in enumerate(layers):
        w, b = np.asarray(layer.weight), np.asarray(layer.bias)
        if w.dtype != np.int16 or w.ndim != 2:
            raise ValueError(f"layer {i}: weight must be a 2-D int16 array, got {w.dtype} with shape {w.shape}")
        if b.dtype != np.int32 or b.shape != (w.shape[0],):
            raise ValueError(f"layer {i}: bias must be int32 of shape ({w.shape[0]},), got {b.dtype} {b.shape}")
        for what, size in (("inputs", layer.n_in), ("outputs", layer.m_out)):
            if not 1 <= size <= max_width:
                raise ValueError(
                    f"layer {i} has {size} {what}; the kernel supports 1 to {max_width} (MAX_WIDTH)"
                )
        if not 0 <= layer.shift <= 40:
            raise ValueError(f"layer {i}: shift {layer.shift} is outside 0..40 (SPEC.md)")
        if i > 0 and layer.n_in != layers[i - 1].m_out:
            raise ValueError(
                f"layer {i} takes {layer.n_in} inputs but layer {i - 1} gives {layers[i - 1].m_out}"
            )
        if i == len(layers) - 1 and layer.relu:
            raise ValueError("the output layer cannot have a ReLU (its head is raw or tanh)")
