"""`pearl-fpga bench train`: pearl_fpga's training throughput against Stable-Baselines3 and SBX at
identical hyper-parameters (the rl-zoo presets, same update-to-data ratio), in one run, each library as
its users run it: pearl_fpga at its defaults (the learner's torch threads chosen by measurement, DDPG's
actor and critic gradients on two threads; TD3 in SB3's order), SB3 both at one torch thread and at
torch's default thread count (one per core), and SBX (SB3's API on JAX, its whole update compiled by XLA)
at JAX's default threads; SBX's DQN has no gradient clipping. For each seed the runs follow each other,
so a change of load hits all of them;
the 1-minute load average is recorded before and after every run, and a run that started or ended
with it above half the cores is marked as taken under load.

SB3's DQN computes the vanilla target (max over the target network); pearl_fpga's preset is double
DQN, which costs one more forward pass per update. The benchmark runs the same algorithm on both
sides: vanilla DQN unless --double-q is given (then SB3 still runs vanilla, and the table says so).

Both train from scratch for --steps env steps without periodic evaluation; then each final policy is
evaluated deterministically for --eval-episodes episodes. With --keep-best pearl_fpga keeps its preset's
periodic evaluations and reports the best kept policy, as `pearl-fpga train` does: the learning-quality
runs (usually with --no-sb3). SB3 runs when the `bench` extra
(stable-baselines3) is installed; otherwise its rows say so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.bench.meta import LoadProbe, measured_record
from pearl_fpga.config import TrainConfig


@dataclass(frozen=True)
class TrainBench:
    """pearl_fpga's run is `config` (its total_steps, workers, learner_threads: 0 = chosen by measurement);
    the baselines run at the same settings."""

    config: TrainConfig
    seeds: tuple[int, ...] = (0,)
    placement: str | None = None  # pearl_fpga placement (default: kernel actor on the CPU build)
    sb3_threads: tuple[str, ...] = ("1", "default")  # SB3 torch thread settings: N, or "default" (one per core)
    eval_episodes: int = 10
    keep_best: bool = False  # report pearl_fpga's best kept policy (the config's periodic evaluations)
    sb3: bool = True  # run the Stable-Baselines3 baseline (where installed)
    sbx: bool = True  # run SBX (SB3 on JAX, its whole update compiled by XLA, at JAX's default threads)

    def __post_init__(self) -> None:
        _sb3_settings(self.sb3_threads, 1)
        if not self.seeds or self.eval_episodes < 1:
            raise ValueError("need at least one seed and eval_episodes >= 1")


def _sb3_settings(values: tuple[str, ...], default_threads: int) -> dict[str, int]:
    """{"1": 1, "default": <torch's default>} from the --sb3-threads values."""
    out: dict[str, int] = {}
    for v in values:
        if v == "default":
            out["default"] = default_threads
        elif v.isdigit() and int(v) >= 1:
            out[v] = int(v)
        else:
            raise ValueError(f"sb3_threads (--sb3-threads) takes positive integers or 'default', got {v!r}")
    return out


def baseline_device(placement: str) -> str:
    """Where the baselines' learners run: on the GPU when pearl_fpga's learner does (its run's placement
    says learn=cuda or cuda-bf16), else on the CPU, so that both sides of a comparison use the same hardware."""
    from pearl_fpga.runtime.placement import parse_placement

    return parse_placement(placement).learn_device


def measure(args: TrainBench, log: Callable[[str], None]) -> dict[str, Any]:
    """Every seed: pearl_fpga, then SB3 at each thread setting, then SBX, one after the other."""
    import torch

    default_threads = torch.get_num_threads()  # torch's own default (one per core), before anything sets it
    config = args.config
    sb3_settings = _sb3_settings(args.sb3_threads, default_threads)
    results: dict[str, Any] = {"algo": config.algo, "env_id": config.env_id, "steps": config.total_steps,
                               "pearl_threads": "auto" if config.learner_threads == 0 else config.learner_threads,
                               "sb3_threads": sb3_settings, "keep_best": bool(args.keep_best),
                               "config": config.to_dict(), "runs": []}
    sb3 = _sb3_module() if args.sb3 else None
    sbx = sbx_module() if args.sbx else None
    for seed in args.seeds:
        log(f"seed {seed}: pearl_fpga ...")
        ours = _measured(lambda: _run_pearl(config, seed, args.placement, args.eval_episodes,
                                            _progress_lines(f"seed {seed}: pearl_fpga", log)))
        log(_done(ours))
        entry: dict[str, Any] = {"seed": seed, "pearl_fpga": ours, "sb3": {}, "speedup": {}}
        device = results["baseline_device"] = baseline_device(ours["placement"])  # as resolved (auto too)
        if sb3 is not None:
            for name, threads in sb3_settings.items():
                log(f"seed {seed}: stable-baselines3 at {name} torch thread(s) ...")
                theirs = _measured(lambda: _run_sb3(sb3, config, seed, args.eval_episodes, threads, device))
                log(_done(theirs))
                entry["sb3"][name] = theirs
                entry["speedup"][name] = ours["env_steps_per_s"] / theirs["env_steps_per_s"]
        if sbx is not None:
            log(f"seed {seed}: sbx (JAX) ...")
            entry["sbx"] = _measured(lambda: _run_sb3(sbx, config, seed, args.eval_episodes, None, device))
            log(_done(entry["sbx"]))
            entry["speedup_sbx"] = ours["env_steps_per_s"] / entry["sbx"]["env_steps_per_s"]
        results["runs"].append(entry)
        torch.set_num_threads(default_threads)
    results["sb3"] = "installed" if sb3 is not None else ("not installed (pip install 'pearl_fpga[bench]')"
                                                          if args.sb3 else "skipped")
    if sb3 is not None:
        results["median_speedup"] = {name: statistics.median(r["speedup"][name] for r in results["runs"])
                                     for name in sb3_settings}
    results["sbx"] = "installed" if sbx is not None else ("not installed (pip install 'pearl_fpga[bench]')"
                                                          if args.sbx else "skipped")
    if sbx is not None:
        results["median_speedup_sbx"] = statistics.median(r["speedup_sbx"] for r in results["runs"])
    results["libraries"] = _versions()
    if results["baseline_device"] == "cuda":
        results["gpu"] = torch.cuda.get_device_name(0)
    from pearl_fpga.host import cpu_identity

    results["cpu_features"] = cpu_identity()["features"]  # the matrix and vector units the learners may use
    results["runs_under_load"] = sum(r["pearl_fpga"]["under_load"] or any(s["under_load"] for s in r["sb3"].values())
                                     or r.get("sbx", {}).get("under_load", False) for r in results["runs"])
    return results


def run(config: TrainBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Train pearl_fpga and the baselines for every seed of `config`; the JSON record (argv: the command line)."""
    return measured_record("train", lambda: measure(config, log), argv)


def report(record: dict[str, Any], console: Any) -> None:
    """The record's tables, printed to a rich Console."""
    _table(console, record["results"])


def _measured(fn: Any) -> dict[str, Any]:
    """fn()'s figures plus how busy the machine was meanwhile (meta.LoadProbe)."""
    with LoadProbe() as probe:
        out = fn()
    out.update(probe.figures())
    return out


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
    series = [("pearl_fpga", [r["pearl_fpga"]["env_steps_per_s"] for r in runs])]
    for name in results["sb3_threads"]:
        if all(name in r["sb3"] for r in runs):
            series.append((f"SB3, {name} thread{'s' if name != '1' else ''}",
                           [r["sb3"][name]["env_steps_per_s"] for r in runs]))
    if all("sbx" in r for r in runs):
        series.append(("SBX (JAX)", [r["sbx"]["env_steps_per_s"] for r in runs]))
    width = 0.8 / len(series)
    for k, (label, values) in enumerate(series):
        ax.bar(x + (k - (len(series) - 1) / 2) * width, values, width, label=label)
    for xi, r in zip(x, runs):
        if r["speedup"] or "speedup_sbx" in r:
            text = " / ".join(f"{v:.2f}x" for v in [*r["speedup"].values(), *([r["speedup_sbx"]] if "speedup_sbx" in r else [])])
            ax.annotate(text, (xi, max(v[xi] for _, v in series)), ha="center", va="bottom", fontsize=8)
    loaded = [r["pearl_fpga"]["under_load"] or any(v["under_load"] for v in r["sb3"].values()) for r in runs]
    ax.set_xticks(x, [f"seed {s}" + ("\n(under load)" if busy else "") for s, busy in zip(seeds, loaded)])
    ax.set_ylabel("env steps/s")
    ax.set_title(f"{results['algo'].upper()} {results['env_id']}, {results['steps']:,} env steps")
    ax.set_ylim(0, 1.25 * max(ax.get_ylim()[1], 1.0))
    ax.legend(loc="upper left", ncols=len(series), fontsize=8)
    tasks = list(runs[0]["pearl_fpga"]["us_per_env_step"])
    mean_us = [float(np.mean([r["pearl_fpga"]["us_per_env_step"][k] for r in runs])) for k in tasks]
    ax2.barh(tasks, mean_us)
    ax2.invert_yaxis()
    ax2.set_xlabel("us per env step (pearl_fpga, mean over seeds)")
    ax2.set_title("where the time goes")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _progress_lines(name: str, log: Callable[[str], None], every_s: float = 10.0) -> Callable[[Any], None]:
    """A Trainer progress callback that logs one line every `every_s` seconds: steps, rate, ETA."""
    last = [time.monotonic()]

    def line(stats: Any) -> None:
        now = time.monotonic()
        if now - last[0] < every_s or stats.env_steps >= stats.target_steps:
            return
        last[0] = now
        rate = stats.steps_per_s
        eta = (stats.target_steps - stats.env_steps) / rate if rate > 0 else float("nan")
        log(f"{name}: step {stats.env_steps:,}/{stats.target_steps:,}, {rate:,.0f} steps/s, ETA {eta:,.0f} s")

    return line


def _done(run: dict[str, Any]) -> str:
    return (f"  done: {run['env_steps_per_s']:,.0f} env steps/s over {run['seconds']:,.0f} s, "
            f"final return {run['final_return']:.1f}")


def _run_pearl(config: TrainConfig, seed: int, placement: str | None, eval_episodes: int,
               progress: Callable[[Any], None] | None = None) -> dict[str, Any]:
    from pearl_fpga.trainer import Trainer

    trainer = Trainer(algo=config.algo, env=config.env_id, placement=placement, config=config, seed=seed)
    start = time.perf_counter()
    trainer.train(config.total_steps, progress=progress)
    elapsed = time.perf_counter() - start
    result = trainer.evaluate(eval_episodes)
    per_task = trainer.task_summary()
    return {"placement": str(trainer.placement), "workers": config.workers, "seconds": elapsed,
            "env_steps_per_s": trainer.env_steps / elapsed, "updates_per_s": trainer.grad_steps / elapsed,
            "grad_steps": trainer.grad_steps, "final_return": result.mean, "eval_policy": result.policy,
            "eval_policy_step": result.policy_step,
            "learner_threads": trainer.learner_threads_report(),
            "learner_threads_used": (trainer.learner_threads.choice.current if trainer.learner_threads is not None
                                     else config.learner_threads),
            "update_schedule": trainer.update_schedule_report(),
            "us_per_env_step": {k: v * 1e6 for k, v in per_task.items() if k != "env_steps_per_s"}}


def _sb3_module() -> Any:
    try:
        import stable_baselines3
    except ImportError:
        return None
    return stable_baselines3


def sbx_module() -> Any:
    """SBX (pip package sbx-rl): SB3's API and algorithms on JAX."""
    try:
        import sbx
    except ImportError:
        return None
    return sbx


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("torch", "stable-baselines3", "sbx-rl", "jax", "jaxlib", "gymnasium", "numpy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return out


def baseline_model(sb3: Any, config: TrainConfig, seed: int, device: str = "cpu") -> Any:
    """The same algorithm of Stable-Baselines3 or SBX (`sb3` is either module; their class of the same name)
    at the config's settings, on its gymnasium env, its learner on `device` ("cpu" or "cuda"; SBX's JAX
    arrays go where `jax_device` puts them)."""
    import gymnasium as gym

    from pearl_fpga.algos.registry import learner_class

    common = dict(learning_rate=config.learning_rate, buffer_size=config.buffer_size,
                  learning_starts=config.learning_starts, batch_size=config.batch_size, gamma=config.gamma,
                  train_freq=config.train_freq, gradient_steps=config.gradient_steps,
                  policy_kwargs=dict(net_arch=list(config.net_arch)), seed=seed, device=device, verbose=0)
    env = gym.make(config.env_id)
    own = learner_class(config.algo).baseline_kwargs(config, env.action_space, sb3.__name__ == "sbx")
    return getattr(sb3, config.algo.upper())("MlpPolicy", env, **own, **common)


def jax_device(device: str) -> Any:
    """A context in which JAX (SBX) puts new arrays on `device`'s kind: its first GPU for "cuda", its CPU
    otherwise (JAX would take a GPU wherever it finds one)."""
    import jax

    return jax.default_device(jax.devices("gpu" if device == "cuda" else "cpu")[0])


def _run_sb3(sb3: Any, config: TrainConfig, seed: int, eval_episodes: int, threads: int | None,
             device: str = "cpu") -> dict[str, Any]:
    """One run of Stable-Baselines3 (at `threads` torch threads) or SBX (`sb3` is the sbx module; JAX
    keeps its own default threads: threads None) at the config's settings, the learner on `device`."""
    import contextlib

    import gymnasium as gym
    import torch
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    with jax_device(device) if sb3.__name__ == "sbx" else contextlib.nullcontext():
        model = baseline_model(sb3, config, seed, device)
        if threads is not None:
            torch.set_num_threads(threads)
        start = time.perf_counter()
        model.learn(config.total_steps)
        elapsed = time.perf_counter() - start
        mean, _ = evaluate_policy(model, Monitor(gym.make(config.env_id)), n_eval_episodes=eval_episodes,
                                  deterministic=True)
    updates = int(getattr(model, "_n_updates", 0))
    return {"version": sb3.__version__, "seconds": elapsed, "env_steps_per_s": model.num_timesteps / elapsed,
            "updates_per_s": updates / elapsed, "grad_steps": updates,
            "final_return": float(mean)}  # type: ignore[arg-type]  # a float unless return_episode_rewards


def _table(console: Any, results: dict[str, Any]) -> None:
    from rich.table import Table

    variant = ""
    if results["algo"] == "dqn":
        variant = " (pearl_fpga double DQN, SB3 vanilla)" if results["config"]["double_q"] else " (vanilla target on both)"
    elif results["config"].get("concurrent_updates"):
        variant = " (pearl_fpga: actor and critic gradients on the step's starting critic)"
    device = results.get("baseline_device", "cpu")
    t = Table(title=f"bench train: {results['algo'].upper()}{variant} {results['env_id']}, {results['steps']:,} env steps"
                    + (f", every learner on {device}" if device != "cpu" else ""),
              title_justify="left")
    for col in ("seed", "library", "torch threads", "env steps/s", "updates/s", "final return", "seconds", "load 1 min",
                "other cores", "pearl_fpga is"):
        t.add_column(col, justify="left" if col in ("library", "torch threads") else "right")
    for r in results["runs"]:
        ours = r["pearl_fpga"]
        t.add_row(str(r["seed"]), f"pearl_fpga ({ours['placement']}, {ours['workers']} workers)",
                  f"{ours['learner_threads_used']}" + (" (auto)" if results["pearl_threads"] == "auto" else ""),
                  *_figures(ours), "")
        for name, theirs in r["sb3"].items():
            t.add_row(str(r["seed"]), f"stable-baselines3 {theirs['version']}",
                      f"{results['sb3_threads'][name]} ({name})", *_figures(theirs), f"{r['speedup'][name]:.2f}x")
        if "sbx" in r:
            t.add_row(str(r["seed"]), f"sbx {r['sbx']['version']} (JAX)", "JAX default", *_figures(r["sbx"]),
                      f"{r['speedup_sbx']:.2f}x")
    console.print(t)
    if results["sbx"] != "installed":
        console.print(f"sbx: {results['sbx']}", markup=False)
    else:
        console.print(f"median speedup in env steps/s: {results['median_speedup_sbx']:.2f}x vs SBX", markup=False)
    if results["sb3"] != "installed":
        console.print(f"stable-baselines3: {results['sb3']}", markup=False)
    else:
        console.print("median speedup in env steps/s: " + ", ".join(
            f"{v:.2f}x vs SB3 at {k} thread(s)" for k, v in results["median_speedup"].items()), markup=False)
    if results["runs_under_load"]:
        console.print(f"[yellow]{results['runs_under_load']:d} seed(s) ran while other processes kept more than "
                      "half the cores busy (*): not headline figures[/yellow]")
    tasks = Table(title="pearl_fpga: where the time goes (us per env step, mean over seeds)", title_justify="left")
    keys = list(results["runs"][0]["pearl_fpga"]["us_per_env_step"])
    for k in keys:
        tasks.add_column(k, justify="right")
    tasks.add_row(*[f"{np.mean([r['pearl_fpga']['us_per_env_step'][k] for r in results['runs']]):,.1f}" for k in keys])
    console.print(tasks)


def _figures(run: dict[str, Any]) -> tuple[str, ...]:
    flag = " *" if run["under_load"] else ""
    return (f"{run['env_steps_per_s']:,.0f}", f"{run['updates_per_s']:,.0f}", f"{run['final_return']:.1f}",
            f"{run['seconds']:.1f}", f"{run['load_before'][0]:.1f}-{run['load_after'][0]:.1f}{flag}",
            "-" if run["other_cores_busy"] is None else f"{run['other_cores_busy']:.2f}")
