"""DQN, DDPG and TD3 update code against straightforward reference updates written out in the test."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from float_bounds import assert_difference_close, huber_mean_tolerance

from pearl_fpga.algos import DDPG, DQN, TD3, Batch
from pearl_fpga.config import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def _batch(rng, n, obs_dim, discrete, n_actions=2, weights=False):
    data = {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "action": rng.integers(0, n_actions, n) if discrete else rng.uniform(-1, 1, (n, 1)).astype(np.float32),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "done": (rng.random(n) < 0.2).astype(np.float32),
    }
    if weights:
        data["weights"] = rng.uniform(0.1, 1.0, n).astype(np.float32)
    return data


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])
@pytest.mark.parametrize("double_q,weights", [(True, False), (False, False), (True, True)])
def test_dqn_step_matches_reference(double_q, weights, fused):
    """The written-out backward pass, as torch ops and as the fused CPU step (algos/fused.py), against
    autograd + torch.optim on the same step (PER weights too)."""
    cfg = TrainConfig.preset("dqn", net_arch=[16, 16], double_q=double_q, learning_rate=1e-2, max_grad_norm=0.5)
    algo = DQN(cfg, 4, 3, seed=1, fused=fused)
    algo.update_target()
    with torch.no_grad():  # make the target differ from the online net
        for p in algo.q_target.parameters():
            p.add_(0.05)
    ref_q, ref_t = copy.deepcopy(algo.q), copy.deepcopy(algo.q_target)
    opt = torch.optim.Adam(ref_q.parameters(), lr=1e-2)
    data = _batch(np.random.default_rng(0), 32, 4, True, 3, weights=weights)
    data["reward"] *= 3.0  # TD errors on both sides of the Huber knee
    b = Batch(**data).to_torch(discrete=True)
    loss, td = algo.update(b)

    with torch.no_grad():
        if double_q:
            a_next = ref_q(b.next_obs).argmax(1, keepdim=True)
            next_q = ref_t(b.next_obs).gather(1, a_next)
        else:
            next_q = ref_t(b.next_obs).max(1, keepdim=True).values
        target = b.reward + (1 - b.done) * cfg.gamma * next_q
    cur = ref_q(b.obs).gather(1, b.action)
    if weights:
        ref_loss = (b.weights * F.smooth_l1_loss(cur, target, reduction="none")).mean()
    else:
        ref_loss = F.smooth_l1_loss(cur, target)
    opt.zero_grad()
    ref_loss.backward()
    torch.nn.utils.clip_grad_norm_(ref_q.parameters(), 0.5)
    opt.step()
    # the TD error is a difference of two values: its tolerance is a few ulps of those (tests/float_bounds.py)
    cur_np, target_np = cur.detach().squeeze(1).numpy(), target.squeeze(1).numpy()
    w_np = b.weights.squeeze(1).numpy() if weights else None
    assert abs(float(loss) - float(ref_loss.detach())) <= huber_mean_tolerance(cur_np, target_np, w_np)
    assert_difference_close(td.numpy(), cur_np, target_np, absolute=True)
    for p, r in zip(algo.q.parameters(), ref_q.parameters(), strict=True):
        torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)


def test_dqn_importance_weights_scale_the_loss():
    cfg = TrainConfig.preset("dqn", net_arch=[8])
    rng = np.random.default_rng(3)
    data = _batch(rng, 16, 4, True, weights=True)
    a, b = DQN(cfg, 4, 2, seed=0), DQN(cfg, 4, 2, seed=0)
    loss_w, _ = a.update(Batch(**data).to_torch(discrete=True))
    plain = {k: v for k, v in data.items() if k != "weights"}
    loss_p, _ = b.update(Batch(**plain).to_torch(discrete=True))
    assert float(loss_w) < float(loss_p)  # weights < 1 shrink the loss
    ones = dict(data, weights=np.ones(16, np.float32))
    c = DQN(cfg, 4, 2, seed=0)
    loss_1, _ = c.update(Batch(**ones).to_torch(discrete=True))
    assert float(loss_1) == pytest.approx(float(loss_p), rel=1e-6)


def test_dqn_learns_a_fixed_regression_target():
    cfg = TrainConfig.preset("dqn", net_arch=[32], gamma=0.0, learning_rate=1e-2)
    algo = DQN(cfg, 4, 2, seed=0)
    data = _batch(np.random.default_rng(1), 64, 4, True)
    data["done"][:] = 1.0
    b = Batch(**data).to_torch(discrete=True)
    first = float(algo.update(b)[0])
    for _ in range(200):
        last = float(algo.update(b)[0])
    assert last < 0.1 * first


def test_dqn_target_copy_and_state_dict_round_trip():
    cfg = TrainConfig.preset("dqn", net_arch=[8])
    algo = DQN(cfg, 4, 2, seed=0)
    algo.update(Batch(**_batch(np.random.default_rng(0), 8, 4, True)).to_torch(discrete=True))
    assert not all(torch.equal(p, q) for p, q in zip(algo.q.parameters(), algo.q_target.parameters(), strict=True))
    algo.update_target()
    assert all(torch.equal(p, q) for p, q in zip(algo.q.parameters(), algo.q_target.parameters(), strict=True))
    other = DQN(cfg, 4, 2, seed=5)
    other.load_state_dict(algo.state_dict())
    assert all(torch.equal(p, q) for p, q in zip(algo.q.parameters(), other.q.parameters(), strict=True))
    assert other.updates == 1


# [16, 16]: every layer thin (native loops on the fused path); [40, 24]: the middle one a torch GEMM
NETS = pytest.mark.parametrize("net_arch", [[16, 16], [40, 24]], ids=["thin", "wide"])
FUSED = pytest.mark.parametrize("fused", [True, False], ids=["fused", "torch"])


@NETS
@FUSED
@pytest.mark.parametrize("concurrent", [False, True], ids=["sb3-order", "concurrent"])
def test_ddpg_step_matches_reference(concurrent, fused, net_arch):
    """Sequential: SB3's order (critic step, then the actor's gradient on the updated critic).
    Concurrent: both gradients on the step's starting networks (OpenAI Baselines' order), then both steps.
    The fused CPU step (algos/fused_ac.py) and the torch ops, each against autograd + torch.optim."""
    cfg = TrainConfig.preset("ddpg", net_arch=net_arch, tau=0.1, concurrent_updates=concurrent)
    algo = DDPG(cfg, 3, 1, seed=2, fused=fused)
    assert (algo._fused is not None) == fused
    actor, critic = copy.deepcopy(algo.actor), copy.deepcopy(algo.critic)
    actor_t, critic_t = copy.deepcopy(algo.actor_target), copy.deepcopy(algo.critic_target)
    opt_a = torch.optim.Adam(actor.parameters(), lr=cfg.learning_rate)
    opt_c = torch.optim.Adam(critic.parameters(), lr=cfg.learning_rate)
    data = _batch(np.random.default_rng(0), 32, 3, False)
    b = Batch(**data).to_torch()
    for _ in range(2):  # the second step runs on Adam state and moved targets from the first
        loss, _ = algo.update(b)

        with torch.no_grad():
            target = b.reward + (1 - b.done) * cfg.gamma * critic_t(torch.cat([b.next_obs, actor_t(b.next_obs)], 1))
        c_loss = F.mse_loss(critic(torch.cat([b.obs, b.action], 1)), target)
        opt_c.zero_grad()
        c_loss.backward()
        if not concurrent:
            opt_c.step()
        a_loss = -critic(torch.cat([b.obs, actor(b.obs)], 1)).mean()
        opt_a.zero_grad()
        if concurrent:  # the actor's gradient only: the critic's .grad holds the critic loss's
            for p, g in zip(actor.parameters(), torch.autograd.grad(a_loss, list(actor.parameters())), strict=True):
                p.grad = g
            opt_c.step()
        else:
            a_loss.backward()
        opt_a.step()
        with torch.no_grad():
            for net, tgt in ((actor, actor_t), (critic, critic_t)):
                for p, t in zip(net.parameters(), tgt.parameters(), strict=True):
                    t.mul_(1 - cfg.tau).add_(p, alpha=cfg.tau)
        assert float(loss) == pytest.approx(float(c_loss.detach()), rel=1e-5)
    for mine, ref in ((algo.actor, actor), (algo.critic, critic), (algo.actor_target, actor_t),
                      (algo.critic_target, critic_t)):
        for p, r in zip(mine.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)
    assert all(p.requires_grad for p in algo.critic.parameters())


def test_ddpg_actor_output_is_bounded_and_state_round_trips():
    cfg = TrainConfig.preset("ddpg", net_arch=[8])
    algo = DDPG(cfg, 3, 2, seed=0)
    out = algo.deterministic(np.random.default_rng(0).normal(size=(5, 3)) * 100)
    assert out.shape == (5, 2) and np.all(np.abs(out) <= 1)
    other = DDPG(cfg, 3, 2, seed=9)
    other.load_state_dict(algo.state_dict())
    for p, q in zip(algo.critic_target.parameters(), other.critic_target.parameters(), strict=True):
        assert torch.equal(p, q)


@NETS
@FUSED
@pytest.mark.parametrize("concurrent,weights", [(False, False), (True, False), (False, True)],
                         ids=["sb3-order", "concurrent", "sb3-order-is-weights"])
def test_td3_step_matches_reference(concurrent, weights, fused, net_arch):
    """SB3's TD3, written out: twin critics on the smaller target value, the target actor's action plus
    clipped noise (drawn from a generator seeded like the learner's); the actor (on Q1) and the targets
    move only on every second step, counted from 1; PER's weights on each squared error. The fused CPU
    step and the torch ops, the critics one per thread (the default), against autograd + torch.optim."""
    cfg = TrainConfig.preset("td3", net_arch=net_arch, tau=0.1, target_policy_noise=0.4, target_noise_clip=0.3,
                             concurrent_updates=concurrent)
    algo = TD3(cfg, 3, 2, seed=2, fused=fused)
    assert (algo._fused is not None) == fused and algo.split_critics
    actor, q1, q2 = copy.deepcopy(algo.actor), copy.deepcopy(algo.critics[0]), copy.deepcopy(algo.critics[1])
    actor_t, q1_t, q2_t = (copy.deepcopy(algo.actor_target), copy.deepcopy(algo.critic_targets[0]),
                           copy.deepcopy(algo.critic_targets[1]))
    assert not torch.equal(q1[0].weight, q2[0].weight)  # two critics, initialized apart
    opt_a = torch.optim.Adam(actor.parameters(), lr=cfg.learning_rate)
    opt_c = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=cfg.learning_rate)
    noise_rng = torch.Generator().manual_seed(2)
    rng = np.random.default_rng(0)
    for step in range(1, 5):
        data = _batch(rng, 32, 3, False, weights=weights)
        data["action"] = rng.uniform(-1, 1, (32, 2)).astype(np.float32)
        b = Batch(**data).to_torch()
        actor_before = [p.clone() for p in algo.actor.parameters()]
        loss, td = algo.update(b)

        with torch.no_grad():
            noise = torch.empty(32, 2).normal_(0, cfg.target_policy_noise, generator=noise_rng)
            next_a = (actor_t(b.next_obs) + noise.clamp(-cfg.target_noise_clip, cfg.target_noise_clip)).clamp(-1, 1)
            x_next = torch.cat([b.next_obs, next_a], 1)
            target = b.reward + (1 - b.done) * cfg.gamma * torch.min(q1_t(x_next), q2_t(x_next))
        x = torch.cat([b.obs, b.action], 1)
        if weights:
            c_loss = (b.weights * (q1(x) - target) ** 2).mean() + (b.weights * (q2(x) - target) ** 2).mean()
        else:
            c_loss = F.mse_loss(q1(x), target) + F.mse_loss(q2(x), target)
        td_ref = (q1(x) - target).abs().squeeze(1).detach()
        opt_c.zero_grad()
        c_loss.backward()
        if not concurrent:  # SB3: the actor's gradient on the updated critic
            opt_c.step()
        if step % 2 == 0:
            a_loss = -q1(torch.cat([b.obs, actor(b.obs)], 1)).mean()
            opt_a.zero_grad()
            for p, g in zip(actor.parameters(), torch.autograd.grad(a_loss, list(actor.parameters())), strict=True):
                p.grad = g
        if concurrent:  # the critic of the step's start gave the actor's gradient
            opt_c.step()
        if step % 2 == 0:
            opt_a.step()
            with torch.no_grad():
                for net, tgt in ((actor, actor_t), (q1, q1_t), (q2, q2_t)):
                    for p, t in zip(net.parameters(), tgt.parameters(), strict=True):
                        t.mul_(1 - cfg.tau).add_(p, alpha=cfg.tau)
        else:  # no actor step on odd steps
            assert all(torch.equal(p, q) for p, q in zip(algo.actor.parameters(), actor_before, strict=True))
        assert float(loss) == pytest.approx(float(c_loss.detach()), rel=1e-5)
        torch.testing.assert_close(td, td_ref, rtol=1e-5, atol=1e-5)
        for mine, ref in ((algo.actor, actor), (algo.critics[0], q1), (algo.critics[1], q2),
                          (algo.actor_target, actor_t), (algo.critic_targets[0], q1_t), (algo.critic_targets[1], q2_t)):
            for p, r in zip(mine.parameters(), ref.parameters(), strict=True):
                torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-6)
    assert algo.updates == 4


def test_td3_matches_stable_baselines3():
    """Where SB3 is installed (the bench extra): its TD3.train on the same weights, batches and smoothing
    noise (SB3 draws it from torch's global generator, seeded as ours) ends with the same networks, to
    float rounding (Adam's fused and foreach kernels round differently); other noise misses by ~1e-3."""
    pytest.importorskip("stable_baselines3")
    import gymnasium as gym
    from stable_baselines3 import TD3 as SB3TD3
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    cfg = TrainConfig.preset("td3", net_arch=[32, 32], tau=0.1)
    ours = TD3(cfg, 3, 1, seed=5)
    sb3 = SB3TD3("MlpPolicy", gym.make("Pendulum-v1"), learning_rate=cfg.learning_rate, gamma=cfg.gamma, tau=cfg.tau,
                 policy_delay=cfg.policy_delay, target_policy_noise=cfg.target_policy_noise,
                 target_noise_clip=cfg.target_noise_clip, policy_kwargs=dict(net_arch=cfg.net_arch), device="cpu")
    pol = sb3.policy
    pairs = [(pol.actor.mu, ours.actor), (pol.actor_target.mu, ours.actor_target),
             *zip(pol.critic.q_networks, ours.critics), *zip(pol.critic_target.q_networks, ours.critic_targets)]
    with torch.no_grad():
        for theirs, mine in pairs:
            for t, m in zip(theirs.parameters(), mine.parameters(), strict=True):
                t.copy_(m)
    rng = np.random.default_rng(0)
    batches = [Batch(**_batch(rng, 64, 3, False)).to_torch() for _ in range(6)]
    queue = iter(batches)
    sb3.replay_buffer.sample = lambda *_, **__: (lambda b: ReplayBufferSamples(
        b.obs.clone(), b.action.clone(), b.next_obs.clone(), b.done.clone(), b.reward.clone()))(next(queue))
    sb3.set_logger(configure(None, []))
    torch.manual_seed(5)
    sb3.train(gradient_steps=len(batches), batch_size=64)
    for b in batches:
        ours.update(b)
    for theirs, mine in pairs:
        for t, m in zip(theirs.parameters(), mine.parameters(), strict=True):
            torch.testing.assert_close(m, t.detach(), rtol=1e-4, atol=1e-6)


@FUSED
@pytest.mark.parametrize("precision", [None, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("concurrent,weights", [(False, False), (False, True), (True, True)])
def test_td3_critics_on_two_threads_give_the_bits_of_one(concurrent, weights, precision, fused):
    """`split_critics` (the default) runs the second critic's target value, forward and backward pass on
    the second thread (and, in SB3's order, the actor's forward pass beside the target actor's): every
    parameter, target and Adam state after N steps (policy delay, smoothing noise, IS weights) is bitwise
    that of the same learner on one thread, in float32 (the fused step's native GEMM tasks) and in bfloat16
    (its torch GEMMs on the Python second thread)."""
    cfg = TrainConfig.preset("td3", net_arch=[48, 32], concurrent_updates=concurrent)
    split, single = (TD3(cfg, 3, 1, seed=4, fused=fused, precision=precision),
                     TD3(cfg, 3, 1, seed=4, fused=fused, precision=precision))
    single.split_critics = False
    assert split.split_critics and split._grad_thread is not None
    rng = np.random.default_rng(5)
    for _ in range(7):
        batch = Batch(**_batch(rng, 32, 3, False, weights=weights)).to_torch()
        (loss_a, td_a), (loss_b, td_b) = split.update(batch), single.update(batch)
        assert torch.equal(loss_a, loss_b) and torch.equal(td_a, td_b)
    nets = ("actor", "actor_target", "critics", "critic_targets")
    for name in nets:
        mine, theirs = getattr(split, name), getattr(single, name)
        for a, b in zip(mine if isinstance(mine, list) else [mine], theirs if isinstance(theirs, list) else [theirs],
                        strict=True):
            for p, q in zip(a.parameters(), b.parameters(), strict=True):
                assert torch.equal(p, q), name
    for adam in ("actor_optimizer", "critic_optimizer"):
        mine, theirs = getattr(split, adam).state_dict()["state"], getattr(single, adam).state_dict()["state"]
        assert mine.keys() == theirs.keys()
        for k in mine:
            for key in ("step", "exp_avg", "exp_avg_sq"):
                assert torch.equal(mine[k][key], theirs[k][key]), (adam, k, key)


def test_td3_state_round_trips_with_its_delay_phase_and_noise_generator():
    cfg = TrainConfig.preset("td3", net_arch=[8])
    rng = np.random.default_rng(1)
    batches = [Batch(**_batch(rng, 16, 3, False)).to_torch() for _ in range(4)]
    a = TD3(cfg, 3, 1, seed=0)
    a.update(batches[0])  # an odd number of steps: the next one updates the actor
    state = copy.deepcopy(a.state_dict())  # as a checkpoint holds it (torch's optimizer loads share tensors)
    assert {"critic2", "critic2_target", "noise_generator"} <= set(state)
    b = TD3(cfg, 3, 1, seed=7)
    b.load_state_dict(state)
    for batch in batches[1:]:
        assert torch.equal(a.update(batch)[0], b.update(batch)[0])
    for net in ("actor", "actor_target"):
        for p, q in zip(getattr(a, net).parameters(), getattr(b, net).parameters(), strict=True):
            assert torch.equal(p, q)
    for p, q in zip(a.critic_targets[1].parameters(), b.critic_targets[1].parameters(), strict=True):
        assert torch.equal(p, q)
    out = a.deterministic(np.random.default_rng(0).normal(size=(5, 3)) * 100)
    assert out.shape == (5, 1) and np.all(np.abs(out) <= 1)


def test_ddpg_is_td3_with_one_critic_no_delay_and_no_smoothing():
    ddpg = DDPG(TrainConfig.preset("ddpg", net_arch=[8]), 3, 1, seed=0)
    assert (ddpg.n_critics, ddpg.policy_delay, ddpg.target_noise) == (1, 1, 0.0)
    assert set(ddpg.state_dict()) == {"actor", "critic", "actor_target", "critic_target", "actor_optimizer",
                                      "critic_optimizer", "updates"}  # DDPG's checkpoint format is unchanged


def test_lean_adam_matches_torch_adam_and_round_trips():
    """LeanAdam steps the fused Adam kernel directly: same weights as torch.optim.Adam(fused=True)
    driven through .grad, and its state_dict resumes a run exactly."""
    from pearl_fpga.algos.common import LeanAdam

    rng = np.random.default_rng(3)
    init = [torch.tensor(rng.normal(size=s).astype(np.float32)) for s in ((7, 5), (7,), (2, 7))]
    grads = [[torch.tensor(rng.normal(size=p.shape).astype(np.float32)) for p in init] for _ in range(6)]
    ref = [p.clone().requires_grad_(True) for p in init]
    ref_opt = torch.optim.Adam(ref, lr=3e-3, fused=True)
    lean = LeanAdam([p.clone().requires_grad_(True) for p in init], lr=3e-3)
    for step, g in enumerate(grads):
        for p, gi in zip(ref, g, strict=True):
            p.grad = gi.clone()
        ref_opt.step()
        with torch.no_grad():
            lean.step([gi.clone() for gi in g])
        if step == 2:  # checkpoint and resume into a fresh optimizer over copied parameters
            resumed = LeanAdam([p.detach().clone().requires_grad_(True) for p in lean.params], lr=3e-3)
            resumed.optimizer.load_state_dict(lean.optimizer.state_dict())
            resumed.reset_cache()
            lean = resumed
    for p, r in zip(lean.params, ref, strict=True):
        assert torch.equal(p, r)
    assert set(lean.optimizer.state_dict()["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}


@pytest.mark.parametrize("max_norm", [0.05, 1e3])
def test_clip_grad_norm_matches_torch(max_norm):
    from pearl_fpga.algos.common import clip_grad_norm

    rng = np.random.default_rng(4)
    grads = [torch.tensor(rng.normal(size=s).astype(np.float32)) for s in ((16, 4), (16,), (3, 16))]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    clip_grad_norm(grads, max_norm)
    for p, g in zip(params, grads, strict=True):
        torch.testing.assert_close(g, p.grad, rtol=1e-6, atol=0)


@pytest.mark.parametrize("tanh_head", [False, True])
def test_module_free_forward_equals_the_module(tanh_head):
    from pearl_fpga.algos.common import forward, linear_layers, mlp

    torch.manual_seed(0)
    net = mlp(5, [32, 24], 3, tanh_head=tanh_head)
    x = torch.randn(17, 5)
    assert torch.equal(forward(linear_layers(net), x, tanh_head=tanh_head), net(x))


def test_subnormals_are_flushed_during_a_step_and_the_mode_is_restored():
    """A trained learner's Adam second moments hold subnormals, and each operation on one is slow on
    many x86 CPUs: the learner flushes them during its step (config.flush_subnormals), on every thread
    it computes on, and leaves the caller's mode as it was."""
    import threading

    from pearl_fpga.algos.common import subnormals_flushed

    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)

    def flushing() -> bool:
        return bool(tiny * np.float32(1.0) == 0.0)

    assert not flushing()
    with subnormals_flushed(True):
        assert flushing()
        with subnormals_flushed(True):
            assert flushing()
        assert flushing()
    assert not flushing()
    with subnormals_flushed(False):
        assert not flushing()

    sub = float(np.finfo(np.float32).tiny) / 8  # a subnormal second moment
    for algo_name, flush in [("dqn", True), ("dqn", False), ("ddpg", True), ("ddpg", False)]:
        cfg = TrainConfig.preset(algo_name, net_arch=[8], flush_subnormals=flush)
        discrete = algo_name == "dqn"
        algo = DQN(cfg, 4, 2, seed=0) if discrete else DDPG(cfg, 4, 1, seed=0)
        data = _batch(np.random.default_rng(0), 16, 4, discrete)
        algo.update(Batch(**data).to_torch(discrete=discrete))
        opts = [algo.optimizer] if discrete else [algo.actor_optimizer, algo.critic_optimizer]
        seen_threads: list[bool] = []
        if not discrete:  # the actor's half: the fused step's (a CPU learner, the native module built) or torch's
            owner, name = (algo._fused, "actor_grads") if algo._fused is not None else (algo, "_actor_grads")
            inner = getattr(owner, name)
            setattr(owner, name, lambda *args, inner=inner: (seen_threads.append(flushing()), inner(*args))[1])
        for opt in opts:
            for state in opt.state.values():
                state["exp_avg_sq"].fill_(sub)
                state["exp_avg"].zero_()
        algo.update(Batch(**dict(data, reward=np.zeros(16, np.float32))).to_torch(discrete=discrete))
        v = torch.cat([s["exp_avg_sq"].flatten() for opt in opts for s in opt.state.values()]).numpy()
        decayed = (v > 0) & (v < np.finfo(np.float32).tiny)
        assert decayed.any() != flush, f"{algo_name} flush={flush}: subnormal moments after a step: {decayed.sum()}"
        assert not flushing()
        if not discrete and cfg.concurrent_updates:
            assert seen_threads == [flush]  # the actor's half on its own thread flushes too
