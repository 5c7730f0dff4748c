"""`pearl-fpga train --algo qlearning|sarsa`: tabular training on the TabularQ kernel, online (epsilon-greedy,
progress, CSV/TensorBoard logs, learning curve, checkpoint + --resume) or offline over a stored dataset
of transitions (--dataset FILE.npz); --save-dataset FILE.npz records the transitions of an online run.
Called by pearl_fpga.commands.train, which owns the shared options."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

TABULAR_ALGOS = ("qlearning", "sarsa")
DEFAULT_ENV = "Taxi-v4"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tabular (--algo qlearning|sarsa)")
    group.add_argument("--episodes", type=int, default=None, help="training episodes (default: the env preset)")
    group.add_argument("--backend", default=None, help="TabularQ backend: auto, numpy, cpu, rtl, pynq, xrt (default auto)")
    group.add_argument("--dataset", type=Path, default=None,
                       help="offline mode: learn from the transitions in this npz (see --save-dataset) instead of the env")
    group.add_argument("--epochs", type=int, default=None, help="offline mode: sweeps over the dataset (default 1)")
    group.add_argument("--parts", type=int, default=None,
                       help="offline mode: SwiftRL partitions (K independent tables merged by their mean; default 1 = sequential)")
    group.add_argument("--save-dataset", type=Path, default=None,
                       help="write the transitions of this online run to an npz usable by --dataset")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from pearl_fpga.algos.tabular import TabularConfig
    from pearl_fpga.errors import PearlError, TrainingInterrupted
    from pearl_fpga.runtime.logger import RunLogger, plot_learning_curve
    from pearl_fpga.runtime.tabular import TabularTrainer, exact_evaluation

    console = Console(stderr=args.json)
    offline = args.dataset is not None
    try:
        for flag in ("placement", "workers"):
            if getattr(args, flag, None) is not None:
                raise ValueError(f"--{flag} is for dqn/ddpg/td3; tabular runs take --backend")
        if getattr(args, "per", False) or getattr(args, "steps", None) is not None:
            raise ValueError("--per and --steps are for dqn/ddpg/td3; tabular runs take --episodes")
        if offline and (args.resume or args.save_dataset is not None):
            raise ValueError("--dataset (offline) cannot be combined with --resume or --save-dataset")
        config = TabularConfig.preset(args.algo, args.env or DEFAULT_ENV)
        if args.config is not None:
            config = TabularConfig.from_json(args.config, base=config)
        overrides = {k: v for k, v in (("episodes", args.episodes), ("backend", args.backend), ("epochs", args.epochs),
                                       ("parts", args.parts), ("seed", args.seed),
                                       ("eval_episodes", args.eval_episodes)) if v is not None}
        if args.checkpoint_freq is not None:
            overrides["checkpoint_every"] = args.checkpoint_freq
        config = TabularConfig.from_dict({**config.to_dict(), **overrides, **_parse_set(getattr(args, "set", None))})
        if config.algo != args.algo:
            raise ValueError(f"--config {args.config} is for algo {config.algo!r}, but --algo is {args.algo!r}")
    except ValueError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2

    mode = "offline" if offline else "online"
    logdir = args.logdir or _default_logdir(f"{config.algo}-{mode}", config.env_id, config.seed, args.resume)
    ckpt = args.checkpoint_dir or logdir / "checkpoint"
    logger = None
    trainer = None
    try:
        logger = RunLogger(logdir, tensorboard=not args.no_tensorboard, append=args.resume)
        if args.resume:
            trainer = TabularTrainer.load(ckpt, expect={"algo": config.algo, "env_id": config.env_id}, logger=logger,
                                          checkpoint_dir=ckpt, record=False)
            if args.episodes is not None:
                trainer.config.episodes = args.episodes
            console.print(f"resumed {ckpt} at episode {trainer.episode:,}", markup=False)
        else:
            trainer = TabularTrainer(config, logger=logger, checkpoint_dir=None if offline else ckpt,
                                     record=args.save_dataset is not None)
        cfg = trainer.config
        console.print(f"training {cfg.algo} on {cfg.env_id} ({mode}, {trainer.n_states} states x {trainer.n_actions} "
                      f"actions, backend {trainer.kernel.backend_name}, alpha {cfg.alpha}, gamma {cfg.gamma}); "
                      f"logs in {logdir}", markup=False)
        t0 = time.perf_counter()
        if offline:
            data = trainer.train_offline(args.dataset, progress=lambda e, n: console.print(f"epoch {e}/{n}", markup=False))
            console.print(f"{data['n']:,} transitions x {cfg.epochs} epoch(s), parts {cfg.parts}", markup=False)
        else:
            _train_with_progress(trainer, console)
        seconds = time.perf_counter() - t0
        if args.save_dataset is not None:
            console.print(f"dataset of {trainer.env_steps:,} transitions written to {trainer.save_dataset(args.save_dataset)}", markup=False)
        result = trainer.evaluate(cfg.eval_episodes)
        exact_return, exact_success = exact_evaluation(trainer.env, trainer.kernel.greedy(), cfg.success_reward)
        if logger is not None:
            trainer.log_evaluation(result)
    except KeyboardInterrupt as exc:
        # online training stops between episodes and checkpoints there (TrainingInterrupted); anything
        # else (offline mode, start-up, the final evaluation) is not saved mid-update
        signum = exc.signum if isinstance(exc, TrainingInterrupted) and exc.signum else signal.SIGINT
        saved = isinstance(exc, TrainingInterrupted) and exc.checkpoint is not None
        where = f"at episode {trainer.episode:,}: " if trainer is not None else ""
        what = (f"checkpoint written to {ckpt}; continue with --resume --logdir {logdir}" if saved
                else "no new checkpoint written")
        console.print("[yellow]interrupted[/yellow] " + escape(where + what))
        return 128 + int(signum)
    except (PearlError, ValueError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    finally:
        if logger is not None:
            logger.close()

    from pearl_fpga.runtime.tabular_plot import plot_policy

    policy_png = plot_policy(trainer.env, trainer.kernel.q, logdir / "policy.png",
                             f"{cfg.algo} {cfg.env_id}\ngreedy policy, exact success {exact_success:.3f}")
    png = None
    if trainer.episode_log:
        png = plot_learning_curve(trainer.episode_log, trainer.eval_log, logdir / "learning_curve.png",
                                  f"{cfg.algo} {cfg.env_id} (seed {cfg.seed}, {trainer.kernel.backend_name})")
    summary = {
        "algo": cfg.algo, "env_id": cfg.env_id, "mode": mode, "seed": cfg.seed, "backend": trainer.kernel.backend_name,
        "episodes": trainer.episode, "env_steps": trainer.env_steps, "train_seconds": seconds,
        "eval_episodes": int(result.returns.size), "eval_mean_return": result.mean, "eval_std_return": result.std,
        "eval_success_rate": result.success_rate, "exact_mean_return": exact_return,
        "exact_success_rate": exact_success, "policy_png": None if policy_png is None else str(policy_png),
        "config": cfg.to_dict(),
    }
    (logdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        console.print(f"greedy policy over {result.returns.size:,} episodes: mean return {result.mean:.3f} "
                      f"(std {result.std:.3f}), success rate {result.success_rate:.4f}; exact from the env model: "
                      f"return {exact_return:.4f}, success {exact_success:.4f}", markup=False)
        if png is not None:
            console.print(f"learning curve: {png}", markup=False)
        if policy_png is not None:
            console.print(f"policy: {policy_png}", markup=False)
    return 0


def _parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set FIELD=VALUE items as TabularConfig fields (JSON values, else plain strings)."""
    import dataclasses

    from pearl_fpga.algos.tabular import TabularConfig

    known = {f.name for f in dataclasses.fields(TabularConfig)}
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise ValueError(f"--set {item!r}: write FIELD=VALUE with a TabularConfig field ({', '.join(sorted(known))})")
        try:
            out[name] = json.loads(value)
        except json.JSONDecodeError:
            out[name] = value
    if "algo" in out:
        raise ValueError("--set algo=...: use --algo to choose the algorithm")
    return out


