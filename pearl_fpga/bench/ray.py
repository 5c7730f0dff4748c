"""`pearl-fpga bench ray`: the Ray engine's costs, side by side in one run, on a local Ray instance.

1. a replay shard through Ray vs in-process: insert and sample+update throughput over batch sizes
   1..4096, and the batch at which Ray reaches 90% of in-process;
2. env steps/s against the number of env actors (1, 2, 4, 8) on an env whose every step also sleeps
   (pearl_fpga/SlowCartPole-v1: CartPole-v1 plus a 1 ms wait without CPU use, so scaling shows on a host with few cores;
   real envs that use the CPU scale with the cores), and the per-call overhead of a grant against
   the data's env time on plain CartPole-v1;
3. weight broadcast time (ray.put until every actor loaded them) for the 256x256 and 400x300 nets;
4. time to recover from a killed env actor and from a killed replay shard.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.bench.meta import load_line, measured_record
from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.ray_probe import OBS_DIM, shard_config, transitions
from pearl_fpga.replay.sharded import ReplayShard
from pearl_fpga.runtime.engines.ray_cluster import import_ray
from pearl_fpga.runtime.schedule import allowed_gradient_steps

NETS = {"DQN 4-256-256-2": (4, [256, 256], 2), "DDPG actor 3-400-300-1": (3, [400, 300], 1)}


@dataclass(frozen=True)
class RayBench:
    batches: tuple[int, ...] = (1, 4, 16, 64, 256, 1024, 4096)  # replay batch sizes
    actors: tuple[int, ...] = (1, 2, 4, 8)  # env actor counts
    seconds: float = 3.0  # measured seconds per actor count

    def __post_init__(self) -> None:
        if any(b < 1 for b in self.batches) or any(a < 1 for a in self.actors) or self.seconds <= 0:
            raise ValueError("batches and actors must be >= 1 and seconds > 0")


def measure(args: RayBench) -> dict[str, Any]:
    from pearl_fpga.planner import ray_probe
    from pearl_fpga.runtime.engines.ray_cluster import connect, import_ray
    from pearl_fpga.runtime.envs import SLOW_ENV_ID
    from pearl_fpga.runtime.schedule import RAY_MESSAGE_STEPS

    started = connect("")
    ray = import_ray()
    try:
        shard = ray_probe.shard_throughput(args.batches)
        results: dict[str, Any] = {
            "shard": shard, "transport": ray_probe.transport_cost(shard),
            "insert_90pct_batch": ray_probe.first_batch_at(shard, "insert_ratio"),
            "sample_update_90pct_batch": ray_probe.first_batch_at(shard, "sample_update_ratio"),
            "scaling_env": f"{SLOW_ENV_ID} (CartPole-v1 + 1 ms sleep per step)",
            "scaling": actor_scaling(args.actors, SLOW_ENV_ID, seconds=args.seconds),
            "call_overhead": call_overhead("CartPole-v1", sorted({64, RAY_MESSAGE_STEPS, 1024})),
            "message_steps": RAY_MESSAGE_STEPS,
            "broadcast": broadcast_times(NETS),
            "recovery": recovery_times(),
            "cluster": "local Ray instance on this host (one node); multi-node figures need a real cluster",
        }
    finally:
        if started:
            ray.shutdown()
    return results


def report(record: dict[str, Any], console: Any) -> None:
    """The record's tables and lines, printed to a rich Console."""
    from rich.table import Table

    results = record["results"]
    t = Table(title="1. replay shard: transitions/s through Ray vs in-process (each Ray call waited for)",
                  title_justify="left")
    for col in ("batch", "insert local", "insert ray", "ratio", "sample+update local", "sample+update ray", "ratio"):
        t.add_column(col, justify="right")
    for r in results["shard"]:
        t.add_row(str(r["batch"]), f"{r['insert_local']:,.0f}", f"{r['insert_ray']:,.0f}", f"{r['insert_ratio']:.2f}",
                  f"{r['sample_update_local']:,.0f}", f"{r['sample_update_ray']:,.0f}", f"{r['sample_update_ratio']:.2f}")
    console.print(t)
    tc = results["transport"]
    def at(batch: int | None) -> str:
        return f"batch {batch}" if batch is not None else "no measured batch"

    console.print(f"Ray reaches 90% of in-process at {at(results['insert_90pct_batch'])} (insert), "
                  f"{at(results['sample_update_90pct_batch'])} (sample+update); fitted transport cost "
                  f"{tc['per_call_s'] * 1e6:,.0f} us per call + {tc['per_byte_s'] * 1e9:.2f} ns per byte", markup=False)
    s = Table(title=f"2. env actors on {results['scaling_env']}: a sleep, not CPU work, so scaling shows on "
                    "a small host", title_justify="left")
    for col in ("actors", "env steps/s", "x 1 actor"):
        s.add_column(col, justify="right")
    base = results["scaling"][0]["env_steps_per_s"]
    for r in results["scaling"]:
        s.add_row(str(r["actors"]), f"{r['env_steps_per_s']:,.0f}", f"{r['env_steps_per_s'] / base:.2f}")
    console.print(s)
    for r in results["call_overhead"]:
        console.print(f"   grant of {r['chunk']} steps on CartPole-v1: {r['wall_s'] * 1e3:.2f} ms per call, "
                      f"Ray call + shard insert {r['ray_s'] * 1e3:.2f} ms = {r['overhead_vs_env']:.0%} of the data's "
                      f"env+act time", markup=False)
    for r in results["broadcast"]:
        console.print(f"3. broadcast {r['net']} ({r['bytes'] / 1e6:.2f} MB) to {r['actors']} actors: "
                      f"median {r['median_s'] * 1e3:.1f} ms, max {r['max_s'] * 1e3:.1f} ms", markup=False)
    rec = results["recovery"]
    console.print(f"4. recovery: killed env actor answers again after {rec['actor_s']:.2f} s; killed replay shard "
                  f"after {rec['shard_s']:.2f} s (restarted empty: {rec['shard_lost']:,} transitions lost, counted)")
    console.print(f"{results['cluster']}.", markup=False)
    console.print(load_line(record), markup=False)


