"""The planner's model and assignment on synthetic tables whose optimum is known by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pearl_fpga.planner.assign import Constraints, PlanError, search
from pearl_fpga.planner.model import Device, Fit, Tables, Workload, predict

# One env step per call and per env step one learner update of batch 1: every per-step time is the
# fit's `a`, so optima can be worked out by hand.
W1 = Workload(envs_per_worker=1, batch_size=1, updates_per_step=1.0, sync_every=1, insert_batch=1)


def tables(times: dict[str, dict[str, float]], cores: int = 2, accel_power: tuple[float, float] = (5.0, 10.0)) -> Tables:
    """times: target -> task -> seconds per call (constant). Target "cpu" and "fast" are on the CPU."""
    fits = {(task, target): Fit(sec, 0.0) for target, per in times.items() for task, sec in per.items()}
    target_device = {t: ("cpu" if t in ("cpu", "fast") else t) for t in times}
    devices = {"cpu": Device("cpu", "cpu", cores, 10.0, 10.0 + 20.0 * cores, "nominal")}
    for t in times:
        if target_device[t] != "cpu":
            devices[t] = Device(t, "fpga", 1, *accel_power, "nominal")
    return Tables(fits, target_device, devices)


CPU = {"env_step": 1e-3, "act": 1e-3, "replay_insert": 1e-4, "replay_sample": 1e-4, "replay_update": 1e-4,
       "learn": 2e-3, "weight_sync": 1e-4}


def test_stage_and_device_limits_by_hand():
    t = tables({"cpu": CPU}, cores=2)
    one = predict(t, W1, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=1)
    # actor stage: 2 ms per step -> 500/s; learner 2.1 ms -> 476/s; cpu load 4.4 ms / 2 cores -> 454/s
    assert one.throughput == pytest.approx(2 / 4.4e-3)
    assert one.bottleneck == "device cpu"
    assert one.task_seconds["learn"] == pytest.approx(2e-3)
    assert one.device_utilization["cpu"] == pytest.approx(1.0)
    # before learning starts actions are random (no inference) and the learner idles: env step binds
    assert one.warmup_throughput == pytest.approx(1 / 1e-3)
    steps, starts = 1000, 500
    assert one.average_throughput(steps, starts) == pytest.approx(steps / (starts / 1000 + (steps - starts) / one.throughput))


def test_act_fraction_and_worker_insert_batch():
    fits = {(task, "cpu"): Fit(1e-3, 1e-4) for task in CPU}
    t = Tables(fits, {"cpu": "cpu"}, {"cpu": Device("cpu", "cpu", 64, 1, 2, "nominal")})
    w = Workload(envs_per_worker=1, batch_size=1, updates_per_step=1, sync_every=1, insert_batch=1,
                 act_fraction=0.25, worker_insert_batch=64)
    inline = predict(t, w, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=0)
    workers = predict(t, w, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=2)
    assert inline.task_seconds["act"] == pytest.approx(0.25 * 1.1e-3)
    assert inline.task_seconds["replay_insert"] == pytest.approx(1.1e-3)
    assert workers.task_seconds["replay_insert"] == pytest.approx((1e-3 + 64e-4) / 64)


def test_in_process_mode_runs_tasks_in_turn():
    t = tables({"cpu": CPU}, cores=2)
    seq = predict(t, W1, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=0)
    assert seq.throughput == pytest.approx(1 / 4.4e-3)
    assert seq.bottleneck == "stage in-process"
    ranked = search(t, W1, ["cpu"], max_workers=2, min_workers=0)
    assert {p.workers for p in ranked} == {0, 1, 2}
    assert ranked[0].workers == 1  # 454/s with workers vs 227/s in-process


def test_update_to_data_ratio_scales_learner_time():
    t = tables({"cpu": CPU}, cores=8)
    half = Workload(envs_per_worker=1, batch_size=1, updates_per_step=0.5, sync_every=2, insert_batch=1)
    p = predict(t, half, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=4)
    assert p.task_seconds["learn"] == pytest.approx(1e-3)
    assert p.task_seconds["weight_sync"] == pytest.approx(0.25 * 1e-4)
    learner = 1e-3 + 0.25e-4
    assert p.throughput == pytest.approx(1 / learner)
    assert p.bottleneck == "stage learner"


def test_batched_fit_is_amortized_per_env_step():
    fits = {(task, "cpu"): Fit(1e-3, 1e-4) for task in CPU}
    t = Tables(fits, {"cpu": "cpu"}, {"cpu": Device("cpu", "cpu", 64, 1, 2, "nominal")})
    w = Workload(envs_per_worker=8, batch_size=32, updates_per_step=0.25, sync_every=10, insert_batch=16)
    p = predict(t, w, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=1)
    assert p.task_seconds["env_step"] == pytest.approx((1e-3 + 8e-4) / 8)
    assert p.task_seconds["replay_insert"] == pytest.approx((1e-3 + 16e-4) / 16)
    assert p.task_seconds["replay_sample"] == pytest.approx(0.25 * (1e-3 + 32e-4))


def test_known_optimum_offloads_act_and_replay():
    fpga = {"act": 1e-4, "weight_sync": 1e-4, "replay_insert": 1e-5, "replay_sample": 1e-5, "replay_update": 1e-5}
    cpu = dict(CPU, replay_sample=1e-3, learn=1.2e-3)
    t = tables({"cpu": cpu, "fpga": fpga}, cores=2)
    ranked = search(t, W1, ["cpu", "fpga"], max_workers=4)
    best = ranked[0]
    # act and replay on the FPGA leave 2.2 ms of CPU work per step (909/s on 2 cores); the learner
    # stage (1.2 ms learn + 0.1 ms sync) binds at 769/s, and one worker (1.1 ms per step) keeps up.
    # Any other placement needs >= 3.3 ms of CPU per step (<= 606/s).
    assert best.placement == {"act": "fpga", "replay": "fpga", "learn": "cpu"}
    assert best.workers == 1
    assert best.bottleneck == "stage learner"
    assert best.throughput == pytest.approx(1 / 1.3e-3)
    assert all(p.throughput <= 1 / 3.3e-3 * 2 * (1 + 1e-9) for p in ranked if p.placement != best.placement)


def test_tie_prefers_fewer_devices_then_fewer_workers():
    # the FPGA is exactly as fast as the CPU: same throughput, so the CPU-only plan must win
    t = tables({"cpu": CPU, "fpga": dict(CPU)}, cores=16)
    best = search(t, W1, ["cpu", "fpga"], max_workers=4)[0]
    assert set(best.placement.values()) == {"cpu"}
    assert best.workers == 1  # the learner binds at 1 worker already: more workers tie
    # and the preference order breaks a tie between two targets on the same device
    t2 = tables({"cpu": CPU, "fast": dict(CPU)}, cores=16)
    assert set(search(t2, W1, ["fast", "cpu"], max_workers=2)[0].placement.values()) == {"fast"}
    assert set(search(t2, W1, ["cpu", "fast"], max_workers=2)[0].placement.values()) == {"cpu"}


def test_device_that_cannot_run_a_task_is_never_chosen_for_it():
    fpga_act_only = {"act": 1e-5, "weight_sync": 1e-5}  # no replay, no learn on this board
    t = tables({"cpu": CPU, "fpga": fpga_act_only}, cores=2)
    ranked = search(t, W1, ["cpu", "fpga"], max_workers=2)
    assert all(p.placement["replay"] == "cpu" and p.placement["learn"] == "cpu" for p in ranked)
    assert ranked[0].placement["act"] == "fpga"
    with pytest.raises(KeyError, match="cannot run"):
        predict(t, W1, {"act": "cpu", "replay": "fpga", "learn": "cpu"}, 1)


def test_pin_and_exclude_constraints():
    fpga = {"act": 1e-4, "weight_sync": 1e-4}
    t = tables({"cpu": CPU, "fpga": fpga}, cores=2)
    assert search(t, W1, ["cpu", "fpga"], 2)[0].placement["act"] == "fpga"
    assert search(t, W1, ["cpu", "fpga"], 2, constraints="!fpga")[0].placement["act"] == "cpu"
    assert search(t, W1, ["cpu", "fpga"], 2, constraints="act=cpu")[0].placement["act"] == "cpu"
    assert all(p.workers == 2 for p in search(t, W1, ["cpu", "fpga"], 2, constraints="workers=2"))


def test_infeasible_constraint_names_the_culprit():
    fpga = {"act": 1e-4, "weight_sync": 1e-4}
    t = tables({"cpu": CPU, "fpga": fpga}, cores=2)
    with pytest.raises(PlanError, match=r"'learn=fpga'.*can run learn.*cpu"):
        search(t, W1, ["cpu", "fpga"], 2, constraints="learn=fpga")
    with pytest.raises(PlanError, match=r"'act=cuda'"):
        search(t, W1, ["cpu", "fpga"], 2, constraints="act=cuda")
    with pytest.raises(PlanError, match=r"'!cpu'"):
        search(t, W1, ["cpu", "fpga"], 2, constraints="!cpu")
    with pytest.raises(PlanError, match=r"not together"):
        search(t, W1, ["cpu", "fpga"], 2, constraints="act=fpga,!fpga")
    with pytest.raises(PlanError, match="workers=9"):
        search(t, W1, ["cpu", "fpga"], 2, constraints="workers=9")


@pytest.mark.parametrize("bad", ["act", "foo=cpu", "workers=-1", "workers=two", "!", "act=cpu,act=fpga"])
def test_malformed_constraints_are_rejected(bad):
    with pytest.raises(PlanError):
        Constraints.parse(bad)


def test_efficiency_objective_trades_speed_for_watts():
    # the FPGA acts 2x faster but the board draws 100 W: throughput picks it, efficiency does not
    fast_hungry = {"act": 0.5e-3, "weight_sync": 1e-4}
    t = tables({"cpu": CPU, "fpga": fast_hungry}, cores=1, accel_power=(100.0, 100.0))
    by_speed = search(t, W1, ["cpu", "fpga"], 1, objective="throughput")[0]
    by_watt = search(t, W1, ["cpu", "fpga"], 1, objective="efficiency")[0]
    assert by_speed.placement["act"] == "fpga"
    assert by_watt.placement["act"] == "cpu"
    assert by_watt.efficiency > by_speed.efficiency
    assert by_speed.power_w == pytest.approx(by_speed.power_w)
    # power: idle + (active - idle) * utilization per used device; one core, saturated
    cpu_only = predict(t, W1, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, 1)
    assert cpu_only.device_utilization["cpu"] == pytest.approx(1.0)
    assert cpu_only.power_w == pytest.approx(30.0)
    assert cpu_only.power_source == "nominal"
    with pytest.raises(PlanError, match="objective"):
        search(t, W1, ["cpu"], 1, objective="speed")


@given(
    times=st.lists(st.floats(1e-6, 1e-2), min_size=7, max_size=7),
    cores=st.integers(1, 8),
    workers=st.integers(1, 8),
)
def test_throughput_respects_every_limit(times, cores, workers):
    per = dict(zip(CPU, times))
    t = tables({"cpu": per}, cores=cores)
    p = predict(t, W1, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers)
    total = sum(p.task_seconds.values())
    assert p.throughput * total <= cores * (1 + 1e-9)
    assert p.throughput * (per["env_step"] + per["act"]) <= workers * (1 + 1e-9)
    assert p.throughput * (per["learn"] + per["weight_sync"]) <= 1 + 1e-9
    # and one of them binds
    assert math.isclose(max(p.throughput * total / cores, p.throughput * (per["env_step"] + per["act"]) / workers,
                            p.throughput * (per["learn"] + per["weight_sync"]),
                            p.throughput * (per["replay_insert"] + per["replay_sample"] + per["replay_update"])),
                        1.0, rel_tol=1e-9)


def test_shared_cpu_capacity_limits_parallel_processes():
    # others use the machine: 3 processes of ours get together only 1.5x what one gets
    base = tables({"cpu": CPU}, cores=2)
    shared = Tables(base.fits, base.target_device, base.devices, base.stages, cpu_parallel={1: 1.0, 2: 1.4, 3: 1.5})
    assert shared.cpu_capacity(1) == 1.0 and shared.cpu_capacity(2) == 1.4 and shared.cpu_capacity(5) == 1.5
    place = {"act": "cpu", "replay": "cpu", "learn": "cpu"}
    p = predict(shared, W1, place, workers=1)  # actor + replay + learner processes
    assert p.throughput == pytest.approx(1.5 / 4.4e-3)
    assert p.bottleneck == "device cpu"
    assert predict(base, W1, place, workers=1).throughput == pytest.approx(2 / 4.4e-3)
    assert predict(shared, W1, place, workers=0).throughput == pytest.approx(1 / 4.4e-3)


RUNTIME_STAGES = {"actor": ("env_step", "act"),
                  "learner": ("replay_insert", "replay_sample", "replay_update", "learn", "weight_sync")}


def test_runtime_overheads_by_hand():
    # explore runs around every act call, worker_poll around every gradient step (worker mode only),
    # and a worker run pays start + stop once
    base = tables({"cpu": CPU}, cores=8)
    fits = dict(base.fits)
    fits.update({("explore", "cpu"): Fit(1e-4, 0.0), ("worker_poll", "cpu"): Fit(2e-4, 0.0),
                 ("worker_start", "cpu"): Fit(1.0, 0.5), ("worker_stop", "cpu"): Fit(0.25, 0.25)})
    t = Tables(fits, base.target_device, base.devices, RUNTIME_STAGES)
    place = {"act": "cpu", "replay": "cpu", "learn": "cpu"}
    inline = predict(t, W1, place, workers=0)
    assert inline.task_seconds["act"] == pytest.approx(1e-3 + 1e-4)
    assert inline.warmup_task_seconds["act"] == pytest.approx(1e-4)  # random actions still draw numbers
    assert inline.throughput == pytest.approx(1 / (4.4e-3 + 1e-4))  # no pool to poll in-process
    assert inline.startup_s == inline.shutdown_s == 0.0
    two = predict(t, W1, place, workers=2)
    learner = 1e-4 * 3 + 2e-3 + 1e-4 + 2e-4  # replay + learn + sync + poll, per env step
    assert two.throughput == pytest.approx(1 / learner) and two.bottleneck == "stage learner"
    assert (two.startup_s, two.shutdown_s) == pytest.approx((2.0, 0.75))
    steps, starts = 10_000, 1_000
    seconds = 2.75 + starts / two.warmup_throughput + (steps - starts) / two.throughput
    assert two.run_seconds(steps, starts) == pytest.approx(seconds)
    assert two.average_throughput(steps, starts) == pytest.approx(steps / seconds)


@pytest.mark.parametrize("actor_slow, learner_slow, expect", [
    (1.0, 1.0, 0.5e-3 + (2.4e-3 - 0.5e-3)),        # no interference: the learner's work alone
    (3.0, 1.5, 1.5e-3 + (2.4e-3 - 1.5e-3 / 1.5)),  # burst of 1.5 ms, the learner does 1 ms of work in it
    (12.0, 2.0, 6e-3),                              # the burst outlasts the learner's work: actors bind
])
def test_shared_cpu_overlap_of_actors_and_learner(actor_slow, learner_slow, expect):
    base = tables({"cpu": CPU}, cores=8)
    fits = dict(base.fits)
    fits.update({("learner_corun", "cpu"): Fit(learner_slow, 0.0), ("actor_corun", "cpu"): Fit(actor_slow, 0.0)})
    t = Tables(fits, base.target_device, base.devices, RUNTIME_STAGES)
    p = predict(t, W1, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=4)
    # actors: 2 ms per env step over 4 workers = 0.5 ms per env step at full speed; learner 2.4 ms
    assert p.throughput == pytest.approx(1 / expect)
    if actor_slow > 1.0:
        assert p.bottleneck == "stage learner+actors"
    # never faster than the stages alone
    assert p.throughput <= predict(base, W1, {"act": "cpu", "replay": "cpu", "learn": "cpu"}, workers=4).throughput * (1 + 1e-9)


def test_actor_corun_is_per_act_target():
    base = tables({"cpu": CPU, "fast": {"act": 1e-4, "weight_sync": 1e-4}}, cores=8)
    fits = dict(base.fits)
    fits.update({("learner_corun", "cpu"): Fit(1.0, 0.0), ("actor_corun", "cpu"): Fit(2.0, 0.0),
                 ("actor_corun", "fast"): Fit(20.0, 0.0)})
    t = Tables(fits, base.target_device, base.devices, RUNTIME_STAGES)
    p = predict(t, W1, {"act": "fast", "replay": "cpu", "learn": "cpu"}, workers=1)
    # the fast actor: 1.1 ms per step alone, 22 ms while the learner runs; the learner does 2.4 ms in that burst
    assert p.throughput == pytest.approx(1 / 22e-3)


def test_the_tabular_cycle_model_by_hand():
    """n UPDATEs on rows no recent write touched issue one per clock; the same row again and again waits
    HAZARD_WINDOW - 1 slots each time; the drain of the last write comes on top (hls_schedule)."""
    import numpy as np

    from pearl_fpga.planner.hls_schedule import tabular_update_cycles
    from pearl_fpga.spec.tabular import HAZARD_WINDOW

    n, drain = 50, HAZARD_WINDOW - 1
    assert tabular_update_cycles(np.arange(n), np.arange(n) + n) == n + drain
    assert tabular_update_cycles(np.full(n, 7), np.full(n, 7)) == 1 + (n - 1) * HAZARD_WINDOW + drain
    # a row revisited exactly HAZARD_WINDOW slots later does not wait
    rows = np.arange(n) % HAZARD_WINDOW
    assert tabular_update_cycles(rows, rows + 1000) == n + drain


def test_the_hls_schedule_follows_the_commands_ii_and_the_leaf_latency():
    """At the Alveo clock (300 MHz, above the descriptors' II1_MAX_MHZ) replay's and tabular's COMMANDS
    loops issue every 2 clocks (hls/<kernel>/SPEC.md, "Initiation interval"), and the leaf words in
    UltraRAM add their read latency twice (front copy, leaf level) to the pipeline's fill."""
    from pearl_fpga.board.catalog import load_catalog
    from pearl_fpga.planner import fpga_model, hls_schedule
    from pearl_fpga.spec.descriptor import descriptor
    from pearl_fpga.spec.replay import tree_depth

    import numpy as np

    latency = descriptor("replay").constant("URAM_READ_LATENCY")
    for spec in load_catalog().values():
        rk = spec.kernels["replay"]
        depth = tree_depth(rk["capacity"], rk["fanout"])
        fit = fpga_model.replay_cycles_hls(depth, rk["fanout"], spec.clock_mhz, spec.replay_leaf_memory)
        ii = 2 if spec.kind == "alveo" else 1
        extra = 2 * (latency - 1) if spec.replay_leaf_memory == "uram" else 0
        fill = hls_schedule.REPLAY_FRONT_CYCLES + depth * hls_schedule.replay_level_cycles(rk["fanout"], spec.clock_mhz) + extra
        assert (fit.c1, fit.c0) == (ii, fill - ii), spec.name
        rows = np.arange(50)
        assert hls_schedule.tabular_update_cycles(rows, rows + 50, spec.clock_mhz) == ii * hls_schedule.tabular_update_cycles(rows, rows + 50)