def _default_logdir(name: str, env_id: str, seed: int, resume: bool) -> Path:
    base = Path("runs") / f"{name}-{env_id}-s{seed}"
    if resume or not base.exists():
        return base
    n = 2
    while (base.parent / f"{base.name}-{n}").exists():
        n += 1
    return base.parent / f"{base.name}-{n}"


def _train_with_progress(trainer: Any, console: Any) -> None:
    """Live rich progress on a terminal; a plain line every 10 s otherwise."""
    cfg = trainer.config
    if console.is_terminal:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        columns = (TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                   TextColumn("{task.completed:,.0f}/{task.total:,.0f} episodes"), TextColumn("{task.fields[rate]}"),
                   TextColumn("return {task.fields[ret]}"), TextColumn("eps {task.fields[eps]}"), TextColumn("ETA"),
                   TimeRemainingColumn())
        with Progress(*columns, console=console, refresh_per_second=4) as progress:
            task = progress.add_task(cfg.algo, total=cfg.episodes, completed=trainer.episode, rate="", ret="-", eps="-")
            trainer.train(lambda st: progress.update(task, completed=st.episode, rate=f"{st.steps_per_s:,.0f} steps/s",
                                                     ret=f"{st.recent_return:.2f}", eps=f"{st.epsilon:.3f}"))
        return
    last = [0.0]
    start_episode, t0 = trainer.episode, time.monotonic()

    def line(st: Any) -> None:
        now = time.monotonic()
        if now - last[0] < 10 and st.episode < st.episodes:
            return
        last[0] = now
        per_episode = (now - t0) / max(st.episode - start_episode, 1)
        print(f"episode {st.episode:,}/{st.episodes:,}  {st.steps_per_s:,.0f} steps/s  ETA "
              f"{per_episode * (st.episodes - st.episode):.0f} s  return(100) {st.recent_return:.2f}  eps {st.epsilon:.3f}",
              file=sys.stderr if console.stderr else sys.stdout, flush=True)

    trainer.train(line)
