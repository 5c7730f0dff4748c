"""MLP kernel: the numpy reference, the HLS C++ (cpu backend: every MAC array the CPU runs, with and
without VNNI, on any thread count, and the plain HLS loops) and, when present, the RTL agree bit for bit
(hls/mlp/SPEC.md); the tanh table and its stated error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlp_cases import (
    FIXED_CASES,
    backend_factories,
    build_case,
    cpu_paths,
    cross_backend_params,
    networks,
    random_inputs,
)
from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend, tanh_pwl
from pearl_fpga.spec.mlp import HEAD_RAW, QuantizedLayer, encode_load_stream, tanh_table

ROOT = Path(__file__).resolve().parents[1]
TANH_WORST_ERROR = 4.8e-5  # stated in the README: max |t/32768 - tanh(y/4096)| over every int16 y


def reference(layers, head, x_q):
    ref = NumpyMLPBackend()
    ref.load(layers, head)
    return ref.infer(x_q)


def assert_same(got, want, what: str) -> None:
    out, arg = got
    want_out, want_arg = want
    assert out.dtype == np.int16 and out.shape == want_out.shape, what
    bad = np.argwhere(out != want_out)
    assert bad.size == 0, f"{what}: {len(bad)} words differ, first at {bad[0]}: {out[tuple(bad[0])]} vs {want_out[tuple(bad[0])]}"
    if want_arg is None:
        assert arg is None, what
    else:
        np.testing.assert_array_equal(np.asarray(arg, dtype=np.int64), want_arg, err_msg=what)


@pytest.mark.parametrize("backend_name", cross_backend_params())
def test_fixed_cases_bit_exact(backend_name):
    backend = backend_factories()[backend_name]()
    ran = 0
    for name, (widths, _, _) in FIXED_CASES.items():
        if max(widths) > backend.max_width or len(widths) - 1 > backend.max_layers:
            continue
        layers, head = build_case(name)
        small = FIXED_CASES[name][2] == "ties"
        x_q = random_inputs(np.random.default_rng(1), 24, widths[0], extremes=0.0 if small else 0.25,
                            max_abs=8 if small else 32768)
        backend.load(layers, head)
        assert_same(backend.infer(x_q), reference(layers, head, x_q), f"{backend_name} {name}")
        ran += 1
    assert ran >= len(FIXED_CASES) - 2  # the two cases wider than 256 need the cpu build's width


@pytest.mark.parametrize("backend_name", [f"cpu-{path}" for path in cpu_paths()])
@given(case=networks())
def test_random_networks_bit_exact(backend_name, case):
    layers, head, x_q = case
    backend = backend_factories()[backend_name]()
    backend.load(layers, head)
    assert_same(backend.infer(x_q), reference(layers, head, x_q), backend_name)


def test_fastest_path_is_really_used_where_available():
    from pearl_fpga import _mlp_native
    from pearl_fpga.backends.mlp_cpu import CpuMLPBackend

    flags = set(Path("/proc/cpuinfo").read_text().split()) if Path("/proc/cpuinfo").exists() else set()
    avx512, avx2 = {"avx512f", "avx512bw"} <= flags, {"avx2", "bmi2"} <= flags
    cap = os.environ.get("PEARL_FPGA_NATIVE_ISA") or "vnni"  # make test-isa runs the narrower paths too
    levels = ["scalar", "avx2", "avx512", "vnni"]
    allowed = lambda level: levels.index(level) <= levels.index(cap)  # noqa: E731
    vnni = allowed("vnni") and ("avx512_vnni" in flags if avx512 and allowed("avx512") else "avx_vnni" in flags)
    want = ("avx512" if avx512 and allowed("avx512") else "avx2" if avx2 and allowed("avx2") else "plain")
    want = want + "vnni" if want != "plain" and vnni else want
    assert CpuMLPBackend().path == want
    assert want in _mlp_native.PATHS
    assert CpuMLPBackend(path="plain").path == "plain"
    with pytest.raises(ValueError, match="path must be one of 'auto', 'avx512vnni'"):
        CpuMLPBackend(path="sse9")


def test_reference_matches_spec_by_hand():
    """A 2-2-2 network worked out on paper: rounding half up, saturation, ReLU, argmax ties."""
    l0 = QuantizedLayer(np.array([[1, 2], [-3, 4]], np.int16), np.array([1, -2], np.int32), 1, True)
    l1 = QuantizedLayer(np.array([[30000, 0], [0, 30000]], np.int16), np.array([0, 0], np.int32), 0, False)
    x = np.array([[3, 2], [-1, -1], [32767, 32767]], np.int16)
    out, arg = reference([l0, l1], HEAD_RAW, x)
    # ties without ReLU (shift 1): -3/2 = -1.5 -> -1, 3/2 = 1.5 -> 2, -5/2 = -2.5 -> -2
    tie = QuantizedLayer(np.array([[-3], [3], [-5]], np.int16), np.zeros(3, np.int32), 1, False)
    np.testing.assert_array_equal(reference([tie], HEAD_RAW, np.array([[1]], np.int16))[0], [[-1, 2, -2]])
    # row 0: acc = (1+3*1+2*2, -2-9+8) = (8, -3) -> (8+1)>>1=4, (-3+1)>>1=-1 -> relu (4, 0) -> (120000->32767, 0)
    # row 1: acc = (1-1-2, -2+3-4) = (-2, -3) -> (-1, -1) -> relu (0, 0) -> (0, 0), argmax of a tie = 0
    # row 2: acc = (1+3*32767, -2+32767) = (98302, 32765) -> (49151, 16383) -> saturate (32767, 16383)
    np.testing.assert_array_equal(out, [[32767, 0], [0, 0], [32767, 32767]])
    np.testing.assert_array_equal(arg, [0, 0, 0])


def test_tanh_table_and_head_agree_everywhere():
    from pearl_fpga import _mlp_native

    np.testing.assert_array_equal(_mlp_native.tanh_table(), tanh_table())
    y = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16)
    np.testing.assert_array_equal(_mlp_native.tanh_pwl(y), tanh_pwl(y))
    table = tanh_table()
    assert table[0] == -32767 and table[512] == 0 and table[1024] == 32767
    assert np.all(np.diff(table) >= 0)


def test_tanh_worst_case_error_is_as_stated():
    y = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16)
    err = np.abs(tanh_pwl(y) / 32768.0 - np.tanh(y / 4096.0))
    assert err.max() <= TANH_WORST_ERROR
    assert err.max() > TANH_WORST_ERROR / 2  # the stated figure is tight, not a loose bound


@pytest.mark.parametrize("path", cpu_paths())
def test_rejected_load_keeps_old_weights(path):
    from pearl_fpga import _mlp_native

    engine = _mlp_native.Engine(path)
    layers, head = build_case("dqn-4-64-64-2")
    assert engine.load(encode_load_stream(layers, head)) == 0
    x_q = random_inputs(np.random.default_rng(2), 5, 4)
    before = engine.infer_int(x_q)
    words = encode_load_stream(layers, head)
    too_long = np.concatenate([words, words[:3]])
    truncated_header = words[:3]
    mismatch = words.copy()
    mismatch[5] = 7  # layer 1 n_in != layer 0 m_out
    bad_shift = words.copy()
    bad_shift[3] = 41
    too_wide = words.copy()
    too_wide[2] = _mlp_native.MAX_WIDTH + 1
    truncated_weights = words[: len(words) // 2]
    bad_streams = [mismatch, bad_shift, too_wide, truncated_header, truncated_weights]
    for stream in bad_streams:
        assert engine.load(stream) == _mlp_native.ERR_BAD_LOAD
        after = engine.infer_int(x_q)
        np.testing.assert_array_equal(after[0], before[0])
    assert engine.load(too_long) == _mlp_native.ERR_BAD_LOAD  # words after tlast: rejected, old weights kept
    np.testing.assert_array_equal(engine.infer_int(x_q)[0], before[0])


def test_infer_int_rejects_wrong_arrays():
    from pearl_fpga.backends.mlp_cpu import CpuMLPBackend

    backend = CpuMLPBackend()
    layers, head = build_case("dqn-4-64-64-2")
    backend.load(layers, head)
    with pytest.raises(TypeError, match="int16"):
        backend.infer(np.zeros((2, 4), np.int32))
    with pytest.raises(ValueError, match="4 inputs"):
        backend.infer(np.zeros((2, 5), np.int16))
    with pytest.raises(ValueError, match="MAX_BATCH"):
        backend.infer(np.zeros((backend.max_batch + 1, 4), np.int16))


def test_csim_testbench_passes(tmp_path):
    """The C simulation that `make csim` runs: mlp_top through its streams against the formulas."""
    exe = tmp_path / "mlp_tb"
    subprocess.run(
        ["g++", "-std=c++17", "-O1", "-Wall", "-Wno-unknown-pragmas", "-Ihls", "-Ihls/mlp",
         "hls/mlp/mlp.cpp", "hls/mlp/mlp_tb.cpp", "-o", str(exe)],
        cwd=ROOT, check=True,
    )
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all checks passed" in result.stdout


def test_kernel_parameters_match_the_python_description():
    from pearl_fpga import _mlp_native
    from pearl_fpga.spec import mlp as mlp_format

    assert _mlp_native.MAX_WIDTH == mlp_format.CPU_MAX_WIDTH
    assert _mlp_native.MAX_LAYERS == mlp_format.MAX_LAYERS
    assert _mlp_native.MAX_BATCH == mlp_format.MAX_BATCH
    assert NumpyMLPBackend.max_width == mlp_format.CPU_MAX_WIDTH


# A batch split over threads: every observation is computed alone, so any thread count gives the same bits.


def _split_engine(path: str, threads: int, layers, head: str, parallel_batch: int = 2):
    from pearl_fpga import _mlp_native

    engine = _mlp_native.Engine(path, threads)
    assert engine.load(encode_load_stream(layers, head)) == 0
    engine.parallel_batch = parallel_batch
    return engine


@pytest.mark.parametrize("path", cpu_paths())
@given(case=networks(), threads=st.integers(2, 4), batch=st.integers(16, 200), seed=st.integers(0, 2**32 - 1))
def test_split_batches_bit_exact(path, case, threads, batch, seed):
    layers, head, _ = case
    x_q = random_inputs(np.random.default_rng(seed), batch, layers[0].weight.shape[1])
    engine = _split_engine(path, threads, layers, head)
    assert engine.threads_for(batch) == threads
    assert_same(engine.infer_int(x_q), reference(layers, head, x_q), f"{path}, {threads} threads, batch {batch}")


@pytest.mark.parametrize("path", cpu_paths())
def test_saturation_corners_on_every_path_and_thread_count(path):
    """Weights and inputs at the int16 corners, the widest layers (two exact blocks per row), biases at
    the int32 corners, and shifts from none to the largest: the sums a split activation must keep exact."""
    rng = np.random.default_rng(7)
    corners = np.array([-32768, 32767, -32767, 255, 256, -256, -1, 0, 1], np.int64)
    layers = []
    for widths, shift, relu in (((512, 512), 0, True), ((512, 300), 40, False), ((300, 5), 16, False)):
        n, m = widths
        w = rng.choice([-32768, 32767, -1, 0], size=(m, n)).astype(np.int16)
        w[0] = -32768  # a row of the most negative weight: its sum reaches -2^39 on saturated inputs
        b = rng.choice([-(2**31), 2**31 - 1, 0], size=m).astype(np.int32)
        layers.append(QuantizedLayer(w, b, shift, relu))
    x_q = rng.choice(corners, size=(97, 512)).astype(np.int16)
    x_q[:8] = -32768
    x_q[8:16] = 32767
    want = reference(layers, HEAD_RAW, x_q)
    for threads in (1, 2, 3):
        engine = _split_engine(path, threads, layers, HEAD_RAW)
        assert_same(engine.infer_int(x_q), want, f"{path}, {threads} threads")


def test_thread_settings():
    import torch

    from pearl_fpga.backends.mlp_cpu import CpuMLPBackend

    backend = CpuMLPBackend()
    assert backend.threads == 0  # automatic
    with pytest.raises(ValueError, match="no weights loaded"):
        _ = backend.parallel_batch
    backend.load(*build_case("wide-256-256-7"))
    wide = backend.parallel_batch
    backend.load(*build_case("dqn-4-64-64-2"))
    assert 2 <= wide < backend.parallel_batch  # more work per observation: split from a smaller batch
    derived = backend.parallel_batch
    backend.parallel_batch = 40
    backend.load(*build_case("dqn-4-64-64-2"))  # a setting outlives new weights
    assert backend.parallel_batch == 40 and backend.engine.threads_for(39) == 1
    old = torch.get_num_threads()
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            assert backend.engine.threads_for(40) == n  # the default follows torch where torch is loaded
    finally:
        torch.set_num_threads(old)
    backend.threads = 3
    assert backend.engine.threads_for(40) == 3 and backend.engine.threads_for(15) == 1
    backend.parallel_batch = 0
    assert backend.parallel_batch == derived
    with pytest.raises(ValueError, match="threads must be 0"):
        backend.threads = -1
    with pytest.raises(ValueError, match="parallel_batch must be 0"):
        backend.parallel_batch = -1


DEFAULT_THREADS_PROBE = """
import sys
from pearl_fpga.backends.mlp_cpu import CpuMLPBackend
sys.path.insert(0, "tests")
from mlp_cases import build_case
backend = CpuMLPBackend()
backend.load(*build_case("wide-256-256-7"))
assert "torch" not in sys.modules
print(backend.engine.threads_for(4096))
"""


@pytest.mark.parametrize("omp", [None, "1", "2,1"])
def test_default_threads_without_torch(omp):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if omp is not None:
        env["OMP_NUM_THREADS"] = omp
    r = subprocess.run([sys.executable, "-c", DEFAULT_THREADS_PROBE], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    cores = len(os.sched_getaffinity(0))
    assert int(r.stdout) == (cores if omp is None else min(cores, int(omp.split(",")[0])))


def test_split_batches_from_several_threads_and_after_a_fork():
    """Concurrent callers share the helper pool (one runs alone while another holds it), and a forked
    child, which has no helper threads, starts its own pool instead of waiting for the parent's."""
    import multiprocessing
    from concurrent.futures import ThreadPoolExecutor

    layers, head = build_case("wide-256-256-7")
    engine = _split_engine(cpu_paths()[0], 2, layers, head)
    inputs = [random_inputs(np.random.default_rng(seed), 64 + seed, 256) for seed in range(8)]
    wants = [reference(layers, head, x) for x in inputs]
    with ThreadPoolExecutor(4) as pool:
        for got, want in zip(pool.map(engine.infer_int, inputs * 4), wants * 4):
            assert_same(got, want, "concurrent callers")
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_infer_and_check, args=(engine, inputs[0], wants[0]))
    child.start()
    child.join(timeout=120)
    if child.is_alive():
        child.kill()
        pytest.fail("a forked child hung on the helper pool")
    assert child.exitcode == 0


def _infer_and_check(engine, x_q, want) -> None:
    assert_same(engine.infer_int(x_q), want, "after a fork")
