"""Golden reference of the MLP kernel: hls/mlp/SPEC.md written out in int64 numpy. Slow is fine."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pearl_fpga.spec.mlp import check_layers, check_observations
from pearl_fpga.spec.mlp import (
    CPU_MAX_WIDTH,
    HEAD_TANH,
    INT16_MAX,
    INT16_MIN,
    MAX_BATCH,
    MAX_LAYERS,
    QuantizedLayer,
    tanh_table,
)


def requantize(acc: np.ndarray, shift: int, relu: bool) -> np.ndarray:
    """int64 accumulators -> int16: round half up by `shift` (arithmetic shift), saturate, optional ReLU."""
    y = (acc + (1 << (shift - 1))) >> shift if shift > 0 else acc
    y = np.clip(y, INT16_MIN, INT16_MAX)
    if relu:
        y = np.maximum(y, 0)
    return y.astype(np.int16)


def tanh_pwl(y: np.ndarray) -> np.ndarray:
    """Q3.12 int16 -> Q0.15 int16 through the 1025-entry table and 64-LSB linear segments."""
    table = tanh_table().astype(np.int64)
    u = y.astype(np.int64) + 32768
    k, r = u >> 6, u & 63
    return (table[k] + (((table[k + 1] - table[k]) * r + 32) >> 6)).astype(np.int16)


class NumpyMLPBackend:
    """The reference backend: `infer` is SPEC.md line by line."""

    name = "numpy"
    max_layers = MAX_LAYERS
    max_width = CPU_MAX_WIDTH  # the limits of the cpu extension (SPEC.md)
    max_batch = MAX_BATCH

    def __init__(self) -> None:
        self.last_cycles: int | None = None
        self._layers: list[QuantizedLayer] | None = None
        self._head = ""

    def load(self, layers: Sequence[QuantizedLayer], head: str) -> None:
        check_layers(layers, head, self.max_layers, self.max_width)
        self._layers = [
            QuantizedLayer(np.array(q.weight, np.int16), np.array(q.bias, np.int32), int(q.shift), bool(q.relu))
            for q in layers
        ]
        self._head = head

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if self._layers is None:
            raise ValueError("no weights loaded: call load() first")
        x_q = check_observations(x_q, self._layers[0].n_in, self.max_batch)
        a = x_q.astype(np.int64)
        for layer in self._layers:
            acc = a @ layer.weight.astype(np.int64).T + layer.bias.astype(np.int64)
            a = requantize(acc, layer.shift, layer.relu).astype(np.int64)
        y = a.astype(np.int16)
        if self._head == HEAD_TANH:
            return tanh_pwl(y), None
        return y, np.argmax(y, axis=1).astype(np.int64)  # argmax returns the first maximum
