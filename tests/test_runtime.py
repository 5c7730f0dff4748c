"""Runtime parts: placement parsing, uniform replay, env group conventions and snapshots, actor
policies on the kernel, worker processes (UTD schedule, restart after a kill)."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import torch

from pearl_fpga.runtime.schedule import allowed_gradient_steps
from pearl_fpga.algos import mlp
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError, DivergenceError
from pearl_fpga.runtime.envs import EnvGroup
from pearl_fpga.runtime.placement import Placement, parse_placement
from pearl_fpga.algos.heads import EpsilonGreedy, GaussianNoise
from pearl_fpga.runtime.policy import ActorPolicy
from pearl_fpga.replay.manager import UniformReplay
from pearl_fpga.replay.transitions import Transitions
from pearl_fpga.trainer import Trainer

TINY = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
            batch_size=32, eval_freq=0)


# ---------------------------------------------------------------- placement
def test_parse_placement_forms():
    p = parse_placement("fpga-emu")
    assert (p.act, p.replay, p.learn) == ("fpga-emu", "fpga-emu", "cpu") and p.kernel_actor
    p = parse_placement("act=cpu-kernel, replay=cpu ,learn=cpu")
    assert p == Placement("cpu-kernel", "cpu", "cpu") and str(p) == "act=cpu-kernel,replay=cpu,learn=cpu"
    assert parse_placement("cuda:0").act == "cuda" and parse_placement("cuda").learn == "cuda"
    assert parse_placement({"act": "cpu"}) == Placement("cpu", "cpu", "cpu")
    assert parse_placement(str(p)) == p


@pytest.mark.parametrize("text,words", [
    ("tpu", "unknown device"), ("act=tpu", "cannot run task"), ("learn=fpga", "cannot run task"),
    ("foo=cpu", "unknown role"), ("act=cpu,act=cpu", "twice"), ("", "empty"), ("auto", "dispatcher"),
    ("act", "unknown device"),
])
def test_parse_placement_errors(text, words):
    with pytest.raises(ValueError, match=words):
        parse_placement(text)


# ---------------------------------------------------------------- replay
def test_uniform_replay_wraps_and_round_trips():
    r = UniformReplay(10, 2, (), True, seed=0)
    for i in range(3):
        n = 4
        r.add(Transitions(obs=np.full((n, 2), i, np.float32), action=np.arange(n), reward=np.full(n, i, np.float32),
                          next_obs=np.full((n, 2), i + 1, np.float32), done=np.zeros(n, np.float32)))
    assert len(r) == 10 and r.pos == 2
    assert r.reward[:2].tolist() == [2, 2]  # oldest entries overwritten first
    s = r.sample(64)
    assert s.obs.shape == (64, 2) and np.all(s.next_obs == s.obs + 1)
    other = UniformReplay(10, 2, (), True, seed=5)
    other.load_state_dict(r.state_dict())
    assert np.array_equal(other.sample(16).indices, r.sample(16).indices)
    with pytest.raises(CheckpointError, match="capacity"):
        UniformReplay(20, 2, (), True, seed=0).load_state_dict(r.state_dict())
    bad = r.state_dict()
    bad["obs"] = bad["obs"][:, :1]
    before = other.obs.copy()
    with pytest.raises(CheckpointError, match="obs"):
        other.load_state_dict(bad)
    assert np.array_equal(other.obs, before)


@pytest.mark.parametrize("size", [7, 5000])
def test_uniform_replay_sample_many_draws_what_sample_calls_draw(size):
    """A round's batches drawn at once are the batches (and leave the generator where) sample() calls do."""
    rng = np.random.default_rng(1)
    one, many = (UniformReplay(8192, 3, (), True, seed=4) for _ in range(2))
    data = Transitions(obs=rng.normal(size=(size, 3)).astype(np.float32), action=rng.integers(0, 2, size),
                       reward=rng.normal(size=size).astype(np.float32),
                       next_obs=rng.normal(size=(size, 3)).astype(np.float32),
                       done=(rng.random(size) < 0.1).astype(np.float32))
    for r in (one, many):
        r.add(data)
    stacked = many.sample_many(16, 5)
    parts = stacked.split(16)
    assert len(parts) == 5
    for part in parts:
        expected = one.sample(16)
        for name in ("obs", "action", "reward", "next_obs", "done", "indices"):
            assert np.array_equal(getattr(part, name), getattr(expected, name)), name
    assert one.rng.bit_generator.state == many.rng.bit_generator.state


