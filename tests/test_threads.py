"""The learner's adaptive thread count: the choice follows the measured step time, a losing count is
probed less and less often, and a run that promises the same bits uses only the counts that give them."""

import numpy as np
import pytest
import torch

from pearl_fpga.runtime.threads import AdaptiveThreads, thread_candidates
from pearl_fpga.runtime.placement import bf16_unsupported


class FakeMachine:
    """A clock whose learner step costs `cost[n]` seconds at n threads (settable mid-run)."""

    def __init__(self, cost: dict[int, float]) -> None:
        self.cost = dict(cost)
        self.now = 0.0
        self.set_calls: list[int] = []

    def clock(self) -> float:
        return self.now

    def set_threads(self, n: int) -> None:
        self.set_calls.append(n)


def run(ctl: AdaptiveThreads, machine: FakeMachine, steps: int) -> list[int]:
    used = []
    for _ in range(steps):
        with ctl.step():
            used.append(ctl.threads)
            machine.now += machine.cost[ctl.threads]
    return used


def make(machine: FakeMachine, cores: int = 2, **kw) -> AdaptiveThreads:
    kw.setdefault("period", 100)
    kw.setdefault("recheck", kw["period"])  # rounds a period apart (the shorter first intervals: their own test)
    return AdaptiveThreads(cores=cores, set_threads=machine.set_threads, clock=machine.clock, **kw)


def test_candidates():
    assert thread_candidates(1) == (1,)
    assert thread_candidates(2) == (1, 2)
    assert thread_candidates(6) == (1, 2, 4, 6)
    assert thread_candidates(8) == (1, 2, 4, 8)


def test_picks_the_faster_count_and_reports_it():
    machine = FakeMachine({1: 600e-6, 2: 480e-6})
    ctl = make(machine)
    used = run(ctl, machine, 500)
    assert ctl.choice.current == 2
    assert ctl.choice.median_step_s == pytest.approx({1: 600e-6, 2: 480e-6})
    assert used[-50:] == [2] * 50
    assert ctl.choice.switches == 1
    assert "auto: 2 threads" in ctl.choice.describe()


def test_stays_within_the_margin():
    machine = FakeMachine({1: 500e-6, 2: 490e-6})  # 2% faster: not worth a switch
    ctl = make(machine)
    run(ctl, machine, 300)
    assert ctl.choice.current == 1
    assert ctl.choice.switches == 0


def test_falls_back_when_the_other_core_gets_busy_and_backs_off():
    machine = FakeMachine({1: 600e-6, 2: 480e-6})
    ctl = make(machine)
    run(ctl, machine, 300)
    assert ctl.choice.current == 2
    machine.cost[2] = 10e-3  # another job takes the second core: the team waits for it
    used = run(ctl, machine, 5000)
    assert ctl.choice.current == 1
    # the losing count is probed ever less often: a few hundred steps at most, out of 5000
    slow = used.count(2)
    assert slow < 0.06 * len(used)
    tail = used[-2500:]
    assert tail.count(2) <= 2 * (ctl.warmup + ctl.probe_steps)
    # and once the core is free again, the controller finds it
    machine.cost[2] = 480e-6
    run(ctl, machine, 100 * 40)
    assert ctl.choice.current == 2


def test_one_core_never_probes():
    machine = FakeMachine({1: 1e-3})
    ctl = make(machine, cores=1)
    assert run(ctl, machine, 300) == [1] * 300
    assert ctl.choice.rounds == 0
    assert machine.set_calls == [1]


def test_an_exception_in_a_step_is_not_a_sample():
    machine = FakeMachine({1: 600e-6, 2: 480e-6})
    ctl = make(machine)
    with pytest.raises(RuntimeError):
        with ctl.step():
            machine.now += 1.0
            raise RuntimeError("learner failed")
    run(ctl, machine, 300)
    assert ctl.choice.median_step_s[ctl.choice.current] < 1e-3


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="probe_steps"):
        AdaptiveThreads(cores=2, probe_steps=0, set_threads=lambda n: None)


