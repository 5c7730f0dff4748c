"""`pearl-fpga bench train`: pearl_fpga's training throughput against Stable-Baselines3 at identical
hyper-parameters (the rl-zoo presets, same update-to-data ratio, same torch intra-op thread count), in
one run. pearl_fpga's DDPG computes its actor and critic gradients concurrently on two threads
(`concurrent_updates`, the overlap its runtime is for); SB3 is sequential.

SB3's DQN computes the vanilla target (max over the target network); pearl_fpga's preset is double
DQN, which costs one more forward pass per update. The benchmark runs the same algorithm on both
sides: vanilla DQN unless --double-q is given (then SB3 still runs vanilla, and the table says so).

Both train from scratch for --steps env steps without periodic evaluation; then each final policy is
evaluated deterministically for --eval-episodes episodes. SB3 runs when the `bench` extra
(stable-baselines3) is installed; otherwise its column says so.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

HELP = "training throughput (env steps/s, updates/s) and final return vs Stable-Baselines3 at equal settings"
DEFAULT_STEPS = {"dqn": 20_000, "ddpg": 20_000}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", choices=("dqn", "ddpg"), default="dqn")
    parser.add_argument("--env", default=None, help="gymnasium id (default CartPole-v1 / Pendulum-v1)")
    parser.add_argument("--steps", type=int, default=None, help="env steps per run (default 20000)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default 0)")
    parser.add_argument("--placement", default=None, help="pearl_fpga placement (default: kernel actor on the CPU build)")
    parser.add_argument("--workers", type=int, default=0, help="pearl_fpga actor worker processes (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both learners (default 1)")
    parser.add_argument("--double-q", action="store_true",
                        help="DQN: run pearl_fpga's double-DQN target (SB3 has only the vanilla one; default: "
                             "vanilla on both sides, the same algorithm)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 baseline")
    parser.add_argument("--json", action="store_true", help="print machine-readable results")
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="also draw env steps/s per library and seed, and where pearl_fpga's time goes, to PNG")


def run(args: argparse.Namespace) -> int:
    import torch
    from rich.console import Console

    from pearl_fpga.config import TrainConfig

    console = Console(stderr=args.json)
    steps = args.steps or DEFAULT_STEPS[args.algo]
    if steps < 1 or args.threads < 1:
        console.print("[red]error:[/red] --steps and --threads must be >= 1")
        return 2
    torch.set_num_threads(args.threads)
    extra = {"double_q": bool(args.double_q)} if args.algo == "dqn" else {}
    config = TrainConfig.preset(args.algo, args.env, total_steps=steps, eval_freq=0, workers=args.workers,
                                learner_threads=args.threads, **extra)
    results: dict[str, Any] = {"algo": args.algo, "env_id": config.env_id, "steps": steps, "threads": args.threads,
                               "config": config.to_dict(), "runs": []}
    sb3 = None if args.no_sb3 else _sb3_module()
    for seed in args.seeds:
        console.print(f"seed {seed}: pearl_fpga ...")
        ours = _run_pearl(config, seed, args.placement, args.eval_episodes)
        entry: dict[str, Any] = {"seed": seed, "pearl_fpga": ours}
        if sb3 is not None:
            console.print(f"seed {seed}: stable-baselines3 ...")
            entry["sb3"] = _run_sb3(sb3, config, seed, args.eval_episodes, args.threads)
            entry["speedup_env_steps_per_s"] = ours["env_steps_per_s"] / entry["sb3"]["env_steps_per_s"]
        results["runs"].append(entry)
    results["sb3"] = "installed" if sb3 is not None else ("skipped" if args.no_sb3 else
                                                          "not installed (pip install 'pearl_fpga[bench]')")
    if any("sb3" in r for r in results["runs"]):
        results["mean_speedup"] = float(np.mean([r["speedup_env_steps_per_s"] for r in results["runs"]]))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _table(console, results)
    if args.plot:
        plot(results, args.plot)
        console.print(f"plot: {args.plot}")
    return 0


def plot(results: dict[str, Any], path: str) -> None:
    """Two panels: env steps/s of both libraries per seed (with the ratio), and pearl_fpga's
    microseconds per env step split by task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    seeds = [str(r["seed"]) for r in runs]
    x = np.arange(len(runs))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100, gridspec_kw={"width_ratios": [3, 2]})
    ours = [r["pearl_fpga"]["env_steps_per_s"] for r in runs]
    has_sb3 = any("sb3" in r for r in runs)
    width = 0.38 if has_sb3 else 0.6
    ax.bar(x - width / 2 if has_sb3 else x, ours, width, label="pearl_fpga")
    if has_sb3:
        theirs = [r["sb3"]["env_steps_per_s"] if "sb3" in r else 0.0 for r in runs]
        ax.bar(x + width / 2, theirs, width, label="stable-baselines3")
        for xi, r in zip(x, runs):
            if "sb3" in r:
                ax.annotate(f"{r['speedup_env_steps_per_s']:.2f}x", (xi, max(ours[xi], theirs[xi])),
                            ha="center", va="bottom", fontsize=9)
    ax.set_xticks(x, [f"seed {s}" for s in seeds])
    ax.set_ylabel("env steps/s")
    ax.set_title(f"{results['algo'].upper()} {results['env_id']}, {results['steps']:,} env steps")
    ax.set_ylim(0, 1.2 * max(ax.get_ylim()[1], 1.0))
    ax.legend(loc="upper left", ncols=2)
    tasks = list(runs[0]["pearl_fpga"]["us_per_env_step"])
    mean_us = [float(np.mean([r["pearl_fpga"]["us_per_env_step"][k] for r in runs])) for k in tasks]
    ax2.barh(tasks, mean_us)
    ax2.invert_yaxis()
    ax2.set_xlabel("us per env step (pearl_fpga, mean over seeds)")
    ax2.set_title("where the time goes")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _run_pearl(config: Any, seed: int, placement: str | None, eval_episodes: int) -> dict[str, Any]:
    from pearl_fpga.trainer import Trainer

    trainer = Trainer(algo=config.algo, env=config.env_id, placement=placement, config=config, seed=seed)
    start = time.perf_counter()
    trainer.train(config.total_steps)
    elapsed = time.perf_counter() - start
    result = trainer.evaluate(eval_episodes)
    per_task = trainer.task_summary()
    return {"placement": str(trainer.placement), "workers": config.workers, "seconds": elapsed,
            "env_steps_per_s": trainer.env_steps / elapsed, "updates_per_s": trainer.grad_steps / elapsed,
            "grad_steps": trainer.grad_steps, "final_return": result.mean,
            "us_per_env_step": {k: v * 1e6 for k, v in per_task.items() if k != "env_steps_per_s"}}


