"""The Ray transport's cost, measured for the planner's Ray model (planner.ray_plan): a replay shard
through Ray vs in-process, fitted to a cost per call and per byte. `pearl-fpga bench ray` reports it
too. Each function expects a connected Ray (runtime.engines.ray_cluster.connect)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.replay.sharded import ReplayShard
from pearl_fpga.replay.transitions import Transitions
from pearl_fpga.runtime.engines.ray_cluster import import_ray
from pearl_fpga.runtime.schedule import allowed_gradient_steps

OBS_DIM = 4


def transitions(n: int, rng: np.random.Generator) -> Transitions:
    obs = rng.normal(size=(n, OBS_DIM)).astype(np.float32)
    return Transitions(obs=obs, action=rng.integers(0, 2, n), reward=np.ones(n, np.float32), next_obs=obs + 0.01,
                       done=np.zeros(n, np.float32))


def transition_bytes(n: int) -> int:
    """Bytes of n transitions of the measured kind (CartPole-sized)."""
    return sum(v.nbytes for v in transitions(n, np.random.default_rng(0)).arrays())


def shard_config(capacity: int) -> TrainConfig:
    return TrainConfig.preset("dqn", buffer_size=capacity, batch_size=1, per=True)


def shard_throughput(batches: Sequence[int], capacity: int = 65_536, budget_s: float = 0.3,
                     seed: int = 0) -> list[dict[str, Any]]:
    """Transitions/s of insert and of sample+update, in-process and through a Ray actor, per batch size.
    Each Ray call is waited for (the per-call cost a learner pays for a synchronous call)."""
    ray = import_ray()
    rng = np.random.default_rng(seed)
    cfg = shard_config(capacity)
    beta_steps = allowed_gradient_steps(cfg, cfg.total_steps)
    local = ReplayShard(cfg, OBS_DIM, (), True, seed, beta_steps=beta_steps)
    remote = ray.remote(ReplayShard).options(num_cpus=0).remote(cfg, OBS_DIM, (), True, seed, beta_steps=beta_steps)
    fill = transitions(4096, rng)
    for _ in range(capacity // 4096):
        local.add(fill)
    ray.get([remote.add.remote(fill) for _ in range(capacity // 4096)])
    rows = []
    for b in batches:
        data = transitions(b, rng)
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
