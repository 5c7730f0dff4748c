"""The MLP kernel's reference RTL: cocotb testbenches per parameter set, and the "rtl" backend.

Each cocotb parameter set is one Verilator build (in build/sim/, reused across runs) running every
test of tests/cocotb/mlp/test_mlp_top.py; the rtl backend builds its own library once per shape
(cached in ~/.cache/pearl_fpga/rtl).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from pearl_fpga.backends.mlp_cpu import CpuMLPBackend
from pearl_fpga.board.mlp_driver import MLPRTLBackend
from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.kernels import MLPInfer
from pearl_fpga.spec.mlp import HEAD_RAW, HEAD_TANH, QuantizedLayer, infer_cycle_bound
from pearl_fpga.sim.verilator import kernel_rtl, tanh_parameter, write_tanh_memh

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[1]
COCOTB_DIR = Path(__file__).resolve().parent / "cocotb" / "mlp"
sys.path.insert(0, str(COCOTB_DIR))
from mlp_cases import networks  # noqa: E402  (tests/, the MLP kernel's shared test material)
from mlp_rtl_cases import random_network, reference  # noqa: E402

# (LANES, MAX_WIDTH, MEM_LATENCY): a narrow and a wide MAC array, the engine's memories read with one
# more register than the default in the narrow one; MAX_WIDTH 64 keeps the simulations short.
COCOTB_SETS = [(4, 64, 3), (16, 64, 2)]


@pytest.mark.parametrize("lanes,max_width,mem_latency", COCOTB_SETS, ids=lambda v: str(v))
def test_cocotb_mlp_top(lanes: int, max_width: int, mem_latency: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    build_dir = REPO / "build" / "sim" / f"mlp_top_p{lanes}_w{max_width}_l{mem_latency}"
    memh = write_tanh_memh(build_dir)
    results = build_dir / "mlp_cycles.json"
    results.unlink(missing_ok=True)
    monkeypatch.syspath_prepend(str(COCOTB_DIR))  # the simulator imports the test module from sys.path
    run_cocotb(
        top="mlp_top",
        sources=kernel_rtl("mlp"),
        test_module="test_mlp_top",
        test_dir=build_dir,
        build_dir=build_dir,
        parameters={"LANES": lanes, "MAX_WIDTH": max_width, "MAX_LAYERS": 4, "MEM_LATENCY": mem_latency},
        build_args=[tanh_parameter(memh)],
        extra_env={
            "MLP_LANES": str(lanes),
            "MLP_MAX_WIDTH": str(max_width),
            "MLP_MAX_LAYERS": "4",
            "MLP_SEED": str(lanes * 7 + max_width),
            "MLP_TB_RESULTS": str(results),
        },
    )
    figures = json.loads(results.read_text())
    print(f"mlp_top cycles per inference (LANES={lanes}): {figures['nets']}", file=sys.stderr)
    assert figures["lanes"] == lanes and len(figures["nets"]) == 3


# ---------------------------------------------------------------------------- the "rtl" backend
@pytest.fixture(scope="module")
def rtl() -> MLPRTLBackend:
    return MLPRTLBackend(lanes=16)


@pytest.fixture(scope="module")
def cpu() -> CpuMLPBackend:
    return CpuMLPBackend()


def _check(backend: MLPRTLBackend, layers: list[QuantizedLayer], head: str, x: np.ndarray, cpu: CpuMLPBackend | None = None) -> None:
    """rtl == numpy reference (and == cpu when given), outputs and argmax."""
    backend.load(layers, head)
    values, argmax = backend.infer(x)
    want_values, want_argmax = reference(layers, head, x)
    assert values.dtype == np.int16 and values.shape == want_values.shape
    np.testing.assert_array_equal(values, want_values)
    if head == HEAD_RAW:
        np.testing.assert_array_equal(argmax, want_argmax)
    else:
        assert argmax is None
    if cpu is not None:
        cpu.load(layers, head)
        cpu_values, _ = cpu.infer(x)
        np.testing.assert_array_equal(values, cpu_values)


@settings(max_examples=25)
@given(case=networks(max_width=256))
def test_rtl_backend_bit_exact(rtl: MLPRTLBackend, cpu: CpuMLPBackend, case) -> None:
    """Random networks (tests/mlp_cases.py: up to 4 layers, widths up to 256, any shift, saturation,
    exact rounding ties, batches of 0..40) give the same words on rtl, numpy and cpu."""
    layers, head, x_q = case
    _check(rtl, layers, head, x_q, cpu)


def test_rtl_backend_saturates_every_way(rtl: MLPRTLBackend) -> None:
    """Accumulators far above and below int16, a zero shift and the largest shift (40)."""
    w = np.full((3, 2), -32768, dtype=np.int16)
    hidden = QuantizedLayer(w, np.array([2**31 - 1, -(2**31), 0], dtype=np.int32), 0, True)
    out_w = np.array([[32767, -32768, 1], [-1, 1, 32767]], dtype=np.int16)
    out_b = np.array([5, -5], dtype=np.int32)
    x = np.array([[-32768, -32768], [32767, -32768], [0, 0]], dtype=np.int16)
    _check(rtl, [hidden, QuantizedLayer(out_w, out_b, 1, False)], HEAD_RAW, x)
    _check(rtl, [hidden, QuantizedLayer(out_w, out_b, 40, False)], HEAD_TANH, x)


def test_mlpinfer_rtl_matches_cpu() -> None:
    """MLPInfer(backend="rtl") end to end: same outputs and actions as the cpu backend, cycles reported."""
    import torch
    torch.manual_seed(0)
    q_net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 2))
    obs = np.random.default_rng(7).normal(size=(64, 4)) * np.array([1.0, 2.0, 0.2, 2.0])
    on_rtl = MLPInfer.from_torch(q_net, backend="rtl", calibration=obs)
    on_cpu = MLPInfer.from_torch(q_net, backend="cpu", calibration=obs)
    np.testing.assert_array_equal(on_rtl(obs[:16]), on_cpu(obs[:16]))
    np.testing.assert_array_equal(on_rtl.act(obs[:16]), on_cpu.act(obs[:16]))
    assert on_rtl.last_cycles is not None and on_rtl.last_cycles > 0


def test_rtl_cycles_per_inference(rtl: MLPRTLBackend) -> None:
    """Whole-batch cycles per inference (pipeline fill included) of the README's two networks within
    SPEC.md's bound MACs / LANES + 8 * layers + 16."""
    rng = np.random.default_rng(4)
    for widths in ([4, 64, 64, 2], [3, 256, 256, 1]):
        layers = random_network(rng, 256, 4, widths=widths)
        x = rng.integers(-4096, 4096, (16, widths[0])).astype(np.int16)
        _check(rtl, layers, HEAD_RAW, x)
        per_inference = rtl.last_cycles / len(x)
        assert per_inference <= infer_cycle_bound([(layer.n_in, layer.m_out) for layer in layers], 16), (widths, per_inference)


