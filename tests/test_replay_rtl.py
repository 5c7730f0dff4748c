"""The replay kernel's reference RTL: cocotb testbenches per parameter set, and the "rtl" backend.

Each cocotb parameter set is one Verilator build (in build/sim/, reused across runs) running every
test of tests/cocotb/replay/test_replay_top.py; the rtl backend builds its own library once per shape
(cached in ~/.cache/pearl_fpga/rtl).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replay_cases import adversarial_ops, assert_backends_agree, random_ops

from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.kernels import ReplaySampler
from pearl_fpga.spec.replay import RTL_LEVEL_CYCLES, batch_cycle_bound, tree_depth
from pearl_fpga.sim.verilator import kernel_rtl

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[1]
COCOTB_DIR = Path(__file__).resolve().parent / "cocotb" / "replay"

# (capacity, fanout, FREE_RUN): capacities that are not powers of K, both control modes. Each set is
# one Verilator build (the expensive part of this file); fan-out 4 is covered by the backend tests.
COCOTB_SETS = [(13, 2, 0), (300, 16, 1)]
BACKEND_SHAPES = [(13, 2), (100, 4), (300, 16)]


@pytest.mark.parametrize("capacity,fanout,free_run", COCOTB_SETS, ids=lambda v: str(v))
def test_cocotb_replay_top(capacity: int, fanout: int, free_run: int) -> None:
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    build_dir = REPO / "build" / "sim" / f"replay_top_c{capacity}_k{fanout}_f{free_run}"
    run_cocotb(
        top="replay_top",
        sources=kernel_rtl("replay"),
        test_module="test_replay_top",
        test_dir=COCOTB_DIR,
        build_dir=build_dir,
        parameters={"CAPACITY": capacity, "FANOUT": fanout, "FREE_RUN": free_run},
        build_args=["-CFLAGS", "-O0"],  # the tests are short: compile time dominates
        extra_env={
            "REPLAY_CAPACITY": str(capacity),
            "REPLAY_FANOUT": str(fanout),
            "REPLAY_FREE_RUN": str(free_run),
            "REPLAY_SEED": str(capacity + fanout),
        },
    )
    figures = json.loads((build_dir / "replay_cycles.json").read_text())
    print(f"replay_top cycles (capacity={capacity}, fanout={fanout}, FREE_RUN={free_run}): {figures}", file=sys.stderr)
    assert figures["depth"] == tree_depth(capacity, fanout)


# ---------------------------------------------------------------------------- the "rtl" backend
def _samplers(capacity: int, fanout: int) -> dict[str, ReplaySampler]:
    return {b: ReplaySampler(capacity, fanout, backend=b) for b in ("numpy", "cpu", "rtl")}


def _random_words(rng: np.random.Generator, n: int) -> np.ndarray:
    words = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    kind = rng.integers(0, 4, n)
    words[kind == 0] = 0
    words[kind == 1] = rng.integers(1, 4, int((kind == 1).sum()))
    return words.astype(np.uint32)


@pytest.mark.parametrize("capacity,fanout", BACKEND_SHAPES, ids=lambda v: str(v))
def test_rtl_backend_bit_exact(capacity: int, fanout: int) -> None:
    """numpy, cpu and rtl agree on indices, words and totals over random update/sample sequences."""
    samplers = _samplers(capacity, fanout)
    rng = np.random.default_rng(capacity * 31 + fanout)
    for step in range(25):
        n = int(rng.integers(1, 2 * capacity))
        idx = rng.integers(0, capacity, n)
        idx[rng.random(n) < 0.25] = idx[0]  # repeated indices within one batch
        words = _random_words(rng, n)
        for s in samplers.values():
            s.update(idx, words=words)
        totals = {b: s.total_fixed for b, s in samplers.items()}
        assert len(set(totals.values())) == 1, f"step {step}: totals differ {totals}"
        np.testing.assert_array_equal(samplers["rtl"].leaves(), samplers["numpy"].leaves())
        if totals["numpy"] == 0:
            continue
        seed, batch = int(rng.integers(1 << 31)), int(rng.integers(1, 300))
        results = {b: s.sample_fixed(batch, np.random.default_rng(seed)) for b, s in samplers.items()}
        for b in ("cpu", "rtl"):
            np.testing.assert_array_equal(results[b][0], results["numpy"][0], err_msg=f"{b} indices, step {step}")
            np.testing.assert_array_equal(results[b][1], results["numpy"][1], err_msg=f"{b} words, step {step}")
        assert (results["rtl"][1] > 0).all(), "a zero-priority leaf was sampled"
        if step == 12:
            for s in samplers.values():
                s.clear()
            assert samplers["rtl"].total_fixed == 0


@pytest.mark.parametrize("capacity,fanout", BACKEND_SHAPES, ids=lambda v: str(v))
def test_rtl_backend_shared_cases(capacity: int, fanout: int) -> None:
    """The cross-backend command sequences of tests/replay_cases.py: rtl traces equal numpy's."""
    assert_backends_agree("rtl", capacity, fanout, random_ops(capacity, seed=capacity + fanout))
    assert_backends_agree("rtl", capacity, fanout, adversarial_ops(capacity))


