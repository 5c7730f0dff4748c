"""ReplaySampler: bit-exactness across backends, sampling statistics, and every bad-input path."""

from __future__ import annotations

import importlib
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from replay_cases import (
    BACKENDS,
    CASES,
    adversarial_ops,
    assert_backends_agree,
    boundary_targets,
    check_descent,
    random_ops,
)
from scipy.stats import chisquare

from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.kernels import ReplaySampler
from pearl_fpga.kernels import replay as replay_module
from pearl_fpga.spec.replay import (
    PRIORITY_MAX,
    priorities_to_fixed,
    stratified_targets,
    tree_depth,
)

native = importlib.import_module("pearl_fpga._replay_native")  # built by `make native` / pip install


# ---- bit-exactness -------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("capacity,fanout", CASES)
def test_random_sequences_match_reference(backend, capacity, fanout):
    assert_backends_agree(backend, capacity, fanout, random_ops(capacity, seed=capacity * 31 + fanout))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("capacity,fanout", CASES)
def test_adversarial_sequences_match_reference(backend, capacity, fanout):
    assert_backends_agree(backend, capacity, fanout, adversarial_ops(capacity))


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
@pytest.mark.parametrize("capacity,fanout", [(1, 2), (17, 4), (1000, 16), (300, 8)])
def test_descent_matches_prefix_sums(backend, capacity, fanout):
    """Independent of the reference: each target lands in its leaf's prefix interval."""
    rng = np.random.default_rng(capacity)
    s = ReplaySampler(capacity, fanout, backend=backend)
    words = rng.integers(0, 1 << 20, capacity).astype(np.uint32) * (rng.random(capacity) < 0.6)
    words[-1] = 1
    for start in range(0, capacity, 4096):
        s.update(np.arange(start, min(start + 4096, capacity)), words=words[start : start + 4096])
    assert s.total_fixed == int(words.sum(dtype=np.uint64))
    targets = boundary_targets(words)
    idx, got = s.sample_targets(targets)
    check_descent(words, targets, idx, got)
    idx, got = s.sample_fixed(256, np.random.default_rng(0))
    targets = stratified_targets(s.total_fixed, 256, np.random.default_rng(0))
    check_descent(words, targets, idx, got)


@given(
    fanout=st.sampled_from([2, 4, 8, 16]),
    capacity=st.integers(1, 300),
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([0, 1, 2, 65536, PRIORITY_MAX]) | st.integers(0, PRIORITY_MAX)), min_size=1, max_size=40),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**32 - 1),
    batch=st.integers(1, 64),
)
def test_property_cpu_equals_reference(fanout, capacity, batches, seed, batch):
    ref = ReplaySampler(capacity, fanout, backend="numpy")
    cpu = ReplaySampler(capacity, fanout, backend="cpu")
    model = np.zeros(capacity, dtype=np.uint64)
    for updates in batches:
        idx = np.array([i % capacity for i, _ in updates])
        words = np.array([w for _, w in updates], dtype=np.uint32)
        for i, w in zip(idx, words):  # sequential semantics: the last write of an index wins
            model[i] = w
        ref.update(idx, words=words)
        cpu.update(idx, words=words)
        assert cpu.total_fixed == ref.total_fixed == int(model.sum())
        assert (cpu.leaves() == model).all() and (ref.leaves() == model).all()
        if cpu.total_fixed:
            a = cpu.sample_fixed(batch, np.random.default_rng(seed))
            b = ref.sample_fixed(batch, np.random.default_rng(seed))
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
            assert (a[1] > 0).all()


# ---- host conversions in C++ equal the reference --------------------------------------------------
@given(
    st.lists(
        st.floats(min_value=0, max_value=1e12, allow_subnormal=True)
        | st.sampled_from([0.0, -0.0, 2**-17, 2**-16, 1.5 * 2**-16, 0.5 / 65536, 65535.999992, 65536.0, 1e300]),
        min_size=1,
        max_size=50,
    )
)
def test_native_to_fixed_equals_reference(values):
    p = np.array(values, dtype=np.float64)
    words, saturated, bad = native.to_fixed(p)
    ref_words, ref_saturated = priorities_to_fixed(p)
    assert bad == -1 and saturated == ref_saturated
    assert words.dtype == np.uint32 and (words == ref_words).all()


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf, -np.inf, -1e-300])
def test_native_to_fixed_flags_bad_values(bad):
    p = np.array([1.0, bad, 2.0])
    assert native.to_fixed(p)[2] == 1
    with pytest.raises(ValueError, match="position 1"):
        ReplaySampler(4, 2).update([0, 1, 2], p)


