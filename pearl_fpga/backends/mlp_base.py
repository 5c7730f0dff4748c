"""The interface every MLP-kernel backend implements (numpy, cpu, rtl, pynq/xrt boards).

A backend holds one loaded network (the kernel's on-chip weights) and runs int16 observations
through it exactly as hls/mlp/SPEC.md says; float quantization lives in `pearl_fpga.kernels.mlp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from pearl_fpga.spec.mlp import QuantizedLayer


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
