"""`pearl-fpga train`: train any algorithm of the runtime (DQN, DDPG and TD3 with the kernels in the loop;
tabular Q-learning and SARSA on the TabularQ kernel) with live progress, CSV and TensorBoard logs,
checkpoints (periodic, at the end and on Ctrl-C or SIGTERM), a PNG learning curve and a summary. A run
locks its log directory; `--resume` applies the settings a resumed run may change and refuses the
others, listing them.

The shared options mean the same for every algorithm: --steps, --eval-freq and --checkpoint-freq count
env steps, --eval-episodes is the length of every evaluation. A tabular run acts on the step counts at
the end of the episode that reaches them. Some options belong to one family: the placement and engine
to the deep algorithms, the table's backend and the offline dataset mode to the tabular ones."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import time
import warnings
from pathlib import Path
from typing import Any

from pearl_fpga.config import TrainConfig
from pearl_fpga.commands.common import (default_logdir, report_error, report_lost_outputs, train_with_progress,
                                        warn_no_learning, write_summary)
from pearl_fpga.commands.config_args import add_config_options, build_config
from pearl_fpga.commands.train_summary import board_report, engine_text, print_summary, run_summary
from pearl_fpga import presets as registry

HELP = ("train DQN, DDPG or TD3 (e.g. --algo dqn --env CartPole-v1 --steps 50000 --placement fpga-emu), or tabular "
        "Q-learning/SARSA on the TabularQ kernel (--algo qlearning --env Taxi-v4; see docs/tabular.md)")

DEEP_OPTIONS = ("placement", "workers", "per", "engine", "actors", "replay_shards", "ray_address")
TABULAR_OPTIONS = ("backend", "dataset", "epochs", "parts", "save_dataset")
FIELD_OPTIONS = {"steps": "total_steps", "eval_freq": "eval_freq", "eval_episodes": "eval_episodes",
                 "workers": "workers", "engine": "engine", "actors": "actors", "replay_shards": "replay_shards",
                 "ray_address": "ray_address", "backend": "backend", "epochs": "epochs", "parts": "parts"}
"""Options that set one TrainConfig field each (--checkpoint-freq too, with its own default)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", choices=registry.names(), default="dqn", help="algorithm (default dqn)")
    parser.add_argument("--env", default=None, help="gymnasium id (default: CartPole-v1 for dqn, Pendulum-v1 for ddpg "
                                                     "and td3, Taxi-v4 for qlearning and sarsa)")
    parser.add_argument("--steps", type=int, default=None,
                        help="total env steps (default: the preset's); a tabular run ends with the episode that reaches them")
    parser.add_argument("--episodes", type=int, default=None, help=argparse.SUPPRESS)  # gone: named in the error
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed (default 0; a resumed run keeps its checkpoint's, and refuses another)")
    parser.add_argument("--eval-freq", type=int, default=None,
                        help="env steps between periodic evaluations (default: the preset's; 0 = none)")
    parser.add_argument("--eval-episodes", type=int, default=None,
                        help="episodes of every evaluation, periodic and final (default: the preset's)")
    parser.add_argument("--logdir", type=Path, default=None, help="where logs go (default runs/<algo>-<env>-s<seed>)")
    parser.add_argument("--checkpoint-dir", type=Path, default=None, help="checkpoint directory (default <logdir>/checkpoint)")
    parser.add_argument("--checkpoint-freq", type=int, default=None, help="env steps between checkpoints (default 10000)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from --checkpoint-dir up to --steps; of the settings given again, the run's "
                             "length, evaluation, checkpoint and engine settings are applied, any other that differs "
                             "from the checkpoint is refused with the list (docs/training.md)")
    parser.add_argument("--no-tensorboard", action="store_true", help="skip the TensorBoard event file")
    parser.add_argument("--json", action="store_true", help="print the final summary as JSON")
    parser.add_argument("--strict", action="store_true",
                        help="make warnings that the run cannot do what it should errors (e.g. a --steps budget "
                             "that ends before learning_starts: no gradient step would run)")
    add_config_options(parser)
    deep = parser.add_argument_group("dqn, ddpg, td3")
    deep.add_argument("--placement", default=None,
                      help="device per task: cpu, cpu-kernel, fpga-emu[:BOARD] (a catalog board's kernels emulated; "
                           "default: the catalog's default board), cuda, fpga, 'act=fpga-emu,replay=cpu,learn=cpu', "
                           "or auto (the planner chooses); default: the MLP kernel's C++ build for acting")
    deep.add_argument("--workers", type=int, default=None, help="actor worker processes (0 = in-process, deterministic)")
    deep.add_argument("--per", action="store_true", help="prioritized replay on the replay kernel")
    deep.add_argument("--engine", choices=("auto", "inline", "processes", "ray"), default=None,
                      help="where actors and replay run: inline (one process), processes (--workers actor "
                           "processes), ray (--actors Ray actors, --replay-shards shards; see docs/distributed.md); "
                           "default auto: processes when --workers > 0, else inline")
    deep.add_argument("--actors", type=int, default=None, help="ray engine: env actors (default 2)")
    deep.add_argument("--replay-shards", type=int, default=None, help="ray engine: replay shards (default 1)")
    deep.add_argument("--ray-address", default=None,
                      help="ray engine: 'auto' joins the cluster of `ray start` on this node, host:port joins "
                           "that head; default: start a local Ray instance")
    tabular = parser.add_argument_group("qlearning, sarsa")
    tabular.add_argument("--backend", default=None, help="TabularQ backend: auto, numpy, cpu, rtl, pynq, xrt (default auto)")
    tabular.add_argument("--dataset", type=Path, default=None,
                         help="offline mode: learn from the transitions in this npz (see --save-dataset) instead of the env")
    tabular.add_argument("--epochs", type=int, default=None, help="offline mode: sweeps over the dataset (default 1)")
    tabular.add_argument("--parts", type=int, default=None,
                         help="offline mode: SwiftRL partitions (K independent tables merged by their mean; default 1 = sequential, "
                              "0 = K chosen by a measurement on this machine)")
    tabular.add_argument("--save-dataset", type=Path, default=None,
                         help="write the transitions of this online run to an npz usable by --dataset")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from pearl_fpga.errors import NoLearningWarning, PearlError, TrainingInterrupted
    from pearl_fpga.runtime.checkpoint import DirLock
    from pearl_fpga.runtime.tabular_trainer import TabularTrainer
    from pearl_fpga.trainer import Trainer
    from pearl_fpga.trainers import load_trainer

    console = Console(stderr=args.json)
    seed_asked, args.seed = args.seed, 0 if args.seed is None else args.seed
    tabular = args.algo in registry.tabular_names()
    offline = tabular and args.dataset is not None
    try:
        _check_options(args, tabular)
        config = _config(args)
        asked = _asked_fields(args, config) if args.resume else {}
        placement, plan = (None, None) if tabular else _placement(args, config, console)
    except ValueError as exc:
        return report_error(console, exc)

    logdir = args.logdir or default_logdir(config.algo + ("-offline" if offline else ""), config.env_id, args.seed,
                                           args.resume)
    ckpt = args.checkpoint_dir or logdir / "checkpoint"
    args.interrupt_note = lambda: _interrupt_outcome(ckpt, logdir, False, f"continue with --resume --logdir {logdir}")
    logger = None
    trainer: Trainer | TabularTrainer | None = None
    new_logdir = not logdir.exists()  # removed again if the run fails before its first env step
    lock = DirLock(logdir / ".lock", "log directory")
    failed_before_start = False
    try:
        from pearl_fpga.runtime.logger import RunLogger

        lock.acquire()  # before the logger: a second run on this logdir must not truncate its CSV files
        logger = RunLogger(logdir, tensorboard=not args.no_tensorboard, append=args.resume)
        if args.resume:
            trainer = load_trainer(ckpt, placement=placement, workers=args.workers, logger=logger, checkpoint_dir=ckpt,
                                   engine=args.engine, ray_address=args.ray_address,
                                   expect={"algo": config.algo, "env_id": config.env_id}, overrides=asked)
            if seed_asked is not None and seed_asked != trainer.seed:
                raise ValueError(f"--seed {seed_asked}: the checkpoint {ckpt} was trained with seed {trainer.seed}, which "
                                 "a resumed run keeps (its generators continue where they stopped); drop --seed, or "
                                 "start a new run with another --logdir")
            console.print(f"resumed {escape(str(ckpt))} at env step {trainer.env_steps:,}")
        elif tabular:
            trainer = TabularTrainer(config.algo, config.env_id, config=config, seed=args.seed, logger=logger,
                                     checkpoint_dir=None if offline else ckpt, record=args.save_dataset is not None)
        else:
            config, board_fit = _fit_board(args, config, placement, console)
            trainer = Trainer(algo=config.algo, env=config.env_id, placement=placement, config=config, seed=args.seed,
                              logger=logger, checkpoint_dir=ckpt)
            trainer.board_fit = board_fit
        total = trainer.config.total_steps
        remaining = total - trainer.env_steps
        console.print(escape(_header(trainer, args.dataset if offline else remaining, logdir)))
        if trainer.emulated_board:
            console.print(escape(_board_header(trainer.emulated_board)))
        t0 = time.perf_counter()
        if offline and isinstance(trainer, TabularTrainer):
            data = trainer.train_offline(args.dataset, progress=lambda e, n: console.print(f"epoch {e}/{n}", markup=False))
            console.print(f"{data['n']:,} transitions x {trainer.config.epochs} epoch(s), parts {trainer.config.parts}",
                          markup=False)
        elif remaining > 0:
            with warnings.catch_warnings():
                if warn_no_learning(trainer, remaining, args.strict, console):
                    warnings.simplefilter("ignore", NoLearningWarning)  # said on the console already
                train_with_progress(trainer, remaining, console)
        elif args.resume:
            why = (f"--steps {args.steps:,} is not above" if args.steps is not None
                   else f"the run's total_steps ({total:,}) is reached at")
            console.print(escape(f"{why} the checkpoint's {trainer.env_steps:,} env steps: nothing to train; evaluating "
                                 f"it (pearl-fpga eval {ckpt} does only that; --steps N above it trains on)"))
        seconds = time.perf_counter() - t0
        if args.save_dataset is not None and isinstance(trainer, TabularTrainer):
            console.print(f"dataset of {trainer.env_steps:,} transitions written to {trainer.save_dataset(args.save_dataset)}",
                          markup=False)
        result = trainer.evaluate(trainer.config.eval_episodes)
        if isinstance(trainer, TabularTrainer):
            trainer.log_evaluation(result)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, TrainingInterrupted) and exc.signum else signal.SIGINT
        again = f"continue with --resume --logdir {logdir}" + (f" --checkpoint-dir {ckpt}" if args.checkpoint_dir else "")
        if isinstance(exc, TrainingInterrupted) and exc.checkpoint is not None:
            console.print(f"[yellow]interrupted[/yellow] ({escape(str(exc))}); {escape(again)}")
        else:
            started = trainer is not None and trainer.env_steps > 0
            failed_before_start = new_logdir and not started and not _has_checkpoint(ckpt)
            console.print("[yellow]interrupted[/yellow] " + escape(
                f"({exc or signal.Signals(signum).name}): " + _interrupt_outcome(ckpt, logdir, failed_before_start, again)))
        return 128 + int(signum)
    except (PearlError, ValueError) as exc:
        if new_logdir and (trainer is None or trainer.env_steps == 0):
            failed_before_start = True
        return report_error(console, exc)
    finally:
        if logger is not None:
            logger.close()
        if trainer is not None:
            trainer.close()
        lock.release()
        if failed_before_start:
            # nothing of this run is worth keeping, and a leftover folder would push the next run to "-N+1"
            shutil.rmtree(logdir, ignore_errors=True)

    try:
        if isinstance(trainer, TabularTrainer):
            return _report_tabular(args, console, trainer, result, logdir, "offline" if offline else "online", seconds)
        assert isinstance(trainer, Trainer)
        from pearl_fpga.runtime.logger import plot_learning_curve

        png = plot_learning_curve(trainer.episode_log, trainer.eval_log, logdir / "learning_curve.png",
                                  f"{config.algo.upper()} {config.env_id} (seed {trainer.seed}, {trainer.placement})")
        measured = trainer.task_summary()
        summary = run_summary(trainer, measured, result)
        summary["board_modelled"] = board = board_report(trainer)
        write_summary(logdir, summary)
    except OSError as exc:
        return report_lost_outputs(console, exc, logdir, None if offline else ckpt)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(console, trainer, measured, result, png, board)
    if plan is not None:
        plan.report(measured)
    return 0


