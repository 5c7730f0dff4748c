"""`pearl-fpga plan`: profile this machine (cached), model every placement, print the best one."""

from __future__ import annotations

from pearl_fpga import presets as registry

import argparse
import json
import sys

from pearl_fpga.commands.config_args import add_config_options, build_config, config_flags

HELP = "predict time per task per device and choose the placement and actor-worker count for an objective"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", default="dqn", choices=registry.deep_names(), help="algorithm (default dqn)")
    parser.add_argument("--env", default=None, help="gymnasium id (default: CartPole-v1 for dqn, Pendulum-v1 for ddpg and td3)")
    parser.add_argument("--per", action="store_true", help="plan with prioritized replay (the replay kernel)")
    parser.add_argument("--objective", default="throughput", choices=("throughput", "efficiency"),
                        help="maximize env steps/s, or env steps per joule (default throughput)")
    parser.add_argument("--devices", help="targets to consider, e.g. cpu,cpu-kernel,fpga-emu:pynq-z2 "
                        "(default: the devices this machine has)")
    parser.add_argument("--board", help="catalog board modelled by fpga-emu (adds fpga-emu to the default devices)")
    parser.add_argument("--constraints", help='e.g. "act=fpga-emu", "!cuda", "workers=2" (comma-separated)')
    parser.add_argument("--max-workers", type=int, help="most actor workers to consider (default: max(2, cores))")
    parser.add_argument("--cycles", default="hls", choices=("hls", "rtl", "spec"),
                        help="FPGA cycle source without a csynth report: the stated model of the HLS design's schedule "
                        "(what make bitstream ships; default), counts of the reference RTL from the rtl backend "
                        "(Verilator), or the RTL's SPEC.md bounds. The reference RTL's figure is noted beside either.")
    parser.add_argument("--csynth", action="append", default=[], metavar="PATH",
                        help="a Vitis csynth report (<kernel>_top_csynth.xml) or a folder holding them; reports "
                        "under build/hw/<board>/hls/<kernel>/ (make hls) are found without it and take "
                        "precedence over --cycles")
    parser.add_argument("--cpu-watts", help="IDLE,ACTIVE watts of the CPU when RAPL is not readable (nominal)")
    parser.add_argument("--quick", action="store_true", help="tiny profiling sizes (seconds; noisier)")
    parser.add_argument("--reprofile", action="store_true", help="ignore the cached profile and measure again")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    parser.add_argument("--engine", choices=("auto", "ray"), default="auto",
                        help="ray: also plan the Ray engine over the cluster's nodes (actors per node, replay shards)")
    parser.add_argument("--ray-address", default="",
                        help="with --engine ray: the cluster to plan for ('auto', host:port; default a local instance)")
    add_config_options(parser)


def load_config(args: argparse.Namespace):
    """The run's TrainConfig from --algo/--env/--per/--config/--set."""
    return build_config(args, args.algo, args.env, **({"per": True} if args.per else {}))


