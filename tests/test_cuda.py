"""The CUDA paths: placement learn=cuda and cuda-bf16 (the torch step on the GPU) and act=cuda.

Skipped where torch sees no GPU (CI's hosts); run on a GPU machine with `make test` or
`pytest tests/test_cuda.py`. A CUDA step is the CPU torch step's arithmetic with another summation order,
so one step agrees with it to float32 rounding, and a checkpoint taken on the GPU loads on a CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pearl_fpga.algos import make_learner
from pearl_fpga.config import TrainConfig
from pearl_fpga.replay.batch import Batch
from tests.test_learner_precision import _bandit_batch  # the one-step task (done = 1), on any device

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")

DEEP = ("dqn", "ddpg", "td3", "sac")


def _arrays(algo: str, obs_dim: int, action_dim: int, n: int, rng: np.random.Generator) -> Batch:
    return Batch(
        obs=rng.standard_normal((n, obs_dim)).astype(np.float32),
        action=(rng.integers(0, action_dim, n) if algo == "dqn"
                else rng.uniform(-1, 1, (n, action_dim)).astype(np.float32)),
        reward=rng.standard_normal(n).astype(np.float32),
        next_obs=rng.standard_normal((n, obs_dim)).astype(np.float32),
        done=(rng.random(n) < 0.1).astype(np.float32),
    )


def _params(learner) -> torch.Tensor:
    nets = [learner.q] if learner.discrete else [learner.actor, *getattr(learner, "critics", [learner.critic])]
    return torch.cat([p.detach().flatten().cpu() for net in nets for p in net.parameters()])


@pytest.mark.parametrize("algo_name", DEEP)
def test_a_cuda_step_agrees_with_the_cpu_torch_step(algo_name):
    """Same seed, same batches: the TD errors of the first step agree to float32 rounding, and the
    parameters after 20 steps stay within what Adam's normalized steps can move on that rounding. TD3's
    smoothing noise and SAC's samples come from a CPU generator on either device: the same draws."""
    discrete = algo_name == "dqn"
    obs_dim, action_dim = (4, 2) if discrete else (3, 1)
    cfg = TrainConfig.preset(algo_name, net_arch=[64, 64], double_q=False)
    cls = type(make_learner(cfg, obs_dim, action_dim))
    cpu = cls(cfg, obs_dim, action_dim, device="cpu", seed=3, fused=False)
    gpu = cls(cfg, obs_dim, action_dim, device="cuda", seed=3)
    assert torch.equal(_params(cpu), _params(gpu))  # the same initial weights
    rng = np.random.default_rng(0)
    for i in range(20):
        batch = _arrays(algo_name, obs_dim, action_dim, 128, rng)
        (loss_c, td_c), (loss_g, td_g) = cpu.update(batch.to_torch("cpu", discrete)), gpu.update(
            batch.to_torch("cuda", discrete))
        assert td_g.device.type == "cuda"
        if i == 0:
            np.testing.assert_allclose(td_g.cpu().numpy(), td_c.numpy(), rtol=1e-4, atol=1e-5)
            assert float(loss_g) == pytest.approx(float(loss_c), rel=1e-4, abs=1e-6)
    drift = float((_params(gpu) - _params(cpu)).norm() / _params(cpu).norm())
    assert drift < 1e-3, drift


@pytest.mark.parametrize("target", ["cuda", "cuda-bf16"])
@pytest.mark.parametrize("algo_name", DEEP)
def test_a_short_cuda_run_learns(algo_name, target):
    discrete = algo_name == "dqn"
    cfg = TrainConfig.preset(algo_name, net_arch=[64, 64], learning_rate=1e-3)
    if target.endswith("bf16") and "bfloat16" not in type(make_learner(cfg, 3, 1)).precisions:
        pytest.skip(f"{algo_name}'s learner runs in float32 only")
    learner = make_learner(cfg, 3, 2 if discrete else 1, device=target, seed=0)
    rng = np.random.default_rng(0)
    losses = [float(learner.update(_bandit_batch(rng, discrete, 64, "cuda"))[0]) for _ in range(400)]
    assert np.mean(losses[-20:]) < 0.2 * np.mean(losses[:20])
    probe = np.linspace(-1, 1, 41, dtype=np.float32)
    obs = np.stack([probe, np.zeros_like(probe), np.zeros_like(probe)], 1)
    if discrete:
        with torch.no_grad():
            greedy = learner.q(torch.as_tensor(obs, device="cuda")).argmax(1).cpu().numpy()
        assert np.mean(greedy == (probe > 0)) >= 0.9
    else:  # SAC's entropy bonus keeps its mean action a little off the optimum
        assert np.abs(_greedy_action(learner, obs) - 0.5 * probe).max() < (0.25 if algo_name == "sac" else 0.15)


def _greedy_action(learner, obs: np.ndarray) -> np.ndarray:
    """The continuous actor's greedy action (SAC's: tanh of its mean) for 1-d actions."""
    with torch.no_grad():
        out = learner.policy_module(torch.as_tensor(obs, device=learner.device)).cpu().numpy()
    return np.tanh(out[:, 0]) if learner.actor_head(learner.config, 1).action_rule == "tanh-mean" else out[:, 0]


@pytest.mark.parametrize("algo_name", DEEP)
def test_a_run_on_the_gpu_resumes_on_a_cpu(algo_name, tmp_path):
    """Train with the learner on the GPU (the actor on the CPU's torch), save, load on a CPU-only
    placement: the policy acts the same, and training goes on there."""
    from pearl_fpga.trainer import Trainer

    tiny = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
                batch_size=32, eval_freq=0)
    cfg = TrainConfig.preset(algo_name, **tiny)
    trainer = Trainer(algo_name, placement="act=cpu,learn=cuda", config=cfg, seed=0)
    trainer.train(400)
    assert trainer.grad_steps > 0
    assert next(trainer.algo.policy_module.parameters()).device.type == "cuda"
    path = trainer.save(tmp_path / "run")
    resumed = Trainer.load(path, placement="cpu")
    assert next(resumed.algo.policy_module.parameters()).device.type == "cpu"
    obs = np.random.default_rng(1).uniform(-1, 1, (16, trainer.spec.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(_outputs(resumed.algo, obs), _outputs(trainer.algo, obs), rtol=1e-5, atol=1e-5)
    resumed.train(200)
    assert resumed.env_steps >= 600


def _outputs(learner, obs: np.ndarray) -> np.ndarray:
    """The policy network's outputs for `obs`, computed on the learner's device."""
    with torch.no_grad():
        return learner.policy_module(torch.as_tensor(obs, dtype=torch.float32, device=learner.device)).cpu().numpy()


def test_the_actor_runs_on_the_gpu_too():
    from pearl_fpga.trainer import Trainer

    cfg = TrainConfig.preset("dqn", learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16],
                             buffer_size=4000, batch_size=32, eval_freq=0)
    trainer = Trainer("dqn", placement="cuda", config=cfg, seed=0)
    trainer.train(400)
    assert trainer.placement.act == "cuda" and trainer.grad_steps > 0