@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("update"), st.lists(st.tuples(st.integers(0, 99), st.integers(0, 2**32 - 1)), min_size=1, max_size=40)),
            st.tuples(st.just("sample"), st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=40)),
            st.tuples(st.just("clear"), st.just([])),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_rtl_backend_matches_reference_property(ops: list) -> None:
    """Arbitrary update/sample/clear sequences: rtl equals the numpy reference (capacity 100, K=4)."""
    rtl = ReplaySampler(100, 4, backend="rtl")
    ref = ReplaySampler(100, 4, backend="numpy")
    for kind, args in ops:
        if kind == "update":
            idx = np.array([a for a, _ in args])
            words = np.array([w for _, w in args], dtype=np.uint64)
            rtl.update(idx, words=words)
            ref.update(idx, words=words)
        elif kind == "sample" and ref.total_fixed > 0:
            total = ref.total_fixed
            targets = np.minimum(np.floor(np.array(args) * total), total - 1).astype(np.uint64)
            got, want = rtl.sample_targets(targets), ref.sample_targets(targets)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
        elif kind == "clear":
            rtl.clear()
            ref.clear()
        assert rtl.total_fixed == ref.total_fixed
    rtl.close()


@pytest.mark.parametrize("capacity,fanout", BACKEND_SHAPES, ids=lambda v: str(v))
def test_rtl_backend_cycles_per_batch(capacity: int, fanout: int) -> None:
    """Cycle counts of batched calls meet SPEC.md: B commands in <= B + 8*DEPTH + 16 cycles."""
    s = ReplaySampler(capacity, fanout, backend="rtl")
    depth = tree_depth(capacity, fanout)
    rng = np.random.default_rng(5)
    for batch in (1, 32, 256):
        s.update(rng.integers(0, capacity, batch), words=rng.integers(1, 1 << 24, batch))
        update_cycles = s.last_cycles
        s.sample_fixed(batch, rng)
        sample_cycles = s.last_cycles
        print(f"rtl c={capacity} k={fanout} B={batch}: update {update_cycles} cycles, sample {sample_cycles} cycles")
        assert update_cycles is not None and sample_cycles is not None
        assert update_cycles <= batch_cycle_bound(batch, depth), f"{batch} updates took {update_cycles} cycles"
        assert sample_cycles <= batch_cycle_bound(batch, depth), f"{batch} samples took {sample_cycles} cycles"
        assert sample_cycles >= batch + RTL_LEVEL_CYCLES * depth, "samples faster than the pipeline per level: counting is wrong"
        assert update_cycles >= batch and sample_cycles >= batch, "fewer cycles than commands: counting is wrong"


def test_rtl_backend_timeout_restores_tree() -> None:
    """A call over its cycle limit raises KernelTimeout naming the kernel and leaves the tree as it was."""
    s = ReplaySampler(100, 4, backend="rtl", cycle_limit=60)  # a sample of 8 fits (44 cycles), 100 updates not (108)
    ref = ReplaySampler(100, 4, backend="numpy")
    idx, words = np.arange(10), np.arange(1, 11) * 1000
    s.update(idx, words=words)
    ref.update(idx, words=words)
    before = s.leaves()
    with pytest.raises(KernelTimeout, match=r"replay kernel on Verilator simulation of replay_top \(CAPACITY=100, FANOUT=4\).*"
                                            r"within 60 clock cycles.*n_cmds@0x10=0x00000064.*tree restored"):
        s.update(np.arange(100), words=np.full(100, 7))
    np.testing.assert_array_equal(s.leaves(), before)
    assert s.total_fixed == ref.total_fixed
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    np.testing.assert_array_equal(s.sample_fixed(8, rng_a)[0], ref.sample_fixed(8, rng_b)[0])


def test_rtl_backend_without_verilator(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Verilator (or no g++): BackendUnavailable that says what to install."""
    import pearl_fpga.sim.verilator as verilator

    monkeypatch.setattr(verilator, "verilator_available", lambda: False)
    with pytest.raises(BackendUnavailable, match=r"pearl_fpga\[sim\]"):
        ReplaySampler(77, 8, backend="rtl")
