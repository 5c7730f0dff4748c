"""The bfloat16 learner (placement learn=cpu-bf16) and the compiled learner step (config.learner_compile).

bf16: the wide GEMMs run in bfloat16 while the master weights, Adam's state and the loss stay float32,
so one step must agree with float32's to within the rounding bfloat16 adds, and a short run must learn.
Compiled: a step that cannot be compiled runs uncompiled after one warning line.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from pearl_fpga.algos import make_learner
from pearl_fpga.algos.common import Batch, CompiledStep, cast_layers, forward, linear_layers
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.runtime.placement import bf16_unsupported, learn_target, parse_placement

from float_bounds import U_BF16, bf16_forward_bound

BF16_HERE = bf16_unsupported("cpu") is None
needs_bf16 = pytest.mark.skipif(not BF16_HERE, reason=f"no bfloat16 GEMMs here: {bf16_unsupported('cpu')}")

def _batch(algo: str, obs_dim: int, action_dim: int, n: int, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    data = {
        "obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
        "action": (rng.integers(0, action_dim, n) if algo == "dqn"
                   else rng.uniform(-1, 1, (n, action_dim)).astype(np.float32)),
        "reward": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
        "done": (rng.random(n) < 0.1).astype(np.float32),
    }
    return Batch(**data).to_torch(discrete=algo == "dqn")


@needs_bf16
def test_bf16_forward_is_within_the_rounding_bound_of_float32():
    torch.manual_seed(0)
    cfg = TrainConfig.preset("ddpg", net_arch=[64, 48])
    algo = make_learner(cfg, 3, 1, device="cpu")
    layers = linear_layers(algo.critic)
    x = torch.randn(256, 4)
    with torch.no_grad():
        exact = forward(layers, x)
        low = forward(cast_layers(layers, torch.bfloat16), x)
        bound = bf16_forward_bound(layers, x)
    assert low.dtype == torch.float32
    diff = (low - exact).abs()
    assert diff.max() > 0  # the GEMMs really ran in bfloat16
    assert torch.all(diff <= bound * 1.01 + 1e-6), float((diff / bound).max())
    assert float(bound.max()) < 0.25 * float(exact.abs().max())  # and the bound is not vacuous


@needs_bf16
@pytest.mark.parametrize("algo_name,fused", [("dqn", True), ("dqn", False), ("ddpg", True), ("ddpg", False),
                                             ("td3", True), ("td3", False)])
def test_bf16_step_is_close_to_float32(algo_name, fused):
    """Same start, same batch: the TD errors differ by at most the rounding bound of the Q-values they
    subtract (online Q at the taken action, gamma times the target's), and the parameters after the step
    by what Adam's first step can move on the gradients' rounding: a few in a thousand of them flip sign
    where the gradient is near zero, the rest agree closely."""
    discrete = algo_name == "dqn"
    obs_dim, action_dim = (4, 2) if discrete else (3, 1)
    cfg = TrainConfig.preset(algo_name, net_arch=[64, 64], double_q=False)
    kwargs = {} if fused is None else {"fused": fused}
    learners = {}
    for target in ("cpu", "cpu-bf16"):
        device, precision = learn_target(target)
        cls = type(make_learner(cfg, obs_dim, action_dim))
        learners[target] = cls(cfg, obs_dim, action_dim, device=device, seed=3,
                               precision=torch.bfloat16 if precision == "bfloat16" else None, **kwargs)
    batch = _batch(algo_name, obs_dim, action_dim, 128)
    ref = learners["cpu"]
    with torch.no_grad():  # a bound on each sample's TD error: its Q's and gamma times its next Q's
        if discrete:
            q_bound = bf16_forward_bound(linear_layers(ref.q), batch.obs)
            next_bound = bf16_forward_bound(linear_layers(ref.q_target), batch.next_obs)
            td_bound = (q_bound.gather(1, batch.action) + cfg.gamma * next_bound.max(1, keepdim=True).values)
        else:  # the next action carries the target actor's error into the target critics (min: the larger)
            q_bound = bf16_forward_bound(linear_layers(ref.critic), torch.cat([batch.obs, batch.action], 1))
            a_err = bf16_forward_bound(linear_layers(ref.actor_target), batch.next_obs)
            next_in = torch.cat([batch.next_obs, forward(linear_layers(ref.actor_target), batch.next_obs, True)], 1)
            in_err = torch.cat([torch.zeros_like(batch.next_obs), a_err], 1)
            next_bound = torch.stack([bf16_forward_bound(linear_layers(t), next_in, in_err)
                                      for t in ref.critic_targets]).max(0).values
            td_bound = q_bound + cfg.gamma * next_bound
        td_bound = td_bound.squeeze(1) * 1.01 + 1e-6  # first order: 1% for the products of rounding errors
    (loss32, td32), (loss16, td16) = (learners[t].update(batch) for t in ("cpu", "cpu-bf16"))
    assert torch.all((td16 - td32).abs() <= td_bound), float(((td16 - td32).abs() / td_bound).max())
    # the loss: Huber is 1-Lipschitz; an MSE moves by at most (2|td| + d) d, per critic (TD3 sums two)
    if discrete:
        loss_bound = td_bound.mean()
    else:
        loss_bound = ref.n_critics * ((2 * td32 + td_bound) * td_bound).mean()  # Q2's bound: as Q1's, assumed
    assert abs(float(loss16) - float(loss32)) <= float(loss_bound)
    # the gradients, read from Adam's first moment (exp_avg = (1 - beta1) g after one step), norm-wise:
    # no derived bound here (cancellation in the backward GEMMs amplifies the roundings); measured at most
    # 26 u on these networks, so 64 u (1/8) tells a bf16 gradient from a wrong one
    opt = "optimizer" if discrete else "critic_optimizer"
    state32, state16 = ref.state_dict()[opt]["state"], learners["cpu-bf16"].state_dict()[opt]["state"]
    for key, s32 in state32.items():
        g32, g16 = s32["exp_avg"], state16[key]["exp_avg"]
        assert g16.dtype == torch.float32  # float32 optimizer state
        assert float((g16 - g32).norm()) <= 64 * U_BF16 * float(g32.norm()) + 1e-7, key


def _bandit_batch(rng: np.random.Generator, discrete: bool, n: int, device: str = "cpu") -> Batch:
    """One-step episodes (done = 1): the TD target is the reward, so the critic must fit it and the
    actor must find its best action. Reward: DQN 1 for the action that matches the sign of obs[0], else
    0; DDPG/TD3 -(a - 0.5 obs[0])^2."""
    obs = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    if discrete:
        action = rng.integers(0, 2, n)
        reward = (action == (obs[:, 0] > 0)).astype(np.float32)
    else:
        action = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
        reward = -((action[:, 0] - 0.5 * obs[:, 0]) ** 2).astype(np.float32)
    data = {"obs": obs, "action": action, "reward": reward, "next_obs": obs, "done": np.ones(n, np.float32)}
    return Batch(**data).to_torch(device, discrete=discrete)


def _greedy(learner, obs: np.ndarray) -> np.ndarray:
    """The DQN learner's greedy actions from its float network (as a torch actor takes them)."""
    with torch.no_grad():
        return learner.q(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1).numpy()


@needs_bf16
@pytest.mark.parametrize("algo_name", ["dqn", "ddpg", "td3"])
def test_a_short_bf16_run_learns(algo_name):
    discrete = algo_name == "dqn"
    cfg = TrainConfig.preset(algo_name, net_arch=[64, 64], learning_rate=1e-3)
    learner = make_learner(cfg, 3, 2 if discrete else 1, device="cpu-bf16", seed=0)
    rng = np.random.default_rng(0)
    losses = [float(learner.update(_bandit_batch(rng, discrete, 64))[0]) for _ in range(300)]
    assert np.mean(losses[-20:]) < 0.2 * np.mean(losses[:20])
    probe = np.linspace(-1, 1, 41, dtype=np.float32)
    obs = np.stack([probe, np.zeros_like(probe), np.zeros_like(probe)], 1)
    if discrete:
        assert np.mean(_greedy(learner, obs) == (probe > 0)) >= 0.9
    else:
        assert np.abs(learner.deterministic(obs)[:, 0] - 0.5 * probe).max() < 0.15


@needs_bf16
@pytest.mark.parametrize("algo_name", ["dqn", "td3"])
def test_checkpoints_cross_precisions(algo_name):
    """A bf16 learner's state is float32 (its master weights): a float32 learner loads it and acts the same."""
    discrete = algo_name == "dqn"
    cfg = TrainConfig.preset(algo_name, net_arch=[32, 32])
    low = make_learner(cfg, 3, 2 if discrete else 1, device="cpu-bf16", seed=0)
    rng = np.random.default_rng(1)
    for _ in range(5):
        low.update(_bandit_batch(rng, discrete, 32))
    state = low.state_dict()
    tensors = [t for part in state.values() if isinstance(part, dict) for t in part.values() if isinstance(t, torch.Tensor)]
    assert tensors and all(t.dtype == torch.float32 for t in tensors)
    full = make_learner(cfg, 3, 2 if discrete else 1, device="cpu", seed=9)
    full.load_state_dict(state)
    obs = rng.uniform(-1, 1, (16, 3)).astype(np.float32)
    act = (lambda a: _greedy(a, obs)) if discrete else (lambda a: a.deterministic(obs))
    np.testing.assert_array_equal(act(full), act(low))
    low.update(_bandit_batch(rng, discrete, 32))  # and a bf16 learner resumes from a float32 one's state
    low.load_state_dict(full.state_dict())


def test_bf16_placement_names_what_is_missing(monkeypatch):
    from pearl_fpga import host

    assert parse_placement("act=cpu-kernel,learn=cpu-bf16").learn == "cpu-bf16"
    assert parse_placement("learn=cpu-bf16").learn_device == "cpu"
    assert learn_target("cuda-bf16") == ("cuda", "bfloat16") and learn_target("cpu") == ("cpu", "float32")
    with pytest.raises(ValueError, match="cannot run task 'act'"):
        parse_placement("act=cpu-bf16")
    monkeypatch.setattr(host, "cpu_identity", lambda: {"cpu": "Old CPU", "features": ["avx2", "fma"]})
    with pytest.raises(BackendUnavailable, match=r"learn=cpu-bf16: .*Old CPU.*amx_bf16.*avx512_bf16.*use learn=cpu"):
        make_learner(TrainConfig.preset("dqn"), 4, 2, device="cpu-bf16")
    if not torch.cuda.is_available():
        with pytest.raises(BackendUnavailable, match="no CUDA device"):
            make_learner(TrainConfig.preset("dqn"), 4, 2, device="cuda-bf16")


def _failing_backend(gm, example_inputs):
    raise RuntimeError("no compiler here")


def test_a_step_that_cannot_compile_runs_uncompiled_after_one_line():
    calls = []

    def step(x):
        calls.append(1)
        return x * 2

    compiled = CompiledStep(step, "test step", backend=_failing_backend)
    with pytest.warns(RuntimeWarning, match=r"^test step: torch.compile failed here .*no compiler here.*uncompiled") as rec:
        assert torch.equal(compiled(torch.ones(3)), torch.full((3,), 2.0))
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    assert not compiled.compiled
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second notice
        compiled(torch.ones(3))


def test_a_compiled_step_keeps_a_graph_per_thread_count_and_flag_past_dynamo_s_default_limit():
    """The adaptive threads switch torch's count and TD3 alternates actor steps: each is a guard of its own,
    and past dynamo's default limit of 8 graphs the step would silently run uncompiled."""
    from pearl_fpga.algos.common import RECOMPILE_LIMIT

    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def step(x, flag):
        return x * 2 if flag else x + 1

    compiled = CompiledStep(step, "test step", backend=counting_backend)
    old = torch.get_num_threads()
    try:
        for _ in range(2):  # the second pass finds every graph cached
            for threads in range(1, 7):
                torch.set_num_threads(threads)
                for flag in (False, True):
                    assert torch.equal(compiled(torch.ones(3), flag), torch.full((3,), 2.0))
    finally:
        torch.set_num_threads(old)
    assert 8 < len(graphs) == 12 <= RECOMPILE_LIMIT and compiled.compiled


@pytest.mark.parametrize("algo_name", ["dqn", "ddpg", "td3"])
def test_learner_compile_falls_back_to_the_same_step(monkeypatch, algo_name):
    """learner_compile on a machine where compiling fails: the same arithmetic as the uncompiled torch
    step (DQN's torch path, TD3's one-thread update with concurrent_updates' order)."""
    import pearl_fpga.algos.common as common

    real_compile = torch.compile
    monkeypatch.setattr(common.torch, "compile", lambda fn, backend: real_compile(fn, backend=_failing_backend))
    discrete = algo_name == "dqn"
    obs_dim, action_dim = (4, 2) if discrete else (3, 1)
    cfg = TrainConfig.preset(algo_name, net_arch=[16, 16], learner_compile=True, concurrent_updates=True)
    plain = TrainConfig.preset(algo_name, net_arch=[16, 16], concurrent_updates=True)
    fallen = make_learner(cfg, obs_dim, action_dim, seed=0)
    ref = make_learner(plain, obs_dim, action_dim, seed=0) if not discrete else type(fallen)(plain, obs_dim, action_dim,
                                                                                           seed=0, fused=False)
    batch = _batch(algo_name, obs_dim, action_dim, 32)
    with pytest.warns(RuntimeWarning, match="torch.compile failed here"):
        fallen.update(batch)
    ref.update(batch)
    for _ in range(3):
        fallen.update(batch)
        ref.update(batch)
    for key, part in ref.state_dict().items():
        if isinstance(part, dict) and key != "noise_generator":
            for name, t in part.items():
                if isinstance(t, torch.Tensor):
                    torch.testing.assert_close(fallen.state_dict()[key][name], t, rtol=1e-5, atol=1e-6)


def _learn_tables(learn_cpu: float, learn_bf16: float):
    from pearl_fpga.planner.model import Device, Fit, Tables

    cpu = {"env_step": 1e-3, "act": 1e-3, "replay_insert": 1e-4, "replay_sample": 1e-4, "replay_update": 1e-4,
           "learn": learn_cpu, "weight_sync": 1e-4}
    fits = {(task, "cpu"): Fit(sec, 0.0) for task, sec in cpu.items()}
    fits[("learn", "cpu-bf16")] = Fit(learn_bf16, 0.0)
    return Tables(fits, {"cpu": "cpu", "cpu-bf16": "cpu"}, {"cpu": Device("cpu", "cpu", 2, 10.0, 50.0, "nominal")})


@pytest.mark.parametrize("bf16_seconds,chosen", [(1e-3, "cpu-bf16"), (1.99e-3, "cpu"), (3e-3, "cpu")])
def test_the_planner_takes_bf16_only_when_it_is_faster(bf16_seconds, chosen):
    """A learn-only target on the CPU: chosen when its step makes the run faster beyond the tie margin,
    else the default float32 learner stays."""
    from pearl_fpga.planner.assign import search
    from pearl_fpga.planner.model import Workload

    work = Workload(envs_per_worker=1, batch_size=64, updates_per_step=1.0, sync_every=1, insert_batch=1)
    best = search(_learn_tables(2e-3, bf16_seconds), work, ["cpu", "cpu-bf16"], max_workers=1, min_workers=0,
                  default={"act": "cpu", "replay": "cpu", "learn": "cpu"})[0]
    assert best.placement == {"act": "cpu", "replay": "cpu", "learn": chosen}


@pytest.mark.parametrize("algo_name", ["dqn", "sac"])
def test_the_profile_times_the_bf16_learner_or_says_why_not(monkeypatch, algo_name):
    from pearl_fpga.algos.sac import SAC
    from pearl_fpga.planner import host_probe
    from pearl_fpga.planner.host_probe import Sizes
    from pearl_fpga.runtime import placement

    cfg = TrainConfig.preset(algo_name, net_arch=[16, 16], batch_size=16, buffer_size=4096)
    sizes = Sizes(envs=(1,), act=(1,), insert=(1,), repeats=2, learn_repeats=2, worker_starts=(), parallel=())
    if BF16_HERE:
        prof = host_probe.profile_host(cfg, ("cpu", "cpu-bf16"), sizes)
        assert ("learn", "cpu-bf16") in prof.fits and ("act", "cpu-bf16") not in prof.fits
        assert "act@cpu-bf16" not in prof.unavailable  # a learn-only target is not an act target
    monkeypatch.setattr(placement, "bf16_unsupported", lambda device: "no AMX here; use learn=cpu")
    prof = host_probe.profile_host(cfg, ("cpu", "cpu-bf16"), sizes)
    assert ("learn", "cpu-bf16") not in prof.fits
    assert prof.unavailable["learn@cpu-bf16"] == "no AMX here; use learn=cpu"
    if algo_name == "sac":  # a learner that runs in float32 only is not timed in bfloat16 on any CPU
        monkeypatch.setattr(placement, "bf16_unsupported", lambda device: None)
        monkeypatch.setattr(SAC, "precisions", ("float32",))
        prof = host_probe.profile_host(cfg, ("cpu", "cpu-bf16"), sizes)
        assert prof.unavailable["learn@cpu-bf16"] == "sac's learner runs in float32 only"


@pytest.mark.slow  # compiling takes tens of seconds
def test_the_compiled_td3_step_is_whole_and_matches_the_uncompiled_one():
    """Where inductor works (a C++ compiler, as on the development host): each of TD3's two steps (with
    and without the actor's update) is one graph, no graph break, and it computes the uncompiled step
    to float rounding (its kernels fuse and reorder the element-wise work)."""
    import torch._dynamo.utils as dynamo_utils

    cfg = TrainConfig.preset("td3", net_arch=[16, 16], learner_compile=True)
    plain = TrainConfig.preset("td3", net_arch=[16, 16])
    compiled, ref = make_learner(cfg, 3, 1, seed=0), make_learner(plain, 3, 1, seed=0)
    batch = _batch("td3", 3, 1, 32)
    dynamo_utils.counters.clear()
    for _ in range(4):
        (loss_c, td_c), (loss_r, td_r) = compiled.update(batch), ref.update(batch)
        torch.testing.assert_close(td_c, td_r, rtol=1e-4, atol=1e-5)
    assert compiled._compiled.compiled
    assert dict(dynamo_utils.counters["graph_break"]) == {}
    assert dynamo_utils.counters["stats"]["unique_graphs"] == 2
    for key in ("actor", "critic", "critic2"):
        for name, t in ref.state_dict()[key].items():
            torch.testing.assert_close(compiled.state_dict()[key][name], t, rtol=1e-4, atol=1e-5)


def test_bench_learner_reports_each_precision_against_its_own_peak(tmp_path, capsys, monkeypatch):
    import json

    from pearl_fpga.cli import main
    from pearl_fpga.runtime import placement

    out = tmp_path / "learner.json"
    argv = ["bench", "learner", "--algo", "ddpg", "--set", "net_arch=[32,32]", "--rounds", "1", "--seconds", "0.02",
            "--json", str(out)]
    assert main(argv) == 0
    results = json.loads(out.read_text())["results"]
    ddpg = results["algos"]["ddpg"]
    assert ddpg["label"] == "float32" and results["peak_gflops"]["1"] > 0
    if BF16_HERE:
        low = ddpg["variants"]["bfloat16"]
        assert results["peak_gflops_bfloat16"]["1"] > 0
        assert low["flops_per_step"] == ddpg["flops_per_step"]  # the same GEMMs, in another precision
        assert low["gflops"]["1"] == pytest.approx(low["flops_per_step"] / low["step_s"]["1"] / 1e9)
        assert "bfloat16" in capsys.readouterr().out
    monkeypatch.setattr(placement, "bf16_unsupported", lambda device: "no AMX here; use learn=cpu")
    assert main([*argv, "--precision", "bfloat16"]) == 2
    assert "bfloat16: no AMX here" in capsys.readouterr().err


def test_a_onednn_cap_below_its_bf16_kernels_rules_bf16_out(monkeypatch):
    """ONEDNN_MAX_CPU_ISA=AVX2 (make test-isa's switch) leaves oneDNN only emulated bfloat16 GEMMs:
    the bf16 learner is then unavailable, naming the variable, as on a CPU without bf16."""
    from pearl_fpga.host import bf16_unsupported as unsupported

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    reason = unsupported("cpu")
    assert reason is not None and ("ONEDNN_MAX_CPU_ISA=AVX2" in reason or "amx_bf16" in reason)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert unsupported("cpu") == (None if BF16_HERE else unsupported("cpu"))
