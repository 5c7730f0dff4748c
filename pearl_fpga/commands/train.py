"""`pearl-fpga train`: train DQN, DDPG or TD3 with the kernels in the loop, with live progress, CSV and
TensorBoard logs, checkpoints (periodic, at the end and on Ctrl-C or SIGTERM), a PNG learning curve and
a per-task summary table. A run locks its log directory; `--resume` applies the settings a resumed
run may change (runtime.checkpoint.RESUMABLE_FIELDS) and refuses the others, listing them."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from pearl_fpga.commands.config_args import add_config_options, build_config

HELP = ("train DQN, DDPG or TD3 (e.g. --algo dqn --env CartPole-v1 --steps 50000 --placement fpga-emu), or tabular "
        "Q-learning/SARSA (--algo qlearning --env Taxi-v4; see docs/tabular.md)")


def configure(parser: argparse.ArgumentParser) -> None:
    from pearl_fpga.commands import train_tabular

    parser.add_argument("--algo", choices=("dqn", "ddpg", "td3", *train_tabular.TABULAR_ALGOS), default="dqn",
                        help="algorithm (default dqn)")
    parser.add_argument("--env", default=None, help="gymnasium id (default: CartPole-v1 for dqn, Pendulum-v1 for ddpg and td3)")
    parser.add_argument("--steps", type=int, default=None, help="total env steps (default: the rl-zoo budget)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--placement", default=None,
                        help="device per task: cpu, cpu-kernel, fpga-emu[:BOARD] (a catalog board's kernels emulated; "
                             "default: the catalog's default board), cuda, fpga, 'act=fpga-emu,replay=cpu,learn=cpu', "
                             "or auto (the planner chooses); default: the MLP kernel's C++ build for acting")
    parser.add_argument("--workers", type=int, default=None, help="actor worker processes (0 = in-process, deterministic)")
    parser.add_argument("--per", action="store_true", help="prioritized replay on the replay kernel")
    parser.add_argument("--engine", choices=("auto", "inline", "processes", "ray"), default=None,
                        help="where actors and replay run: inline (one process), processes (--workers actor "
                             "processes), ray (--actors Ray actors, --replay-shards shards; see docs/distributed.md); "
                             "default auto: processes when --workers > 0, else inline")
    parser.add_argument("--actors", type=int, default=None, help="ray engine: env actors (default 2)")
    parser.add_argument("--replay-shards", type=int, default=None, help="ray engine: replay shards (default 1)")
    parser.add_argument("--ray-address", default=None,
                        help="ray engine: 'auto' joins the cluster of `ray start` on this node, host:port joins "
                             "that head; default: start a local Ray instance")
    parser.add_argument("--logdir", type=Path, default=None, help="where logs go (default runs/<algo>-<env>-s<seed>)")
    parser.add_argument("--checkpoint-dir", type=Path, default=None, help="checkpoint directory (default <logdir>/checkpoint)")
    parser.add_argument("--checkpoint-freq", type=int, default=None, help="env steps between checkpoints (default 10000)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from --checkpoint-dir up to --steps; of the settings given again, the run's "
                             "length, evaluation, checkpoint and engine settings are applied, any other that differs "
                             "from the checkpoint is refused with the list (docs/training.md)")
    parser.add_argument("--eval-episodes", type=int, default=None,
                        help="episodes of the final evaluation (default 20; tabular: the preset's)")
    parser.add_argument("--no-tensorboard", action="store_true", help="skip the TensorBoard event file")
    parser.add_argument("--json", action="store_true", help="print the final summary as JSON")
    add_config_options(parser)
    train_tabular.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from pearl_fpga.commands import train_tabular

    if args.algo in train_tabular.TABULAR_ALGOS:
        return train_tabular.run(args)
    if args.eval_episodes is None:
        args.eval_episodes = 20
    if args.eval_episodes < 1:  # refused now, not after the whole run
        print(f"error: --eval-episodes {args.eval_episodes}: the final evaluation needs at least 1 episode",
              file=sys.stderr)
        return 2
    tabular_only = [f"--{name.replace('_', '-')}" for name in ("episodes", "backend", "dataset", "epochs", "parts",
                                                                "save_dataset") if getattr(args, name) is not None]
    if tabular_only:
        print(f"error: {', '.join(tabular_only)} are for --algo qlearning|sarsa", file=sys.stderr)
        return 2
    from rich.console import Console
    from rich.markup import escape

    from pearl_fpga.errors import PearlError, TrainingInterrupted
    from pearl_fpga.runtime.checkpoint import DirLock
    from pearl_fpga.runtime.logger import RunLogger, plot_learning_curve
    from pearl_fpga.trainer import Trainer

    console = Console(stderr=args.json)
    try:
        overrides: dict[str, Any] = {}
        if args.steps is not None:
            overrides["total_steps"] = args.steps
        if args.per:
            overrides["per"] = True
        if args.workers is not None:
            overrides["workers"] = args.workers
        for name in ("engine", "actors", "replay_shards", "ray_address"):
            if getattr(args, name) is not None:
                overrides[name] = getattr(args, name)
        config = build_config(args, args.algo, args.env, **overrides)
        if args.checkpoint_freq is not None or not config.checkpoint_freq:
            config = build_config(args, args.algo, args.env, **overrides,
                                  checkpoint_freq=args.checkpoint_freq if args.checkpoint_freq is not None else 10_000)
        asked = _asked_fields(args, config) if args.resume else {}
    except ValueError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2

    placement: Any = args.placement
    from pearl_fpga.runtime.placement import unused_replay_notice

    try:
        notice = unused_replay_notice(placement, config.per)
    except ValueError as exc:  # a placement that does not parse (an unknown board, a bad device)
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    if notice:
        console.print(f"[yellow]notice:[/yellow] {escape(notice)}")
    plan = None
    if placement is not None and str(placement).strip().lower() == "auto":
        try:
            plan = _plan(args.algo, config)
        except (ImportError, AttributeError) as exc:
            console.print(f"[red]error:[/red] --placement auto needs the planner (pearl_fpga.planner.choose_placement), "
                          f"which is not available here ({escape(str(exc))}); pass an explicit placement such as fpga-emu")
            return 2
        placement = plan.placement
        if args.workers is None:
            config.workers = int(plan.workers)
        console.print(escape(f"planner chose --placement {placement} with {config.workers} worker(s)"))

    logdir = args.logdir or _default_logdir(config.algo, config.env_id, args.seed, args.resume)
    ckpt = args.checkpoint_dir or logdir / "checkpoint"
    logger = None
    trainer = None
    new_logdir = not logdir.exists()  # removed again if the run fails before its first env step
    lock = DirLock(logdir / ".lock", "log directory")
    old_term = _terminate_as_interrupt()
    failed_before_start = False
    try:
        lock.acquire()  # before the logger: a second run on this logdir must not truncate its CSV files
        logger = RunLogger(logdir, tensorboard=not args.no_tensorboard, append=args.resume)
        if args.resume:
            trainer = Trainer.load(ckpt, placement=placement, workers=args.workers, logger=logger, checkpoint_dir=ckpt,
                                   engine=args.engine, ray_address=args.ray_address,
                                   expect={"algo": config.algo, "env_id": config.env_id}, overrides=asked)
            console.print(f"resumed {escape(str(ckpt))} at env step {trainer.env_steps:,}")
        else:
            config = _fit_board(args, config, placement, console)
            trainer = Trainer(algo=config.algo, env=config.env_id, placement=placement, config=config, seed=args.seed,
                              logger=logger, checkpoint_dir=ckpt)
        total = trainer.config.total_steps
        remaining = total - trainer.env_steps
        placed = ",".join(f"{task}={trainer.device_of(task)}" for task in ("act", "replay", "learn"))
        console.print(escape(f"training {config.algo.upper()} on {config.env_id}: {remaining:,} env steps, placement "
                             f"{placed}, engine {_engine_text(trainer.config, trainer.engine)}; logs in {logdir}"))
        if trainer.placement.board:
            console.print(escape(_board_header(trainer.placement.board)))
        if remaining > 0:
            _train_with_progress(trainer, remaining, console)
        elif args.resume:
            why = (f"--steps {args.steps:,} is not above" if args.steps is not None
                   else f"the run's total_steps ({total:,}) is reached at")
            console.print(escape(f"{why} the checkpoint's {trainer.env_steps:,} env steps: nothing to train; evaluating "
                                 f"it (pearl-fpga eval {ckpt} does only that; --steps N above it trains on)"))
        result = trainer.evaluate(args.eval_episodes)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, TrainingInterrupted) and exc.signum else signal.SIGINT
        again = f"continue with --resume --logdir {logdir}" + (f" --checkpoint-dir {ckpt}" if args.checkpoint_dir else "")
        if isinstance(exc, TrainingInterrupted) and exc.checkpoint is not None:
            console.print(f"[yellow]interrupted[/yellow] ({escape(str(exc))}); {escape(again)}")
        else:
            console.print(f"[yellow]interrupted[/yellow] " + escape(
                f"({exc or signal.Signals(signum).name}): no new checkpoint; the last complete one in {ckpt}, if any, "
                f"is kept; {again}"))
        return 128 + int(signum)
    except (PearlError, ValueError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        if new_logdir and (trainer is None or trainer.env_steps == 0):
            failed_before_start = True
        return 2
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if logger is not None:
            logger.close()
        if trainer is not None:
            trainer.close()
        lock.release()
        if failed_before_start:
            # nothing of this run is worth keeping, and a leftover folder would push the next run to "-N+1"
            shutil.rmtree(logdir, ignore_errors=True)

    png = plot_learning_curve(trainer.episode_log, trainer.eval_log, logdir / "learning_curve.png",
                              f"{config.algo.upper()} {config.env_id} (seed {trainer.seed}, {trainer.placement})")
    measured = trainer.task_summary()
    summary = _summary(trainer, measured, result)
    summary["board_modelled"] = board = _board_report(trainer)
    (logdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(console, trainer, measured, result, png, board)
    if plan is not None:
        plan.report(measured)
    return 0


def _fit_board(args: argparse.Namespace, config: Any, placement: Any, console: Any) -> Any:
    """The config fitted to an emulated board where the preset does not fit and --set/--config left the
    field alone (runtime.emulation.board_preset), with one line saying which runs and why."""
    from rich.markup import escape

    from pearl_fpga.runtime.emulation import board_preset
    from pearl_fpga.runtime.envs import env_spec
    from pearl_fpga.runtime.placement import parse_placement

    spec = env_spec(config.env_id)
    config, note = board_preset(config, parse_placement(placement), spec.obs_dim, spec.action_dim,
                                set(_asked_fields(args, config)))
    if note:
        console.print(escape(note))
    return config


def _board_header(name: str) -> str:
    from pearl_fpga.board.catalog import get_board

    b = get_board(name)
    m, r = b.kernels["mlp"], b.kernels["replay"]
    return (f"emulating {b.name} ({b.clock_mhz:g} MHz; MLP kernel: {m['max_layers']} layers of width up to "
            f"{m['max_width']}, {m['lanes']} MAC lanes; replay kernel: {r['capacity']:,} transitions, fan-out "
            f"{r['fanout']}); its times are modelled")


def _board_report(trainer: Any) -> dict[str, Any] | None:
    """The emulated board's modelled times of the run's kernel tasks (planner.fpga_model.board_run)."""
    from pearl_fpga.planner.fpga_model import board_run
    from pearl_fpga.runtime.emulation import emulated_board
    from pearl_fpga.runtime.engines import resolve_engine

    board = emulated_board(trainer.placement)
    if board is None:
        return None
    stats = trainer.stats()
    return board_run(board, trainer.config, trainer.spec.obs_dim, trainer.spec.action_dim, trainer.spec.discrete,
                     trainer.placement, trainer.timer.seconds, trainer.timer.calls, stats.env_steps_run, stats.elapsed,
                     resolve_engine(trainer.config) == "inline")


def _terminate_as_interrupt() -> Any:
    """SIGTERM outside train() (start-up, final evaluation) ends the command like Ctrl-C, through the
    finally blocks (logs closed, locks released); inside train() the Trainer's own handler applies."""
    from pearl_fpga.errors import TrainingInterrupted

    def handler(signum: int, frame: Any) -> None:
        raise TrainingInterrupted("SIGTERM", signum, None)

    return signal.signal(signal.SIGTERM, handler)