def _placement(args: argparse.Namespace, config: TrainConfig, console: Any) -> tuple[Any, Any]:
    """A deep run's placement and the planner's plan (None unless --placement auto, which may also set the
    workers); ValueError for a placement that does not parse or a planner that is missing."""
    from rich.markup import escape

    from pearl_fpga.runtime.placement import unused_replay_notice

    notice = unused_replay_notice(args.placement, config.per)
    if notice:
        console.print(f"[yellow]notice:[/yellow] {escape(notice)}")
    if args.placement is None or str(args.placement).strip().lower() != "auto":
        return args.placement, None
    try:
        plan = _plan(args.algo, config)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--placement auto needs the planner (pearl_fpga.planner.choose_placement), which is not "
                         f"available here ({exc}); pass an explicit placement such as fpga-emu") from exc
    if args.workers is None:
        config.workers = int(plan.workers)
    console.print(escape(f"planner chose --placement {plan.placement} with {config.workers} worker(s)"))
    return plan.placement, plan


def _check_options(args: argparse.Namespace, tabular: bool) -> None:
    """ValueError for an option of the other family of algorithms, or one that is gone."""
    if args.episodes is not None:
        raise ValueError("--episodes is gone: every algorithm's run length is --steps (env steps); a tabular run "
                         "ends with the episode that reaches it")
    if args.eval_episodes is not None and args.eval_episodes < 1:  # refused now, not after the whole run
        raise ValueError(f"--eval-episodes {args.eval_episodes}: every evaluation needs at least 1 episode")
    family, other = (TABULAR_OPTIONS, DEEP_OPTIONS) if tabular else (DEEP_OPTIONS, TABULAR_OPTIONS)
    wrong = [f"--{name.replace('_', '-')}" for name in other if getattr(args, name) not in (None, False)]
    if wrong:
        owner = "/".join(registry.deep_names()) if tabular else "--algo " + "|".join(registry.tabular_names())
        hint = "; tabular runs choose the table's device with --backend" if tabular else ""
        raise ValueError(f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} for {owner}{hint}")
    if tabular and args.dataset is not None and (args.resume or args.save_dataset is not None):
        raise ValueError("--dataset (offline) cannot be combined with --resume or --save-dataset")


