"""`pearl-fpga bench <name>`: each benchmark's options, parsed into its config.

The benchmarks live in pearl_fpga/bench/<name>.py. Each has a config dataclass, `run(config, argv, log)`
that returns the JSON record `--json` writes, `report(record, console)` that prints its tables and, where
it draws one, `plot(results, path)`. This module only turns the command line into the config.
"""

from __future__ import annotations

from pearl_fpga import presets as registry

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.commands.config_args import add_config_options, build_config

HELP = "benchmarks: figures side by side with the baselines, in one run"


def _names(text: str) -> tuple[str, ...]:
    """'a,b' -> ('a', 'b'); '' -> ()."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


# ---------------------------------------------------------------------------------------- kernel benches
def _replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--capacity", type=int, default=1 << 20, help="buffer capacity (default 2^20)")
    parser.add_argument("--fanout", type=int, default=16, choices=(2, 4, 8, 16), help="sum-tree fan-out")
    parser.add_argument("--batch", type=int, default=256, help="samples (and priority updates) per call")
    parser.add_argument("--obs-dim", type=int, default=4, help="observation size (float32)")
    parser.add_argument("--repeats", type=int, default=1000, help="timed sample+update iterations per row")
    parser.add_argument("--rtl-capacity", type=int, default=4096, help="capacity of the rtl measurement")
    parser.add_argument("--baselines", default="cpprb,torchrl",
                        help="comma-separated baselines to run (cpprb, torchrl; '' for none)")
    parser.add_argument("--no-rtl", action="store_true", help="skip the rtl backend (its first build is slow)")
    parser.add_argument("--seed", type=int, default=0)


def _replay_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.replay import ReplayBench

    return ReplayBench(capacity=args.capacity, fanout=args.fanout, batch=args.batch, obs_dim=args.obs_dim,
                       repeats=args.repeats, rtl_capacity=args.rtl_capacity, baselines=_names(args.baselines),
                       rtl=not args.no_rtl, seed=args.seed)


def _mlp_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=7, help="timing rounds per figure (default 7)")
    parser.add_argument("--no-rtl", action="store_true", help="skip the rtl cycle counts")


def _mlp_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.mlp import MlpBench

    return MlpBench(repeats=args.repeats, rtl=not args.no_rtl)


def _tabular_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--states", type=int, default=500, help="table rows (default 500, Taxi's size)")
    parser.add_argument("--actions", type=int, default=6, help="table columns (default 6)")
    parser.add_argument("--updates", type=int, default=1_000_000, help="transitions per timed run (compiled loops)")
    parser.add_argument("--numpy-updates", type=int, default=50_000, help="transitions for the slow numpy loop")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per contender (the best is kept)")
    parser.add_argument("--threads", type=int, default=2, help="K of the partitioned cpu run (default 2)")
    parser.add_argument("--rtl-updates", type=int, default=2000, help="transitions of the rtl cycle count")
    parser.add_argument("--rtl-states", type=int, default=64,
                        help="table rows of the rtl run (default 64, FrozenLake8x8's; the RTL holds the table in "
                             "registers, so large tables verilate slowly)")
    parser.add_argument("--no-rtl", action="store_true", help="skip the rtl backend")
    parser.add_argument("--seed", type=int, default=0)


def _tabular_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.tabular import TabularBench

    return TabularBench(states=args.states, actions=args.actions, updates=args.updates,
                        numpy_updates=args.numpy_updates, repeats=args.repeats, threads=args.threads,
                        rtl_updates=args.rtl_updates, rtl_states=args.rtl_states, rtl=not args.no_rtl, seed=args.seed)


def _tabular_policies_options(parser: argparse.ArgumentParser) -> None:
    from pearl_fpga.bench.tabular_policies import ALGOS, ENVS

    parser.add_argument("--eval-episodes", type=int, default=2000, help="sampled evaluation episodes (default 2000)")
    parser.add_argument("--envs", default=",".join(ENVS), help=f"comma-separated env ids (default {','.join(ENVS)})")
    parser.add_argument("--algos", default=",".join(ALGOS), help="qlearning,sarsa (default both)")
    parser.add_argument("--backend", default="auto", help="TabularQ backend for training (default auto: cpu if built)")
    parser.add_argument("--seed", type=int, default=0)


def _tabular_policies_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.tabular_policies import TabularPoliciesBench

    return TabularPoliciesBench(eval_episodes=args.eval_episodes, envs=_names(args.envs), algos=_names(args.algos),
                                backend=args.backend, seed=args.seed)


def _ray_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64, 256, 1024, 4096],
                        help="replay batch sizes (default 1 4 16 ... 4096)")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8], help="env actor counts (default 1 2 4 8)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per actor count (default 3)")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG", help="write the four panels as a PNG")


def _ray_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.ray import RayBench

    return RayBench(batches=tuple(args.batches), actors=tuple(args.actors), seconds=args.seconds)


# ----------------------------------------------------------------------- benches that take a TrainConfig
def _learner_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", choices=(*registry.deep_names(), "all"), default="all",
                        help="learner to time; all: every deep algorithm (default)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    parser.add_argument("--seconds", type=float, default=0.5, help="length of one round per setting (default 0.5)")
    parser.add_argument("--precision", choices=("float32", "bfloat16", "both"), default="both",
                        help="learner precision to time; both (default): float32, and bfloat16 where this host "
                             "has it in hardware")
    parser.add_argument("--compile", action="store_true",
                        help="also time the step as one torch.compile'd unit (compiling takes tens of seconds)")
    parser.add_argument("--profile", action="store_true",
                        help="also sort the serial step's time (float32, and bfloat16 where it runs) into GEMMs, Adam, "
                             "the native passes by name, other torch ops and the rest (torch.profiler and the native "
                             "module's piece timers), at each thread count")
    parser.add_argument("--sbx", action="store_true",
                        help="also time SBX's gradient step at the same settings (JAX at its default threads)")
    add_config_options(parser)  # --config / --set: the learner's TrainConfig (net_arch, batch_size, ...) over the preset


def _learner_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.learner import LearnerBench

    algos = registry.deep_names() if args.algo == "all" else (args.algo,)
    return LearnerBench(configs=tuple(build_config(args, algo) for algo in algos), rounds=args.rounds,
                        seconds=args.seconds, precision=args.precision, compile=args.compile, sbx=args.sbx,
                        profile=args.profile)


def _train_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", choices=registry.deep_names(), default="dqn")
    parser.add_argument("--env", default=None, help="gymnasium id (default CartPole-v1 / Pendulum-v1)")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per run (default 20000)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds (default 0)")
    parser.add_argument("--placement", default=None, help="pearl_fpga placement (default: kernel actor on the CPU build)")
    parser.add_argument("--workers", type=int, default=0, help="pearl_fpga actor worker processes (default 0)")
    parser.add_argument("--threads", type=int, default=0,
                        help="pearl_fpga learner torch threads (default 0: chosen by measurement, its default)")
    parser.add_argument("--sb3-threads", nargs="+", default=["1", "default"], metavar="N|default",
                        help="SB3 torch thread settings to run (default: 1 and default, torch's one per core)")
    parser.add_argument("--double-q", action="store_true",
                        help="DQN: run pearl_fpga's double-DQN target (SB3 has only the vanilla one; default: "
                             "vanilla on both sides, the same algorithm)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--keep-best", action="store_true",
                        help="pearl_fpga: keep the preset's periodic evaluations and report the best kept policy, "
                             "as `pearl-fpga train` does (learning-quality runs; SB3 still reports its final policy)")
    parser.add_argument("--no-sb3", action="store_true", help="skip the Stable-Baselines3 baseline")
    parser.add_argument("--no-sbx", action="store_true",
                        help="skip the SBX baseline (SB3 on JAX, its whole update compiled by XLA, at JAX's default "
                             "threads)")
    add_config_options(parser)
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="also draw env steps/s per library and seed, and where pearl_fpga's time goes, to PNG")


def _train_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.train import TrainBench

    if args.steps < 1 or args.threads < 0:
        raise ValueError("--steps must be >= 1 and --threads >= 0")
    extra: dict[str, Any] = {"double_q": bool(args.double_q)} if args.algo == "dqn" else {}
    if not args.keep_best:
        extra["eval_freq"] = 0
    config = build_config(args, args.algo, args.env, total_steps=args.steps, workers=args.workers,
                          learner_threads=args.threads, **extra)
    return TrainBench(config=config, seeds=tuple(args.seeds), placement=args.placement,
                      sb3_threads=tuple(args.sb3_threads), eval_episodes=args.eval_episodes,
                      keep_best=args.keep_best, sb3=not args.no_sb3, sbx=not args.no_sbx)


def _plan_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", default="dqn", choices=registry.deep_names())
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
    add_config_options(parser)
    parser.add_argument("--plot", default=None, metavar="PNG",
                        help="also draw predicted against measured env steps/s, with the 15%% band, to PNG")


def _plan_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.plan import PlanBench
    from pearl_fpga.config import TrainConfig

    base = TrainConfig.preset(args.algo, args.env)
    starts = args.learning_starts if args.learning_starts is not None else min(base.learning_starts, args.steps // 4)
    config = build_config(args, args.algo, args.env, total_steps=args.steps, learning_starts=starts, eval_freq=0,
                          per=bool(args.per))
    return PlanBench(config=config, max_workers=args.max_workers, quick=args.quick, cached=args.cached,
                     seed=args.seed)


def _fuzz_options(parser: argparse.ArgumentParser) -> None:
    from pearl_fpga.bench.fuzz import FuzzBench
    from pearl_fpga.bench.fuzz_cases import KINDS

    parser.add_argument("--per-kind", type=int, default=FuzzBench.per_kind, help="generated inputs of each file kind")
    parser.add_argument("--kinds", type=_names, default=KINDS, help=f"comma-separated file kinds ({', '.join(KINDS)})")
    parser.add_argument("--seed", type=int, default=FuzzBench.seed, help="seed of the generated inputs")
    parser.add_argument("--jobs", type=int, default=FuzzBench.jobs, help="worker processes at once")


def _fuzz_config(args: argparse.Namespace) -> Any:
    from pearl_fpga.bench.fuzz import FuzzBench

    return FuzzBench(per_kind=args.per_kind, kinds=tuple(args.kinds), seed=args.seed, jobs=args.jobs)


# ------------------------------------------------------------------------------------------- the command
@dataclass(frozen=True)
class Bench:
    module: str  # in pearl_fpga.bench, imported only when the bench runs (some import torch or ray)
    options: Callable[[argparse.ArgumentParser], None]
    config: Callable[[argparse.Namespace], Any]  # the parsed options -> the module's config
    help: str


BENCHES = {
    "replay": Bench("replay", _replay_options, _replay_config,
                    "replay buffer and sum-tree kernel: us per sample/update vs cpprb and TorchRL, rtl cycles"),
    "mlp": Bench("mlp", _mlp_options, _mlp_config,
                 "MLP inference latency: cpu backend vs torch eager (1 and default threads), rtl cycles"),
    "train": Bench("train", _train_options, _train_config,
                   "training throughput (env steps/s, updates/s) and final return vs Stable-Baselines3 and SBX "
                   "at equal settings"),
    "plan": Bench("plan", _plan_options, _plan_config,
                  "predicted vs measured env steps/s of the CPU-only placements, and the planner's choice vs the "
                  "default"),
    "learner": Bench("learner", _learner_options, _learner_config,
                     "learner step time by precision, torch thread count and adaptive, GFLOP/s against the GEMM "
                     "peak of its precision"),
    "tabular": Bench("tabular", _tabular_options, _tabular_config,
                     "tabular Q-learning kernel: updates/s of the cpu backend vs the numpy loop and numba, rtl cycles"),
    "tabular-policies": Bench("tabular_policies", _tabular_policies_options, _tabular_policies_config,
                              "tabular kernel: the policies Q-learning and SARSA learn with each preset, evaluated "
                              "(2,000 episodes and exactly)"),
    "fuzz": Bench("fuzz", _fuzz_options, _fuzz_config,
                  "every kind of file users hand the package, corrupted and edited (seeded), each loaded in a "
                  "subprocess with a timeout: clear errors, tracebacks, hangs, loads that changed"),
    "ray": Bench("ray", _ray_options, _ray_config,
                 "Ray engine: replay shard through Ray vs in-process, actor scaling, weight broadcast, fault recovery"),
}


def _module(bench: Bench) -> Any:
    return importlib.import_module(f"pearl_fpga.bench.{bench.module}")


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, bench in BENCHES.items():
        bench_parser = sub.add_parser(name, help=bench.help, description=bench.help)
        bench.options(bench_parser)
        bench_parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH",
                                  help="write the JSON record (figures, command, commit, machine, load) to PATH; "
                                       "without PATH print it instead of the tables; also kept as its CPU vendor's "
                                       "latest record in hosts/<vendor>/ beside PATH")
        bench_parser.add_argument("--no-vendor-copy", dest="vendor_copy", action="store_false",
                                  help="with --json PATH: keep no copy in hosts/<vendor>/ (A/B runs, scratch records)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pearl_fpga.bench.records import write_record
    from pearl_fpga.commands.common import report_error
    from pearl_fpga.errors import PearlError

    bench = BENCHES[args.bench]
    module = _module(bench)
    errors = Console(stderr=True)
    try:
        config = bench.config(args)  # a bad option or --set field, an unreadable --config
    except (ValueError, TypeError, OSError) as exc:
        return report_error(errors, exc)
    try:
        record = module.run(config, getattr(args, "argv", None), log=lambda line: errors.print(line, markup=False))
    except PearlError as exc:  # e.g. no Ray to connect to, no feasible placement
        return report_error(errors, exc)
    if args.json:
        write_record(record, args.json, per_vendor=args.vendor_copy)
    plot = getattr(args, "plot", None)
    if plot:
        module.plot(record["results"], Path(plot))
        errors.print(f"plot: {plot}", markup=False)
    if args.json != "-":
        module.report(record, Console(width=None if sys.stdout.isatty() else 150))
    return 0