def _params_after_steps(algo: str, cfg, threads: int) -> list[torch.Tensor]:
    """The learner's parameters after 5 steps on a fixed batch at `threads` torch threads, computed
    here independently of runtime.threads."""
    from pearl_fpga.algos import make_learner
    from pearl_fpga.algos.common import Batch

    obs_dim, action_dim = (4, 2) if algo == "dqn" else (3, 1)
    rng = np.random.default_rng(0)
    B = cfg.batch_size
    data = {
        "obs": rng.standard_normal((B, obs_dim)).astype(np.float32),
        "action": rng.integers(0, 2, B) if algo == "dqn" else rng.uniform(-1, 1, (B, 1)).astype(np.float32),
        "reward": rng.standard_normal(B).astype(np.float32),
        "next_obs": rng.standard_normal((B, obs_dim)).astype(np.float32),
        "done": (rng.random(B) < 0.1).astype(np.float32),
        "weights": np.ones(B, np.float32),
        "indices": np.arange(B),
    }
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        learner = make_learner(cfg, obs_dim, action_dim, device="cpu", seed=0)
        batch = Batch(**data).to_torch(learner.device, discrete=algo == "dqn")
        for _ in range(5):
            learner.update(batch)
        return [p.detach().clone() for p in learner.policy_module.parameters()]
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("algo", ["dqn", "ddpg"])
def test_the_probe_tells_which_counts_give_the_same_bits(algo, tmp_path):
    """Whether 2 threads give one thread's bits depends on the CPU and its BLAS path (it holds on some
    x86 machines and not on others), so the suite does not assert it: it checks that the probe's answer
    matches what this machine does, and that the answer is cached per machine and learner."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.thread_bits import reproducible_thread_counts

    cfg = TrainConfig.preset(algo, concurrent_updates=False) if algo == "ddpg" else TrainConfig.preset(algo)
    obs_dim, action_dim = (4, 2) if algo == "dqn" else (3, 1)
    cache = tmp_path / "determinism.json"
    found = reproducible_thread_counts(cfg, obs_dim, action_dim, (1, 2), cache=cache)
    assert found.probed == (1, 2) and found.repeats and 1 in found.agree and not found.cached
    one, two = (_params_after_steps(algo, cfg, n) for n in (1, 2))
    assert all(torch.equal(a, b) for a, b in zip(one, _params_after_steps(algo, cfg, 1), strict=True))
    same = all(torch.equal(a, b) for a, b in zip(one, two, strict=True))
    assert same == (2 in found.agree), f"the probe says {found}, but 2 threads {'agree' if same else 'differ'} here"
    again = reproducible_thread_counts(cfg, obs_dim, action_dim, (1, 2), cache=cache)
    assert again.cached and again.agree == found.agree
    other = TrainConfig.preset(algo, net_arch=[32], **({"concurrent_updates": False} if algo == "ddpg" else {}))
    assert not reproducible_thread_counts(other, obs_dim, action_dim, (1, 2), cache=cache).cached  # another shape
    cache.write_text("{not json")  # a corrupt cache is measured again, not trusted
    assert reproducible_thread_counts(cfg, obs_dim, action_dim, (1, 2), cache=cache).agree == found.agree


def test_a_run_that_promises_the_same_bits_never_leaves_the_agreeing_counts(monkeypatch):
    """Where no other count agrees with one thread, the controller keeps one thread however fast the
    others are, and its report says why; where 2 agrees, it may switch to it."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime import thread_bits

    cfg = TrainConfig.preset("dqn", net_arch=[8], update_schedule="serial")  # one caller: counts 1 and 2
    for agree in [(1,), (1, 2)]:
        monkeypatch.setattr(thread_bits, "reproducible_thread_counts",
                            lambda *a, agree=agree, **k: thread_bits.Reproducibility(probed=(1, 2), agree=agree))
        ctl = thread_bits.reproducible_controller(cfg, 4, 2, cores=2)
        machine = FakeMachine({1: 600e-6, 2: 300e-6})
        ctl._set_threads, ctl._clock = machine.set_threads, machine.clock
        used = run(ctl, machine, 3000)
        if agree == (1,):
            assert set(used) == {1} and ctl.choice.candidates == (1,)
            assert "fixed (the learner's bits at 2 threads differ" in ctl.choice.describe()
        else:
            assert used[-1] == 2 and "fixed" not in ctl.choice.describe()


