"""The ray engine on a 2-node Ray cluster simulated on this host (ray.cluster_utils.Cluster, loopback
only, usage stats off), one cluster for the whole module."""

from __future__ import annotations

import os
import subprocess
import sys
import time

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray's switch for loopback-only node addresses

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from pearl_fpga.config import TrainConfig  # noqa: E402
from pearl_fpga.errors import EngineError  # noqa: E402
from pearl_fpga.runtime.engines.ray_cluster import check_reachable  # noqa: E402
from pearl_fpga.trainer import Trainer  # noqa: E402

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster():
    # the head has no CPU for actors, so everything lands on the worker node (and a removed node matters)
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1"})
    worker = c.add_node(num_cpus=2, node_ip_address="127.0.0.1")
    ray.init(address=c.address, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield c, worker
    ray.shutdown()
    c.shutdown()


def dqn_config(**overrides) -> TrainConfig:
    base = dict(total_steps=5000, learning_starts=500, eval_freq=0, per=True, actors=2, replay_shards=2,
                actor_resources={"CPU": 0.5}, shard_resources={"CPU": 0.25}, engine="ray")
    return TrainConfig.preset("dqn", **{**base, **overrides})


def shard_rows(trainer: Trainer) -> np.ndarray:
    rows = [np.concatenate([s["replay"]["buffer"]["obs"], s["replay"]["buffer"]["next_obs"],
                            s["replay"]["buffer"]["action"][:, None].astype(np.float32)], axis=1)
            for s in trainer.replay.state_dict()["shards"]]
    return np.concatenate(rows)


def test_dqn_learns_and_every_transition_arrives_exactly_once(cluster):
    with Trainer("dqn", config=dqn_config(), placement="cpu", seed=0) as trainer:
        stats = trainer.train(5000)
        assert stats.env_steps == 5000 and stats.grad_steps > 0
        returns = [r for _, r, _ in trainer.episode_log]
        assert np.mean(returns[-10:]) > 2 * np.mean(returns[:10])  # CartPole returns improve
        rows = shard_rows(trainer)
        assert len(rows) == 5000 == trainer.replay.inserted  # none lost, none twice
        assert len(np.unique(rows, axis=0)) == 5000
        sizes = [s["size"] for s in trainer.replay._status]
        assert min(sizes) > 0  # both shards were fed
        assert trainer.faults() == {"actor_restarts": 0, "shard_restarts": 0, "transitions_lost": 0,
                                    "nonfinite_dropped": 0}


def test_priorities_reach_the_right_shard_and_sampling_follows_them(cluster):
    from scipy.stats import chisquare

    with Trainer("dqn", config=dqn_config(total_steps=1200, learning_starts=1200), placement="cpu", seed=1) as trainer:
        trainer.train(1200)  # no gradient steps: every transition keeps priority 1
        replay = trainer.replay
        batch = replay.sample(64)
        shard = batch.indices // replay.stride
        replay.update_priorities(batch.indices, np.where(shard == 0, 20.0, 0.0))
        replay.flush()
        state = replay.state_dict()["shards"]
        for i in range(2):
            leaves = state[i]["replay"]["buffer"]["leaves"] / 65536.0  # Q16.16 words
            mine = np.unique(batch.indices[shard == i] % replay.stride)
            expected = (20.0 + 1e-6) ** 0.6 if i == 0 else 1e-6 ** 0.6
            np.testing.assert_allclose(leaves[mine], expected, rtol=1e-3, atol=2e-5)
        replay.refresh()
        totals = np.array([s["total"] for s in replay._status])
        counts = np.zeros(2)
        for _ in range(60):
            np.add.at(counts, replay.sample(64).indices // replay.stride, 1)
        assert chisquare(counts, totals / totals.sum() * counts.sum()).pvalue > 1e-3


def test_actors_compute_initial_priorities(cluster):
    cfg = dqn_config(total_steps=1200, learning_starts=1200, actor_priorities=True)
    with Trainer("dqn", config=cfg, placement="cpu", seed=4) as trainer:
        trainer.train(1200)  # no gradient step: every priority in replay is an actor's
        leaves = np.concatenate([s["replay"]["buffer"]["leaves"] for s in trainer.replay.state_dict()["shards"]])
    assert len(leaves[leaves > 0]) == 1200
    assert len(np.unique(leaves[leaves > 0])) > 100  # TD-error priorities, not the one max priority


def test_checkpoint_covers_every_shard_and_resumes(cluster, tmp_path):
    cfg = dqn_config(total_steps=1500, learning_starts=600)
    with Trainer("dqn", config=cfg, placement="cpu", seed=2, checkpoint_dir=tmp_path) as trainer:
        trainer.train(1000)
        sizes = [s["size"] for s in trainer.replay._status]
    with Trainer.load(tmp_path, engine="ray") as resumed:
        assert [s["size"] for s in resumed.replay._status] == sizes
        assert resumed.env_steps == 1000
        resumed.train(500)
        assert resumed.env_steps == 1500 and len(resumed.replay) == 1500


def test_missing_resources_are_named(cluster):
    with pytest.raises(EngineError, match=r"needs fpga 2 \(has 0\) for 2 env actors"):
        Trainer("dqn", config=dqn_config(actor_resources={"CPU": 0.5, "fpga": 1}), placement="cpu")
    with pytest.raises(EngineError, match="CPU 40"):
        Trainer("dqn", config=dqn_config(actors=80), placement="cpu")


def test_a_killed_actor_and_a_removed_node_leave_training_running(cluster):
    c, worker = cluster
    events: list[str] = []
    with Trainer("dqn", config=dqn_config(total_steps=6000), placement="cpu", seed=3) as trainer:
        spare = c.add_node(num_cpus=2, node_ip_address="127.0.0.1")  # after the shards were placed on `worker`
        def chaos(stats) -> None:
            if stats.env_steps >= 1500 and "kill" not in events:
                events.append("kill")
                ray.kill(trainer.engine.actors[0], no_restart=False)
            elif stats.env_steps >= 3000 and "remove" not in events:
                events.append("remove")
                c.remove_node(worker)

        stats = trainer.train(6000, progress=chaos, progress_interval=0.0)
        assert events == ["kill", "remove"]
        assert stats.env_steps == 6000
        faults = trainer.faults()
        assert faults["actor_restarts"] >= 1
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert worker.node_id not in alive and spare.node_id in alive
        # the shards lived on the removed node: Ray restarted them on the spare one, losses counted
        assert faults["shard_restarts"] >= 1 and faults["transitions_lost"] > 0
        assert len(trainer.replay) > 0


def test_unreachable_address_fails_fast():
    start = time.monotonic()
    with pytest.raises(EngineError, match="cannot reach the Ray cluster at 127.0.0.1:9"):
        check_reachable("127.0.0.1:9", timeout=2)
    with pytest.raises(EngineError, match="not host:port"):
        check_reachable("nowhere", timeout=2)
    assert time.monotonic() - start < 10


def test_cli_with_an_unreachable_address_says_so(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pearl_fpga.cli", "train", "--engine", "ray", "--ray-address",
                          "127.0.0.1:9", "--steps", "1000", "--logdir", str(tmp_path / "run"), "--no-tensorboard"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in out.stdout + out.stderr


def test_too_many_shards_for_the_capacity():
    with pytest.raises(ValueError, match="replay_shards=64 leaves 31 transitions per shard"):
        TrainConfig.preset("dqn", buffer_size=2000, replay_shards=64, engine="ray")


def test_bench_ray_runs_on_the_cluster(cluster, tmp_path):
    import json

    from pearl_fpga.cli import main

    out = tmp_path / "ray.json"
    assert main(["bench", "ray", "--batches", "16", "256", "--actors", "1", "2", "--seconds", "0.5",
                 "--json", str(out), "--plot", str(tmp_path / "ray.png")]) == 0
    record = json.loads(out.read_text())["results"]
    assert [r["batch"] for r in record["shard"]] == [16, 256]
    assert all(r["insert_ray"] > 0 and r["sample_update_ray"] > 0 for r in record["shard"])
    assert [r["actors"] for r in record["scaling"]] == [1, 2] and record["scaling"][0]["env_steps_per_s"] > 0
    assert record["recovery"]["shard_restarted"] and record["recovery"]["shard_lost"] > 0
    assert (tmp_path / "ray.png").stat().st_size > 0


def test_default_resources_are_sized_to_the_cluster():
    """Empty actor/shard resources (the defaults) share the cluster's CPUs: 2 actors and 1 shard fit a
    2-core host; explicit resources are kept for check_resources to judge."""
    from pearl_fpga.runtime.engines.ray_cluster import check_resources, size_to_cluster

    for actors, shards, cpus in [(2, 1, 2.0), (2, 2, 2.0), (4, 2, 2.0), (1, 1, 16.0), (8, 4, 3.0)]:
        actor, shard, note = size_to_cluster(actors, shards, {}, {}, {"CPU": cpus})
        assert actors * actor["CPU"] + shards * shard["CPU"] <= cpus
        assert actor["CPU"] <= 1.0 and shard["CPU"] == pytest.approx(int(actor["CPU"] * 50) / 100)
        check_resources([("env actors", actors, actor), ("replay shards", shards, shard)], {"CPU": cpus})
        assert f"sized to the cluster's {cpus:g} CPUs" in note and f"{actors} env actor{'s' if actors > 1 else ''} x" in note
    actor, shard, note = size_to_cluster(2, 1, {"CPU": 0.5, "fpga": 1.0}, {}, {"CPU": 2.0, "fpga": 2.0})
    assert actor == {"CPU": 0.5, "fpga": 1.0} and shard == {"CPU": 0.5} and "1 replay shard x 0.5 CPU" in note
    # explicit counts that cannot fit at a useful share still fail with the resource message
    actor, shard, _ = size_to_cluster(64, 1, {}, {}, {"CPU": 2.0})
    with pytest.raises(EngineError, match="lacks resources"):
        check_resources([("env actors", 64, actor), ("replay shards", 1, shard)], {"CPU": 2.0})


def test_td3_trains_on_the_cluster_with_kernel_actors(cluster):
    cfg = TrainConfig.preset("td3", total_steps=600, learning_starts=200, eval_freq=0, engine="ray", actors=1,
                             net_arch=[16, 16], batch_size=32, buffer_size=2000, weight_sync_interval=20,
                             actor_resources={"CPU": 0.5}, shard_resources={"CPU": 0.25})
    with Trainer("td3", config=cfg, placement="cpu-kernel", seed=0) as trainer:
        stats = trainer.train(600)
        assert stats.env_steps == 600 and trainer.grad_steps == trainer.algo.updates == 400  # one per env step after 200
        assert trainer.faults()["transitions_lost"] == 0


def test_the_defaults_train_on_a_two_cpu_cluster(cluster):
    """What `pearl-fpga train --engine ray` does with its defaults (2 actors, 1 shard, resources sized)."""
    cfg = TrainConfig.preset("dqn", total_steps=1500, learning_starts=500, eval_freq=0, engine="ray",
                             net_arch=[32, 32])
    assert cfg.actor_resources == {} and cfg.shard_resources == {} and (cfg.actors, cfg.replay_shards) == (2, 1)
    with Trainer("dqn", config=cfg, placement="cpu", seed=0) as trainer:
        assert trainer.train(1500).env_steps == 1500
        assert trainer.engine.sizing.startswith("sized to the cluster's 2 CPUs: 2 env actors x 0.8 CPU, 1 replay shard x 0.4 CPU")