def _sb3_module() -> Any:
    try:
        import stable_baselines3
    except ImportError:
        return None
    return stable_baselines3


def _run_sb3(sb3: Any, config: Any, seed: int, eval_episodes: int, threads: int) -> dict[str, Any]:
    import gymnasium as gym
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    common = dict(learning_rate=config.learning_rate, buffer_size=config.buffer_size,
                  learning_starts=config.learning_starts, batch_size=config.batch_size, gamma=config.gamma,
                  train_freq=config.train_freq, gradient_steps=config.gradient_steps,
                  policy_kwargs=dict(net_arch=list(config.net_arch)), seed=seed, device="cpu", verbose=0)
    env = gym.make(config.env_id)
    if config.algo == "dqn":
        model = sb3.DQN("MlpPolicy", env, target_update_interval=config.target_update_interval,
                        exploration_fraction=config.exploration_fraction,
                        exploration_initial_eps=config.exploration_initial_eps,
                        exploration_final_eps=config.exploration_final_eps, max_grad_norm=config.max_grad_norm,
                        tau=config.tau, **common)
    else:
        from stable_baselines3.common.noise import NormalActionNoise

        dim = env.action_space.shape[0]
        noise = NormalActionNoise(np.zeros(dim), config.action_noise_std * np.ones(dim))
        model = sb3.DDPG("MlpPolicy", env, action_noise=noise, tau=config.tau, **common)
    torch.set_num_threads(threads)
    start = time.perf_counter()
    model.learn(config.total_steps)
    elapsed = time.perf_counter() - start
    mean, _ = evaluate_policy(model, Monitor(gym.make(config.env_id)), n_eval_episodes=eval_episodes, deterministic=True)
    return {"version": sb3.__version__, "seconds": elapsed, "env_steps_per_s": model.num_timesteps / elapsed,
            "updates_per_s": model._n_updates / elapsed, "grad_steps": int(model._n_updates),
            "final_return": float(mean)}


def _table(console: Any, results: dict[str, Any]) -> None:
    from rich.table import Table

    variant = ""
    if results["algo"] == "dqn":
        variant = " (pearl_fpga double DQN, SB3 vanilla)" if results["config"]["double_q"] else " (vanilla target on both)"
    elif results["config"].get("concurrent_updates"):
        variant = " (pearl_fpga: actor and critic gradients on two threads)"
    t = Table(title=f"bench train: {results['algo'].upper()}{variant} {results['env_id']}, {results['steps']:,} env steps, "
                    f"{results['threads']} torch thread(s)", title_justify="left")
    for col in ("seed", "library", "env steps/s", "updates/s", "final return", "seconds", "speedup"):
        t.add_column(col, justify="left" if col == "library" else "right")
    for r in results["runs"]:
        ours = r["pearl_fpga"]
        t.add_row(str(r["seed"]), f"pearl_fpga ({ours['placement']}, {ours['workers']} workers)",
                  f"{ours['env_steps_per_s']:,.0f}", f"{ours['updates_per_s']:,.0f}", f"{ours['final_return']:.1f}",
                  f"{ours['seconds']:.1f}", f"{r['speedup_env_steps_per_s']:.2f}x" if "sb3" in r else "-")
        if "sb3" in r:
            s = r["sb3"]
            t.add_row(str(r["seed"]), f"stable-baselines3 {s['version']}", f"{s['env_steps_per_s']:,.0f}",
                      f"{s['updates_per_s']:,.0f}", f"{s['final_return']:.1f}", f"{s['seconds']:.1f}", "1.00x")
    console.print(t)
    if results["sb3"] != "installed":
        console.print(f"stable-baselines3: {results['sb3']}")
    else:
        console.print(f"mean speedup in env steps/s: {results['mean_speedup']:.2f}x")
    tasks = Table(title="pearl_fpga: where the time goes (us per env step, mean over seeds)", title_justify="left")
    keys = list(results["runs"][0]["pearl_fpga"]["us_per_env_step"])
    for k in keys:
        tasks.add_column(k, justify="right")
    tasks.add_row(*[f"{np.mean([r['pearl_fpga']['us_per_env_step'][k] for r in results['runs']]):,.1f}" for k in keys])
    console.print(tasks)