def _config(args: argparse.Namespace) -> Any:
    """The run's TrainConfig: the preset, --config, the options, --set (config_args.build_config)."""
    overrides: dict[str, Any] = {field: getattr(args, flag) for flag, field in FIELD_OPTIONS.items()
                                 if getattr(args, flag) is not None}
    if args.per:
        overrides["per"] = True
    config = build_config(args, args.algo, args.env, **overrides)
    if args.checkpoint_freq is not None:
        config.checkpoint_freq = args.checkpoint_freq
    elif not config.checkpoint_freq:
        config.checkpoint_freq = 10_000  # a command-line run checkpoints unless told otherwise
    config.validate()
    return config


def _header(trainer: Any, work: Any, logdir: Path) -> str:
    """The line that says what trains where: `work` is the env steps to run, or the offline dataset."""
    cfg = trainer.config
    if cfg.algo in registry.tabular_names():
        what = f"the dataset {work} (offline)" if isinstance(work, Path) else f"{work:,} env steps"
        return (f"training {cfg.algo} on {cfg.env_id}: {what}, {trainer.n_states} states x {trainer.n_actions} actions, "
                f"backend {trainer.kernel.backend_name}, alpha {cfg.learning_rate:g}, gamma {cfg.gamma:g}; logs in {logdir}")
    placed = ",".join(f"{task}={trainer.device_of(task)}" for task in ("act", "replay", "learn"))
    return (f"training {cfg.algo.upper()} on {cfg.env_id}: {work:,} env steps, placement {placed}, engine "
            f"{engine_text(cfg, trainer.engine)}; logs in {logdir}")


