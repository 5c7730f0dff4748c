"""Measurements of the Ray engine's costs, for `pearl-fpga bench ray` and the planner's Ray model:
a replay shard through Ray vs in-process, env-actor scaling, weight broadcast, recovery from faults.
Each function expects a connected Ray (runtime.engines.ray_cluster.connect)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.runtime.engines.ray_cluster import import_ray
from pearl_fpga.runtime.engines.sharded_replay import ReplayShard

OBS_DIM = 4


def _transitions(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    obs = rng.normal(size=(n, OBS_DIM)).astype(np.float32)
    return {"obs": obs, "action": rng.integers(0, 2, n), "reward": np.ones(n, np.float32),
            "next_obs": obs + 0.01, "done": np.zeros(n, np.float32)}


def transition_bytes(n: int) -> int:
    """Bytes of n transitions of the measured kind (CartPole-sized)."""
    return sum(v.nbytes for v in _transitions(n, np.random.default_rng(0)).values())


def _shard_config(capacity: int) -> TrainConfig:
    return TrainConfig.preset("dqn", buffer_size=capacity, batch_size=1, per=True)


def shard_throughput(batches: Sequence[int], capacity: int = 65_536, budget_s: float = 0.3,
                     seed: int = 0) -> list[dict[str, Any]]:
    """Transitions/s of insert and of sample+update, in-process and through a Ray actor, per batch size.
    Each Ray call is waited for (the per-call cost a learner pays for a synchronous call)."""
    ray = import_ray()
    rng = np.random.default_rng(seed)
    cfg = _shard_config(capacity)
    local = ReplayShard(cfg, OBS_DIM, (), True, seed)
    remote = ray.remote(ReplayShard).options(num_cpus=0).remote(cfg, OBS_DIM, (), True, seed)
    fill = _transitions(4096, rng)
    for _ in range(capacity // 4096):
        local.add(fill)
    ray.get([remote.add.remote(fill) for _ in range(capacity // 4096)])
    rows = []
    for b in batches:
        data = _transitions(b, rng)
        td = rng.random(b)
        calls = int(max(5, min(2000, 200_000 // b)))

        def timed(fn: Any) -> float:
            t0 = time.perf_counter()
            done = 0
            while done < calls and (time.perf_counter() - t0 < budget_s or done < 5):
                fn()
                done += 1
            return done * b / (time.perf_counter() - t0)

        inc_local, inc_remote = local.incarnation, ray.get(remote.status.remote())["incarnation"]

        def local_cycle() -> None:
            out = local.sample(b)
            local.update(inc_local, out["batch"].indices, td)

        def remote_cycle() -> None:
            out = ray.get(remote.sample.remote(b))
            ray.get(remote.update.remote(inc_remote, out["batch"].indices, td))

        row = {"batch": b, "bytes": transition_bytes(b),
               "insert_local": timed(lambda: local.add(data)),
               "insert_ray": timed(lambda: ray.get(remote.add.remote(data))),
               "sample_update_local": timed(local_cycle), "sample_update_ray": timed(remote_cycle)}
        row["insert_ratio"] = row["insert_ray"] / row["insert_local"]
        row["sample_update_ratio"] = row["sample_update_ray"] / row["sample_update_local"]
        rows.append(row)
    ray.kill(remote)
    return rows


def transport_cost(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per-call and per-byte cost of a Ray insert, fitted (least squares) to the extra time per call
    over the in-process insert: extra(b) = per_call + per_byte * bytes(b)."""
    extra = np.array([r["batch"] / r["insert_ray"] - r["batch"] / r["insert_local"] for r in rows])
    size = np.array([r["bytes"] for r in rows], dtype=np.float64)
    a = np.stack([np.ones_like(size), size], axis=1)
    (per_call, per_byte), *_ = np.linalg.lstsq(a, extra, rcond=None)
    return {"per_call_s": float(max(per_call, 0.0)), "per_byte_s": float(max(per_byte, 0.0))}