def test_non_finite_rows_are_found_once_and_dropped_with_their_td_errors():
    from pearl_fpga.replay.transitions import nonfinite_rows

    n = 6
    t = Transitions(obs=np.zeros((n, 2), np.float32), action=np.arange(n), reward=np.ones(n, np.float32),
                    next_obs=np.zeros((n, 2), np.float32), done=np.zeros(n, np.float32))
    assert nonfinite_rows(t) is None and len(Transitions.concatenate([t, t])) == 2 * n
    t.next_obs[1, 0] = np.inf
    t.reward[4] = np.nan
    mask, field = nonfinite_rows(t)
    assert mask.tolist() == [False, True, False, False, True, False] and field == "reward"
    r = UniformReplay(10, 2, (), True, seed=0)
    r.on_nonfinite = "drop"
    kept, td = r._finite(t, np.arange(n, dtype=np.float64))
    assert len(kept) == 4 and td.tolist() == [0, 2, 3, 5] and r.dropped == 2
    r.on_nonfinite = "error"
    with pytest.raises(DivergenceError, match="non-finite reward"):
        r.add(t)
    assert len(r) == 0


def test_batch_split_views_torch_and_numpy():
    from pearl_fpga.replay import Batch

    b = Batch(obs=np.arange(20, dtype=np.float32).reshape(10, 2), action=np.arange(10), reward=np.arange(10.0),
              next_obs=np.zeros((10, 2), np.float32), done=np.zeros(10, np.float32), indices=np.arange(10) * 3)
    for batch in (b, b.to_torch(discrete=True)):
        parts = batch.split(4)
        assert [len(p) for p in parts] == [4, 4, 2] and all(p.weights is None for p in parts)
        assert np.asarray(parts[1].obs).tolist() == [[8, 9], [10, 11], [12, 13], [14, 15]]
        assert parts[2].indices.tolist() == [24, 27]


# ---------------------------------------------------------------- envs
def test_env_group_stores_true_final_obs_and_terminated_only():
    g = EnvGroup("CartPole-v1", 2, seed=0)
    rng = np.random.default_rng(0)
    seen_end = 0
    for _ in range(200):
        before = g.obs.copy()
        t, finished = g.step(rng.integers(0, 2, 2))
        assert np.array_equal(t.obs, before)
        for i in np.flatnonzero(t.done):
            seen_end += 1
            assert abs(t.next_obs[i][2]) > 0.2 or abs(t.next_obs[i][0]) > 2.4  # the failing state
            assert not np.array_equal(g.obs[i], t.next_obs[i])  # auto-reset obs differs
        assert len(finished) == int(t.done.sum())  # CartPole never truncates before 500 steps
    assert seen_end > 0


def test_env_snapshot_restores_trajectories():
    a = EnvGroup("Pendulum-v1", 2, seed=3)
    rng = np.random.default_rng(1)
    for _ in range(30):
        a.step(rng.uniform(-1, 1, (2, 1)))
    snap = a.snapshot()
    actions = rng.uniform(-1, 1, (250, 2, 1))  # crosses the 200-step time limit
    first = [a.step(x)[0].next_obs.copy() for x in actions]
    b = EnvGroup("Pendulum-v1", 2, seed=99)
    b.restore(snap)
    second = [b.step(x)[0].next_obs.copy() for x in actions]
    assert all(np.array_equal(x, y) for x, y in zip(first, second, strict=True))
    with pytest.raises(CheckpointError, match="env states"):
        EnvGroup("Pendulum-v1", 3, seed=0).restore(snap)


# ---------------------------------------------------------------- actor policies
def test_kernel_actor_matches_torch_greedy_and_resyncs():
    torch.manual_seed(0)
    net = mlp(4, [32, 32], 2)
    obs = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    head = EpsilonGreedy(TrainConfig.preset("dqn"), 2)
    kernel = ActorPolicy(net, parse_placement("fpga-emu"), head, obs)
    torch_actor = ActorPolicy(net, parse_placement("cpu"), head, obs)
    agree = np.mean(kernel.deterministic(obs) == torch_actor.deterministic(obs))
    assert agree >= 0.97
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(-1)
    kernel.load_weights(net.state_dict())
    torch_actor.load_weights(net.state_dict())
    assert np.mean(kernel.deterministic(obs) == torch_actor.deterministic(obs)) >= 0.97


