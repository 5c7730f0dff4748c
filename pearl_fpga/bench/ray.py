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

import argparse
from pathlib import Path
from typing import Any

from pearl_fpga.bench.meta import LoadProbe, add_json_option, write_record

HELP = "Ray engine: replay shard through Ray vs in-process, actor scaling, weight broadcast, fault recovery"
NETS = {"DQN 4-256-256-2": (4, [256, 256], 2), "DDPG actor 3-400-300-1": (3, [400, 300], 1)}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64, 256, 1024, 4096],
                        help="replay batch sizes (default 1 4 16 ... 4096)")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8], help="env actor counts (default 1 2 4 8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per actor count (default 3)")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG", help="write the four panels as a PNG")
    add_json_option(parser)


def measure(args: argparse.Namespace) -> dict[str, Any]:
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
            "scaling": ray_probe.actor_scaling(args.actors, SLOW_ENV_ID, seconds=args.seconds),
            "call_overhead": ray_probe.call_overhead("CartPole-v1", sorted({64, RAY_MESSAGE_STEPS, 1024})),
            "message_steps": RAY_MESSAGE_STEPS,
            "broadcast": ray_probe.broadcast_times(NETS),
            "recovery": ray_probe.recovery_times(),
            "cluster": "local Ray instance on this host (one node); multi-node figures need a real cluster",
        }
    finally:
        if started:
            ray.shutdown()
    return results


def _print(results: dict[str, Any], probe: LoadProbe) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
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
    load = probe.figures()
    state = "UNDER LOAD" if load["under_load"] else "quiet"
    console.print(f"{results['cluster']}. machine: {state} (load average {load['load_before']} -> "
                  f"{load['load_after']}); compare within this run only", markup=False)


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


def run(args: argparse.Namespace) -> int:
    from pearl_fpga.errors import PearlError

    if any(b < 1 for b in args.batches) or any(a < 1 for a in args.actors) or args.seconds <= 0:
        print("error: --batches and --actors must be >= 1 and --seconds > 0")
        return 2
    try:
        with LoadProbe() as probe:
            results = measure(args)
    except PearlError as exc:
        print(f"error: {exc}")
        return 2
    write_record(args, "ray", results, probe)
    if args.plot is not None:
        results["plot"] = str(plot(results, args.plot))
    if args.json != "-":
        _print(results, probe)
    return 0
