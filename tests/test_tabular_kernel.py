"""TabularQ: the API, its validation (a rejected call changes nothing), bit-exactness of every backend
present in the package against an independent Python-int oracle of the contract, partitioned mode."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.kernels import TabularQ
from pearl_fpga.spec.tabular import merge_partitions


def _backends() -> list:
    """numpy always; cpu and rtl as soon as their modules are in the package (then they must work)."""
    names = [pytest.param("numpy")]
    if importlib.util.find_spec("pearl_fpga.backends.tabular_cpu") is not None:
        names.append(pytest.param("cpu"))
    if importlib.util.find_spec("pearl_fpga.board.verilator_transport") is not None:
        names.append(pytest.param("rtl", marks=pytest.mark.sim))
    return names


BACKENDS = _backends()


def oracle(table, alpha_w, gamma_w, sarsa, s, a, r_words, s2, a2, done):
    """The contract of TABULAR.md / hls/tabular/SPEC.md in Python ints, one transition at a time."""
    q = [[int(v) for v in row] for row in table]
    for i in range(len(s)):
        if done[i]:
            boot = 0
        elif sarsa:
            boot = q[s2[i]][a2[i]]
        else:
            boot = max(q[s2[i]])
        target = int(r_words[i]) + ((gamma_w * boot + (1 << 15)) >> 16)
        delta = target - q[s[i]][a[i]]
        v = q[s[i]][a[i]] + ((alpha_w * delta + (1 << 15)) >> 16)
        q[s[i]][a[i]] = min(max(v, -(1 << 31)), (1 << 31) - 1)
    return np.array(q, dtype=np.int32)


def random_batch(rng, n_states, n_actions, n, reward_scale=10.0):
    return dict(s=rng.integers(0, n_states, n), a=rng.integers(0, n_actions, n),
                r=rng.normal(0, reward_scale, n), s2=rng.integers(0, n_states, n), done=rng.random(n) < 0.1,
                a2=rng.integers(0, n_actions, n))


def words(r):
    return np.floor(np.asarray(r, dtype=np.float64) * 65536 + 0.5).astype(np.int64)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("algo", ["q", "sarsa"])
def test_random_stream_matches_oracle_and_sequential_loop(backend, algo):
    rng = np.random.default_rng(1)
    b = random_batch(rng, 7, 3, 400)
    k = TabularQ(7, 3, alpha=0.3, gamma=0.95, algo=algo, backend=backend)
    k.update(**b)
    want = oracle(np.zeros((7, 3), np.int32), k.alpha_word, k.gamma_word, algo == "sarsa", b["s"], b["a"],
                  words(b["r"]), b["s2"], b["a2"], b["done"])
    np.testing.assert_array_equal(k.table, want)
    one = TabularQ(7, 3, alpha=0.3, gamma=0.95, algo=algo, backend=backend)
    for i in range(0, 400, 37):  # uneven chunks: a batch equals the loop
        one.update(**{key: v[i:i + 37] for key, v in b.items()})
    np.testing.assert_array_equal(one.table, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_adversarial_repeats_self_loops_and_saturation(backend):
    n = 64
    s = np.zeros(n, np.int64)  # the same (s, a) over and over, s2 == s: every update reads the row it writes
    k = TabularQ(2, 2, alpha=1.0, gamma=1.0, backend=backend)
    k.update(s, s, np.full(n, 32767.0), s, np.zeros(n, bool))
    assert k.table[0, 0] == 2**31 - 1  # saturated, not wrapped
    k.update(s, s, np.full(n, -32768.0), s, np.ones(n, bool))
    assert k.table[0, 0] == -(2**31)
    start = np.array([[2**31 - 1, -(2**31)], [5, -5]], np.int32)
    k.load(start)
    rng = np.random.default_rng(3)
    b = random_batch(rng, 2, 2, 200, reward_scale=20000.0)
    b["r"] = np.clip(b["r"], -32768.0, 32767.0)
    k.update(**b)
    np.testing.assert_array_equal(k.table, oracle(start, 65536, 65536, False, b["s"], b["a"], words(b["r"]),
                                                  b["s2"], b["a2"], b["done"]))


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
def test_property_bit_exact(backend, data):
    ns = data.draw(st.integers(1, 6))
    na = data.draw(st.integers(1, 4))
    n = data.draw(st.integers(0, 40))
    alpha = data.draw(st.sampled_from([1 / 65536, 0.01, 0.5, 1.0]))
    gamma = data.draw(st.sampled_from([0.0, 0.5, 0.99, 1.0]))
    sarsa = data.draw(st.booleans())
    ints = lambda hi: np.array(data.draw(st.lists(st.integers(0, hi - 1), min_size=n, max_size=n)), np.int64)
    r = np.array(data.draw(st.lists(st.floats(-32768, 32767.99), min_size=n, max_size=n)), np.float64)
    done = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    start = np.array(data.draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=ns * na, max_size=ns * na)),
                     np.int32).reshape(ns, na)
    s, a, s2, a2 = ints(ns), ints(na), ints(ns), ints(na)
    k = TabularQ(ns, na, alpha, gamma, algo="sarsa" if sarsa else "q", backend=backend)
    k.load(start)
    k.update(s, a, r, s2, done, a2=a2)
    np.testing.assert_array_equal(k.table, oracle(start, k.alpha_word, k.gamma_word, sarsa, s, a, words(r), s2,
                                                  a2, done))


def test_api_views_and_clear():
    k = TabularQ(3, 2, alpha=0.5, gamma=0.5, backend="numpy")
    k.update(np.array([1]), np.array([1]), np.array([2.0]), np.array([0]), np.array([True]))
    assert k.q[1, 1] == 1.0 and k.table.dtype == np.int32 and k.table[1, 1] == 65536
    assert k.greedy().tolist() == [0, 1, 0]
    assert k.last_cycles is None or isinstance(k.last_cycles, int)
    k.clear()
    assert not k.table.any()
    assert "numpy" in repr(k) and k.alpha == 0.5 and k.gamma == 0.5
    assert TabularQ(2, 2, backend="auto").backend_name in ("cpu", "numpy")


BAD_CALLS = [
    (dict(s=[0, 9]), ValueError, r"s\[1\] = 9 is out of range"),
    (dict(s2=[-1, 0]), ValueError, r"s2\[0\] = -1"),
    (dict(a=[0, 2]), ValueError, r"a\[1\] = 2 is out of range; actions"),
    (dict(r=[0.0, np.nan]), ValueError, r"r\[1\] is nan; rewards must be finite"),
    (dict(r=[np.inf, 0.0]), ValueError, r"finite"),
    (dict(r=[40000.0, 0.0]), ValueError, r"outside the Q16.16 range"),
    (dict(r=[0.0, 0.0, 0.0]), ValueError, r"r has 3 entries but s has 2"),
    (dict(done=[True]), ValueError, r"done has 1 entries"),
    (dict(s=[[0, 1]]), ValueError, r"1-D array"),
    (dict(s=[0.0, 1.0]), TypeError, r"integer array"),
    (dict(a=[True, False]), TypeError, r"integer array"),
    (dict(r=["x", "y"]), TypeError, r"float or integer"),
    (dict(done=[0, 2]), ValueError, r"only 0/1"),
    (dict(done=[0.5, 1.0]), TypeError, r"done must be a bool"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad,exc,match", BAD_CALLS)
def test_bad_input_is_rejected_and_changes_nothing(backend, bad, exc, match):
    k = TabularQ(3, 2, alpha=0.5, gamma=0.9, backend=backend)
    k.update(np.array([0, 1]), np.array([1, 0]), np.array([1.0, -2.0]), np.array([1, 2]), np.array([False, True]))
    before = k.table
    args = dict(s=[0, 1], a=[1, 1], r=[3.0, 4.0], s2=[2, 2], done=[False, False])
    args.update(bad)
    with pytest.raises(exc, match=match):
        k.update(**{key: np.array(v) for key, v in args.items()})
    with pytest.raises(exc, match=match):
        k.update_partitioned(**{key: np.array(v) for key, v in args.items()}, parts=2)
    np.testing.assert_array_equal(k.table, before)


def test_sarsa_needs_a2_and_changes_nothing():
    k = TabularQ(3, 2, alpha=0.5, gamma=0.9, algo="sarsa", backend="numpy")
    k.load(np.arange(6, dtype=np.int32).reshape(3, 2))
    with pytest.raises(ValueError, match="SARSA needs a2"):
        k.update(np.array([0]), np.array([0]), np.array([1.0]), np.array([1]), np.array([False]))
    with pytest.raises(ValueError, match=r"a2\[0\] = 5 is out of range"):
        k.update(np.array([0]), np.array([0]), np.array([1.0]), np.array([1]), np.array([False]), a2=np.array([5]))
    np.testing.assert_array_equal(k.table, np.arange(6, dtype=np.int32).reshape(3, 2))


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(alpha=0.0), ValueError, r"alpha=0.0 is out of range; pass alpha in \(0, 1\]"),
    (dict(alpha=1.5), ValueError, r"alpha in \(0, 1\]"),
    (dict(gamma=-0.1), ValueError, r"gamma in \[0, 1\]"),
    (dict(gamma=1.01), ValueError, r"gamma in \[0, 1\]"),
    (dict(gamma=float("nan")), ValueError, r"gamma must be finite"),
    (dict(algo="dqn"), ValueError, r"choose 'q'"),
    (dict(backend="gpu"), ValueError, r"unknown tabular backend"),
    (dict(n_states=0), ValueError, r"n_states must be >= 1"),
    (dict(n_actions=2.5), TypeError, r"n_actions must be an integer"),
])
def test_bad_construction(kwargs, exc, match):
    args = dict(n_states=4, n_actions=2, alpha=0.1, gamma=0.9, backend="numpy")
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        TabularQ(**args)


def test_gamma_one_is_exact_and_load_is_validated():
    k = TabularQ(2, 2, alpha=1.0, gamma=1.0, backend="numpy")
    assert k.gamma_word == 65536 and k.alpha_word == 65536
    k.load(np.full((2, 2), 7, np.int32))
    with pytest.raises(TypeError, match="raw int32"):
        k.load(np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        k.load(np.zeros((3, 2), np.int32))
    assert (k.table == 7).all()


def test_merge_is_the_integer_mean_rounded_half_up():
    t = [np.array([[1, -1, 3]], np.int32), np.array([[2, -2, 4]], np.int32)]
    np.testing.assert_array_equal(merge_partitions(t), [[2, -1, 4]])  # floor((3+1)/2), floor((-3+1)/2), 7+1 // 2
    big = [np.full((1, 1), 2**31 - 1, np.int32)] * 3
    assert merge_partitions(big)[0, 0] == 2**31 - 1  # summed in int64, no wrap


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("parts", [1, 3, 8, 50])
def test_partitioned_equals_k_independent_runs_then_merge(backend, parts):
    rng = np.random.default_rng(parts)
    b = random_batch(rng, 5, 3, 41)
    start = rng.integers(-(2**20), 2**20, (5, 3)).astype(np.int32)
    k = TabularQ(5, 3, alpha=0.25, gamma=0.9, algo="sarsa", backend=backend)
    k.load(start)
    k.update_partitioned(**b, parts=parts)
    tables = []
    for idx in np.array_split(np.arange(41), parts):  # 50 parts: some slices empty, they keep the start table
        one = TabularQ(5, 3, alpha=0.25, gamma=0.9, algo="sarsa", backend="numpy")
        one.load(start)
        one.update(**{key: v[idx] for key, v in b.items()})
        tables.append(one.table)
    np.testing.assert_array_equal(k.table, merge_partitions(tables))
    if parts == 1:
        seq = TabularQ(5, 3, alpha=0.25, gamma=0.9, algo="sarsa", backend=backend)
        seq.load(start)
        seq.update(**b)
        np.testing.assert_array_equal(k.table, seq.table)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_one_equals_update_and_rejects_bad_scalars(backend):
    rng = np.random.default_rng(7)
    b = random_batch(rng, 6, 3, 200)
    batch = TabularQ(6, 3, alpha=0.4, gamma=0.9, algo="sarsa", backend=backend)
    batch.update(**b)
    one = TabularQ(6, 3, alpha=0.4, gamma=0.9, algo="sarsa", backend=backend)
    for i in range(200):
        one.update_one(int(b["s"][i]), int(b["a"][i]), float(b["r"][i]), int(b["s2"][i]), bool(b["done"][i]),
                       int(b["a2"][i]))
    np.testing.assert_array_equal(one.table, batch.table)
    before = one.table
    for kwargs, match in ((dict(s=6), r"s = 6 is out of range"), (dict(a=-1), r"a = -1"),
                          (dict(s2=True), r"s2 = True"), (dict(r=float("nan")), "r must be finite"),
                          (dict(r=1e6), r"r=1000000.0 is out of range"), (dict(a2=None), "SARSA needs a2"),
                          (dict(a2=3), r"a2 = 3 is out of range"), (dict(s=1.0), r"s = 1.0")):
        args = dict(s=0, a=0, r=1.0, s2=1, done=False, a2=0)
        args.update(kwargs)
        with pytest.raises((ValueError, TypeError), match=match):
            one.update_one(**args)
    np.testing.assert_array_equal(one.table, before)


def test_cpu_binding_refuses_wrong_arrays_and_changes_nothing():
    native = pytest.importorskip("pearl_fpga._tabular_native")
    table = np.zeros((3, 2), dtype=np.int32)
    u = np.zeros(2, dtype=np.uint32)
    ok = dict(s=u, a=u, r=np.zeros(2, np.int32), s2=u, a2=u, done=np.zeros(2, np.uint8))
    with pytest.raises(TypeError, match="table must be"):
        native.update(table.astype(np.int64), 65536, 0, False, **ok)
    with pytest.raises(TypeError, match="r must be"):
        native.update(table, 65536, 0, False, **{**ok, "r": np.zeros(2, np.float32)})
    with pytest.raises(IndexError, match="out of range"):
        native.update(table, 65536, 0, False, **{**ok, "s2": np.array([0, 3], np.uint32)})
    with pytest.raises(ValueError, match="alpha"):
        native.update(table, 0, 0, False, **ok)
    assert not table.any()


@pytest.mark.skipif(importlib.util.find_spec("pearl_fpga.backends.tabular_cpu") is None, reason="cpu backend not built")
@pytest.mark.parametrize("algo", ["q", "sarsa"])
@pytest.mark.parametrize("n_actions", [2, 4, 5, 6])  # the unrolled row maxes (2, 4, 6) and the general loop
def test_cpu_one_call_path_equals_the_validated_path(algo, n_actions):
    """int64/float64/bool arrays take the cpu backend's one-pass check-and-apply; other dtypes the
    validator. Both give the reference table, and a bad entry on the fast path changes nothing, even
    after every transition before it was applied (its undo log restores them)."""
    rng = np.random.default_rng(3)
    n = 2000
    b = dict(s=rng.integers(0, 9, n), a=rng.integers(0, n_actions, n), r=rng.normal(0, 50, n),
             s2=rng.integers(0, 9, n), done=rng.random(n) < 0.1, a2=rng.integers(0, n_actions, n))
    # rewards at the ends of the Q16.16 range and negative non-integers (the floor of the conversion)
    b["r"][:6] = [-32768.0, (2**31 - 1) / 65536, -1.3, -2.5 / 65536, 2.5 / 65536, -0.5 / 65536]
    fast = TabularQ(9, n_actions, alpha=0.3, gamma=0.97, algo=algo, backend="cpu")
    slow = TabularQ(9, n_actions, alpha=0.3, gamma=0.97, algo=algo, backend="cpu")
    ref = TabularQ(9, n_actions, alpha=0.3, gamma=0.97, algo=algo, backend="numpy")
    fast.update(**b)
    slow.update(**{k: (v.astype(np.int32) if v.dtype == np.int64 else v) for k, v in b.items()})
    ref.update(**b)
    np.testing.assert_array_equal(fast.table, ref.table)
    np.testing.assert_array_equal(slow.table, ref.table)
    before = fast.table
    for at in (7, n - 1):
        for key, value, match in (("r", np.nan, rf"r\[{at}\] is nan"), ("s2", 9, rf"s2\[{at}\] = 9 is out of range"),
                                  ("r", 1e9, rf"r\[{at}\] = 1000000000.0 is outside"),
                                  ("r", 32768 - 2**-17, rf"r\[{at}\] = 32767.99999\d* is outside"),
                                  ("r", -np.inf, rf"r\[{at}\] is -inf"), ("a", n_actions, rf"a\[{at}\] = {n_actions}")):
            bad = {k: v.copy() for k, v in b.items()}
            bad[key][at] = value
            with pytest.raises(ValueError, match=match):
                fast.update(**bad)
            np.testing.assert_array_equal(fast.table, before)
        bad = {k: v.copy() for k, v in b.items()}
        bad["a2"][at] = -1  # checked whenever given, also by Q-learning, which does not use it
        with pytest.raises(ValueError, match=rf"a2\[{at}\] = -1"):
            fast.update(**bad)
        np.testing.assert_array_equal(fast.table, before)


@pytest.mark.parametrize("backend,build", [("pynq", "make bitstream"), ("xrt", "make xclbin"),
                                           ("serial", "make bitstream BOARD=ulx3s")])
def test_board_backends_without_a_bitstream_say_how_to_build_one(backend, build, tmp_path, monkeypatch):
    monkeypatch.setenv("PEARL_FPGA_BITSTREAMS", str(tmp_path))
    monkeypatch.delenv("PEARL_FPGA_BOARD", raising=False)
    with pytest.raises(BackendUnavailable, match=build):
        TabularQ(4, 2, backend=backend)


CPU = pytest.mark.skipif(importlib.util.find_spec("pearl_fpga.backends.tabular_cpu") is None,
                         reason="cpu backend not built")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """The partitioned mode's thread probe caches its choice: here in a folder of each test's own."""
    monkeypatch.setenv("PEARL_FPGA_CACHE", str(tmp_path / "cache"))


def reference_partitioned(start, algo, alpha, gamma, b, parts):
    """K numpy tables, one per np.array_split slice, each from `start`, merged (SPEC.md, "Partitioned mode")."""
    tables = []
    for idx in np.array_split(np.arange(len(b["s"])), parts):
        one = TabularQ(*start.shape, alpha=alpha, gamma=gamma, algo=algo, backend="numpy")
        one.load(start)
        if idx.size:
            one.update(**{key: v[idx] for key, v in b.items()})
        tables.append(one.table)
    return merge_partitions(tables)


@CPU
@given(data=st.data())
def test_property_partitioned_cpu_is_the_spec_whatever_the_threads(data):
    """Random and adversarial datasets (one (s, a) over and over with s2 == s, rewards at the ends of
    Q16.16 that saturate, more slices than transitions, negative sums that the merge's floor rounds):
    the cpu backend's one-call partitioned mode gives the reference's table for K slices, the same at
    every thread count."""
    ns = data.draw(st.integers(1, 5))
    na = data.draw(st.sampled_from([1, 2, 3, 4, 6, 7]))
    n = data.draw(st.integers(1, 60))
    algo = data.draw(st.sampled_from(["q", "sarsa"]))
    alpha = data.draw(st.sampled_from([1 / 65536, 0.3, 1.0]))
    gamma = data.draw(st.sampled_from([0.0, 0.9, 1.0]))
    parts = data.draw(st.integers(1, 70))
    adversarial = data.draw(st.booleans())
    if adversarial:
        s = np.zeros(n, np.int64)
        b = dict(s=s, a=s.copy(), s2=s.copy(), a2=s.copy(), done=np.zeros(n, bool),
                 r=np.full(n, data.draw(st.sampled_from([-32768.0, 32767.99998]))))
    else:
        ints = lambda hi: np.array(data.draw(st.lists(st.integers(0, hi - 1), min_size=n, max_size=n)), np.int64)
        b = dict(s=ints(ns), a=ints(na), s2=ints(ns), a2=ints(na),
                 r=np.array(data.draw(st.lists(st.floats(-32768, 32767.99), min_size=n, max_size=n)), np.float64),
                 done=np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool))
    start = np.array(data.draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=ns * na, max_size=ns * na)),
                     np.int32).reshape(ns, na)
    want = reference_partitioned(start, algo, alpha, gamma, b, parts)
    for threads in (1, 2, 3, 8):
        k = TabularQ(ns, na, alpha, gamma, algo=algo, backend="cpu")
        k.load(start)
        plan = k.update_partitioned(**b, parts=parts, threads=threads)
        assert plan.parts == parts and 1 <= plan.threads <= min(threads, parts)
        np.testing.assert_array_equal(k.table, want)


@CPU
@pytest.mark.parametrize("algo", ["q", "sarsa"])
def test_partitioned_cpu_other_dtypes_and_bad_entries(algo):
    """Other dtypes are validated and then take the same native call; a bad entry in any slice, even
    the last, leaves the table as it was (the slices run on private copies)."""
    rng = np.random.default_rng(11)
    b = random_batch(rng, 9, 4, 3000)
    start = rng.integers(-(2**24), 2**24, (9, 4)).astype(np.int32)
    want = reference_partitioned(start, algo, 0.2, 0.95, b, 5)
    k = TabularQ(9, 4, alpha=0.2, gamma=0.95, algo=algo, backend="cpu")
    k.load(start)
    k.update_partitioned(**{key: (v.astype(np.uint8) if v.dtype == np.int64 else v.astype(np.float32)
                                  if key == "r" else v) for key, v in b.items()}, parts=5, threads=2)
    exact_r = TabularQ(9, 4, alpha=0.2, gamma=0.95, algo=algo, backend="numpy")
    exact_r.load(start)
    exact_r.update_partitioned(**{**b, "r": b["r"].astype(np.float32)}, parts=5, threads=1)
    np.testing.assert_array_equal(k.table, exact_r.table)  # float32 rewards: the same words either way
    k.load(start)
    k.update_partitioned(**b, parts=5, threads=2)
    np.testing.assert_array_equal(k.table, want)
    for key, value, match in (("s", 9, r"s\[2999\] = 9"), ("r", np.nan, r"r\[2999\] is nan"),
                              ("a2", 4, r"a2\[2999\] = 4"), ("a", -1, r"a\[2999\] = -1")):
        bad = {x: v.copy() for x, v in b.items()}
        bad[key][-1] = value
        with pytest.raises(ValueError, match=match):
            k.update_partitioned(**bad, parts=5, threads=2)
        np.testing.assert_array_equal(k.table, want)


@CPU
def test_partitioned_cpu_from_many_python_threads_at_once():
    """The native pool runs one call at a time; callers from several threads each get their own result."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    batches = [random_batch(rng, 30, 3, 5000) for _ in range(6)]
    want = [reference_partitioned(np.zeros((30, 3), np.int32), "q", 0.5, 0.9, b, 3) for b in batches]

    def run(i: int) -> np.ndarray:
        k = TabularQ(30, 3, alpha=0.5, gamma=0.9, backend="cpu")
        for _ in range(5):
            k.clear()
            k.update_partitioned(**batches[i], parts=3, threads=2)
        return k.table

    with ThreadPoolExecutor(6) as pool:
        for got, expected in zip(pool.map(run, range(6)), want):
            np.testing.assert_array_equal(got, expected)


def _partitioned_in_child(queue) -> None:
    k = TabularQ(4, 2, alpha=0.5, gamma=0.9, backend="cpu")
    b = random_batch(np.random.default_rng(0), 4, 2, 100)
    k.update_partitioned(**b, parts=2, threads=2)
    queue.put(k.table.tolist())


@CPU
def test_partitioned_cpu_after_fork():
    """A forked child has the parent's pool object but not its threads: it starts a pool of its own."""
    import multiprocessing

    b = random_batch(np.random.default_rng(0), 4, 2, 100)
    parent = TabularQ(4, 2, alpha=0.5, gamma=0.9, backend="cpu")
    parent.update_partitioned(**b, parts=2, threads=2)  # the parent's pool is up
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_partitioned_in_child, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and np.array_equal(got, parent.table)


def test_partition_plan_given_open_and_cached(monkeypatch):
    """Given threads are capped at K and the cores; open threads and an open K are measured once per
    machine and call shape (the fewest threads within 5% of the fastest), then read back from the cache;
    a probe made while the machine is busy is kept for this process only."""
    from pearl_fpga.kernels import tabular_partitions as tp

    calls = []

    def fake_measure(n_states, n_actions, sarsa, batch, parts, candidates):
        calls.append((batch, parts, tuple(candidates)))
        return {1: 100.0, 2: 180.0, 4: 185.0}

    monkeypatch.setattr(tp, "_measure", fake_measure)
    monkeypatch.setattr(tp, "_SEEN", {})
    monkeypatch.setattr(tp, "_native_fingerprint", lambda: "test")
    monkeypatch.setattr(tp, "_busy", lambda cores: False)
    assert tp.plan_threads(500, 6, "q", 1000, parts=8, cores=1) == tp.PartitionPlan(8, 1, "one core")
    assert tp.plan_threads(500, 6, "q", 1000, parts=1, cores=4).threads == 1 and not calls
    plan = tp.plan_threads(500, 6, "q", 1000, parts=None, cores=4)
    assert (plan.parts, plan.threads, plan.how) == (2, 2, "measured") and calls == [(1024, None, (1, 2, 4))]
    assert "parts 2 on 2 threads (measured: 1: 0 M/s" in plan.describe()
    monkeypatch.setattr(tp, "_SEEN", {})  # a new process: read from the file
    again = tp.plan_threads(500, 6, "q", 1000, parts=None, cores=4)
    assert (again.parts, again.threads, again.how) == (2, 2, "cached") and len(calls) == 1
    tp.plan_threads(500, 6, "q", 3000, parts=None, cores=4)  # another batch size: measured again
    assert len(calls) == 2 and calls[-1][0] == 4096
    monkeypatch.setattr(tp, "_busy", lambda cores: True)
    monkeypatch.setattr(tp, "_SEEN", {})
    tp.plan_threads(500, 6, "sarsa", 1000, parts=3, cores=4)
    monkeypatch.setattr(tp, "_SEEN", {})
    tp.plan_threads(500, 6, "sarsa", 1000, parts=3, cores=4)
    assert len(calls) == 4 and calls[-1][1:] == (3, (1, 2, 3))  # measured under load: not kept on disk
    assert tp.slice_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)] and tp.slice_bounds(2, 4)[2:] == [(2, 2), (2, 2)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_partitioned_reports_its_plan_and_refuses_bad_counts(backend, monkeypatch):
    from pearl_fpga.kernels import tabular as kernel_module

    monkeypatch.setattr(kernel_module, "available_cores", lambda: 2)
    b = random_batch(np.random.default_rng(2), 5, 3, 300)
    k = TabularQ(5, 3, alpha=0.25, gamma=0.9, backend=backend)
    plan = k.update_partitioned(**b, parts=4, threads=8)
    assert (plan.parts, plan.threads, plan.how) == (4, 2, "given") and k.partition_plan is plan
    plan = k.update_partitioned(**b, parts=0)
    assert plan.parts >= 1 and plan.threads <= 2 and plan.how in ("measured", "cached", "the backend's instances")
    for bad, exc, match in ((dict(parts=-1), ValueError, "parts must be >= 0, got -1; 0 chooses it by measurement"),
                            (dict(parts=1.5), TypeError, "parts must be an integer"),
                            (dict(parts=True), TypeError, "got a bool"), (dict(threads=-2), ValueError, "threads must"),
                            (dict(threads="2"), TypeError, "threads must be an integer")):
        with pytest.raises(exc, match=match):
            k.update_partitioned(**b, **bad)