def _asked_fields(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    """The TrainConfig fields this command line sets explicitly (--config, --set, --per, --steps,
    --checkpoint-freq, the engine options), with their values in `config`: what --resume compares
    with the checkpoint."""
    from pearl_fpga.commands.config_args import parse_set

    names = set(parse_set(getattr(args, "set", []) or []))
    if args.config is not None:
        names |= set(json.loads(Path(args.config).read_text()))
    if args.per:
        names.add("per")
    flags = {"steps": "total_steps", "checkpoint_freq": "checkpoint_freq", "workers": "workers", "engine": "engine",
             "actors": "actors", "replay_shards": "replay_shards", "ray_address": "ray_address"}
    names |= {field for flag, field in flags.items() if getattr(args, flag) is not None}
    names -= {"algo", "env_id"}  # checked against the checkpoint by Trainer.load(expect=...)
    return {name: getattr(config, name) for name in sorted(names)}


def _engine_text(config: Any, engine_obj: Any = None) -> str:
    from pearl_fpga.runtime.engines import resolve_engine

    engine = resolve_engine(config)
    if engine == "processes":
        return f"processes ({config.workers} actor worker{'s' if config.workers != 1 else ''})"
    if engine == "ray":
        where = config.ray_address or "local Ray instance"
        sizing = getattr(engine_obj, "sizing", "")
        return (f"ray ({config.actors} actor{'s' if config.actors != 1 else ''}, {config.replay_shards} replay "
                f"shard{'s' if config.replay_shards != 1 else ''}, {where}{'; ' + sizing if sizing else ''})")
    return "inline"


def _default_logdir(algo: str, env_id: str, seed: int, resume: bool) -> Path:
    """runs/<algo>-<env>-s<seed>; a new run never overwrites an earlier one (-2, -3, ... suffixes),
    --resume without --logdir continues the unsuffixed one."""
    base = Path("runs") / f"{algo}-{env_id}-s{seed}"
    if resume or not base.exists():
        return base
    n = 2
    while (base.parent / f"{base.name}-{n}").exists():
        n += 1
    return base.parent / f"{base.name}-{n}"


def _plan(algo: str, config: Any) -> Any:
    import pearl_fpga.planner as planner

    return planner.choose_placement(algo, config.env_id, config, objective="throughput")


def _train_with_progress(trainer: Any, steps: int, console: Any) -> None:
    """Live rich progress on a terminal; a plain line every 10 s otherwise."""
    from pearl_fpga.runtime.logger import loss_text

    if console.is_terminal:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        columns = (TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                   TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"), TextColumn("{task.fields[rate]}"),
                   TextColumn("return {task.fields[ret]}"), TextColumn("loss {task.fields[loss]}"),
                   TextColumn("ETA"), TimeRemainingColumn())
        with Progress(*columns, console=console, refresh_per_second=4) as progress:
            start = trainer.env_steps
            task = progress.add_task(trainer.config.algo.upper(), total=steps, rate="", ret="-", loss="-")

            def update(stats: Any) -> None:
                progress.update(task, completed=stats.env_steps - start, rate=f"{stats.steps_per_s:,.0f} steps/s",
                                ret=_fmt(stats.recent_return), loss=loss_text(stats, 4) or "-")

            trainer.train(steps, progress=update)
        return

    last = [0.0]

    def line(stats: Any) -> None:
        now = time.monotonic()
        if now - last[0] < 10 and stats.env_steps < stats.target_steps:
            return
        last[0] = now
        rate = stats.steps_per_s
        eta = (stats.target_steps - stats.env_steps) / rate if rate > 0 else float("nan")
        print(f"step {stats.env_steps:,}/{stats.target_steps:,}  {rate:,.0f} steps/s  ETA {_fmt(eta, 0)} s  "
              f"return {_fmt(stats.recent_return)}  loss {loss_text(stats, 4) or '-'}  best eval {_fmt(stats.best_eval)}",
              file=sys.stderr if console.stderr else sys.stdout, flush=True)

    trainer.train(steps, progress=line, progress_interval=1.0)


def _fmt(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _summary(trainer: Any, measured: dict[str, float], result: Any) -> dict[str, Any]:
    return {
        "algo": trainer.config.algo, "env_id": trainer.config.env_id, "seed": trainer.seed,
        "placement": str(trainer.placement), "workers": trainer.config.workers,
        "env_steps": trainer.env_steps, "grad_steps": trainer.grad_steps, "episodes": trainer.episodes,
        "updates_per_env_step": trainer.grad_steps / max(trainer.env_steps, 1),
        "updates_per_env_step_configured": trainer.config.gradient_steps / trainer.config.train_freq,
        "engine": _engine_text(trainer.config, trainer.engine), "faults": trainer.faults(),
        "worker_restarts": trainer.worker_restarts,
        "eval_mean_return": result.mean, "eval_std_return": result.std, "eval_episodes": len(result.returns),
        "eval_policy": result.policy, "eval_policy_step": result.policy_step,
        "seconds_per_env_step": {k: v for k, v in measured.items() if k != "env_steps_per_s"},
        "env_steps_per_s": measured["env_steps_per_s"],
        "learner_threads": trainer.learner_threads_report(),
        "devices": {k: trainer.device_of(k) for k in measured if k != "env_steps_per_s"},
    }


def _print_summary(console: Any, trainer: Any, measured: dict[str, float], result: Any, png: Path,
                   board: dict[str, Any] | None = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from pearl_fpga.runtime.vocabulary import TASKS

    stats = trainer.stats()
    if not stats.env_steps_run:  # nothing trained in this command (--steps not above the checkpoint's)
        console.print(escape(f"evaluation: {result}"))
        return
    steps = max(stats.env_steps_run, 1)
    modelled = board["seconds_per_env_step"] if board else {}
    title = "Where the time goes (summed over processes" + (
        f"; {board['board']} us: the board's modelled time per env step)" if board else ")")
    table = Table(title=title, title_justify="left")
    cols = ("task", "device", "total s", "us / env step", *((f"{board['board']} us",) if board else ()),
            "calls", "calls / s")
    for col in cols:
        table.add_column(col, justify="left" if col in ("task", "device") else "right")
    per_device: dict[str, float] = {}
    for key in (*TASKS, "eval", "checkpoint"):
        secs = trainer.timer.seconds.get(key, 0.0)
        calls = trainer.timer.calls.get(key, 0)
        if not calls:
            continue
        device = trainer.device_of(key)
        per_device[device] = per_device.get(device, 0.0) + secs
        on_board = (f"{modelled[key] * 1e6:,.1f}" if key in modelled else "-",) if board else ()
        table.add_row(key, device, f"{secs:.2f}", f"{secs / steps * 1e6:,.1f}", *on_board, f"{calls:,}",
                      f"{calls / secs:,.0f}" if secs > 0 else "-")
    console.print(table)
    dev = Table(title="Time per device", title_justify="left")
    dev.add_column("device")
    dev.add_column("busy s", justify="right")
    for device, secs in sorted(per_device.items(), key=lambda kv: -kv[1]):
        dev.add_row(device, f"{secs:.2f}")
    console.print(dev)
    elapsed = stats.elapsed
    console.print(f"env steps/s {measured['env_steps_per_s']:,.0f}   gradient updates/s "
                  f"{trainer.grad_steps / elapsed if elapsed > 0 else 0:,.0f}   episodes {trainer.episodes:,}   "
                  f"actor restarts {trainer.worker_restarts}", markup=False)
    if board:
        rate = board["env_steps_per_s"]
        console.print(f"{board['board']} (modelled): kernel tasks {sum(modelled.values()) * 1e6:,.1f} us / env step on the "
                      "board; " + (f"env steps/s the board would sustain {rate:,.0f} (this run with the kernel tasks "
                                   "timed as on the board)" if rate else "env steps/s modelled for inline runs only"),
                      markup=False)
    faults = trainer.faults()
    if faults.get("nonfinite_dropped"):
        console.print(f"[yellow]transitions dropped for non-finite values (nonfinite_transitions=drop): "
                      f"{faults['nonfinite_dropped']:,}[/yellow]")
    if faults["shard_restarts"]:
        console.print(f"[yellow]replay shard restarts {faults['shard_restarts']:d}, transitions lost with them "
                      f"{faults['transitions_lost']:,}[/yellow]")
    console.print(escape(f"learner threads: {trainer.learner_threads_report()}"))
    console.print(escape(f"evaluation: {result}"))
    console.print(escape(f"learning curve: {png}"))
