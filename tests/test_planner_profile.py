"""Profiles: the least-squares fit, the per-machine cache round trip, corrupt caches, FPGA models."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pearl_fpga.planner import fpga_model, loops, worker_probe
from pearl_fpga.planner import profile as prof
from pearl_fpga.planner.model import Fit
from pearl_fpga.spec.mlp import infer_cycle_bound
from pearl_fpga.spec.replay import batch_cycle_bound, tree_depth


@given(a=st.floats(0, 1e-2), b=st.floats(0, 1e-4), batches=st.lists(st.integers(1, 4096), min_size=2, max_size=6, unique=True))
def test_fit_recovers_an_exact_line(a, b, batches):
    f = prof.fit_line(batches, [a + b * x for x in batches])
    assert f.a == pytest.approx(a, abs=1e-12)
    assert f.b == pytest.approx(b, abs=1e-12)


def test_fit_is_least_squares_and_never_negative():
    x, y = [1, 2, 3, 4], [1.0, 3.0, 2.0, 4.0]
    f = prof.fit_line(x, y)
    b, a = np.polyfit(x, y, 1)
    assert (f.a, f.b) == pytest.approx((a, b))
    falling = prof.fit_line([1, 10], [2e-3, 1e-3])  # noise made time shrink with the batch
    assert (falling.a, falling.b) == pytest.approx((1.5e-3, 0.0))
    through_origin = prof.fit_line([10, 20], [1e-3, 3e-3])  # intercept would be negative
    assert through_origin.a == 0.0 and through_origin.b == pytest.approx((10e-3 + 60e-3) / 500)
    single = prof.fit_line([8, 8], [1.0, 3.0])
    assert (single.a, single.b) == (2.0, 0.0)
    with pytest.raises(ValueError):
        prof.fit_line([1, 2], [1.0, float("nan")])
    with pytest.raises(ValueError):
        prof.fit_line([1, 2], [1.0])


def _profile() -> prof.Profile:
    machine = {"host": "test-host", "cpu": "x", "cores": 2, "key": "abc123"}
    p = prof.Profile(machine, "dqn|CartPole-v1")
    p.fits[("act", "cpu")] = Fit(1e-4, 2e-6)
    p.points[("act", "cpu")] = [(1.0, 1.02e-4), (4.0, 1.08e-4)]
    p.fits[("replay_update", "cpu")] = Fit(0.0, 0.0, "none without PER")
    p.unavailable["act@cuda"] = "torch sees no CUDA device"
    return p


def test_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("PEARL_FPGA_CACHE", str(tmp_path))
    monkeypatch.delenv("PEARL_FPGA_CACHE_DIR", raising=False)
    p = _profile()
    path = prof.save_cached(p)
    assert path.parent == tmp_path / "profiles" and path.name.startswith("test-host-abc123")
    q = prof.load_cached(p.machine, p.workload)
    assert q is not None
    assert q.fits == p.fits and q.unavailable == p.unavailable and q.points[("act", "cpu")] == p.points[("act", "cpu")]
    # another workload is added beside it, not over it
    other = _profile()
    other.workload = "ddpg|Pendulum-v1"
    prof.save_cached(other)
    assert prof.load_cached(p.machine, p.workload) is not None
    assert prof.load_cached(p.machine, "never-profiled") is None
    # a cache written on another machine is not used
    with pytest.warns(UserWarning, match="another machine"):
        assert prof.load_cached({**p.machine, "key": "other"}, p.workload, path=path) is None


@pytest.mark.parametrize("corrupt", [
    "{not json",
    json.dumps({"schema": 99, "machine": {"key": "abc123"}, "workloads": {}}),
    json.dumps({"schema": 1, "machine": {"key": "abc123"}, "workloads": {"dqn|CartPole-v1": {"fits": {"act@cpu": {"a": -1, "b": 0, "source": "measured"}}, "unavailable": {}}}}),
    json.dumps({"schema": 1, "machine": {"key": "abc123"}, "workloads": {"dqn|CartPole-v1": {"fits": {"actcpu": {}}, "unavailable": {}}}}),
    json.dumps({"schema": 1, "machine": {"key": "abc123"}, "workloads": {"dqn|CartPole-v1": {"fits": {"act@cpu": {"a": "1", "b": 0, "source": "m"}}, "unavailable": {}}}}),
])
def test_corrupt_cache_warns_and_is_replaced(tmp_path, monkeypatch, corrupt):
    monkeypatch.setenv("PEARL_FPGA_CACHE", str(tmp_path))
    monkeypatch.delenv("PEARL_FPGA_CACHE_DIR", raising=False)
    p = _profile()
    path = prof.cache_path(p.machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(corrupt)
    with pytest.warns(UserWarning, match="re-profiling"):
        assert prof.load_cached(p.machine, p.workload) is None
    prof.save_cached(p)  # what a re-profile does next: a clean file again
    assert prof.load_cached(p.machine, p.workload).fits == p.fits


def test_spec_cycle_models():
    """The models are SPEC.md's bounds, worked by hand (the cocotb benches check the RTL meets them):
    4-64-64-2 holds 4480 MACs in 3 layers; a 64-sample batch through a depth-4 tree."""
    layers = fpga_model.mlp_layers(4, [64, 64], 2)
    assert layers == [(4, 64), (64, 64), (64, 2)]
    assert fpga_model.mlp_cycles_spec(layers, 16).c1 == 320  # 280 + 24 + 16
    assert fpga_model.mlp_cycles_spec(layers, 8).c1 == 600  # 560 + 24 + 16
    assert fpga_model.mlp_cycles_spec([(3, 5)], 4).c1 == pytest.approx(27.75)  # 15/4 + 8 + 16, no rounding up
    assert tree_depth(65536, 16) == 4 and tree_depth(65537, 16) == 5 and tree_depth(2, 16) == 1
    c = fpga_model.replay_cycles_spec(4)
    assert (c(64), c(1)) == (112, 49)  # B + 8 * 4 + 16


def test_fpga_fits_follow_the_catalog():
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.config import TrainConfig

    cfg = TrainConfig.preset("dqn", net_arch=[64, 64], per=True, buffer_size=8192)
    host = {("act", "cpu-kernel"): Fit(20e-6, 1e-6), ("weight_sync", "cpu-kernel"): Fit(50e-6, 0.0),
            ("host_store", "cpu"): Fit(5e-6, 1e-7), ("host_gather", "cpu"): Fit(10e-6, 2e-7)}
    board = get_board("pynq-z2")
    fits, unavailable, notes = fpga_model.fpga_fits(board, cfg, 4, 2, True, host, cycles="spec")  # the RTL's bounds
    assert not unavailable and notes
    cyc = infer_cycle_bound([(4, 64), (64, 64), (64, 2)], board.kernels["mlp"]["lanes"])
    act = fits[("act", "fpga-emu")]
    assert act.a == pytest.approx(20e-6 + 2 * board.link_latency_us * 1e-6)
    assert act.b == pytest.approx(cyc / (board.clock_mhz * 1e6) + (8 + 6) / (board.link_bandwidth_gbps * 1e9))
    depth = tree_depth(8192, board.kernels["replay"]["fanout"])
    upd = fits[("replay_update", "fpga-emu")]
    assert upd(64) == pytest.approx(board.transfer_seconds(64 * 16) + batch_cycle_bound(64, depth) / (board.clock_mhz * 1e6))
    # a network wider than the board's kernel, a buffer larger than its tree: unavailable, with the reason
    wide = TrainConfig.preset("dqn", per=True)  # 256-wide layers, 100k transitions
    _, unavailable, _ = fpga_model.fpga_fits(board, wide, 4, 2, True, host)
    assert unavailable["act@fpga-emu"] == "pynq-z2's MLP kernel holds width 128; the network 4-256-256-2 has 256"
    assert unavailable["replay@fpga-emu"] == "pynq-z2's replay kernel holds 16,384 transitions; buffer_size is 100,000"


def test_cpu_parallel_is_relative_to_one_process():
    pts = dict(worker_probe.cpu_parallel((1, 2), 0.05))
    assert pts[1.0] == pytest.approx(1.0)
    assert 0.2 < pts[2.0] <= 2.0 * 1.25  # two busy processes get between a share of one core and both cores


def test_worker_pool_costs_time_the_runtime_pool():
    from pearl_fpga.config import TrainConfig

    cfg = TrainConfig.preset("dqn", net_arch=[16, 16], batch_size=16, buffer_size=4096, total_steps=2000)
    costs = worker_probe.worker_pool_costs(cfg, (1,), ("cpu-kernel",), poll_iterations=20, corun_s=0.2)
    assert set(costs) == {("worker_start", "cpu"), ("worker_poll", "cpu"), ("learner_corun", "cpu"),
                          ("actor_corun", "cpu-kernel"), ("worker_stop", "cpu")}
    start, poll, stop = (costs[(k, "cpu")][0][1] for k in ("worker_start", "worker_poll", "worker_stop"))
    assert 0.05 < start < 120 and 0 < poll < 0.1 and 0 < stop < 30  # a process that imports torch: a second or so
    # co-run factors are ratios to the same work done alone (>1 means slower while both run)
    assert 0.2 < costs[("learner_corun", "cpu")][0][1] < 50 and 0.2 < costs[("actor_corun", "cpu-kernel")][0][1] < 200


def test_worker_pool_costs_time_what_they_name(monkeypatch):
    """Delays put into the pool's start, its per-iteration bookkeeping and its close show up in
    worker_start, worker_poll and worker_stop (each at least the delay): the figures time those steps."""
    import time

    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.workers import WorkerPool

    start_delay, poll_delay, stop_delay = 3.0, 0.005, 2.0
    init, restart_dead, close = WorkerPool.__init__, WorkerPool.restart_dead, WorkerPool.close

    def slow_init(self, *args, **kwargs):
        time.sleep(start_delay)
        init(self, *args, **kwargs)

    def slow_restart_dead(self, *args, **kwargs):
        time.sleep(poll_delay)
        return restart_dead(self, *args, **kwargs)

    def slow_close(self, *args, **kwargs):
        time.sleep(stop_delay)
        return close(self, *args, **kwargs)

    monkeypatch.setattr(WorkerPool, "__init__", slow_init)
    monkeypatch.setattr(WorkerPool, "restart_dead", slow_restart_dead)
    monkeypatch.setattr(WorkerPool, "close", slow_close)
    cfg = TrainConfig.preset("dqn", net_arch=[16, 16], batch_size=16, buffer_size=4096, total_steps=2000)
    costs = worker_probe.worker_pool_costs(cfg, (1,), ("cpu",), poll_iterations=20, corun_s=0.1)
    start, poll, stop = (costs[(k, "cpu")][0][1] for k in ("worker_start", "worker_poll", "worker_stop"))
    assert start >= start_delay and poll >= poll_delay and stop >= stop_delay, (start, poll, stop)


def test_the_learner_reference_times_the_profiled_schedule_without_probing(monkeypatch):
    """load_factor compares the learner now against the profile's learner loop, which runs the learner's first
    schedule: the reference must time that schedule, not the run's probe rounds (a probe step of the slower
    schedule read as a slower machine: x1.25-1.38 on a quiet host, against x0.99-1.01 without)."""
    import pearl_fpga.runtime.update_schedule as update_schedule
    from pearl_fpga.algos.registry import learner_class
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner.host_probe import learner_reference

    made = []
    monkeypatch.setattr(update_schedule, "schedule_control", lambda learner, *a, **k: made.append(learner))
    cfg = TrainConfig.preset("dqn", net_arch=[16, 16], batch_size=16, learner_threads=1)
    assert len(learner_class("dqn")(cfg, 4, 2).schedules) == 2  # a step with two schedules to probe
    assert learner_reference(cfg, repeats=3) > 0 and made == []
    loops.learner_step(cfg, np.random.default_rng(0))()  # the run's step, as the thread probe times it: probed
    assert len(made) == 1


def test_explore_overhead_is_measured_without_inference():
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.envs import env_spec

    cfg = TrainConfig.preset("dqn")
    pts = loops.explore_overhead(cfg, env_spec(cfg.env_id), (1, 4), repeats=20)
    assert [p[0] for p in pts] == [1.0, 4.0] and all(0 < p[1] < 0.01 for p in pts)


def test_one_cache_root_and_the_old_variable_warns(monkeypatch, tmp_path):
    from pearl_fpga.sim.verilator import cache_dir as rtl_cache

    monkeypatch.delenv("PEARL_FPGA_CACHE_DIR", raising=False)
    monkeypatch.setenv("PEARL_FPGA_CACHE", str(tmp_path))
    assert prof.cache_dir() == tmp_path / "profiles" and rtl_cache() == tmp_path / "rtl"
    monkeypatch.setenv("PEARL_FPGA_CACHE_DIR", str(tmp_path / "old"))
    with pytest.warns(FutureWarning, match="PEARL_FPGA_CACHE_DIR is deprecated"):
        assert prof.cache_dir() == tmp_path / "old"


def test_code_fingerprint_covers_every_profiled_path(tmp_path):
    """A cached profile is stale when the code it timed changes: an edit to any profiled folder (the
    replay buffer package included) changes the fingerprint, and a name in PROFILED_CODE that the
    package lacks is an error, not a folder silently left out."""
    import shutil
    from pathlib import Path

    pkg = Path(prof.__file__).resolve().parents[1]
    copy = tmp_path / "pearl_fpga"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = prof.code_fingerprint(copy)
    assert before == prof.code_fingerprint(pkg)
    for name in prof.PROFILED_CODE:
        target = copy / name
        source = target if target.is_file() else sorted(p for p in target.rglob("*") if p.suffix in (".py", ".cpp"))[0]
        text = source.read_text()
        source.write_text(text + "\n# edited\n")
        assert prof.code_fingerprint(copy) != before, f"an edit under {name} left the fingerprint unchanged"
        source.write_text(text)
    assert prof.code_fingerprint(copy) == before
    shutil.rmtree(copy / "replay")
    with pytest.raises(FileNotFoundError, match="'replay'"):
        prof.code_fingerprint(copy)