def first_batch_at(rows: list[dict[str, Any]], key: str, fraction: float = 0.9) -> int | None:
    """Smallest measured batch at which Ray reaches `fraction` of in-process throughput."""
    return next((r["batch"] for r in rows if r[key] >= fraction), None)


def _actors(n: int, env_id: str, cpus: float, seed: int) -> tuple[list[Any], Any]:
    from pearl_fpga.algos.common import mlp
    from pearl_fpga.runtime.engines.env_actor import EnvActor

    ray = import_ray()
    cfg = TrainConfig.preset("dqn", env_id=env_id, learning_starts=0, exploration_fraction=0.0, buffer_size=400_000)
    shard = ray.remote(ReplayShard).options(num_cpus=0).remote(
        TrainConfig.from_dict({**cfg.to_dict(), "per": False}), OBS_DIM, (), True, seed)
    spec = {"config": cfg.to_dict(), "placement": "cpu", "calibration": np.zeros((1, OBS_DIM), np.float32)}
    actors = [ray.remote(EnvActor).options(num_cpus=cpus).remote(i, {**spec, "seed": seed + i}, shard) for i in range(n)]
    weights = {k: v.detach() for k, v in mlp(OBS_DIM, cfg.net_arch, 2, tanh_head=False).state_dict().items()}
    ray.get([a.sync.remote([ray.put(weights)], 0) for a in actors])
    return actors, shard


def actor_scaling(counts: Sequence[int], env_id: str, seconds: float = 3.0, chunk: int = 256,
                  seed: int = 0) -> list[dict[str, Any]]:
    """Env steps/s of n env actors kept busy for `seconds` (each call: `chunk` steps + one shard insert)."""
    ray = import_ray()
    out = []
    for n in counts:
        actors, shard = _actors(n, env_id, cpus=min(1.0, 1.0 / max(counts)), seed=seed)
        ray.get([a.run.remote(chunk, 0, [None], 0) for a in actors])  # warm-up: imports, first episodes
        pending = {a.run.remote(chunk, 0, [None], 0): a for a in actors}
        steps, inside, t0 = 0, 0.0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            ready, _ = ray.wait(list(pending), num_returns=1)
            actor = pending.pop(ready[0])
            msg = ray.get(ready[0])
            steps += msg["n"]
            inside += sum(msg["seconds"].values())
            pending[actor.run.remote(chunk, 0, [None], 0)] = actor
        wall = time.perf_counter() - t0
        ray.get(list(pending))
        out.append({"actors": n, "env_steps_per_s": steps / wall, "calls": steps // chunk,
                    "overhead_fraction": max(wall * n - inside, 0.0) / inside if inside else None})
        for a in actors:
            ray.kill(a)
        ray.kill(shard)
    return out


def call_overhead(env_id: str, chunks: Sequence[int], seed: int = 0, calls: int = 20) -> list[dict[str, Any]]:
    """One actor, per grant size: the Ray overhead of a grant (the call itself: wall time minus the time
    the method ran, plus the insert call into the shard) against the env+act time of its data."""
    ray = import_ray()
    actors, shard = _actors(1, env_id, cpus=0.5, seed=seed)
    out = []
    for chunk in chunks:
        ray.get(actors[0].run.remote(chunk, 0, [None], 0))
        walls, env, ray_cost = [], [], []
        for _ in range(calls):
            t0 = time.perf_counter()
            msg = ray.get(actors[0].run.remote(chunk, 0, [None], 0))
            walls.append(time.perf_counter() - t0)
            env.append(msg["seconds"].get("env_step", 0.0) + msg["seconds"].get("act", 0.0))
            ray_cost.append(walls[-1] - msg["elapsed"] + msg["seconds"].get("replay_insert", 0.0))
        busy, cost = float(np.median(env)), float(np.median(ray_cost))
        out.append({"chunk": chunk, "wall_s": float(np.median(walls)), "env_act_s": busy, "ray_s": cost,
                    "overhead_vs_env": cost / busy})
    ray.kill(actors[0])
    ray.kill(shard)
    return out


