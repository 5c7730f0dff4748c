"""The fast learners against the readable specification (pearl_fpga/algos/reference.py), over many
steps: the fused CPU DQN step and the torch path, DDPG and TD3 in both update orders."""

import numpy as np
import pytest
import torch

from pearl_fpga.algos import DDPG, DQN, TD3, Batch
from pearl_fpga.algos.reference import ReferenceDDPG, ReferenceDQN, ReferenceTD3
from pearl_fpga.config import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _batches(steps, n, obs_dim, discrete, n_actions=2, weights=False, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        data = {
            "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "action": rng.integers(0, n_actions, n) if discrete else rng.uniform(-1, 1, (n, 1)).astype(np.float32),
            "reward": (3 * rng.normal(size=n)).astype(np.float32),  # TD errors on both sides of the Huber knee
            "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "done": (rng.random(n) < 0.2).astype(np.float32),
        }
        if weights:
            data["weights"] = rng.uniform(0.1, 1.0, n).astype(np.float32)
        yield Batch(**data).to_torch(discrete=discrete)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
@pytest.mark.parametrize("double_q,weights", [(True, False), (False, True)])
def test_dqn_follows_the_reference_over_many_steps(fused, double_q, weights):
    cfg = TrainConfig.preset("dqn", net_arch=[32, 32], double_q=double_q, learning_rate=3e-3, max_grad_norm=1.0)
    algo = DQN(cfg, 4, 3, seed=2, fused=fused)
    ref = ReferenceDQN(algo.q, algo.q_target, cfg)
    for step, b in enumerate(_batches(30, 32, 4, True, 3, weights)):
        if step % 10 == 0:
            algo.update_target()
            ref.update_target()
        loss, td = algo.update(b)
        ref_loss, ref_td = ref.update(b)
        assert float(loss) == pytest.approx(ref_loss, rel=1e-4, abs=1e-6)
        torch.testing.assert_close(td, ref_td, rtol=1e-4, atol=1e-5)
    for p, r in zip(algo.q.parameters(), ref.q.parameters(), strict=True):
        torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("concurrent", [True, False], ids=["concurrent", "sequential"])
def test_ddpg_follows_the_reference_over_many_steps(concurrent):
    cfg = TrainConfig.preset("ddpg", net_arch=[32, 32], learning_rate=1e-3, concurrent_updates=concurrent)
    algo = DDPG(cfg, 3, 1, seed=3)
    ref = ReferenceDDPG(algo.actor, algo.critic, algo.actor_target, algo.critic_target, cfg)
    for b in _batches(15, 64, 3, False):
        loss, td = algo.update(b)
        ref_loss, ref_td = ref.update(b)
        assert float(loss) == pytest.approx(ref_loss, rel=1e-4, abs=1e-6)
        torch.testing.assert_close(td, ref_td, rtol=1e-4, atol=1e-5)
    for mine, theirs in ((algo.actor, ref.actor), (algo.critic, ref.critic), (algo.actor_target, ref.actor_target),
                         (algo.critic_target, ref.critic_target)):
        for p, r in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("concurrent", [True, False], ids=["concurrent", "sequential"])
def test_td3_follows_the_reference_over_many_steps(concurrent):
    cfg = TrainConfig.preset("td3", net_arch=[32, 32], learning_rate=1e-3, policy_delay=3, concurrent_updates=concurrent)
    algo = TD3(cfg, 3, 1, seed=3)
    ref = ReferenceTD3(algo.actor, algo.critics, algo.actor_target, algo.critic_targets, cfg, cfg.policy_delay,
                       cfg.target_policy_noise, cfg.target_noise_clip, torch.Generator().manual_seed(3))
    for b in _batches(15, 64, 3, False):
        loss, td = algo.update(b)
        ref_loss, ref_td = ref.update(b)
        assert float(loss) == pytest.approx(ref_loss, rel=1e-4, abs=1e-6)
        torch.testing.assert_close(td, ref_td, rtol=1e-4, atol=1e-5)
    for mine, theirs in ((algo.actor, ref.actor), (algo.actor_target, ref.actor_target),
                         *zip(algo.critics + algo.critic_targets, ref.critics + ref.critic_targets)):
        for p, r in zip(mine.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(p, r, rtol=1e-4, atol=1e-5)