def test_ddpg_kernel_actor_is_close_to_torch():
    torch.manual_seed(0)
    net = mlp(3, [32, 32], 1, tanh_head=True)
    obs = np.random.default_rng(0).uniform(-1, 1, (128, 3)).astype(np.float32)
    head = GaussianNoise(TrainConfig.preset("ddpg"), 1)
    k = ActorPolicy(net, parse_placement("cpu-kernel"), head, obs).deterministic(obs)
    t = ActorPolicy(net, parse_placement("cpu"), head, obs).deterministic(obs)
    assert k.shape == t.shape == (128, 1)
    assert np.max(np.abs(k - t)) < 0.02


def test_exploration_follows_sb3_schedule():
    cfg = TrainConfig.preset("dqn", learning_starts=10, total_steps=100, exploration_fraction=0.5)
    net = mlp(4, [8], 2)
    pol = ActorPolicy(net, parse_placement("cpu"), EpsilonGreedy(cfg, 2), np.zeros((4, 4), np.float32))
    obs = np.zeros((2000, 4), np.float32)
    greedy = pol.deterministic(obs[:1])[0]
    late = pol.explore(obs, 90, np.random.default_rng(0))
    assert np.mean(late == greedy) == pytest.approx(1 - cfg.exploration_final_eps / 2, abs=0.02)
    early = pol.explore(obs, 5, np.random.default_rng(0))
    assert np.mean(early == greedy) == pytest.approx(0.5, abs=0.05)


# ---------------------------------------------------------------- workers
def test_workers_honour_the_schedule_and_survive_a_kill():
    cfg = TrainConfig.preset("dqn", workers=1, **TINY)
    trainer = Trainer("dqn", placement="cpu-kernel", config=cfg, seed=0)
    killed: list[int] = []

    def kill_once(stats):
        if not killed and stats.env_steps >= 300 and trainer.engine.pids:
            pid = trainer.engine.pids[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    stats = trainer.train(1200, progress=kill_once, progress_interval=0.0)
    assert killed and trainer.worker_restarts >= 1
    assert 1200 <= trainer.env_steps < 1200 + cfg.n_envs
    assert trainer.grad_steps == allowed_gradient_steps(cfg, trainer.env_steps)
    assert len(trainer.replay) == trainer.env_steps
    assert stats.episodes > 0
    assert trainer.engine.pids == []  # workers stopped after train()


def test_td3_trains_with_a_worker_process_on_the_kernel_actor():
    cfg = TrainConfig.preset("td3", workers=1, **{**TINY, "train_freq": 1, "gradient_steps": 1})
    trainer = Trainer("td3", placement="cpu-kernel", config=cfg, seed=0)
    trainer.train(300)
    assert 300 <= trainer.env_steps < 300 + cfg.n_envs
    assert trainer.grad_steps == allowed_gradient_steps(cfg, trainer.env_steps) == trainer.algo.updates
    assert trainer.engine.pids == []


def test_board_placement_without_a_board_is_a_clear_error():
    from pearl_fpga.errors import BackendUnavailable

    with pytest.raises(BackendUnavailable, match="act=fpga.*pynq.*xrt"):
        Trainer("dqn", placement="act=fpga", config=TrainConfig.preset("dqn", **TINY), seed=0)
    with pytest.raises(BackendUnavailable, match="replay=fpga"):
        Trainer("dqn", placement="act=cpu,replay=fpga", config=TrainConfig.preset("dqn", per=True, **TINY), seed=0)


def test_fpga_sim_is_a_deprecated_alias_of_fpga_emu():
    import pytest

    from pearl_fpga.runtime.placement import parse_placement

    with pytest.warns(FutureWarning, match="'fpga-sim' is deprecated.*'fpga-emu'"):
        old = parse_placement("fpga-sim")
    assert old == parse_placement("fpga-emu")
    with pytest.warns(FutureWarning):
        assert parse_placement("act=fpga-sim,replay=cpu,learn=cpu").act == "fpga-emu"