def plot(results: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    b = [r["batch"] for r in results["shard"]]
    ax[0, 0].semilogx(b, [r["insert_ratio"] for r in results["shard"]], "o-", label="insert")
    ax[0, 0].semilogx(b, [r["sample_update_ratio"] for r in results["shard"]], "s-", label="sample+update")
    ax[0, 0].axhline(0.9, color="grey", ls="--", label="90%")
    ax[0, 0].set(xlabel="batch (transitions)", ylabel="Ray / in-process throughput", title="replay shard via Ray")
    ax[0, 0].legend()
    n = [r["actors"] for r in results["scaling"]]
    rate = [r["env_steps_per_s"] for r in results["scaling"]]
    ax[0, 1].plot(n, rate, "o-", label="measured")
    ax[0, 1].plot(n, [rate[0] * k / n[0] for k in n], "--", color="grey", label="linear")
    ax[0, 1].set(xlabel="env actors", ylabel="env steps/s", title="actor scaling (sleeping env)")
    ax[0, 1].legend()
    ax[1, 0].bar([r["net"] for r in results["broadcast"]], [r["median_s"] * 1e3 for r in results["broadcast"]])
    ax[1, 0].set(ylabel="ms (median)", title="weight broadcast to the actors")
    rec = results["recovery"]
    ax[1, 1].bar(["env actor", "replay shard"], [rec["actor_s"], rec["shard_s"]])
    ax[1, 1].set(ylabel="seconds", title="recovery after a kill")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run(config: RayBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Measure the Ray engine's costs on a local Ray instance; the JSON record (argv: the command line)."""
    return measured_record("ray", lambda: measure(config), argv)


# ------------------------------------------------------------------- env actors, broadcast, recovery
def _actors(n: int, env_id: str, cpus: float, seed: int) -> tuple[list[Any], Any]:
    from pearl_fpga.algos.common import mlp
    from pearl_fpga.runtime.engines.env_actor import EnvActor

    ray = import_ray()
    cfg = TrainConfig.preset("dqn", env_id=env_id, learning_starts=0, exploration_fraction=0.0, buffer_size=400_000)
    shard = ray.remote(ReplayShard).options(num_cpus=0).remote(
        TrainConfig.from_dict({**cfg.to_dict(), "per": False}), OBS_DIM, (), True, seed,
        beta_steps=allowed_gradient_steps(cfg, cfg.total_steps))
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
    shard_cfg = shard_config(65_536)
    shard = ray.remote(max_restarts=-1, max_task_retries=-1)(ReplayShard).options(num_cpus=0).remote(
        shard_cfg, OBS_DIM, (), True, seed, beta_steps=allowed_gradient_steps(shard_cfg, shard_cfg.total_steps))
    before = ray.get(shard.add.remote(transitions(fill, np.random.default_rng(seed))))
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
