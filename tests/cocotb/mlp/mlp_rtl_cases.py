"""Random quantized networks for the MLP RTL tests, and the golden model they are checked against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend
from pearl_fpga.spec.mlp import QuantizedLayer


def random_network(
    rng: np.random.Generator,
    max_width: int,
    max_layers: int,
    *,
    small: bool = False,
    widths: Sequence[int] | None = None,
) -> list[QuantizedLayer]:
    """A random network within the kernel's limits. Half the layers use full-range int16 weights and
    int32 biases with small shifts, so that accumulators go far outside int16 and saturate."""
    if widths is None:
        depth = int(rng.integers(1, max_layers + 1))
        top = min(max_width, 12 if small else max_width)
        widths = [int(w) for w in rng.integers(1, top + 1, depth + 1)]
        if not small and rng.random() < 0.5:
            widths[int(rng.integers(0, depth + 1))] = max_width  # the widest layer the kernel holds
    layers = []
    for i in range(len(widths) - 1):
        n, m = int(widths[i]), int(widths[i + 1])
        if rng.random() < 0.5:
            w = rng.integers(-32768, 32768, (m, n))
            b = rng.integers(-(2**31), 2**31, m)
            shift = int(rng.integers(0, 41))
        else:
            w = rng.integers(-600, 600, (m, n))
            b = rng.integers(-(2**22), 2**22, m)
            shift = int(rng.integers(8, 17))
        w[rng.random((m, n)) < 0.05] = -32768  # the one product that needs the full 31 bits
        layers.append(QuantizedLayer(w.astype(np.int16), b.astype(np.int32), shift, i < len(widths) - 2))
    return layers


def reference(layers: Sequence[QuantizedLayer], head: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The golden model (pearl_fpga.backends.mlp_numpy) on int16 observations (B, n0): (int16 outputs,
    int64 argmax of a RAW head or None)."""
    golden = NumpyMLPBackend()
    golden.load(layers, head)
    return golden.infer(x)
