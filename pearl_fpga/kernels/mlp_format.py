"""The MLP kernel's numbers and stream words (hls/mlp/SPEC.md), shared by every backend and driver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_LAYERS = 4
MAX_WIDTH = 256  # board default; the cpu extension (and the numpy reference) hold CPU_MAX_WIDTH
CPU_MAX_WIDTH = 512
MAX_BATCH = 4096
INT16_MIN, INT16_MAX = -32768, 32767
TANH_FRAC_BITS = 12  # fixed output format of a tanh head (Q3.12)
TANH_SEGMENT_BITS = 6  # 1024 segments of 64 LSB

HEAD_RAW = "raw"
HEAD_TANH = "tanh"

FLAG_RELU = 1 << 0
FLAG_TANH = 1 << 1
FLAG_RAW = 1 << 2

MODE_LOAD = 0
MODE_INFER = 1

# AXI4-Lite register map (byte offsets)
REG_CTRL = 0x00
REG_GIE = 0x04
REG_IER = 0x08
REG_ISR = 0x0C
REG_MODE = 0x10
REG_BATCH = 0x18
REG_LANES = 0x20
REG_MAX_WIDTH = 0x28
REG_MAX_LAYERS = 0x30
REG_ERROR = 0x38


@dataclass(frozen=True)
class QuantizedLayer:
    """One linear layer as the kernel holds it."""

    weight: np.ndarray  # int16, (m_out, n_in), fw fractional bits
    bias: np.ndarray  # int32, (m_out,), fw + fa_in fractional bits
    shift: int  # fw + fa_in - fa_out, 0..40
    relu: bool  # hidden layers: True; the output layer: False

    @property
    def n_in(self) -> int:
        return int(self.weight.shape[1])

    @property
    def m_out(self) -> int:
        return int(self.weight.shape[0])


def tanh_table() -> np.ndarray:
    """T[k] = clamp(floor(tanh((64k - 32768) / 4096) * 32768 + 0.5), -32767, 32767), k = 0..1024, int32."""
    k = np.arange(1025, dtype=np.float64)
    t = np.floor(np.tanh((64.0 * k - 32768.0) / 4096.0) * 32768.0 + 0.5)
    return np.clip(t, -32767, 32767).astype(np.int32)


def encode_load_stream(layers: Sequence[QuantizedLayer], head: str) -> np.ndarray:
    """The LOAD stream of SPEC.md as uint16 words (the last word carries tlast)."""
    words: list[int] = [len(layers)]
    for i, layer in enumerate(layers):
        last = i == len(layers) - 1
        flags = (FLAG_RELU if layer.relu else 0) | (
            (FLAG_TANH if head == HEAD_TANH else FLAG_RAW) if last else 0
        )
        words += [layer.n_in, layer.m_out, layer.shift, flags]
    parts = [np.asarray(words, dtype=np.int64) & 0xFFFF]
    for layer in layers:
        parts.append(layer.weight.astype(np.int16).view(np.uint16).astype(np.int64).ravel())
        b = layer.bias.astype(np.int32).view(np.uint32).astype(np.int64)
        parts.append(np.stack([b & 0xFFFF, b >> 16], axis=1).ravel())
    return np.concatenate(parts).astype(np.uint16)
