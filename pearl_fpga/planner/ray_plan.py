"""The planner's Ray dimension: given the cluster's nodes (ray.nodes()), the measured cost of the Ray
transport (per call and per byte, planner.ray_probe) and the per-task times of the one-host plan, choose
the engine, the env actors per node and the replay shard count.

Model (steady state, per env step; every figure it uses is measured, the composition is modelled):
- an env actor on one CPU delivers 1 / (env_step + act + grant cost) env steps/s, where a grant of
  RAY_MESSAGE_STEPS steps costs two Ray calls (the grant, the insert into a shard) plus its bytes;
- the learner (one CPU on the driver's node) needs learn + sample + update + weight sync per env step,
  plus, per gradient step, one Ray call per shard and the batch's bytes;
- the shards together do the replay work (insert + sample + update), each shard on its own CPU share;
- throughput = the least of the three; the one-host plan's prediction is the alternative.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pearl_fpga.config import TrainConfig
from pearl_fpga.runtime.schedule import RAY_MESSAGE_STEPS

LEARNER_CPUS = 1.0
SHARD_CPUS = 0.5


@dataclass
class RayPlan:
    engine: str  # "ray", or the one-host engine when Ray would be slower
    nodes: list[dict[str, Any]]
    actors_per_node: list[int]
    shards: int
    throughput: float  # predicted env steps/s with Ray
    one_host: float  # the one-host plan's predicted env steps/s
    bottleneck: str
    transport: dict[str, float]
    notes: list[str] = field(default_factory=list)

    @property
    def actors(self) -> int:
        return sum(self.actors_per_node)

    def as_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "actors": self.actors, "actors_per_node": self.actors_per_node,
                "replay_shards": self.shards, "throughput": self.throughput, "one_host_throughput": self.one_host,
                "bottleneck": self.bottleneck, "transport": self.transport, "nodes": self.nodes, "notes": self.notes}


def transition_bytes(obs_dim: int, action_dim: int, discrete: bool) -> int:
    """Bytes of one stored transition (float32 obs and next_obs, action, reward, done)."""
    return 4 * 2 * obs_dim + (8 if discrete else 4 * action_dim) + 4 + 4


def plan_ray(task_seconds: dict[str, float], config: TrainConfig, nodes: list[dict[str, Any]], driver_node: str | None,
             transport: dict[str, float], step_bytes: int, one_host: float, max_shards: int = 8) -> RayPlan:
    """Choose actors per node and the shard count that maximize predicted env steps/s (see the module)."""
    call, per_byte = transport["per_call_s"], transport["per_byte_s"]
    chunk = RAY_MESSAGE_STEPS
    actor_s = task_seconds.get("env_step", 0.0) + task_seconds.get("act", 0.0)
    actor_s += (2 * call + per_byte * step_bytes * chunk) / chunk
    ups = config.gradient_steps / config.train_freq
    replay_work = sum(task_seconds.get(k, 0.0) for k in ("replay_insert", "replay_sample", "replay_update"))
    learner_base = sum(task_seconds.get(k, 0.0) for k in ("learn", "weight_sync"))
    best: tuple[float, int, list[int], str] | None = None
    for shards in range(1, max_shards + 1):
        free = [max(node["resources"].get("CPU", 0.0) - (LEARNER_CPUS if node["node_id"] == driver_node else 0.0), 0.0)
                for node in nodes]
        for _ in range(shards):  # each shard on the node with the most room left
            i = max(range(len(nodes)), key=lambda j: free[j])
            free[i] -= SHARD_CPUS
        if min(free) < 0:
            break  # more shards do not fit either
        # one CPU per env actor; a node with only a share of a CPU left runs one actor on that share
        counts = [max(int(f), 1) if f >= 0.25 else 0 for f in free]
        if sum(counts) < 1:
            continue
        actors_rate = sum(min(c, f) for c, f in zip(counts, free, strict=True)) / actor_s
        learner_rate = 1.0 / max(learner_base + ups * (shards * call + per_byte * step_bytes * config.batch_size), 1e-12)
        shard_rate = shards * SHARD_CPUS / max(replay_work, 1e-12)
        rate, limit = min((actors_rate, "env actors"), (learner_rate, "learner"), (shard_rate, "replay shards"))
        if best is None or rate > best[0] * 1.02:
            best = (rate, shards, counts, limit)
    if best is None:
        return RayPlan("processes" if one_host else "inline", nodes, [0] * len(nodes), 0, 0.0, one_host,
                       "no CPU left for an env actor", transport,
                       ["the cluster has no CPU for an env actor besides the learner: add a node"])
    rate, shards, counts, limit = best
    engine = "ray" if rate > one_host else "processes"
    notes = [] if engine == "ray" else [
        f"Ray would deliver {rate:,.0f} env steps/s, under the one-host plan's {one_host:,.0f}: its transport costs "
        "more than the extra cores give; add nodes, or use envs that cost more per step"]
    return RayPlan(engine, nodes, counts, shards, rate, one_host, limit, transport, notes)
