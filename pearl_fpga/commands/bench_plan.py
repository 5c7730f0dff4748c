"""`pearl-fpga bench plan`: the planner's predictions against measured training throughput.

For every CPU-only placement that runs here (torch or the MLP kernel's C++ build for acting, the
runtime's replay on the CPU, 0 / 1 / 2 actor workers) it predicts the mean env steps/s of a short
run, runs that run with the Trainer, and prints predicted, measured and the error (target: within
25%). The host tasks are re-profiled (a few seconds) right before each run, because the load of a
shared machine drifts within minutes. Then it compares the placement the planner chooses with the runtime's default one, measured.
Periodic evaluation is off during these runs (it is not part of the model).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from typing import Any

HELP = "predicted vs measured env steps/s of the CPU-only placements, and the planner's choice vs the default"
TARGET_ERROR = 0.25


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", default="dqn", choices=("dqn", "ddpg"))
    parser.add_argument("--env", default=None, help="gymnasium id (default: the algorithm's preset env)")
    parser.add_argument("--steps", type=int, default=4000, help="env steps of each measured run (default 4000)")
    parser.add_argument("--learning-starts", type=int, default=None,
                        help="override the preset's learning_starts (default: min(preset, steps / 4))")
    parser.add_argument("--max-workers", type=int, default=2, help="actor worker counts 0..N (default 2)")
    parser.add_argument("--per", action="store_true", help="with prioritized replay (the replay kernel's C++ build)")
    parser.add_argument("--quick", action="store_true", help="tiny profiling sizes")
    parser.add_argument("--cached", action="store_true",
                        help="use the cached profile for every prediction (default: profile afresh before each "
                             "run, so that prediction and run see the same load on a shared machine)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")


def bench_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.config import TrainConfig

    base = TrainConfig.preset(args.algo, args.env)
    starts = args.learning_starts if args.learning_starts is not None else min(base.learning_starts, args.steps // 4)
    return TrainConfig.preset(args.algo, args.env, total_steps=args.steps, learning_starts=starts, eval_freq=0,
                              per=bool(args.per))


def measure(config: Any, placement: str, workers: int, steps: int, seed: int) -> dict[str, Any]:
    """One short training run: env steps/s and the per-task seconds per env step it measured."""
    from pearl_fpga import Trainer

    trainer = Trainer(algo=config.algo, env=config.env_id, placement=placement, config=config, seed=seed,
                      workers=workers)
    start = time.perf_counter()
    trainer.train(steps)
    elapsed = time.perf_counter() - start
    summary = trainer.task_summary()
    return {"env_steps_per_s": steps / elapsed, "seconds": elapsed, "tasks": summary}


def run(args: argparse.Namespace) -> int:
    import sys

    from rich.console import Console
    from rich.table import Table

    from pearl_fpga.errors import PearlError
    from pearl_fpga.planner import choose_placement
    from pearl_fpga.planner.model import ROLES, predict
    from pearl_fpga.planner.plan import build_tables
    from pearl_fpga.planner.profile import Sizes, load_factor, profile_host
    from pearl_fpga.runtime.placement import default_placement

    if args.steps < 200:
        print("error: --steps must be >= 200 for a meaningful rate", file=sys.stderr)
        return 2
    console = Console(stderr=args.json, width=max(Console().width, 120))
    config = bench_config(args)
    # host profile of each run: shorter than the planner's default, it is taken six times
    sizes = Sizes.quick() if args.quick else Sizes(repeats=30, learn_repeats=8)
    try:
        plan = choose_placement(config.algo, config.env_id, config, devices="cpu,cpu-kernel",
                                sizes=Sizes.quick() if args.quick else None, reprofile=not args.cached,
                                progress=not args.json, max_workers=args.max_workers)
    except (PearlError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    acts = [t for t in ("cpu", "cpu-kernel") if plan.tables.can_run("act", t)]
    cases = [(act, w) for act in acts for w in range(0, args.max_workers + 1)]
    rows: list[dict[str, Any]] = []
    for i, (act, workers) in enumerate(cases, 1):
        placement = {"act": act, "replay": "cpu", "learn": "cpu"}
        text = ",".join(f"{r}={placement[r]}" for r in ROLES)
        # the machine is shared and its load drifts within minutes: re-profile the host tasks (a few
        # seconds) right before each run, keeping worker start-up and CPU sharing from the first profile
        factor = load_factor(config, plan.profile, repeats=5 if args.quick else 20)
        tables = plan.tables
        if not args.cached:
            fresh = profile_host(config, ("cpu", "cpu-kernel"), replace(sizes, worker_starts=(), parallel=()))
            for key in (("worker_start", "cpu"), ("cpu_parallel", "cpu")):
                if key in plan.profile.fits:
                    fresh.fits[key], fresh.points[key] = plan.profile.fits[key], plan.profile.points.get(key, [])
            tables = build_tables(config, fresh, ["cpu", "cpu-kernel"], None)[0]
        pred = predict(tables, plan.workload, placement, workers)
        predicted = pred.average_throughput(args.steps, config.learning_starts)
        console.print(f"[{i}/{len(cases)}] {text}, {workers} workers: predicted {predicted:,.0f} env steps/s "
                      f"(learner now x{factor:.2f} of profile); measuring {args.steps} steps ...")
        m = measure(config, text, workers, args.steps, args.seed)
        err = (predicted - m["env_steps_per_s"]) / m["env_steps_per_s"]
        rows.append({"placement": text, "workers": workers, "predicted": predicted, "measured": m["env_steps_per_s"],
                     "load_factor": factor,
                     "error": err, "bottleneck": pred.bottleneck, "measured_tasks": m["tasks"],
                     "predicted_tasks": dict(pred.task_seconds)})
        console.print(f"    measured {m['env_steps_per_s']:,.0f} env steps/s ({err:+.0%})")

    chosen = next(r for r in rows if r["placement"] == plan.placement and r["workers"] == plan.workers) \
        if any(r["placement"] == plan.placement and r["workers"] == plan.workers for r in rows) else None
    dflt_text = str(default_placement())
    default = next((r for r in rows if r["placement"] == dflt_text and r["workers"] == config.workers), None)
    within = sum(abs(r["error"]) <= TARGET_ERROR for r in rows)
    result = {"algo": config.algo, "env": config.env_id, "steps": args.steps, "learning_starts": config.learning_starts,
              "rows": rows, "within_target": within, "cases": len(rows), "target_error": TARGET_ERROR,
              "chosen": {"placement": plan.placement, "workers": plan.workers,
                         "measured": chosen["measured"] if chosen else None},
              "default": {"placement": dflt_text, "workers": config.workers,
                          "measured": default["measured"] if default else None}}
    if chosen and default:
        result["chosen_over_default"] = chosen["measured"] / default["measured"]
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    t = Table(title=f"bench plan: {config.algo} {config.env_id}, {args.steps} env steps per run "
                    f"(learning starts at {config.learning_starts}, UTD {config.gradient_steps}/{config.train_freq})",
              title_justify="left")
    for col in ("placement", "workers", "learner now/profile", "predicted steps/s", "measured steps/s", "error", "predicted bottleneck"):
        t.add_column(col, justify="left" if col in ("placement", "predicted bottleneck") else "right")
    for r in rows:
        mark = "" if abs(r["error"]) <= TARGET_ERROR else " [red](>25%)[/red]"
        t.add_row(r["placement"], str(r["workers"]), f"x{r['load_factor']:.2f}", f"{r['predicted']:,.0f}", f"{r['measured']:,.0f}",
                  f"{r['error']:+.0%}{mark}", r["bottleneck"])
    console.print(t)
    console.print(f"{within}/{len(rows)} predictions within {TARGET_ERROR:.0%} of measured.")
    if chosen and default:
        console.print(f"chosen {plan.placement} with {plan.workers} workers: {chosen['measured']:,.0f} env steps/s; "
                      f"default {dflt_text} with {config.workers} workers: {default['measured']:,.0f} "
                      f"(chosen/default = {result['chosen_over_default']:.2f}x, measured)")
    return 0