def _report_tabular(args: argparse.Namespace, console: Any, trainer: Any, result: Any, logdir: Path, mode: str,
                    seconds: float) -> int:
    """A tabular run's pictures (policy, learning curve), summary.json and closing lines."""
    from pearl_fpga.runtime.tabular_plot import plot_policy

    cfg = trainer.config
    exact_return, exact_success = trainer.exact_evaluation()
    policy_png = plot_policy(trainer.env, trainer.kernel.q, logdir / "policy.png",
                             f"{cfg.algo} {cfg.env_id}\ngreedy policy, exact success {exact_success:.3f}")
    png = trainer.plot_learning_curve(logdir / "learning_curve.png") if trainer.episode_log else None
    summary = {
        "algo": cfg.algo, "env_id": cfg.env_id, "mode": mode, "seed": trainer.seed,
        "backend": trainer.kernel.backend_name, "episodes": trainer.episodes, "env_steps": trainer.env_steps,
        "grad_steps": trainer.grad_steps, "train_seconds": seconds, "eval_episodes": len(result.returns),
        "eval_mean_return": result.mean, "eval_std_return": result.std, "eval_success_rate": result.success_rate,
        "exact_mean_return": exact_return, "exact_success_rate": exact_success,
        "policy_png": None if policy_png is None else str(policy_png), "config": cfg.to_dict(),
    }
    write_summary(logdir, summary)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    console.print(f"greedy policy over {len(result.returns):,} episodes: mean return {result.mean:.3f} (std "
                  f"{result.std:.3f}), success rate {result.success_rate:.4f}; exact from the env model: return "
                  f"{exact_return:.4f}, success {exact_success:.4f}", markup=False)
    for name, path in (("learning curve", png), ("policy", policy_png)):
        if path is not None:
            console.print(f"{name}: {path}", markup=False)
    return 0


