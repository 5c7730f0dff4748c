"""`pearl-fpga bench learner`: one learner step at each torch thread count and under the adaptive
choice (`learner_threads = 0`), side by side in one run, with the achieved GFLOP/s against the peak.

The step is the preset's (DQN CartPole-v1: batch 64, 256x256, double-DQN, fused CPU step; DDPG
Pendulum-v1: batch 256, 400x300, actor and critic gradients on two threads) on a fixed batch, so it
times the learner alone. Rounds interleave the thread counts, so a change of load hits all of them;
the table shows the median round.

Work per step: the floating-point operations of one step of the torch path, counted by
torch.utils.flop_counter (the fused path does the same GEMMs; its thin layers are a few percent more).
Peak: the best of five 2048x2048x2048 float32 torch.mm at that thread count, the sustained GEMM rate
of this machine as torch's BLAS reaches it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np

from pearl_fpga.commands.bench_meta import LoadProbe, with_metadata
from pearl_fpga.commands.config_args import add_config_options, build_config

HELP = "learner step time at each torch thread count and adaptive, GFLOP/s against the GEMM peak"
PEAK_N = 2048


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--algo", choices=("dqn", "ddpg", "td3", "both"), default="both",
                        help="learner to time; both: dqn and ddpg (default)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    parser.add_argument("--seconds", type=float, default=0.5, help="length of one round per setting (default 0.5)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH ('-' = stdout only)")
    add_config_options(parser)  # --config / --set: the learner's TrainConfig (net_arch, batch_size, ...) over the preset


def synthetic_batch(algo: str, obs_dim: int, batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A replay batch of the right shapes and dtypes (its values do not change the work)."""
    rng = np.random.default_rng(seed)
    discrete = algo == "dqn"
    return {
        "obs": rng.standard_normal((batch_size, obs_dim)).astype(np.float32),
        "action": rng.integers(0, 2, batch_size) if discrete
        else rng.uniform(-1, 1, (batch_size, 1)).astype(np.float32),
        "reward": rng.standard_normal(batch_size).astype(np.float32),
        "next_obs": rng.standard_normal((batch_size, obs_dim)).astype(np.float32),
        "done": (rng.random(batch_size) < 0.05).astype(np.float32),
        "weights": np.ones(batch_size, np.float32),
        "indices": np.arange(batch_size),
    }


def _learner(cfg: Any) -> tuple[Any, Any]:
    from pearl_fpga.algos import make_algo
    from pearl_fpga.algos.common import Batch

    algo = cfg.algo
    obs_dim, action_dim = (4, 2) if algo == "dqn" else (3, 1)
    learner = make_algo(cfg, obs_dim, action_dim, device="cpu", seed=0)
    batch = Batch(**synthetic_batch(algo, obs_dim, cfg.batch_size)).to_torch(learner.device, discrete=algo == "dqn")
    return learner, batch


def step_flops(cfg: Any) -> int:
    """Floating-point operations of one learner step of `cfg` (torch path, single-threaded counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    from pearl_fpga.config import TrainConfig

    if cfg.algo in ("ddpg", "td3"):
        cfg = TrainConfig.from_dict({**cfg.to_dict(), "concurrent_updates": False})
    learner, batch = _learner(cfg)
    if cfg.algo == "dqn":
        from pearl_fpga.algos.dqn import DQN

        learner = DQN(learner.config, 4, 2, device="cpu", seed=0, fused=False)
    learner.learn(batch)
    period = getattr(learner, "policy_delay", 1)  # TD3 updates its actor on one step in policy_delay: count a whole period
    with FlopCounterMode(display=False) as counter:
        for _ in range(period):
            learner.learn(batch)
    return int(counter.get_total_flops()) // period


def peak_gflops(threads: int) -> float:
    """Best of five PEAK_N^3 float32 GEMMs at `threads` torch threads, in GFLOP/s."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(PEAK_N, PEAK_N), torch.randn(PEAK_N, PEAK_N)
        out = torch.empty(PEAK_N, PEAK_N)
        torch.mm(a, b, out=out)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2 * PEAK_N**3 / best / 1e9


