"""The model's terms for the run the runtime really makes (issue 33: predictions within 15%): the
in-process loop's bulk sampling, the actor and learner loops' own time, the thread controller's probe
rounds and the schedule's gradient-step count, on injected fits whose totals are worked out by hand;
and the profile measuring them with the runtime's own code (presence and consistency, no timings)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pearl_fpga.planner.model import Device, Fit, Tables, Workload, predict

PLACE = {"act": "cpu", "replay": "cpu", "learn": "cpu"}
CPU = {"env_step": 1e-3, "act": 1e-3, "replay_insert": 1e-4, "replay_sample": 1e-4, "replay_update": 1e-4,
       "learn": 2e-3, "weight_sync": 1e-4}
EXTRA = {"actor_loop": 2e-5, "learner_loop": 3e-5, "lockstep_sample": 1e-5, "learner_convert": 5e-4,
         "thread_probe": 0.4}


def tables(extra: dict[str, float] | None = None) -> Tables:
    fits = {(task, "cpu"): Fit(sec, 0.0) for task, sec in {**CPU, **(extra or {})}.items()}
    return Tables(fits, {"cpu": "cpu"}, {"cpu": Device("cpu", "cpu", 8, 1.0, 2.0, "nominal")})


def workload(**kw: object) -> Workload:
    base = dict(envs_per_worker=1, batch_size=1, updates_per_step=1.0, sync_every=1, insert_batch=1,
                prioritized=False)
    return Workload(**{**base, **kw})  # type: ignore[arg-type]


def test_in_process_uniform_replay_samples_in_bulk_and_the_loops_cost_their_own_time():
    inline = predict(tables(EXTRA), workload(), PLACE, workers=0)
    assert inline.task_seconds["replay_sample"] == pytest.approx(1e-5)  # the round's bulk draw, per batch
    assert inline.task_seconds["learn"] == pytest.approx(2e-3 - 5e-4 + 3e-5)  # converted in the draw; bookkeeping
    assert inline.task_seconds["act"] == pytest.approx(1e-3 + 2e-5)  # the actor loop's own time
    assert inline.throughput == pytest.approx(1 / sum(inline.task_seconds.values()))
    # workers (not lockstep) and prioritized replay sample one batch per gradient step, converted in learn
    for pred in (predict(tables(EXTRA), workload(), PLACE, workers=2),
                 predict(tables(EXTRA), workload(prioritized=True), PLACE, workers=0)):
        assert pred.task_seconds["replay_sample"] == pytest.approx(1e-4)
        assert pred.task_seconds["learn"] == pytest.approx(2e-3 + 3e-5)
    # a profile without the new fits predicts as before
    plain = predict(tables(), workload(), PLACE, workers=0)
    assert plain.task_seconds["learn"] == pytest.approx(2e-3) and plain.task_seconds["act"] == pytest.approx(1e-3)
    assert plain.probe_s == 0.0


def test_probe_rounds_and_the_schedules_gradient_steps_by_hand():
    steps, starts, u = 3000, 750, 0.5
    w = workload(updates_per_step=u, sync_every=128, learning_starts=starts, total_steps=steps,
                 run_updates=1152, probe_rounds=2)
    pred = predict(tables(EXTRA), w, PLACE, workers=0)
    per_update = 1e-5 + (2e-3 - 5e-4 + 3e-5) + 1e-4 / 128  # sample + learn + its share of a sync
    assert pred.update_s == pytest.approx(per_update)
    assert pred.probe_s == pytest.approx(2 * 0.4)
    steady = starts / pred.warmup_throughput + (steps - starts) / pred.throughput
    expected = steady + 0.8 + (1152 - u * (steps - starts)) * per_update
    assert pred.run_seconds(steps, starts) == pytest.approx(expected)
    assert pred.run_throughput == pytest.approx(steps / expected)
    # another run length is the steady model alone (the counts belong to the planned run)
    assert pred.run_seconds(6000, starts) == pytest.approx(starts / pred.warmup_throughput + 5250 / pred.throughput)
    # the run's task timers: learn holds the probe rounds, the learner's tasks the schedule's count
    run = pred.run_task_seconds()
    share = (steps - starts) / steps
    scale = 1152 / (u * (steps - starts))
    assert run["learn"] == pytest.approx(share * u * (2e-3 - 5e-4 + 3e-5) * scale + 0.8 / steps)
    assert run["replay_sample"] == pytest.approx(share * u * 1e-5 * scale)
    # a learner with no probe measured (a fixed thread count, or one candidate) pays none
    fixed = predict(tables({k: v for k, v in EXTRA.items() if k != "thread_probe"}), w, PLACE, workers=0)
    assert fixed.probe_s == 0.0


def test_workload_counts_the_run_as_the_schedule_runs_it():
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner.plan import thread_probe_rounds, workload_of

    cfg = replace(TrainConfig.preset("dqn", "CartPole-v1"), total_steps=3000, learning_starts=750, eval_freq=0)
    w = workload_of(cfg)
    # rounds of 128 at 768, 1024, ..., 2816 (the multiples of 256 past 750): 9 rounds, not 2250 * 0.5
    assert w.run_updates == 9 * 128 and w.updates_per_step == 0.5
    assert w.insert_batch == 256  # in-process: one insert per training round's env steps
    assert w.probe_rounds == 4  # at the first gradient step, then 100, 200 and 400 steps after (runtime.threads)
    assert thread_probe_rounds(cfg, 700) == 3 and thread_probe_rounds(cfg, 701) == 4
    assert thread_probe_rounds(cfg, 2500) == 5 and thread_probe_rounds(cfg, 2501) == 6  # then every 1,000
    assert thread_probe_rounds(cfg, 0) == 0
    assert thread_probe_rounds(replace(cfg, learner_threads=2), 1152) == 0  # a fixed count never probes
    assert workload_of(replace(cfg, total_steps=700)).run_updates == 0


def test_weight_sync_profile_loads_weights_that_change():
    from pearl_fpga.planner.host_probe import _weight_sync

    loaded: list[str] = []

    class Policy:
        def load_weights(self, state: str) -> None:
            loaded.append(state)

    sync = _weight_sync(Policy(), ["a", "b"], 1)
    for _ in range(5):
        sync()
    assert loaded == ["a", "b", "a", "b", "a"]  # never the same weights twice in a row


def test_quick_profile_measures_the_loop_terms():
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner.host_probe import Sizes, profile_host
    from pearl_fpga.planner.plan import workload_of
    from pearl_fpga.planner.tables import build_tables

    cfg = replace(TrainConfig.preset("dqn", "CartPole-v1"), total_steps=600, learning_starts=150, eval_freq=0,
                  buffer_size=4096)
    prof = profile_host(cfg, ("cpu",), Sizes.quick())
    for key in ("actor_loop", "learner_loop", "learner_convert", "lockstep_sample"):
        assert (key, "cpu") in prof.fits, key
    convert, learn = prof.fits[("learner_convert", "cpu")], prof.fits[("learn", "cpu")]
    assert convert(cfg.batch_size) <= learn(cfg.batch_size)  # the conversion is timed inside the learn step
    if ("thread_probe", "cpu") in prof.fits:  # only where the controller has more than one count to probe
        steps, seconds = prof.points[("thread_probe", "cpu")][0]
        assert steps >= 1 and seconds > 0
    tables = build_tables(cfg, prof, ["cpu"], None)[0]
    pred = predict(tables, workload_of(cfg), PLACE, workers=0)
    assert pred.run_updates == 2 * 128 and pred.run_throughput > 0