def test_rtl_timeout_names_state_and_recovers(rtl: MLPRTLBackend) -> None:
    rng = np.random.default_rng(5)
    layers = random_network(rng, 256, 4, widths=[5, 32, 3])
    x = rng.integers(-4096, 4096, (4, 5)).astype(np.int16)
    _check(rtl, layers, HEAD_RAW, x)
    rtl.cycle_limit = 20
    try:
        with pytest.raises(KernelTimeout, match=r"mlp kernel on Verilator simulation of mlp_top.*within 20 clock cycles.*"
                                                r"register state: ctrl@0x00=0x.*reloaded"):
            rtl.infer(x)
    finally:
        rtl.cycle_limit = None
    want, _ = reference(layers, HEAD_RAW, x)
    np.testing.assert_array_equal(rtl.infer(x)[0], want)  # reset and reloaded


def test_rtl_bad_input_leaves_state(rtl: MLPRTLBackend) -> None:
    rng = np.random.default_rng(6)
    layers = random_network(rng, 256, 4, widths=[6, 9, 2])
    x = rng.integers(-4096, 4096, (3, 6)).astype(np.int16)
    _check(rtl, layers, HEAD_RAW, x)
    with pytest.raises(ValueError, match=r"shape \(batch, 6\)"):
        rtl.infer(x[:, :5])
    with pytest.raises(ValueError, match="int16"):
        rtl.infer(x.astype(np.int32))
    with pytest.raises(ValueError, match="MAX_WIDTH"):
        rtl.load(random_network(rng, 300, 4, widths=[4, 257, 2]), HEAD_RAW)
    with pytest.raises(ValueError, match="MAX_LAYERS"):
        rtl.load(random_network(rng, 256, 5, widths=[2, 2, 2, 2, 2, 2]), HEAD_RAW)
    with pytest.raises(ValueError, match="MAX_BATCH"):
        rtl.infer(np.zeros((4097, 6), dtype=np.int16))
    want, _ = reference(layers, HEAD_RAW, x)
    np.testing.assert_array_equal(rtl.infer(x)[0], want)


def test_rtl_backend_unavailable_without_verilator(monkeypatch: pytest.MonkeyPatch) -> None:
    import pearl_fpga.sim.verilator as verilator

    monkeypatch.setattr(verilator, "verilator_available", lambda: False)
    with pytest.raises(BackendUnavailable, match=r"needs Verilator and g\+\+.*pearl_fpga\[sim\]"):
        MLPRTLBackend(lanes=2, max_width=8)  # a shape not built in this process