def broadcast_times(nets: dict[str, tuple[int, list[int], int]], actors: int = 2, repeats: int = 20,
                    seed: int = 0) -> list[dict[str, Any]]:
    """Seconds from `ray.put` of new weights until every actor has loaded them, per network."""
    from pearl_fpga.algos.common import mlp

    ray = import_ray()
    out = []
    for name, (obs_dim, hidden, act_dim) in nets.items():
        from pearl_fpga.runtime.engines.env_actor import EnvActor

        env_id = "CartPole-v1" if act_dim == 2 else "Pendulum-v1"
        cfg = TrainConfig.preset("dqn" if act_dim == 2 else "ddpg", env_id=env_id, net_arch=hidden)
        spec = {"config": cfg.to_dict(), "placement": "cpu", "calibration": np.zeros((1, obs_dim), np.float32)}
        group = [ray.remote(EnvActor).options(num_cpus=0).remote(i, {**spec, "seed": seed + i}, None)
                 for i in range(actors)]
        module = mlp(obs_dim, hidden, act_dim, tanh_head=act_dim != 2)
        ray.get([a.sync.remote([ray.put(module.state_dict())], 0) for a in group])  # the actors are up
        times = []
        for version in range(1, repeats + 1):
            weights = {k: v.detach().clone() for k, v in module.state_dict().items()}
            t0 = time.perf_counter()
            ref = ray.put(weights)
            ray.get([a.sync.remote([ref], version) for a in group])
            times.append(time.perf_counter() - t0)
        nbytes = sum(v.numel() * v.element_size() for v in module.state_dict().values())
        out.append({"net": name, "bytes": nbytes, "actors": actors, "median_s": float(np.median(times)),
                    "max_s": float(np.max(times))})
        for a in group:
            ray.kill(a)
    return out


def recovery_times(seed: int = 0, fill: int = 20_000) -> dict[str, Any]:
    """Seconds until a killed env actor answers again, and until a killed replay shard does (empty: what
    it held is lost and is reported)."""
    from pearl_fpga.runtime.engines.env_actor import EnvActor

    ray = import_ray()
    cfg = TrainConfig.preset("dqn", learning_starts=0)
    spec = {"config": cfg.to_dict(), "placement": "cpu", "calibration": np.zeros((1, OBS_DIM), np.float32), "seed": seed}
    actor = ray.remote(max_restarts=-1, max_task_retries=0)(EnvActor).options(num_cpus=0).remote(0, spec, None)
    old_pid = ray.get(actor.ping.remote())
    t0 = time.perf_counter()
    ray.kill(actor, no_restart=False)
    while True:  # until a new process answers
        try:
            if ray.get(actor.ping.remote(), timeout=30) != old_pid:
                break
        except ray.exceptions.RayActorError:
            pass
        time.sleep(0.01)
    actor_s = time.perf_counter() - t0
    ray.kill(actor)
    shard = ray.remote(max_restarts=-1, max_task_retries=-1)(ReplayShard).options(num_cpus=0).remote(
        _shard_config(65_536), OBS_DIM, (), True, seed)
    before = ray.get(shard.add.remote(_transitions(fill, np.random.default_rng(seed))))
    t0 = time.perf_counter()
    ray.kill(shard, no_restart=False)
    while True:  # until the restarted shard (a new incarnation) answers
        after = ray.get(shard.status.remote(), timeout=60)
        if after["incarnation"] != before["incarnation"] or time.perf_counter() - t0 > 60:
            break
        time.sleep(0.01)
    shard_s = time.perf_counter() - t0
    ray.kill(shard)
    return {"actor_s": actor_s, "shard_s": shard_s, "shard_lost": int(before["size"]),
            "shard_restarted": after["incarnation"] != before["incarnation"]}