def parse_watts(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        idle, active = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--cpu-watts {text!r}: give IDLE,ACTIVE in watts, e.g. 20,95") from None
    if not 0 <= idle <= active:
        raise ValueError(f"--cpu-watts {text!r}: need 0 <= idle <= active")
    return idle, active


def run(args: argparse.Namespace) -> int:
    from pearl_fpga.errors import PearlError
    from pearl_fpga.planner import choose_placement
    from pearl_fpga.planner.host_probe import Sizes

    try:
        config = load_config(args)
        plan = choose_placement(config.algo, config.env_id, config, objective=args.objective,
                                constraints=args.constraints, devices=args.devices, board=args.board,
                                sizes=Sizes.quick() if args.quick else None, reprofile=args.reprofile,
                                progress=not args.json, max_workers=args.max_workers, cycles=args.cycles,
                                cpu_watts=parse_watts(args.cpu_watts), csynth_dirs=args.csynth)
    except (PearlError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ray_plan = None
    if args.engine == "ray":
        try:
            ray_plan = _plan_ray(config, plan, args.ray_address, progress=not args.json)
        except (PearlError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        out = plan.as_dict()
        if ray_plan is not None:
            out["ray"] = ray_plan.as_dict()
        print(json.dumps(out, indent=1))
    else:
        from rich.console import Console

        console = Console(width=max(Console().width, 120))
        console.print(f"plan for {config.algo} on {config.env_id}: batch {config.batch_size}, "
                      f"{config.gradient_steps}/{config.train_freq} updates per env step, net {config.net_arch}, "
                      f"PER {'on' if config.per else 'off'}", markup=False)
        plan.print(console)
        console.print(f"train with: pearl-fpga train --algo {config.algo} --env {config.env_id} "
                      f"--placement {plan.placement} --workers {plan.workers}{config_flags(args)}", markup=False,
                      soft_wrap=True)  # one line, to paste
        if ray_plan is not None:
            _print_ray(console, config, plan, ray_plan, args.ray_address, config_flags(args))
    return 0


def _plan_ray(config, plan, address: str, progress: bool):
    """Join (or start) Ray, read its nodes, measure the transport, and run the planner's Ray model."""
    from pearl_fpga.planner import ray_probe
    from pearl_fpga.planner.ray_plan import plan_ray, transition_bytes
    from pearl_fpga.runtime.engines.ray_cluster import connect, import_ray, nodes
    from pearl_fpga.runtime.envs import env_spec

    started = connect(address)
    ray = import_ray()
    try:
        if progress:
            print("measuring the Ray transport (a replay shard through Ray vs in-process) ...", file=sys.stderr)
        transport = ray_probe.transport_cost(ray_probe.shard_throughput([16, 256, 2048], budget_s=0.2))
        found = nodes()
        driver = ray.get_runtime_context().get_node_id()
    finally:
        if started:
            ray.shutdown()
    spec = env_spec(config.env_id)
    return plan_ray(dict(plan.prediction.task_seconds), config, found, driver, transport,
                    transition_bytes(spec.obs_dim, spec.action_dim, spec.discrete), plan.throughput)


def _print_ray(console, config, plan, ray_plan, address: str, flags: str = "") -> None:
    from rich.table import Table

    table = Table(title="Ray engine: env actors per node (one CPU each; the learner takes one on the driver's node)",
                  title_justify="left")
    for col in ("node", "CPU", "GPU", "other resources", "env actors"):
        table.add_column(col, justify="left" if col in ("node", "other resources") else "right")
    for node, actors in zip(ray_plan.nodes, ray_plan.actors_per_node, strict=True):
        res = node["resources"]
        other = ", ".join(f"{k}={v:g}" for k, v in sorted(res.items())
                          if k not in ("CPU", "GPU", "memory", "object_store_memory") and not k.startswith("node"))
        table.add_row(f"{node['address']} ({node['node_id'][:8]})", f"{res.get('CPU', 0):g}", f"{res.get('GPU', 0):g}",
                      other or "-", str(actors))
    console.print(table)
    t = ray_plan.transport
    console.print(f"Ray transport (measured): {t['per_call_s'] * 1e6:,.0f} us per call + {t['per_byte_s'] * 1e9:.2f} ns "
                  f"per byte; {ray_plan.shards} replay shard(s); predicted {ray_plan.throughput:,.0f} env steps/s "
                  f"(bound by {ray_plan.bottleneck}) vs {ray_plan.one_host:,.0f} on one host: engine {ray_plan.engine}", markup=False)
    for note in ray_plan.notes:
        console.print(f"  {note}", markup=False)
    if ray_plan.engine == "ray":
        addr = f" --ray-address {address}" if address else ""
        console.print(f"train with: pearl-fpga train --algo {config.algo} --env {config.env_id} --placement "
                      f"{plan.placement} --engine ray --actors {ray_plan.actors} --replay-shards {ray_plan.shards}{addr}{flags}", markup=False,
                      soft_wrap=True)
