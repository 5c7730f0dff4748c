"""DDPG's and TD3's update schedule (issue 34): serial or concurrent, chosen by measurement while training
(runtime/update_schedule.py), the same bits either way; the config's auto / serial / concurrent."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from pearl_fpga.algos import DDPG, DQN, TD3
from pearl_fpga.algos.common import Batch
from pearl_fpga.algos.fused import native_gemms
from pearl_fpga.config import TrainConfig
from pearl_fpga.host import available_cores
from pearl_fpga.runtime.threads import CUT_AFTER, AdaptiveThreads
from pearl_fpga.runtime.update_schedule import schedule_control, schedule_report, step_timing


class FakeLearner:
    """A learner whose step costs `cost[schedule]` seconds on a fake clock (settable mid-run)."""

    schedules = ("serial", "concurrent")

    def __init__(self, cost: dict[str, float]) -> None:
        self.cost = dict(cost)
        self.schedule = "concurrent"
        self.now = 0.0

    def set_schedule(self, schedule: str) -> None:
        assert schedule in self.schedules
        self.schedule = schedule

    def clock(self) -> float:
        return self.now


def run(control: AdaptiveThreads, learner: FakeLearner, steps: int) -> list[str]:
    used = []
    for _ in range(steps):
        with control.step():
            used.append(learner.schedule)
            learner.now += learner.cost[learner.schedule]
    return used


def control_of(learner: FakeLearner, **kw) -> AdaptiveThreads:
    kw.setdefault("period", 100)
    control = schedule_control(learner, clock=learner.clock, **kw)
    assert control is not None
    return control


def test_concurrent_measured_slower_runs_serial():
    """A shared host: the concurrent step waits for a core other work holds (18x, as issue 34 measured)."""
    learner = FakeLearner({"serial": 0.56e-3, "concurrent": 10.1e-3})
    control = control_of(learner)
    used = run(control, learner, 2000)
    assert control.choice.current == 1 and learner.schedule == "serial"
    # the slow schedule's probes are cut short and come less and less often: the run costs little more
    # than a serial one (the learner starts concurrent, the old default, until its first round)
    assert used.count("concurrent") <= 5 * (control.warmup + CUT_AFTER)
    assert learner.now < 1.2 * 2000 * 0.56e-3
    line = schedule_report(learner, control)
    assert line is not None and line.startswith("auto: serial (serial: 560 us, concurrent: 10100 us per step;")


def test_concurrent_measured_faster_runs_concurrent():
    learner = FakeLearner({"serial": 1.8e-3, "concurrent": 1.0e-3})
    control = control_of(learner)
    used = run(control, learner, 300)
    first_round = 2 * (control.warmup + control.probe_steps)
    assert learner.schedule == "concurrent" and control.choice.rounds >= 2
    assert used[first_round:].count("serial") <= 2 * (control.warmup + CUT_AFTER)  # re-probes, cut short
    assert schedule_report(learner, control).startswith("auto: concurrent (")  # type: ignore[union-attr]


def test_a_host_that_becomes_shared_mid_run_switches_back_to_serial_and_recovers():
    """Concurrent wins on a free core; another job takes it: the kept schedule's steps slow down, a round
    starts at once and serial wins; the job ends: a later round finds concurrent faster again."""
    learner = FakeLearner({"serial": 1.8e-3, "concurrent": 1.0e-3})
    control = control_of(learner, period=200)
    run(control, learner, 300)
    assert learner.schedule == "concurrent"
    learner.cost["concurrent"] = 20e-3  # other work holds the second core
    used = run(control, learner, 100)
    assert learner.schedule == "serial" and used[-50:] == ["serial"] * 50
    switches = control.choice.switches
    learner.cost["concurrent"] = 1.0e-3  # the core is free again
    run(control, learner, 4000)
    assert learner.schedule == "concurrent" and control.choice.switches > switches
    assert "switches" in schedule_report(learner, control)  # type: ignore[operator]


def test_thread_count_and_schedule_controllers_take_turns():
    """Both time the same steps: while one probes, the other neither starts a round nor takes a sample."""
    learner = FakeLearner({"serial": 1.0e-3, "concurrent": 0.8e-3})
    threads_set: list[int] = []
    threads = AdaptiveThreads(cores=2, candidates=(1, 2), period=50, set_threads=threads_set.append,
                              clock=learner.clock)
    schedule = schedule_control(learner, threads, period=50, clock=learner.clock)
    assert schedule is not None
    stepping = step_timing(threads, schedule)
    both = 0
    for _ in range(1000):
        with stepping:
            both += threads.probing and schedule.probing
            learner.now += learner.cost[learner.schedule] * (0.9 if threads.threads == 2 else 1.0)
    assert both == 0
    assert threads.choice.rounds >= 3 and schedule.choice.rounds >= 3
    assert threads.threads == 2 and learner.schedule == "concurrent"


def test_steps_beside_stepping_actors_keep_a_schedule_of_their_own():
    """Actor processes take the second core while they step (the first ~20% of each training round), then
    wait for credit: concurrent wins only while they wait. Each phase runs under its condition and keeps
    the schedule that is fastest in it; a probe round cut off by a phase change resumes in its phase."""
    from pearl_fpga.runtime.update_schedule import ACTORS_STEPPING, set_condition

    learner = FakeLearner({"serial": 0.6e-3, "concurrent": 0.4e-3})
    control = control_of(learner, period=1000)
    busy_cost = {"serial": 0.6e-3, "concurrent": 1.2e-3}  # the actors hold the second core
    used: dict[str, list[str]] = {"": [], ACTORS_STEPPING: []}
    for _ in range(40):  # 40 training rounds of 128 steps: 25 beside the actors, then 103 alone
        for step in range(128):
            name = ACTORS_STEPPING if step < 25 else ""
            set_condition(name, control, None)
            with control.step():
                used[name].append(learner.schedule)
                learner.now += (busy_cost if name else learner.cost)[learner.schedule]
    set_condition("", control)
    choices = control.choices()
    assert set(choices) == {"", ACTORS_STEPPING}
    assert choices[""].current == 2 and choices[ACTORS_STEPPING].current == 1
    assert choices[ACTORS_STEPPING].rounds >= 1  # its 28-step round spans two 25-step phases
    assert used[""][-1000:].count("concurrent") >= 1000 - 2 * (control.warmup + control.probe_steps)
    assert used[ACTORS_STEPPING][-500:].count("serial") >= 500 - 2 * (control.warmup + CUT_AFTER)
    assert learner.schedule == "concurrent" and control.choice is choices[""]  # back to the usual condition
    line = schedule_report(learner, control)
    assert line is not None and line.startswith("auto: concurrent (") and "; while actors stepping: auto: serial (" in line


def test_no_control_where_there_is_nothing_to_choose():
    assert schedule_control(DDPG(TrainConfig.preset("ddpg", net_arch=[8], concurrent_updates=False), 3, 1)) is None
    fixed = DDPG(TrainConfig.preset("ddpg", net_arch=[8], update_schedule="serial"), 3, 1)
    assert schedule_control(fixed) is None and schedule_report(fixed, None) == "serial (fixed)"
    assert fixed._grad_thread is None  # a serial learner starts no second thread
    auto = TD3(TrainConfig.preset("td3", net_arch=[8]), 3, 1)
    assert auto.schedules == ("serial", "concurrent") and schedule_control(auto) is not None
    compiled = TrainConfig.preset("td3", net_arch=[8], learner_compile=True)
    assert TD3.callers(compiled) == 1


def test_concurrent_asked_of_a_step_with_one_thread_says_it_runs_serial():
    """update_schedule 'concurrent' on a step with no part for a second thread warns and runs serial."""
    with pytest.warns(UserWarning, match="DQN: update_schedule 'concurrent' runs serial here: the torch step"):
        dqn = DQN(TrainConfig.preset("dqn", net_arch=[8], update_schedule="concurrent"), 3, 2, fused=False)
    assert dqn.schedules == ("serial",) and dqn._grad_thread is None
    with pytest.warns(UserWarning, match="DDPG: update_schedule 'concurrent' runs serial here: one critic"):
        DDPG(TrainConfig.preset("ddpg", net_arch=[8], update_schedule="concurrent", concurrent_updates=False), 3, 1)
    with pytest.warns(UserWarning, match="TD3: .* runs serial here: learner_compile"):
        TD3(TrainConfig.preset("td3", net_arch=[8], update_schedule="concurrent", learner_compile=True), 3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a step that has the second thread's part: no warning
        assert TD3(TrainConfig.preset("td3", net_arch=[8], update_schedule="concurrent"), 3, 1).schedules == ("concurrent",)


def test_the_config_value():
    assert TrainConfig.preset("ddpg").update_schedule == "auto"
    assert TrainConfig.preset("td3").update_schedule == "auto"
    assert DDPG.callers(TrainConfig.preset("ddpg", update_schedule="serial")) == 1
    assert DDPG.callers(TrainConfig.preset("ddpg", update_schedule="concurrent")) == 2
    assert TD3.callers(TrainConfig.preset("td3", update_schedule="auto")) == 2  # may run on two threads at any step
    with pytest.raises(ValueError, match="update_schedule must be one of 'auto', 'serial', 'concurrent', got 'fast'"):
        TrainConfig.preset("ddpg", update_schedule="fast")
    assert TrainConfig.preset("dqn").update_schedule == "auto"
    assert DQN.callers(TrainConfig.preset("dqn")) == 2
    assert DQN.callers(TrainConfig.preset("dqn", update_schedule="serial")) == 1
    with pytest.raises(ValueError, match="schedule 'concurrent' is not one of"):
        DDPG(TrainConfig.preset("ddpg", net_arch=[8], update_schedule="serial"), 3, 1).set_schedule("concurrent")


def _batch(rng: np.random.Generator, n: int) -> Batch:
    return Batch(obs=rng.normal(size=(n, 3)).astype(np.float32), action=rng.uniform(-1, 1, (n, 2)).astype(np.float32),
                 reward=rng.normal(size=n).astype(np.float32), next_obs=rng.normal(size=(n, 3)).astype(np.float32),
                 done=(rng.random(n) < 0.3).astype(np.float32),
                 weights=rng.uniform(0.1, 1, n).astype(np.float32)).to_torch()


def _state(learner) -> list[torch.Tensor]:
    nets = [learner.actor, learner.actor_target, *learner.critics, *learner.critic_targets]
    out = [p.detach().clone() for net in nets for p in net.parameters()]
    for adam in (learner.actor_optimizer, learner.critic_optimizer):
        out += [t.clone() for s in adam.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return out


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
@pytest.mark.parametrize("algo,concurrent", [("ddpg", True), ("td3", False), ("td3", True)])
def test_serial_concurrent_and_switching_give_the_same_bits(algo, concurrent, fused):
    """Fixed serial, fixed concurrent and a learner switched at every step: every parameter, target and
    Adam state bitwise equal after steps with the policy delay, smoothing noise and IS weights."""
    cls = DDPG if algo == "ddpg" else TD3
    learners = {s: cls(TrainConfig.preset(algo, net_arch=[48, 32], concurrent_updates=concurrent, update_schedule=s),
                       3, 2, seed=4, fused=fused) for s in ("serial", "concurrent", "auto")}
    assert learners["serial"]._grad_thread is None and learners["concurrent"]._grad_thread is not None
    if fused and algo == "td3":  # float32 twin critics: their GEMMs as native tasks where torch has MKL
        assert (learners["concurrent"]._fused.gemms is None) == (native_gemms() is None)
    rng = np.random.default_rng(5)
    for step in range(7):
        learners["auto"].set_schedule(("serial", "concurrent")[step % 2])
        batch = _batch(rng, 32)
        results = [learner.update(batch) for learner in learners.values()]
        for loss, td in results[1:]:
            assert torch.equal(torch.as_tensor(loss), torch.as_tensor(results[0][0])) and torch.equal(td, results[0][1])
    reference = _state(learners["serial"])
    for learner in learners.values():
        assert all(torch.equal(a, b) for a, b in zip(reference, _state(learner), strict=True))


@pytest.mark.parametrize("double_q", [True, False], ids=["double", "vanilla"])
def test_dqn_s_schedules_give_the_same_bits(double_q):
    """DQN's fused step runs its target pass and wide weight gradients beside the rest in the concurrent
    schedule: fixed serial, fixed concurrent and switching at every step end with the same bits."""
    learners = {s: DQN(TrainConfig.preset("dqn", net_arch=[64, 48], double_q=double_q, update_schedule=s), 5, 3,
                       seed=2) for s in ("serial", "concurrent", "auto")}
    assert learners["serial"]._grad_thread is None and learners["concurrent"]._grad_thread is not None
    assert learners["serial"]._fused is not None  # the fused step (the torch step has no second thread)
    rng = np.random.default_rng(6)
    for step in range(7):
        learners["auto"].set_schedule(("serial", "concurrent")[step % 2])
        batch = Batch(obs=rng.normal(size=(32, 5)).astype(np.float32), action=rng.integers(0, 3, 32),
                      reward=rng.normal(size=32).astype(np.float32), next_obs=rng.normal(size=(32, 5)).astype(np.float32),
                      done=(rng.random(32) < 0.3).astype(np.float32),
                      weights=rng.uniform(0.1, 1, 32).astype(np.float32)).to_torch(discrete=True)
        results = [learner.update(batch) for learner in learners.values()]
        for loss, td in results[1:]:
            assert torch.equal(torch.as_tensor(loss), torch.as_tensor(results[0][0])) and torch.equal(td, results[0][1])
    states = [[p.detach().clone() for p in [*l.q.parameters(), *l.q_target.parameters()]]
              + [t.clone() for st in l.optimizer.state.values() for t in st.values() if isinstance(t, torch.Tensor)]
              for l in learners.values()]
    for state in states[1:]:
        assert all(torch.equal(a, b) for a, b in zip(states[0], state, strict=True))


def _mkl_max_threads():
    """MKL's mkl_get_max_threads from torch's own library (the calling thread's count), or None where torch
    has no MKL (aarch64 wheels)."""
    import ctypes
    from pathlib import Path

    library = next(iter((Path(torch.__file__).parent / "lib").glob("libtorch_cpu.*")), None)
    if library is None or not torch.backends.mkl.is_available():
        return None
    return getattr(ctypes.CDLL(str(library)), "mkl_get_max_threads", None)


@pytest.mark.parametrize("algo", ["ddpg", "td3"])
def test_the_second_thread_runs_at_the_learner_thread_s_torch_threads(algo):
    """torch.set_num_threads sets the calling thread's BLAS threads only (MKL's count is thread-local): the
    step's second thread takes the learner thread's count at each hand-over, else its GEMMs run on every
    core beside the learner thread's and the two contend."""
    cls = DDPG if algo == "ddpg" else TD3
    learner = cls(TrainConfig.preset(algo, net_arch=[8], update_schedule="concurrent"), 3, 2)
    mkl = _mkl_max_threads()
    old = torch.get_num_threads()
    counts = (1, 2, 1) if available_cores() >= 2 else (1,)  # MKL may cap a count above the cores
    try:
        for n in counts:
            torch.set_num_threads(n)
            learner.update(_batch(np.random.default_rng(n), 8))
            seen = learner._on_grad_thread(lambda: (torch.get_num_threads(), mkl() if mkl else None)).result()
            assert seen == (n, n if mkl else None)
    finally:
        torch.set_num_threads(old)


