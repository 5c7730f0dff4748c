"""`pearl-fpga bench plan`: the planner's predictions against measured training throughput.

For every CPU-only placement that runs here (torch or the MLP kernel's C++ build for acting, the
runtime's replay on the CPU, 0 / 1 / 2 actor workers) it predicts the mean env steps/s of a short
run, runs that run with the Trainer, and prints predicted, measured and the error (target: within
15%, issue 33). Right before each run the host tasks, the CPU our processes get together and (for a worker
run) the start, polling and stop of that many worker processes are measured again (a few seconds),
because the load of a shared machine drifts within minutes. Besides the run mean it compares the
parts the model adds up: the one-off worker start + stop, and the steady env steps/s after learning
starts (measured from the Trainer's progress reports), so that a miss says where it comes from.
Then it compares the placement the planner chooses with the runtime's default one, measured.
Periodic evaluation is off during these runs (it is not part of the model).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pearl_fpga.bench.meta import measured_record
from pearl_fpga.config import TrainConfig

TARGET_ERROR = 0.15


@dataclass(frozen=True)
class PlanBench:
    """Each measured run trains `config` for its total_steps (periodic evaluation off: not in the model)."""

    config: TrainConfig
    max_workers: int = 2  # actor worker counts 0..N
    quick: bool = False  # tiny profiling sizes
    cached: bool = False  # the cached profile for every prediction (default: profile afresh before each run,
    # so that prediction and run see the same load on a shared machine)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.config.total_steps < 200:
            raise ValueError("the runs need at least 200 env steps (total_steps) for a meaningful rate")
        if self.max_workers < 0:
            raise ValueError("max_workers must be >= 0")


def run(config: PlanBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Predicted against measured env steps/s of every CPU-only placement; the JSON record (argv: the command line)."""
    return measured_record("plan", lambda: measure_all(config, log), argv)


def measure(config: TrainConfig, placement: str, workers: int, steps: int, seed: int) -> dict[str, Any]:
    """One short training run: env steps/s, its phases and the per-task seconds per env step it measured.

    Phases come from the Trainer's progress reports (every 50 ms, and whenever transitions arrive):
    "startup_s" is the time of the first report (in worker mode: the first transitions received),
    "shutdown_s" the time train() took after its run ended (closing the worker pool), "steady" the
    env steps/s between the first report one training round after learning starts and the last one."""
    from pearl_fpga import Trainer

    trainer = Trainer(algo=config.algo, env=config.env_id, placement=placement, config=config, seed=seed,
                      workers=workers)
    marks: list[tuple[float, int]] = []
    start = time.perf_counter()
    stats = trainer.train(steps, progress=lambda s: marks.append((time.perf_counter() - start, s.env_steps)),
                          progress_interval=0.05)
    elapsed = time.perf_counter() - start
    summary = trainer.task_summary()
    controller = trainer.learner_threads  # the adaptive thread count's controller (None: a fixed count)
    learning = [m for m in marks[:-1] if m[1] >= config.learning_starts + config.train_freq]
    steady = ((learning[-1][1] - learning[0][1]) / (learning[-1][0] - learning[0][0])
              if len(learning) >= 2 and learning[-1][0] > learning[0][0] else None)
    return {"env_steps_per_s": steps / elapsed, "seconds": elapsed, "tasks": summary,
            "startup_s": marks[0][0] if workers > 0 and marks else 0.0,
            "shutdown_s": max(0.0, elapsed - stats.elapsed) if workers > 0 else 0.0,
            "steady_env_steps_per_s": steady, "gradient_steps": trainer.grad_steps,
            "probe_rounds": controller.choice.rounds if controller is not None else 0,
            "update_schedule": trainer.update_schedule_report()}


