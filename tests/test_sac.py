"""SAC (pearl_fpga/algos/sac.py, pearl_fpga/presets/sac.py): its parameters, its update, its actor head on
the MLP kernel, training on the engines, checkpoints and the CLI."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch

from pearl_fpga import Trainer
from pearl_fpga.algos.common import Batch
from pearl_fpga.algos.sac import SAC, SquashedGaussian
from pearl_fpga.config import TrainConfig

TINY = dict(learning_starts=64, batch_size=32, net_arch=[32, 32], eval_freq=0, buffer_size=5_000,
            weight_sync_interval=4)


def _batch(rng: np.random.Generator, n: int = 32, obs_dim: int = 3, action_dim: int = 1,
           weights: bool = False) -> Batch:
    data = dict(obs=rng.normal(size=(n, obs_dim)), action=rng.uniform(-1, 1, (n, action_dim)),
                reward=rng.normal(size=n), next_obs=rng.normal(size=(n, obs_dim)), done=rng.random(n) < 0.1,
                weights=rng.uniform(0.2, 1.0, n) if weights else None)
    return Batch(**data).to_torch()


def test_parameters_come_from_the_registry_and_are_checked():
    cfg = TrainConfig.preset("sac", "Pendulum-v1")
    assert (cfg.learning_rate, cfg.total_steps, cfg.target_update_interval) == (1e-3, 20_000, 1)
    assert (cfg.ent_coef, cfg.ent_coef_init, cfg.target_entropy) == ("auto", 1.0, "auto")
    assert TrainConfig.preset("sac", "MountainCarContinuous-v0").ent_coef == 0.1
    assert TrainConfig.preset("sac", ent_coef=0.2).to_dict()["ent_coef"] == 0.2  # flat in JSON
    assert TrainConfig.from_dict(TrainConfig.preset("sac", target_entropy=-2).to_dict()).target_entropy == -2.0
    with pytest.raises(ValueError, match=r"ent_coef must be a finite number in \(0, inf\) or 'auto'"):
        TrainConfig.preset("sac", ent_coef="often")
    with pytest.raises(ValueError, match="ent_coef = -1 is out of range"):
        TrainConfig.preset("sac", ent_coef=-1)
    with pytest.raises(ValueError, match="'ent_coef' is read by sac only; dqn would ignore it"):
        TrainConfig.preset("dqn", ent_coef=0.1)


def test_log_prob_is_the_squashed_gaussian_density():
    torch.manual_seed(0)
    sac = SAC(TrainConfig.preset("sac", net_arch=[16]), 3, 2, seed=1)
    obs = torch.randn(64, 3)
    state = sac.noise.get_state()
    action, log_prob = sac._action_log_prob(obs)
    sac.noise.set_state(state)
    out = sac.actor(obs)
    mean, log_std = out[:, :2], out[:, 2:].clamp(-20, 2)
    eps = torch.randn(mean.shape, generator=sac.noise)
    dist = torch.distributions.TransformedDistribution(torch.distributions.Normal(mean, log_std.exp()),
                                                       [torch.distributions.TanhTransform()])
    expected = dist.log_prob(torch.tanh(mean + log_std.exp() * eps).clamp(-1 + 1e-7, 1 - 1e-7)).sum(1, keepdim=True)
    assert torch.allclose(action, torch.tanh(mean + log_std.exp() * eps))
    inner = action.abs().amax(dim=1) < 0.99  # away from the saturated ends SB3's 1e-6 in log(1 - a^2 + 1e-6) is tiny
    assert inner.sum() > 40 and torch.allclose(log_prob[inner], expected[inner], atol=1e-4)
    assert torch.allclose(log_prob, expected, atol=1e-2)


@pytest.mark.parametrize("weights", [False, True])
def test_update_is_reproducible_and_resumes_exactly(weights):
    rng = np.random.default_rng(0)
    batches = [_batch(rng, weights=weights) for _ in range(6)]
    cfg = TrainConfig.preset("sac", net_arch=[16, 16], target_update_interval=2)
    a, b = SAC(cfg, 3, 1, seed=3), SAC(cfg, 3, 1, seed=3)
    for batch in batches[:3]:
        ra, rb = a.update(batch), b.update(batch)
        assert torch.equal(ra.loss, rb.loss) and torch.equal(ra.td_abs, rb.td_abs)
        assert ra.td_abs.shape == (32,) and math.isfinite(float(ra.loss))
    resumed = SAC(cfg, 3, 1, seed=99)
    resumed.load_state_dict(copy.deepcopy(a.state_dict()))  # as a checkpoint does: no shared tensors
    for batch in batches[3:]:
        ra, rr = a.update(batch), resumed.update(batch)
        assert torch.equal(ra.loss, rr.loss)
    for pa, pr in zip(a.state_dict()["actor"].values(), resumed.state_dict()["actor"].values()):
        assert torch.equal(pa, pr)
    assert a.ent_coef == resumed.ent_coef != 1.0  # alpha is tuned


def test_entropy_coefficient_follows_the_target_and_a_fixed_one_stays():
    rng = np.random.default_rng(1)
    low = SAC(TrainConfig.preset("sac", net_arch=[16], target_entropy=-50.0), 3, 1, seed=0)
    high = SAC(TrainConfig.preset("sac", net_arch=[16], target_entropy=50.0), 3, 1, seed=0)
    fixed = SAC(TrainConfig.preset("sac", net_arch=[16], ent_coef=0.3), 3, 1, seed=0)
    for _ in range(20):
        batch = _batch(rng)
        low.update(batch), high.update(batch), fixed.update(batch)
    assert low.ent_coef < 1.0 < high.ent_coef  # entropy above its target: less bonus; below: more
    assert fixed.ent_coef == pytest.approx(0.3) and "ent_coef_optimizer" not in fixed.state_dict()


def test_critic_learns_a_fixed_target():
    rng = np.random.default_rng(2)
    sac = SAC(TrainConfig.preset("sac", net_arch=[32, 32], gamma=0.0, ent_coef=1e-6, learning_rate=3e-3), 3, 1, seed=0)
    batch = _batch(rng, n=64)
    losses = [float(sac.update(batch).loss) for _ in range(200)]
    assert losses[-1] < 0.3 * losses[0]  # gamma 0: the target is the reward itself


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_head_actions_are_the_same_bits_on_every_kernel_backend(backend):
    from pearl_fpga.kernels import MLPInfer

    torch.manual_seed(0)
    cfg = TrainConfig.preset("sac", net_arch=[32, 32], learning_starts=0)
    net = SAC.policy_network(3, 2, cfg)
    obs = np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)
    head = SquashedGaussian(cfg, 2)

    class Kernel:
        def __init__(self, name):
            self.k = MLPInfer.from_torch(net, backend=name, calibration=obs, **head.kernel_options)

        def outputs(self, o):
            return np.asarray(self.k(o), dtype=np.float32)

        def deterministic(self, o):
            return head.greedy(self.outputs(o))

    ref, other = Kernel("numpy"), Kernel(backend)
    a = head.explore(ref, obs, 10, np.random.default_rng(5))
    b = head.explore(other, obs, 10, np.random.default_rng(5))
    assert a.shape == (64, 2) and np.array_equal(a, b) and np.abs(a).max() <= 1.0
    assert np.array_equal(ref.deterministic(obs), other.deterministic(obs))
    with torch.no_grad():
        float_greedy = torch.tanh(net(torch.from_numpy(obs))[:, :2]).numpy()
    assert np.max(np.abs(ref.deterministic(obs) - float_greedy)) < 0.05  # the kernel's quantization


@pytest.mark.parametrize("engine,workers", [("inline", 0), ("processes", 1)])
def test_trains_with_the_kernel_actor_and_resumes(tmp_path, engine, workers):
    cfg = TrainConfig.preset("sac", "Pendulum-v1", workers=workers, engine=engine, **TINY)
    with Trainer("sac", "Pendulum-v1", placement="fpga-emu", config=cfg, seed=0, checkpoint_dir=tmp_path) as t:
        stats = t.train(200)
        assert stats.env_steps == 200 and stats.grad_steps > 0 and math.isfinite(stats.loss)
        action, _ = t.predict(np.zeros(3, np.float32))
        assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0  # Pendulum's torque bounds
        sampled = t.predict(np.zeros((5, 3), np.float32), deterministic=False)[0]
        assert sampled.shape == (5, 1) and len(np.unique(sampled)) > 1
    with Trainer.load(tmp_path) as resumed:
        assert resumed.env_steps == 200 and resumed.config.ent_coef == "auto"
        assert resumed.algo.ent_coef == pytest.approx(t.algo.ent_coef)
        resumed.train(64)


def test_inline_runs_repeat_exactly():
    def run() -> list[float]:
        cfg = TrainConfig.preset("sac", "Pendulum-v1", learner_threads=1, **TINY)
        with Trainer("sac", "Pendulum-v1", placement="fpga-emu", config=cfg, seed=4) as t:
            t.train(160)
            return [p.sum().item() for p in t.algo.actor.parameters()]

    assert run() == run()


def test_cli_trains_sac(tmp_path, capsys):
    from pearl_fpga.cli import main

    code = main(["train", "--algo", "sac", "--env", "Pendulum-v1", "--steps", "150", "--placement", "fpga-emu",
                 "--logdir", str(tmp_path / "run"), "--set", "learning_starts=64", "--set", "ent_coef=0.05",
                 "--set", "net_arch=[32,32]", "--set", "batch_size=32", "--eval-episodes", "1", "--json",
                 "--no-tensorboard"])
    assert code == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "sac" and summary["env_steps"] == 150 and summary["config"]["ent_coef"] == 0.05


@pytest.mark.parametrize("library", ["stable_baselines3", "sbx"])
def test_bench_train_runs_the_baselines_sac_at_the_same_settings(library):
    """`bench train --algo sac` builds SB3's and SBX's SAC from the same config (SBX has no
    target_update_interval: a config that needs one is refused for SBX with the way out)."""
    module = pytest.importorskip(library, reason="the bench extra (pip install 'pearl_fpga[bench]') is not installed")
    from pearl_fpga.bench.train import _run_sb3

    cfg = TrainConfig.preset("sac", "Pendulum-v1", total_steps=80, learning_starts=40, batch_size=16,
                             net_arch=[8, 8], buffer_size=100)
    out = _run_sb3(module, cfg, 0, 1, 1 if library == "stable_baselines3" else None)
    assert out["grad_steps"] == 40 and math.isfinite(out["final_return"])
    if library == "sbx":
        with pytest.raises(ValueError, match="SBX's SAC has no such setting"):
            _run_sb3(module, TrainConfig.from_dict({**cfg.to_dict(), "target_update_interval": 2}), 0, 1, None)