def _fit_board(args: argparse.Namespace, config: TrainConfig, placement: Any, console: Any) -> tuple[Any, Any]:
    """The config fitted to an emulated board where the preset does not fit and --set/--config left the
    field alone (runtime.emulation.board_preset), with one line saying which runs and why."""
    from rich.markup import escape

    from pearl_fpga.runtime.emulation import board_fit_record, board_preset
    from pearl_fpga.runtime.envs import env_spec
    from pearl_fpga.runtime.placement import parse_placement

    spec = env_spec(config.env_id)
    fitted, note = board_preset(config, parse_placement(placement), spec.obs_dim, spec.action_dim,
                                set(_asked_fields(args, config)))
    if note:
        console.print(escape(note))
    return fitted, board_fit_record(config, fitted, note)


def _board_header(name: str) -> str:
    from pearl_fpga.board.catalog import get_board

    b = get_board(name)
    m, r = b.kernels["mlp"], b.kernels["replay"]
    return (f"emulating {b.name} ({b.clock_mhz:g} MHz; MLP kernel: {m['max_layers']} layers of width up to "
            f"{m['max_width']}, {m['lanes']} MAC lanes; replay kernel: {r['capacity']:,} transitions, fan-out "
            f"{r['fanout']}); its times are modelled")


def _has_checkpoint(ckpt: Path) -> bool:
    """A complete checkpoint (deep or tabular) is in `ckpt`."""
    return (ckpt / "manifest.json").is_file() or (ckpt / "tabular.npz").is_file()


def _interrupt_outcome(ckpt: Path, logdir: Path, removed: bool, again: str) -> str:
    """What an interrupt without a new checkpoint leaves: the one line says what was saved and where."""
    if _has_checkpoint(ckpt):
        return f"no new checkpoint; the last complete one, in {ckpt}, is kept; {again}"
    if removed:
        return f"stopped during start-up: nothing was saved (no checkpoint, and the new run folder {logdir} was removed)"
    return f"nothing was saved: there is no checkpoint in {ckpt} (logs so far are in {logdir})"


def _asked_fields(args: argparse.Namespace, config: TrainConfig) -> dict[str, Any]:
    """The TrainConfig fields this command line sets explicitly (--config, --set, --per and the options
    of a field), with their values in `config`: what --resume compares with the checkpoint."""
    from pearl_fpga.commands.config_args import parse_set
    from pearl_fpga.config import read_config_file

    names = set(parse_set(getattr(args, "set", []) or []))
    if args.config is not None:
        names |= set(read_config_file(args.config))
    if args.per:
        names.add("per")
    flags = {**FIELD_OPTIONS, "checkpoint_freq": "checkpoint_freq"}
    names |= {field for flag, field in flags.items() if getattr(args, flag) is not None}
    names -= {"algo", "env_id"}  # checked against the checkpoint by Trainer.load(expect=...)
    return {name: getattr(config, name) for name in sorted(names)}


def _plan(algo: str, config: TrainConfig) -> Any:
    import pearl_fpga.planner as planner

    return planner.choose_placement(algo, config.env_id, config, objective="throughput")