def measure_all(args: PlanBench, log: Callable[[str], None]) -> dict[str, Any]:
    """Predict, then measure, every CPU-only placement and worker count; the planner's choice and the default."""
    from pearl_fpga.planner import choose_placement
    from pearl_fpga.planner.model import predict
    from pearl_fpga.runtime.vocabulary import ROLES
    from pearl_fpga.planner.tables import build_tables
    from pearl_fpga.planner.host_probe import Sizes, load_factor, profile_host
    from pearl_fpga.planner.profile import fit_line
    from pearl_fpga.planner.worker_probe import worker_pool_costs
    from pearl_fpga.runtime.placement import default_placement

    config = args.config
    steps = config.total_steps
    # host profile of each run: many cheap repeats, because a shared machine's load comes in bursts
    # and a short timing window catches or misses them by luck (a few seconds in all)
    sizes = Sizes.quick() if args.quick else Sizes(repeats=200, learn_repeats=80)
    plan = choose_placement(config.algo, config.env_id, config, devices="cpu,cpu-kernel",
                            sizes=Sizes.quick() if args.quick else None, reprofile=not args.cached,
                            progress=False, max_workers=args.max_workers)
    acts = [t for t in ("cpu", "cpu-kernel") if plan.tables.can_run("act", t)]
    cases = [(act, w) for act in acts for w in range(0, args.max_workers + 1)]
    rows: list[dict[str, Any]] = []
    for i, (act, workers) in enumerate(cases, 1):
        placement = {"act": act, "replay": "cpu", "learn": "cpu"}
        text = ",".join(f"{r}={placement[r]}" for r in ROLES)
        # the machine is shared and its load drifts within minutes: re-measure the host tasks, the
        # CPU our processes get together and this worker count's start / poll / stop right before the run
        factor = load_factor(config, plan.profile, repeats=5 if args.quick else 20)
        tables = plan.tables
        if not args.cached:
            fresh = profile_host(config, ("cpu", "cpu-kernel"), replace(sizes, worker_starts=()))
            if workers > 0:
                for key, pts in worker_pool_costs(config, (workers,), (act,)).items():
                    fresh.points[key], fresh.fits[key] = pts, fit_line([p[0] for p in pts], [p[1] for p in pts])
            tables = build_tables(config, fresh, ["cpu", "cpu-kernel"], None)[0]
        pred = predict(tables, plan.workload, placement, workers)
        predicted = pred.average_throughput(steps, config.learning_starts)
        log(f"[{i}/{len(cases)}] {text}, {workers} workers: predicted {predicted:,.0f} env steps/s "
            f"(learner now x{factor:.2f} of profile); measuring {steps} steps ...")
        m = measure(config, text, workers, steps, args.seed)
        err = (predicted - m["env_steps_per_s"]) / m["env_steps_per_s"]
        steady = m["steady_env_steps_per_s"]
        rows.append({"placement": text, "workers": workers, "predicted": predicted, "measured": m["env_steps_per_s"],
                     "load_factor": factor, "error": err, "loadavg_1min": os.getloadavg()[0], "bottleneck": pred.bottleneck,
                     "predicted_steady": pred.throughput, "measured_steady": steady,
                     "steady_error": (pred.throughput - steady) / steady if steady else None,
                     "predicted_fixed_s": pred.startup_s + pred.shutdown_s,
                     "measured_fixed_s": m["startup_s"] + m["shutdown_s"],
                     "measured_startup_s": m["startup_s"], "measured_shutdown_s": m["shutdown_s"],
                     "predicted_startup_s": pred.startup_s, "predicted_shutdown_s": pred.shutdown_s,
                     "measured_seconds": m["seconds"],
                     "predicted_seconds": pred.run_seconds(steps, config.learning_starts),
                     "measured_tasks": m["tasks"],
                     "predicted_tasks": pred.run_task_seconds(steps),  # run means, as the Trainer's timers
                     "predicted_steady_tasks": dict(pred.task_seconds),
                     # the run's counts the model takes from the schedule: gradient steps, thread-probe rounds
                     "predicted_gradient_steps": plan.workload.run_updates, "measured_gradient_steps": m["gradient_steps"],
                     "predicted_probe_rounds": plan.workload.probe_rounds, "measured_probe_rounds": m["probe_rounds"],
                     "predicted_probe_s": pred.probe_s, "update_schedule": m["update_schedule"]})
        log(f"    measured {m['env_steps_per_s']:,.0f} env steps/s ({err:+.0%}); steady "
            f"{pred.throughput:,.0f} predicted / {steady or 0:,.0f} measured; start+stop "
            f"{pred.startup_s + pred.shutdown_s:.2f} s predicted / {m['startup_s'] + m['shutdown_s']:.2f} s measured")

    chosen = next(r for r in rows if r["placement"] == plan.placement and r["workers"] == plan.workers) \
        if any(r["placement"] == plan.placement and r["workers"] == plan.workers for r in rows) else None
    dflt_text = str(default_placement())
    default = next((r for r in rows if r["placement"] == dflt_text and r["workers"] == config.workers), None)
    within = sum(abs(r["error"]) <= TARGET_ERROR for r in rows)
    result = {"algo": config.algo, "env": config.env_id, "steps": steps, "learning_starts": config.learning_starts,
              "gradient_steps": config.gradient_steps, "train_freq": config.train_freq,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "rows": rows, "within_target": within, "cases": len(rows), "target_error": TARGET_ERROR,
              "chosen": {"placement": plan.placement, "workers": plan.workers,
                         "measured": chosen["measured"] if chosen else None},
              "default": {"placement": dflt_text, "workers": config.workers,
                          "measured": default["measured"] if default else None}}
    if chosen and default:
        result["chosen_over_default"] = chosen["measured"] / default["measured"]
    return result