@given(total=st.integers(1, 2**52), batch=st.integers(1, 4096), seed=st.integers(0, 2**32 - 1))
def test_native_targets_equal_reference(total, batch, seed):
    ref = stratified_targets(total, batch, np.random.default_rng(seed))
    got = native.targets_from_uniform(np.random.default_rng(seed).random(batch), total)
    assert got.dtype == np.uint64 and (got == ref).all() and int(got.max()) < total


# ---- statistics ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_sampling_frequencies_follow_priorities(backend):
    rng = np.random.default_rng(7)
    capacity = 50
    priorities = rng.uniform(0.5, 5.0, capacity)
    priorities[rng.choice(capacity, 10, replace=False)] = 0.0
    s = ReplaySampler(capacity, 4, backend=backend)
    s.update(np.arange(capacity), priorities)
    counts = np.zeros(capacity)
    draw = np.random.default_rng(123)
    for _ in range(20):
        idx, pri = s.sample(997, draw)  # odd batch: strata do not align with leaves
        np.add.at(counts, idx, 1)
        assert (pri > 0).all()
    assert counts[priorities == 0].sum() == 0, "a zero-priority leaf was drawn"
    live = priorities > 0
    words = s.leaves()[live].astype(np.float64)
    expected = counts.sum() * words / words.sum()
    assert chisquare(counts[live], expected).pvalue > 1e-3
    # The same test rejects a wrong distribution (it can fail).
    assert chisquare(counts[live], np.full(live.sum(), counts.sum() / live.sum())).pvalue < 1e-6


# ---- bad input: clear errors, tree unchanged -----------------------------------------------------
def _loaded(backend: str = "cpu", capacity: int = 20, max_batch: int = 8) -> ReplaySampler:
    s = ReplaySampler(capacity, 4, backend=backend, max_batch=max_batch)
    s.update(np.arange(8), np.linspace(0.5, 4.0, 8))
    return s


BAD_CALLS = [
    ("update", ([0, 20], [1.0, 1.0]), ValueError, "out of range"),
    ("update", ([0, -1], [1.0, 1.0]), ValueError, "out of range"),
    ("update", ([0.0, 1.0], [1.0, 1.0]), TypeError, "integers"),
    ("update", (["a"], [1.0]), TypeError, "integers"),
    ("update", ([True], [1.0]), TypeError, "integers"),
    ("update", ([[0, 1]], [[1.0, 1.0]]), ValueError, "1-D"),
    ("update", ([0, 1], [1.0]), ValueError, "one value per index"),
    ("update", ([0, 1], ["x", "y"]), TypeError, "real numbers"),
    ("update", (np.arange(9), np.ones(9)), ValueError, "max_batch"),
    ("update", ([0, 1], [1.0, np.nan]), ValueError, "position 1"),
    ("update", ([0, 1], [-0.5, 1.0]), ValueError, "position 0"),
    ("update", ([0, 1], [1.0, np.inf]), ValueError, "finite"),
    ("update", ([0], {"words": [2**32]}), ValueError, "0..4294967295"),
    ("update", ([0], {"words": [-1]}), ValueError, "0..4294967295"),
    ("update", ([0], {"words": [1.5]}), TypeError, "words must be integers"),
    ("update", ([0], [1.0], {"words": [1]}), TypeError, "exactly one"),
    ("update", ([0],), TypeError, "exactly one"),
    ("sample", (0,), ValueError, "at least 1"),
    ("sample", (-3,), ValueError, "at least 1"),
    ("sample", (9,), ValueError, "max_batch"),
    ("sample", (2.0,), TypeError, "integer"),
    ("sample", (True,), TypeError, "bool"),
    ("sample", (2, np.random.RandomState(0)), TypeError, "Generator"),
    ("sample_targets", ([10**12],), ValueError, r"\[0, total_fixed\)"),
    ("sample_targets", ([-1],), ValueError, r"\[0, total_fixed\)"),
    ("sample_targets", ([0.5],), TypeError, "integers"),
]


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
@pytest.mark.parametrize("method,args,exc,match", BAD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_CALLS)])
def test_bad_input_is_rejected_and_tree_unchanged(backend, method, args, exc, match):
    s = _loaded(backend)
    before, total = s.leaves(), s.total_fixed
    kwargs = args[-1] if isinstance(args[-1], dict) else {}
    with pytest.raises(exc, match=match):
        getattr(s, method)(*args[: len(args) - bool(kwargs)], **kwargs)
    assert (s.leaves() == before).all() and s.total_fixed == total


