"""ShardedReplay over shards in this process: global proportional sampling, global importance weights,
priority routing, restarts counted, checkpoints. (tests/test_ray_engine.py runs the same class on Ray.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError
from pearl_fpga.replay.sharded import ReplayShard, ShardedReplay, local_shards
from pearl_fpga.replay.transitions import Transitions

OBS_DIM = 3
BETA_STEPS = 1000  # the importance exponent's annealing horizon, the learner's and each shard's


def make(n_shards: int, per: bool = True, capacity: int = 64, seed: int = 0) -> tuple[ShardedReplay, list[ReplayShard]]:
    cfg = TrainConfig.preset("dqn", buffer_size=capacity * n_shards, batch_size=16, per=per, per_alpha=1.0, per_eps=1e-6)
    shard_cfg = TrainConfig.from_dict({**cfg.to_dict(), "buffer_size": capacity})
    shards = [ReplayShard(shard_cfg, OBS_DIM, (), True, seed + 10 * i, beta_steps=BETA_STEPS)
              for i in range(n_shards)]
    submit, gather = local_shards(shards)
    return ShardedReplay(n_shards, capacity, cfg, submit, gather, seed, beta_steps=BETA_STEPS), shards


def transitions(start: int, n: int) -> Transitions:
    """Transitions whose obs[0] is a unique id."""
    ids = np.arange(start, start + n, dtype=np.float32)
    obs = np.stack([ids, np.zeros(n, np.float32), np.ones(n, np.float32)], axis=1)
    return Transitions(obs=obs, action=np.zeros(n, np.int64), reward=ids.copy(), next_obs=obs + 0.5,
                       done=np.zeros(n, np.float32))


def fill(replay: ShardedReplay, shards: list[ReplayShard], per_shard: int) -> None:
    for i, shard in enumerate(shards):
        replay.observe(i, shard.add(transitions(1000 * i, per_shard)))


def test_sampling_is_globally_proportional_across_shards():
    replay, shards = make(3)
    fill(replay, shards, 8)
    # shard priorities differ in level and within each shard: p = (|td| + eps) ** 1
    for i, shard in enumerate(shards):
        shard.update(shard.incarnation, np.arange(8), (i + 1) * np.arange(1, 9, dtype=np.float64))
    replay.refresh()
    p = np.concatenate([(i + 1) * np.arange(1, 9, dtype=np.float64) for i in range(3)])
    counts = np.zeros(24)
    for _ in range(400):
        batch = replay.sample(16)
        ids = batch.obs[:, 0].astype(int)
        np.add.at(counts, (ids // 1000) * 8 + ids % 1000, 1)
    expected = p / p.sum() * counts.sum()
    assert chisquare(counts, expected).pvalue > 1e-3


def test_importance_weights_use_global_probabilities():
    replay, shards = make(2)
    fill(replay, shards, 4)
    shards[0].update(shards[0].incarnation, np.arange(4), np.array([1.0, 1.0, 1.0, 1.0]))
    shards[1].update(shards[1].incarnation, np.arange(4), np.array([4.0, 4.0, 4.0, 4.0]))
    replay.refresh()
    batch = replay.sample(64)
    shard = batch.indices // replay.stride
    p = np.where(shard == 0, 1.0, 4.0) + 1e-6
    np.testing.assert_allclose(batch.weights, (p.min() / p) ** replay.beta_initial, rtol=1e-4)
    assert set(np.unique(shard)) == {0, 1}


def test_one_shard_weights_match_the_single_buffer():
    replay, shards = make(1)
    fill(replay, shards, 10)
    shards[0].update(shards[0].incarnation, np.arange(10), np.linspace(0.1, 3.0, 10))
    replay.refresh()
    batch = replay.sample(32)
    p = np.linspace(0.1, 3.0, 10)[batch.indices] + 1e-6
    np.testing.assert_allclose(batch.weights, (p.min() / p) ** replay.beta_initial, rtol=1e-4)


def test_priority_updates_reach_the_shard_that_produced_the_index():
    replay, shards = make(2)
    fill(replay, shards, 8)
    batch = replay.sample(16)
    replay.update_priorities(batch.indices, np.full(16, 9.0))
    replay.flush()
    for i, shard in enumerate(shards):
        mine = np.unique(batch.indices[batch.indices // replay.stride == i] % replay.stride)
        words = shard.replay.buffer.sampler.priorities()[:8]
        np.testing.assert_allclose(words[mine], 9.0 + 1e-6, rtol=1e-4)
        others = np.setdiff1d(np.arange(8), mine)
        np.testing.assert_allclose(words[others], 1.0, rtol=1e-4)  # new transitions' max priority


def test_a_restarted_shard_is_counted_and_its_old_updates_are_dropped():
    replay, shards = make(2)
    fill(replay, shards, 8)
    batch = replay.sample(16)
    lost_size = len(shards[1].replay)
    cfg = shards[1].replay.buffer  # the restart: a fresh shard in the same slot (as Ray re-runs __init__)
    shards[1] = ReplayShard(TrainConfig.preset("dqn", buffer_size=64, batch_size=16, per=True), OBS_DIM, (), True, 99,
                            beta_steps=BETA_STEPS)
    assert cfg is not shards[1].replay.buffer
    shards[1].add(transitions(5000, 4))
    replay.update_priorities(batch.indices, np.full(16, 2.0))
    replay.flush()
    assert replay.report() == {"shard_restarts": 1, "transitions_lost": lost_size}
    assert replay.dropped_updates == int((batch.indices // replay.stride == 1).sum())
    assert len(replay) == 8 + 4
    ids = replay.sample(16).obs[:, 0]
    assert np.all((ids < 1000) | (ids >= 5000))  # nothing of the lost incarnation comes back


def test_uniform_shards_sample_uniformly_without_weights():
    replay, shards = make(2, per=False)
    fill(replay, shards, 4)
    shards[1].add(transitions(1004, 12))  # shard 1 holds 16, shard 0 holds 4
    replay.refresh()
    counts = np.zeros(2)
    for _ in range(200):
        batch = replay.sample(20)
        assert batch.weights is None
        np.add.at(counts, batch.indices // replay.stride, 1)
    assert chisquare(counts, np.array([4, 16]) / 20 * counts.sum()).pvalue > 1e-3


def test_checkpoint_round_trip_and_shard_count_mismatch():
    replay, shards = make(2)
    fill(replay, shards, 8)
    replay.sample(8)
    state = replay.state_dict()
    again, _ = make(2, seed=5)
    again.load_state_dict(state)
    assert len(again) == 16 and again.sample_calls == replay.sample_calls
    np.testing.assert_array_equal(again.sample(8).obs, replay.sample(8).obs)
    three, _ = make(3)
    with pytest.raises(CheckpointError, match="2 shards, this run has 3"):
        three.load_state_dict(state)


def test_empty_shards_refuse_to_sample():
    replay, _ = make(2)
    with pytest.raises(ValueError, match="every replay shard is empty"):
        replay.sample(4)


def test_engine_ray_without_the_extra_names_it(monkeypatch):
    import sys

    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.trainer import Trainer

    monkeypatch.setitem(sys.modules, "ray", None)  # as if the ray extra were not installed
    with pytest.raises(BackendUnavailable, match=r"pip install 'pearl_fpga\[ray\]'"):
        Trainer("dqn", engine="ray", placement="cpu")


def test_a_late_reply_from_before_a_restart_is_not_another_restart():
    replay, shards = make(1)
    old = shards[0].add(transitions(0, 8))
    replay.observe(0, old)
    shards[0] = ReplayShard(TrainConfig.preset("dqn", buffer_size=64, batch_size=16, per=True), OBS_DIM, (), True, 7,
                            beta_steps=BETA_STEPS)
    replay.observe(0, shards[0].status())
    replay.observe(0, old)  # e.g. an actor's insert reply that was on its way
    assert replay.report() == {"shard_restarts": 1, "transitions_lost": 8}
    assert len(replay) == 0
