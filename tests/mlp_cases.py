"""Reusable MLP-kernel test material: random quantized networks and int16 inputs (saturating ones
included), and the backends every bit-exactness test runs over.

A backend joins the cross-backend tests by an entry in `backend_factories()`; the rtl backend
(pearl_fpga.board.mlp_driver.MLPRTLBackend) joins automatically, marked `sim`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import strategies as st

from pearl_fpga.spec.mlp import HEAD_RAW, HEAD_TANH, INT16_MAX, INT16_MIN, QuantizedLayer


def backend_factories() -> dict[str, Callable[[], object]]:
    """name -> zero-argument factory of a fresh backend."""
    from pearl_fpga.backends.mlp_cpu import CpuMLPBackend

    factories: dict[str, Callable[[], object]] = {}
    for path in cpu_paths():  # every MAC array this CPU can run, e.g. "avx512vnni", and "plain" (HLS loops)
        factories[f"cpu-{path}"] = lambda path=path: CpuMLPBackend(path=path)
    if importlib.util.find_spec("pearl_fpga.board.verilator_transport") is not None:

        def rtl() -> object:
            from pearl_fpga.board.mlp_driver import MLPRTLBackend

            return MLPRTLBackend()

        factories["rtl"] = rtl
    return factories


def cpu_paths() -> list[str]:
    """The cpu backend's MAC arrays that run on this machine ("plain" always does)."""
    from pearl_fpga.backends.mlp_cpu import CpuMLPBackend, native_module

    paths = []
    for path in native_module().PATHS:
        try:
            CpuMLPBackend(path=path)
        except ValueError:
            continue
        paths.append(path)
    return paths


def cross_backend_params() -> list:
    """pytest params over every backend that must match the numpy reference bit for bit."""
    return [
        pytest.param(name, marks=[pytest.mark.sim] if name == "rtl" else [], id=name)
        for name in backend_factories()
    ]


def random_layers(
    rng: np.random.Generator,
    widths: list[int],
    head: str = HEAD_RAW,
    weight_bits: int = 16,
    shifts: tuple[int, int] = (0, 40),
    bias_bits: int = 32,
    relu_hidden: bool = True,
) -> list[QuantizedLayer]:
    """Random int16 weights of `weight_bits` bits, int32 biases of up to `bias_bits` bits, shifts in range."""
    layers = []
    for i, (n, m) in enumerate(zip(widths[:-1], widths[1:])):
        half = 1 << (weight_bits - 1)
        w = rng.integers(-half, half, size=(m, n)).astype(np.int16)
        bhalf = 1 << (bias_bits - 1)
        b = rng.integers(-bhalf, bhalf, size=m, dtype=np.int64).astype(np.int32)
        shift = int(rng.integers(shifts[0], shifts[1] + 1))
        layers.append(QuantizedLayer(w, b, shift, relu_hidden and i < len(widths) - 2))
    return layers


def random_inputs(
    rng: np.random.Generator, batch: int, n0: int, extremes: float = 0.25, max_abs: int = 32768
) -> np.ndarray:
    """int16 (batch, n0): uniform in [-max_abs, max_abs) with a share of -32768, 32767 and 0 (saturation
    corners)."""
    x = rng.integers(-max_abs, min(max_abs, INT16_MAX + 1), size=(batch, n0))
    corner = rng.random((batch, n0)) < extremes
    x[corner] = rng.choice([INT16_MIN, INT16_MAX, 0, -1, 1], size=int(corner.sum()))
    return x.astype(np.int16)


def sensible_shift_layers(rng: np.random.Generator, widths: list[int], head: str) -> list[QuantizedLayer]:
    """A network whose shifts keep typical outputs inside int16 (few saturations), with 14-bit weights."""
    layers = []
    for i, (n, m) in enumerate(zip(widths[:-1], widths[1:])):
        w = rng.integers(-(1 << 13), 1 << 13, size=(m, n)).astype(np.int16)
        b = rng.integers(-(1 << 24), 1 << 24, size=m).astype(np.int32)
        shift = 13 + int(np.ceil(np.log2(n))) // 2 + 2  # ~ sqrt(n) growth of a random sum
        layers.append(QuantizedLayer(w, b, shift, i < len(widths) - 2))
    return layers


# Named deterministic cases every backend runs (widths, head, builder).
FIXED_CASES = {
    "dqn-4-64-64-2": ([4, 64, 64, 2], HEAD_RAW, "sensible"),
    "ddpg-3-64-64-1-tanh": ([3, 64, 64, 1], HEAD_TANH, "sensible"),
    "saturating-8-40-3": ([8, 40, 3], HEAD_RAW, "saturating"),
    "four-layers-5-17-31-9-6": ([5, 17, 31, 9, 6], HEAD_RAW, "sensible"),
    "tanh-saturating-6-33-4": ([6, 33, 4], HEAD_TANH, "saturating"),
    "odd-widths-1-3-1": ([1, 3, 1], HEAD_RAW, "random"),
    "ties-7-9-5": ([7, 9, 5], HEAD_RAW, "ties"),
    "wide-256-256-7": ([256, 256, 7], HEAD_RAW, "sensible"),
    "two-mac-blocks-300-40-3": ([300, 40, 3], HEAD_RAW, "sensible"),  # rows longer than 256 products
    "cpu-width-512-3-tanh": ([512, 3], HEAD_TANH, "random"),
}


def build_case(name: str, seed: int = 0) -> tuple[list[QuantizedLayer], str]:
    widths, head, kind = FIXED_CASES[name]
    rng = np.random.default_rng(seed)
    if kind == "sensible":
        return sensible_shift_layers(rng, widths, head), head
    if kind == "saturating":
        return random_layers(rng, widths, head, weight_bits=16, shifts=(0, 4)), head
    if kind == "ties":
        return random_layers(rng, widths, head, weight_bits=3, shifts=(1, 2), bias_bits=6), head
    return random_layers(rng, widths, head), head


@st.composite
def networks(draw, max_width: int = 300) -> tuple[list[QuantizedLayer], str, np.ndarray]:
    """(layers, head, int16 inputs): 1-4 layers, widths up to `max_width`, any shift, some saturation."""
    n_layers = draw(st.integers(1, 4))
    big = draw(st.booleans()) and max_width > 64
    width = st.integers(1, max_width if big else 64)
    widths = [draw(width) for _ in range(n_layers + 1)]
    head = draw(st.sampled_from([HEAD_RAW, HEAD_TANH]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    style = draw(st.sampled_from(["random", "sensible", "saturating", "ties"]))
    if style == "ties":  # small sums and shifts: many exact halves (round half up) without saturation
        layers = random_layers(rng, widths, head, weight_bits=3, shifts=(1, 3), bias_bits=6)
        batch = draw(st.integers(0, 40))
        return layers, head, random_inputs(rng, batch, widths[0], extremes=0.0, max_abs=8)
    if style == "sensible":
        layers = sensible_shift_layers(rng, widths, head)
    elif style == "saturating":
        layers = random_layers(rng, widths, head, shifts=(0, 6))
    else:
        layers = random_layers(
            rng, widths, head, weight_bits=draw(st.integers(1, 16)), bias_bits=draw(st.integers(1, 32)),
            relu_hidden=draw(st.booleans()),
        )
    batch = draw(st.integers(0, 40))
    return layers, head, random_inputs(rng, batch, widths[0])