def test_an_error_in_the_second_half_is_raised_in_either_schedule():
    """The serial schedule runs the second thread's part at once, holding its error where .result() raises it."""
    for schedule in ("serial", "concurrent"):
        learner = DDPG(TrainConfig.preset("ddpg", net_arch=[8], update_schedule=schedule), 3, 2, fused=False)

        def broken(batch):
            raise RuntimeError("actor half failed")

        learner._actor_grads = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="actor half failed"):
            learner.update(_batch(np.random.default_rng(0), 8))


def test_an_inline_run_that_switches_schedules_learns_the_bits_of_a_serial_run():
    """The Trainer measures the schedule (auto) and reports it; forced to switch often, its inline run's
    weights are those of a serial run, whose summary says the schedule is fixed."""
    from pearl_fpga import Trainer

    weights, reports = [], []
    for schedule in ("serial", "auto"):
        cfg = TrainConfig.preset("ddpg", eval_freq=0, learning_starts=100, net_arch=[32, 32], batch_size=64,
                                 update_schedule=schedule, learner_threads=1)
        with Trainer("ddpg", config=cfg, seed=3) as trainer:
            if schedule == "auto":
                assert trainer.update_schedule is not None
                trainer.update_schedule = schedule_control(trainer.algo, probe_steps=2, warmup=0, period=4)
            else:
                assert trainer.update_schedule is None
            trainer.train(300)
            weights.append([p.detach().clone() for p in trainer.algo.policy_module.parameters()])
            reports.append(trainer.update_schedule_report())
            if schedule == "auto":
                assert trainer.update_schedule.choice.rounds >= 5
    assert reports[0] == "serial (fixed)" and reports[1].startswith("auto: ")
    for a, b in zip(*weights, strict=True):
        assert torch.equal(a, b)