def report(record: dict[str, Any], console: Any) -> None:
    """The record's table and lines, printed to a rich Console."""
    from rich.table import Table

    result = record["results"]
    rows = result["rows"]
    chosen, default = result["chosen"], result["default"]
    t = Table(title=f"bench plan: {result['algo']} {result['env']}, {result['steps']} env steps per run "
                    f"(learning starts at {result['learning_starts']}, UTD {result['gradient_steps']}/{result['train_freq']})",
              title_justify="left")
    for col in ("placement", "workers", "predicted steps/s", "measured steps/s", "error", "steady pred/meas",
                "start+stop pred/meas s", "predicted bottleneck"):
        t.add_column(col, justify="left" if col in ("placement", "predicted bottleneck") else "right")
    for r in rows:
        mark = "" if abs(r["error"]) <= TARGET_ERROR else f" [red](>{TARGET_ERROR:.0%})[/red]"
        steady = f"{r['predicted_steady']:,.0f} / {r['measured_steady']:,.0f}" if r["measured_steady"] else "-"
        t.add_row(r["placement"], str(r["workers"]), f"{r['predicted']:,.0f}", f"{r['measured']:,.0f}",
                  f"{r['error']:+.0%}{mark}", steady, f"{r['predicted_fixed_s']:.2f} / {r['measured_fixed_s']:.2f}",
                  r["bottleneck"])
    console.print(t)
    console.print(f"{result['within_target']}/{len(rows)} predictions within {TARGET_ERROR:.0%} of measured.",
                  markup=False)
    if "chosen_over_default" in result:
        console.print(f"chosen {chosen['placement']} with {chosen['workers']} workers: {chosen['measured']:,.0f} env "
                      f"steps/s; default {default['placement']} with {default['workers']} workers: "
                      f"{default['measured']:,.0f} (chosen/default = {result['chosen_over_default']:.2f}x, measured)",
                      markup=False)


def plot(result: dict[str, Any], path: str) -> None:
    """Predicted against measured env steps/s of every placement, the diagonal and the +-TARGET_ERROR band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(6.5, 5.5), dpi=100)
    top = 1.15 * max([r["measured"] for r in rows] + [r["predicted"] for r in rows] + [1.0])
    line = [0.0, top]
    ax.plot(line, line, color="gray", lw=1, label="predicted = measured")
    ax.fill_between(line, [0.0, top * (1 - TARGET_ERROR)], [0.0, top * (1 + TARGET_ERROR)], color="gray", alpha=0.15,
                    label=f"within {TARGET_ERROR:.0%}")
    for r in rows:
        act = r["placement"].split(",")[0]
        inside = abs(r["error"]) <= TARGET_ERROR
        ax.scatter(r["measured"], r["predicted"], marker="o" if inside else "x", s=40,
                   label=f"{act.removeprefix('act=')}, {r['workers']} workers: {r['error']:+.0%}")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("measured env steps/s (run mean)")
    ax.set_ylabel("predicted env steps/s")
    ax.set_title(f"bench plan: {result['algo']} {result['env']}, {result['steps']:,} steps per run, "
                 f"{result['within_target']}/{result['cases']} within {TARGET_ERROR:.0%}", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