@pytest.mark.parametrize("backend", ["numpy", *BACKENDS])
def test_sampling_an_empty_or_all_zero_tree_is_an_error(backend):
    s = ReplaySampler(10, 2, backend=backend)
    with pytest.raises(ValueError, match="every priority in the tree is 0"):
        s.sample(4, np.random.default_rng(0))
    s.update([3, 4], [1.0, 2.0])
    s.update([3, 4], [0.0, 0.0])
    with pytest.raises(ValueError, match="every priority in the tree is 0"):
        s.sample(4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="every priority in the tree is 0"):
        s.sample_targets([0])
    assert s.total_fixed == 0


def test_saturation_warns_with_count_and_clamps():
    s = ReplaySampler(4, 2, backend="cpu")
    with pytest.warns(RuntimeWarning, match="2 of 3 priorities exceed"):
        s.update([0, 1, 2], [1e6, 70000.0, 1.0])
    assert s.leaves().tolist() == [PRIORITY_MAX, PRIORITY_MAX, 65536, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.update([3], [65535.0])  # in range: no warning


def test_tiny_positive_priority_never_rounds_to_zero():
    s = ReplaySampler(3, 2, backend="cpu")
    s.update([0, 1, 2], [1e-300, 0.0, 2**-18])
    assert s.leaves().tolist() == [1, 0, 1]


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"capacity": 0}, ValueError, "capacity"),
        ({"capacity": 2**20 + 1}, ValueError, "capacity"),
        ({"capacity": 10.0}, TypeError, "capacity"),
        ({"capacity": 10, "fanout": 3}, ValueError, "fanout"),
        ({"capacity": 10, "max_batch": 0}, ValueError, "max_batch"),
        ({"capacity": 10, "max_batch": 4097}, ValueError, "max_batch"),
        ({"capacity": 10, "backend": "gpu"}, ValueError, "unknown replay backend"),
        ({"capacity": 10, "rng": 3}, TypeError, "Generator"),
    ],
)
def test_bad_construction(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ReplaySampler(**kwargs)


# ---- the binding boundary ------------------------------------------------------------------------
def test_binding_rejects_wrong_arrays_and_leaves_tree_unchanged():
    tree = native.SumTree(10, 4)
    tree.update(np.array([1, 2], dtype=np.uint32), np.array([5, 6], dtype=np.uint32))
    before = tree.leaves()
    with pytest.raises(TypeError, match="dtype uint32.*np.ascontiguousarray"):
        tree.update(np.array([1], dtype=np.int64), np.array([5], dtype=np.uint32))
    with pytest.raises(TypeError, match="C-contiguous"):
        tree.update(np.arange(8, dtype=np.uint32)[::2], np.ones(4, dtype=np.uint32))
    with pytest.raises(ValueError, match="1-D"):
        tree.update(np.zeros((1, 2), dtype=np.uint32), np.zeros((1, 2), dtype=np.uint32))
    with pytest.raises(ValueError, match="differ in length"):
        tree.update(np.array([1, 2], dtype=np.uint32), np.array([1], dtype=np.uint32))
    with pytest.raises(ValueError, match="out of range"):
        tree.update(np.array([1, 10], dtype=np.uint32), np.array([1, 1], dtype=np.uint32))
    with pytest.raises(ValueError, match="not below the total"):
        tree.sample(np.array([11], dtype=np.uint64))
    with pytest.raises(TypeError, match="uint64"):
        tree.sample(np.array([1], dtype=np.int64))
    with pytest.raises(ValueError, match="fanout"):
        native.SumTree(10, 3)
    with pytest.raises(ValueError, match="capacity"):
        native.SumTree(0, 4)
    assert (tree.leaves() == before).all() and tree.total() == 11
    assert (tree.depth, tree.capacity, tree.fanout) == (2, 10, 4)


def test_concurrent_calls_keep_the_tree_consistent():
    s = ReplaySampler(5000, 16, backend="cpu")
    s.update(np.arange(4096), np.ones(4096))
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(200):
                s.update(rng.integers(0, 5000, 256), rng.random(256) + 0.1)
                s.sample(256, rng)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert s.total_fixed == int(s.leaves().sum(dtype=np.uint64))


# ---- backend selection ---------------------------------------------------------------------------
def test_properties_and_auto():
    s = ReplaySampler(1000, 16, backend="auto")
    assert (s.backend, s.capacity, s.fanout, s.depth, s.last_cycles) == ("cpu", 1000, 16, 3, None)
    assert s.depth == tree_depth(1000, 16)
    s.update([1, 2], [1.5, 0.25])
    assert s.total == 1.75 and s.total_fixed == 1.75 * 65536
    assert s.priorities()[:3].tolist() == [0.0, 1.5, 0.25]
    assert "ReplaySampler(capacity=1000" in repr(s)


def test_auto_falls_back_to_numpy_without_the_extension(monkeypatch):
    monkeypatch.setitem(sys.modules, "pearl_fpga._replay_native", None)  # import now fails
    assert ReplaySampler(10, 2, backend="auto").backend == "numpy"
    with pytest.raises(BackendUnavailable, match="make native"):
        ReplaySampler(10, 2, backend="cpu")


@pytest.mark.parametrize("backend,module", [("pynq", "pearl_fpga.board.replay_driver"), ("xrt", "pearl_fpga.board.replay_driver"), ("rtl", "pearl_fpga.board.replay_driver")])
def test_missing_backend_module_is_a_clear_error(monkeypatch, backend, module):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(BackendUnavailable, match=f"the {backend} backend of the replay kernel cannot be imported"):
        ReplaySampler(10, 2, backend=backend)


def test_board_backend_receives_transport(monkeypatch):
    """Once F's driver exists it is constructed with the transport name."""
    import types

    seen = {}

    class FakeBoard:
        last_cycles = None

        def __init__(self, capacity, fanout, transport):
            seen.update(capacity=capacity, fanout=fanout, transport=transport)

    monkeypatch.setitem(sys.modules, "pearl_fpga.board.replay_driver", types.SimpleNamespace(ReplayBoardBackend=FakeBoard))
    assert ReplaySampler(10, 4, backend="xrt").backend == "xrt"
    assert seen == {"capacity": 10, "fanout": 4, "transport": "xrt"}


def test_to_fixed_fallback_without_extension(monkeypatch):
    monkeypatch.setattr(replay_module, "_native", None)
    s = ReplaySampler(4, 2, backend="numpy")
    s.update([0, 1], [1.0, 2**-20])
    assert s.leaves().tolist() == [65536, 1, 0, 0]
    assert s.sample(2, np.random.default_rng(0))[0].tolist() == [0, 0]


def test_backends_implement_the_protocol():
    from pearl_fpga.backends.replay_base import ReplayBackend
    from pearl_fpga.backends.replay_cpu import ReplayCPUBackend
    from pearl_fpga.backends.replay_numpy import ReplayNumpyBackend

    for cls in (ReplayNumpyBackend, ReplayCPUBackend):
        backend = cls(10, 4)
        assert isinstance(backend, ReplayBackend) and backend.last_cycles is None
        assert backend.total() == 0 and backend.leaves().dtype == np.uint32 and len(backend.leaves()) == 10


def test_options_for_local_backends_are_rejected():
    with pytest.raises(TypeError, match="takes no options"):
        ReplaySampler(10, 4, backend="cpu", transport="x")


def test_public_check_for_callers_with_their_own_limits():
    s = ReplaySampler(100, 4, backend="numpy", max_batch=8)
    idx = s.check_indices(np.arange(20), limit=30, whole_batch=False)  # more than max_batch: the caller splits
    assert idx.dtype == np.uint32
    with pytest.raises(ValueError, match="out of range.*30 entries in use"):
        s.check_indices([31], limit=30)
    for start in range(0, 20, s.max_batch):
        s.update(idx[start : start + s.max_batch], words=np.full(len(idx[start : start + s.max_batch]), 65536))
    assert s.total == 20.0  # 20 leaves of 1.0


def test_one_registry_serves_every_kernel():
    from pearl_fpga.backends import registry
    from pearl_fpga.errors import BackendUnavailable

    assert set(registry.names("replay")) == set(registry.names("mlp")) == {"numpy", "cpu", "rtl", "pynq", "xrt", "serial", "auto"}
    name, backend = registry.create("replay", "auto", 10, 4)
    assert name == "cpu" and backend.total() == 0
    with pytest.raises(ValueError, match="unknown replay backend 'gpu'"):
        registry.create("replay", "gpu", 10, 4)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        registry.create("nope", "cpu")
    registry.register("test-kernel", "cpu", "pearl_fpga.no_such_module:Backend", "install nothing")
    with pytest.raises(BackendUnavailable, match="cpu backend of the test-kernel kernel.*install nothing"):
        registry.create("test-kernel", "cpu")
    with pytest.raises(BackendUnavailable, match="no test-kernel backend for 'auto'"):
        registry.create("test-kernel", "auto")