def measure(cfg: Any, rounds: int, seconds: float) -> dict[str, Any]:
    """Median seconds per step of `cfg`'s learner at each thread count and adaptive, over interleaved rounds."""
    import torch

    from pearl_fpga.runtime.threads import AdaptiveThreads, available_cores, learner_callers, thread_candidates

    old = torch.get_num_threads()
    learner, batch = _learner(cfg)
    counts = thread_candidates(available_cores())
    per_round: dict[str, list[float]] = {str(n): [] for n in counts}
    per_round["auto"] = []
    callers = learner_callers(learner.config)
    controller = AdaptiveThreads(callers=callers)
    try:
        for _ in range(3):
            learner.learn(batch)  # buffers, first-call dispatch
        for _ in range(max(1, rounds)):
            for n in counts:
                torch.set_num_threads(n)
                learner.learn(batch)
                per_round[str(n)].append(_time_steps(lambda: learner.learn(batch), seconds))
            torch.set_num_threads(controller.threads)

            def adaptive_step() -> None:
                with controller.step():
                    learner.learn(batch)

            per_round["auto"].append(_time_steps(adaptive_step, seconds))
    finally:
        torch.set_num_threads(old)
    return {
        "counts": list(counts),
        "step_s": {k: statistics.median(v) for k, v in per_round.items()},
        "rounds_s": per_round,
        "auto_choice": controller.choice.describe(),
        "auto_threads": controller.choice.current,
        "callers": callers,  # DDPG's concurrent update: two callers, each with the intra-op threads
    }


def _time_steps(step: Any, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        step()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return elapsed / n


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from pearl_fpga.runtime.threads import available_cores, thread_candidates

    console = Console(stderr=args.json == "-")
    algos = ("dqn", "ddpg") if args.algo == "both" else (args.algo,)
    try:
        configs = {algo: build_config(args, algo) for algo in algos}
    except (ValueError, TypeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    probe = LoadProbe().start()
    peaks = {str(n): peak_gflops(n) for n in thread_candidates(available_cores())}
    results: dict[str, Any] = {"peak_gflops": peaks, "peak_method": f"best of 5 float32 torch.mm {PEAK_N}^3",
                               "algos": {}}
    for algo in algos:
        console.print(f"[dim]{escape(f'timing the {algo} learner step ({args.rounds} rounds)...')}[/dim]")
        flops = step_flops(configs[algo])
        m = measure(configs[algo], args.rounds, args.seconds)
        m["config"] = {k: configs[algo].to_dict()[k] for k in ("net_arch", "batch_size")}
        m["flops_per_step"] = flops
        m["gflops"] = {k: flops / t / 1e9 for k, t in m["step_s"].items()}
        results["algos"][algo] = m
    probe.stop()
    load = probe.figures()
    cores = available_cores()

    table = Table(title="Learner step by torch thread count (median of interleaved rounds)",
                  caption="% of peak: against the GEMM peak of the cores the step keeps busy "
                          "(DDPG's concurrent update: two callers)")
    for col in ("algo", "threads", "us/step", "GFLOP/s", "% of peak", "vs 1 thread"):
        table.add_column(col, justify="right" if col not in ("algo", "threads") else "left")
    for algo, m in results["algos"].items():
        base = m["step_s"]["1"]
        for key, t in m["step_s"].items():
            threads = m["auto_threads"] if key == "auto" else int(key)
            n = str(min(cores, threads * m["callers"]))  # the cores this setting keeps busy
            label = f"auto ({m['auto_threads']})" if key == "auto" else key
            table.add_row(algo, label, f"{t * 1e6:.0f}", f"{m['gflops'][key]:.1f}",
                          f"{100 * m['gflops'][key] / peaks[n]:.0f}%", f"{base / t:.2f}x")
    console.print(table)
    console.print("Peak GFLOP/s (" + results["peak_method"] + "): "
                  + ", ".join(f"{n} thread{'s' if n != '1' else ''} {g:.0f}" for n, g in peaks.items()), markup=False)
    for algo, m in results["algos"].items():
        console.print(f"{algo}: {m['flops_per_step'] / 1e6:.1f} MFLOP per step; adaptive: {m['auto_choice']}", markup=False)
    note = " (UNDER LOAD: other processes kept more than half the cores busy)" if load["under_load"] else ""
    console.print(f"load average {load['load_before'][0]:.1f} -> {load['load_after'][0]:.1f} on {cores} cores{note}", markup=False)
    if args.json:
        text = json.dumps(with_metadata("learner", results, getattr(args, "argv", None), probe), indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0