def test_one_candidate_is_described_plainly():
    ctl = AdaptiveThreads(cores=1, set_threads=lambda n: None)
    assert ctl.choice.describe() == "auto: 1 thread (the only count that fits the cores this process may use)"


def test_bench_learner_writes_figures(tmp_path, capsys):
    import json

    from pearl_fpga.cli import main

    out = tmp_path / "learner.json"
    assert main(["bench", "learner", "--algo", "dqn", "--rounds", "1", "--seconds", "0.05", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    results = data["results"]
    dqn = results["algos"]["dqn"]
    assert set(dqn["step_s"]) == {*(str(n) for n in dqn["counts"]), "auto"}
    assert all(t > 0 for t in dqn["step_s"].values())
    # 64x256x256 GEMMs dominate: four to five of them per step, 8.4 MFLOP each
    assert 30e6 < dqn["flops_per_step"] < 60e6
    assert results["peak_gflops"]["1"] > 0
    assert "GFLOP/s" in capsys.readouterr().out


def test_bench_learner_takes_the_config_options(tmp_path, capsys):
    """--set changes the learner that is timed: a 4-64-64-2 network at batch 32 is about 1/25 of the
    preset's FLOPs (the counter sees the smaller GEMMs); a wrong field is refused before timing."""
    import json

    from pearl_fpga.cli import main

    out = tmp_path / "learner.json"
    argv = ["bench", "learner", "--algo", "dqn", "--rounds", "1", "--seconds", "0.02", "--json", str(out)]
    assert main([*argv, "--set", "net_arch=[64,64]", "--set", "batch_size=32"]) == 0
    dqn = json.loads(out.read_text())["results"]["algos"]["dqn"]
    assert dqn["config"] == {"net_arch": [64, 64], "batch_size": 32}
    assert 0.5e6 < dqn["flops_per_step"] < 4e6
    assert main([*argv, "--set", "batch_sise=32"]) == 2
    assert "no field 'batch_sise'" in capsys.readouterr().err


def test_bench_learner_times_sbx_beside_it(tmp_path, capsys):
    """--sbx times SBX's own gradient step of the same algorithm at the same settings (its row on the same
    FLOP count and peak scale); --precision float32 times float32 alone."""
    import json

    pytest.importorskip("sbx", reason="SBX is the bench extra (pip install 'pearl_fpga[bench]')")
    from pearl_fpga.bench.learner import learner_rows
    from pearl_fpga.cli import main

    out = tmp_path / "learner.json"
    assert main(["bench", "learner", "--algo", "sac", "--rounds", "1", "--seconds", "0.05", "--set", "net_arch=[16,16]",
                 "--set", "batch_size=8", "--precision", "float32", "--sbx", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    sac = results["algos"]["sac"]
    assert sac["label"] == "float32" and not any("bfloat16" in v for v in sac["variants"])
    assert sac["sbx"]["step_s"] > 0 and sac["sbx"]["gflops"] == pytest.approx(sac["flops_per_step"] / sac["sbx"]["step_s"] / 1e9)
    assert [r for r in learner_rows(results) if r[1] == "SBX (JAX)"]


def test_bench_learner_profile_accounts_for_the_whole_step(tmp_path):
    """--profile sorts the serial step's time into GEMMs, Adam, other ops and the rest, which add up to it."""
    import json

    from pearl_fpga.bench.learner_profile import category
    from pearl_fpga.cli import main

    out = tmp_path / "learner.json"
    assert main(["bench", "learner", "--algo", "td3", "--rounds", "1", "--seconds", "0.02", "--precision", "float32",
                 "--set", "net_arch=[32,32]", "--set", "batch_size=16", "--profile", "--json", str(out)]) == 0
    profiles = json.loads(out.read_text())["results"]["algos"]["td3"]["profile"]
    assert profiles and all(p["seconds"]["gemm"] > 0 and p["gemm_gflops"] > 0 for p in profiles)
    for p in profiles:
        assert p["precision"] == "float32"
        assert sum(p["seconds"].values()) == pytest.approx(p["step_s"], rel=1e-6) or p["seconds"]["outside"] == 0
        # the fused step's native pieces, timed by name (the bias and ReLU passes here inside the native GEMM tasks);
        # Adam counted as Adam, the rest as native passes
        assert {"linear_thin", "mse_loss_grad", "clip_adam"} <= set(p["native"])
        assert p["seconds"]["native passes"] == pytest.approx(sum(t for n, t in p["native"].items() if n != "clip_adam"))
        assert p["seconds"]["adam"] >= p["native"]["clip_adam"] > 0
    assert [category(n) for n in ("aten::addmm", "aten::_fused_adam_", "aten::relu_")] == ["gemm", "adam", "other torch ops"]


@pytest.mark.skipif(bf16_unsupported("cpu") is not None, reason=f"no bfloat16 GEMMs here: {bf16_unsupported('cpu')}")
def test_bench_learner_profiles_the_bfloat16_step_too(tmp_path):
    """Where the CPU runs the bfloat16 learner, --profile sorts its step too, its narrowing and widening among the
    native passes."""
    import json

    from pearl_fpga.cli import main

    out = tmp_path / "learner.json"
    assert main(["bench", "learner", "--algo", "dqn", "--rounds", "1", "--seconds", "0.02", "--set", "net_arch=[32,32]",
                 "--set", "batch_size=16", "--profile", "--json", str(out)]) == 0
    profiles = json.loads(out.read_text())["results"]["algos"]["dqn"]["profile"]
    low = [p for p in profiles if p["precision"] == "bfloat16"]
    assert low and [p["precision"] for p in profiles[:len(profiles) - len(low)]] == ["float32"] * (len(profiles) - len(low))
    for p in low:
        assert p["seconds"]["gemm"] > 0 and "narrow" in p["native"] and "dqn_loss_grad" in p["native"]
        assert sum(p["seconds"].values()) == pytest.approx(p["step_s"], rel=1e-6) or p["seconds"]["outside"] == 0


def test_bench_learner_says_when_sbx_is_missing(monkeypatch, capsys):
    import pearl_fpga.bench.train as bench_train
    from pearl_fpga.cli import main

    monkeypatch.setattr(bench_train, "sbx_module", lambda: None)
    assert main(["bench", "learner", "--algo", "dqn", "--rounds", "1", "--seconds", "0.02", "--precision", "float32",
                 "--set", "net_arch=[16,16]", "--sbx"]) == 0
    assert "SBX not timed (SBX is not installed (pip install 'pearl_fpga[bench]'))" in capsys.readouterr().out


def test_bench_learner_says_when_sbx_has_no_such_setting(monkeypatch):
    """A config SBX cannot run (its baseline_kwargs refuse it) is skipped with that reason, not timed wrongly."""
    import contextlib

    import pearl_fpga.bench.train as bench_train
    from pearl_fpga.bench.learner_sbx import sbx_step
    from pearl_fpga.config import TrainConfig

    def refuse(*args, **kwargs):
        raise ValueError("target_update_interval=2: SBX's SAC has no such setting")

    monkeypatch.setattr(bench_train, "sbx_module", lambda: object())
    monkeypatch.setattr(bench_train, "jax_device", lambda device: contextlib.nullcontext())  # no JAX needed
    monkeypatch.setattr(bench_train, "baseline_model", refuse)
    assert sbx_step(TrainConfig.preset("sac"), 1, 0.01) == {"skipped": "target_update_interval=2: SBX's SAC has no such setting"}


@pytest.mark.parametrize("algo", ["dqn", "ddpg"])
def test_adaptive_trainer_learns_the_same_weights_as_a_fixed_count(algo):
    """learner_threads=0 switches counts mid-run among those that give one thread's bits on this machine
    (measured); the inline run's result must not notice, whatever this CPU's BLAS does at 2 threads."""
    from pearl_fpga import TrainConfig, Trainer
    from pearl_fpga.runtime.threads import AdaptiveThreads

    weights = []
    for threads in (1, 0):
        if algo == "dqn":
            cfg = TrainConfig.preset("dqn", learner_threads=threads, eval_freq=0, learning_starts=200,
                                     train_freq=64, gradient_steps=32, net_arch=[64, 64])
        else:  # SB3's order: one caller thread, so 2 intra-op threads are a candidate on 2 cores
            cfg = TrainConfig.preset("ddpg", learner_threads=threads, eval_freq=0, learning_starts=200,
                                     concurrent_updates=False, net_arch=[256, 256], batch_size=256)
        trainer = Trainer(algo, config=cfg, seed=3)
        if threads == 0:  # probe often among the counts that agree here, so that the run switches back and forth
            agreeing = trainer.learner_threads.choice.candidates
            trainer.learner_threads = AdaptiveThreads(cores=2, probe_steps=2, warmup=0, period=4, candidates=agreeing)
        trainer.train(600 if algo == "ddpg" else 1200)
        weights.append([p.detach().clone() for p in trainer.algo.policy_module.parameters()])
        if threads == 0:
            assert trainer.learner_threads.choice.rounds >= 5 or len(agreeing) == 1
            assert "auto:" in trainer.learner_threads_report()
    for a, b in zip(*weights, strict=True):
        assert torch.equal(a, b)


def test_the_first_round_decides_then_one_noisy_round_does_not_switch_but_a_collapse_does():
    """The starting count is a guess, so the first probe round's winner is taken at once (a run, and the
    planner's profile of it, use the fastest count from the start); later, one noisy round does not move
    the run, two in a row do, and a collapse of the current count does at once."""
    machine = FakeMachine({1: 600e-6, 2: 480e-6})
    ctl = make(machine)
    run(ctl, machine, 2 * 14)  # the first round: 2 wins and is taken
    assert ctl.choice.current == 2 and ctl.choice.rounds == 1 and ctl.choice.switches == 1
    machine.cost[1] = 400e-6  # now 1 is faster: one round is not enough ...
    run(ctl, machine, 100 + 2 * 14)
    assert ctl.choice.current == 2 and ctl.choice.rounds == 2
    run(ctl, machine, 100 + 2 * 14)  # ... the second in a row is
    assert ctl.choice.current == 1
    machine.cost[1] = 2e-3  # its core is taken: back to 2 after one round, no confirmation needed
    run(ctl, machine, 100 + 2 * 14)
    assert ctl.choice.current == 2


def test_rounds_come_soon_after_the_first_then_a_period_apart_and_soon_after_a_win():
    """The round after the first comes `recheck` steps on and each later one at twice the interval, up to
    `period` (a first decision that noise made is corrected early in a short run), as probe_round_starts
    (the planner's count) says; a challenger's win is confirmed `recheck` steps on, not a period later."""
    from pearl_fpga.runtime.threads import probe_round_starts

    machine = FakeMachine({1: 600e-6, 2: 800e-6})
    ctl = make(machine, period=400, recheck=50)
    round_steps = 2 * (ctl.warmup + ctl.probe_steps)
    starts, was = [], False
    for i in range(2000):
        with ctl.step():
            if ctl.probing and not was:
                starts.append(i)
            was = ctl.probing
            machine.now += machine.cost[ctl.threads]
    expected = [s + round_steps * k for k, s in enumerate(probe_round_starts(2000, period=400, recheck=50))]
    assert starts == [s for s in expected if s < 2000] and starts[:4] == [0, 78, 206, 434]
    assert ctl.choice.current == 1
    machine.cost[2] = 450e-6  # the second core is free now: the next round, 2 wins once ...
    rounds = ctl.choice.rounds
    while ctl.choice.rounds == rounds:
        run(ctl, machine, 1)
    assert ctl.choice.current == 1 and ctl.choice.switches == 0
    steps = 0
    while ctl.choice.rounds == rounds + 1:  # ... and the confirming round comes 50 steps on
        steps += len(run(ctl, machine, 1))
    assert ctl.choice.current == 2 and steps == 50 + round_steps
    with pytest.raises(ValueError, match="recheck"):
        make(machine, period=100, recheck=101)


def test_concurrent_callers_share_the_cores():
    machine = FakeMachine({1: 1e-3})
    ctl = AdaptiveThreads(cores=2, callers=2, set_threads=machine.set_threads, clock=machine.clock)
    assert ctl.choice.candidates == (1,)  # DDPG's two gradient threads already fill two cores
    assert AdaptiveThreads(cores=8, callers=2, set_threads=machine.set_threads).choice.candidates == (1, 2, 4)


def test_a_collapse_between_rounds_starts_a_round_at_once():
    """The other core is taken long before the next scheduled round: the controller notices from the
    current count's own step times and moves within a few dozen steps, not at the end of the period."""
    machine = FakeMachine({1: 600e-6, 2: 300e-6})
    ctl = make(machine, period=10_000)
    run(ctl, machine, 2 * 14)
    assert ctl.choice.current == 2
    run(ctl, machine, 500)
    machine.cost[2] = 20e-3  # another job takes the second core
    used = run(ctl, machine, 100)
    assert ctl.choice.current == 1 and used[-20:] == [1] * 20
    assert used.count(2) <= 2 * (ctl.warmup + ctl.probe_steps) + 2  # the check, then its probe in the round


def test_concurrent_actor_and_critic_gradients_count_as_two_callers():
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.threads import learner_callers

    assert learner_callers(TrainConfig.preset("ddpg")) == 2
    assert learner_callers(TrainConfig.preset("td3")) == 2  # SB3's order, the twin critics one per thread
    assert learner_callers(TrainConfig.preset("td3", concurrent_updates=True)) == 2
    assert learner_callers(TrainConfig.preset("dqn")) == 2  # auto by default: may run beside the rest
    assert learner_callers(TrainConfig.preset("dqn", update_schedule="serial")) == 1


def test_a_probe_that_is_clearly_slower_is_cut_short():
    """On a busy machine a second thread can cost 20x a step: its probe ends after warmup + CUT_AFTER
    steps instead of warmup + probe_steps, in the first round (the current count is measured first) and later."""
    from pearl_fpga.runtime.threads import CUT_AFTER

    machine = FakeMachine({1: 600e-6, 2: 20e-3})
    ctl = make(machine, period=100)
    used = run(ctl, machine, 100 + ctl.warmup + ctl.probe_steps + ctl.warmup + CUT_AFTER)
    assert ctl.choice.current == 1 and ctl.choice.rounds >= 1
    assert used[:ctl.warmup + ctl.probe_steps] == [1] * (ctl.warmup + ctl.probe_steps)  # the reference first
    assert used.count(2) == ctl.warmup + CUT_AFTER
    # a count that is only a little slower is probed in full
    machine = FakeMachine({1: 600e-6, 2: 700e-6})
    ctl = make(machine, period=100)
    used = run(ctl, machine, 2 * (ctl.warmup + ctl.probe_steps))
    assert used.count(2) == ctl.warmup + ctl.probe_steps