def test_a_run_with_actor_processes_times_their_bursts_apart():
    """With a worker process, the steps taken while it holds credit run under ACTORS_STEPPING, the rest under
    the usual condition, and the run ends in the usual one; the summary names both choices."""
    from pearl_fpga import Trainer
    from pearl_fpga.runtime.update_schedule import ACTORS_STEPPING

    cfg = TrainConfig.preset("dqn", workers=1, learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16],
                             buffer_size=4000, batch_size=32, eval_freq=0)
    with Trainer("dqn", placement="cpu", config=cfg, seed=0) as trainer:
        control = trainer.update_schedule
        if control is None:
            pytest.skip("one core: no schedule to choose")
        asked: list[str] = []
        condition = control.condition

        def record(name: str) -> None:
            asked.append(name)
            condition(name)

        control.condition = record  # type: ignore[method-assign]
        trainer.train(1200)
        assert ACTORS_STEPPING in asked and "" in asked and asked[-1] == ""
        assert set(control.choices()) == {"", ACTORS_STEPPING} and control.choice is control.choices()[""]
        assert "; while actors stepping: auto: " in trainer.update_schedule_report()  # type: ignore[operator]


def test_a_resumed_run_may_change_the_schedule(tmp_path):
    """The schedule changes no bit, so `train --resume --set update_schedule=serial` is taken."""
    from pearl_fpga.runtime.checkpoint import resumed_config

    stored = TrainConfig.preset("ddpg", net_arch=[8])
    assert resumed_config(stored, {"update_schedule": "serial"}, tmp_path).update_schedule == "serial"
