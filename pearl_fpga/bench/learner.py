"""`pearl-fpga bench learner`: one learner step at each torch thread count and under the adaptive
choice (`learner_threads = 0`), in each precision this host runs in hardware (float32, and bfloat16
where the CPU has AMX or AVX512_BF16: placement learn=cpu-bf16) and, with compile, as one
torch.compile'd unit; side by side in one run, with the achieved GFLOP/s against the peak of the
precision the step's GEMMs run in.

The step is the preset's (DQN CartPole-v1: batch 64, 256x256, double-DQN; DDPG Pendulum-v1: batch
256, 400x300, actor and critic gradients on the step's starting critic; TD3 Pendulum-v1: DDPG's shapes,
twin critics; the other algorithms at their registry preset; each the fused CPU step where the native
module is built) on a fixed batch, so it times the learner alone. Learners with an update schedule
(`update_schedule`) are timed in each: "serial" on one thread, "concurrent" with the actor's half or a
second critic on a second thread, and the preset's "auto", chosen by measurement while it is timed. Rounds interleave the thread counts and schedules,
so a change of load hits all of them; the table shows the median round.

Work per step: the floating-point operations of one step of the torch path, counted by
torch.utils.flop_counter (the fused path does the same GEMMs; its thin layers are a few percent more).
Peak: the best of five 2048x2048x2048 torch.mm at that thread count, in float32 and in bfloat16, before
and after the steps are timed (the better of the two), the sustained GEMM rate of this machine as
torch's BLAS (oneDNN for bfloat16) reaches it. A bfloat16 step's share is taken against the bfloat16
peak, although its thin layers, loss and Adam run in float32.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.bench.meta import measured_record
from pearl_fpga.config import TrainConfig

PEAK_N = 2048


@dataclass(frozen=True)
class LearnerBench:
    """The learners to time (one TrainConfig each: its algo, net_arch, batch_size, ...) and how long."""

    configs: tuple[TrainConfig, ...]
    rounds: int = 5  # interleaved timing rounds
    seconds: float = 0.5  # length of one round per setting
    precision: str = "both"  # "float32", "bfloat16" or "both" (bfloat16 where this host has it in hardware)
    compile: bool = False  # also time the step as one torch.compile'd unit (compiling takes tens of seconds)
    sbx: bool = False  # also time SBX's gradient step at the same settings (pearl_fpga.bench.learner_sbx)
    profile: bool = False  # also sort a step's time into its parts (learner_profile)

    def __post_init__(self) -> None:
        if not self.configs or self.rounds < 1 or self.seconds <= 0:
            raise ValueError("need at least one learner config, rounds >= 1 and seconds > 0")
        if self.precision not in ("float32", "bfloat16", "both"):
            raise ValueError(f"precision must be float32, bfloat16 or both, got {self.precision!r}")


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


def _learner(cfg: Any, device: str = "cpu") -> tuple[Any, Any]:
    from pearl_fpga.algos import make_learner
    from pearl_fpga.algos.common import Batch

    algo = cfg.algo
    obs_dim, action_dim = (4, 2) if algo == "dqn" else (3, 1)
    learner = make_learner(cfg, obs_dim, action_dim, device=device, seed=0)
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
    if cfg.algo in ("ddpg", "td3"):
        learner.split_critics = False  # the counter sees the calling thread's ops only
    if "serial" in getattr(learner, "schedules", ()):
        learner.set_schedule("serial")  # likewise: every part of the step on this thread
    learner.update(batch)
    period = getattr(learner, "policy_delay", 1)  # TD3 updates its actor on one step in policy_delay: count a whole period
    with FlopCounterMode(display=False) as counter:
        for _ in range(period):
            learner.update(batch)
    return int(counter.get_total_flops()) // period


def peak_gflops(threads: int, precision: str = "float32") -> float:
    """Best of five PEAK_N^3 GEMMs of `precision` ("float32" or "bfloat16") at `threads` torch threads, in GFLOP/s."""
    import torch

    dtype = getattr(torch, precision)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(PEAK_N, PEAK_N, dtype=dtype), torch.randn(PEAK_N, PEAK_N, dtype=dtype)
        out = torch.empty(PEAK_N, PEAK_N, dtype=dtype)
        torch.mm(a, b, out=out)
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            torch.mm(a, b, out=out)
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2 * PEAK_N**3 / best / 1e9


def measure_variants(variants: dict[str, tuple[Any, str]], rounds: int, seconds: float) -> dict[str, dict[str, Any]]:
    """Median seconds per step of each variant's learner (label -> (config, learn target)) at each thread
    count and adaptive, over rounds that time every setting of every variant, so that a change of load
    hits all of them. Each variant's figures include the seconds its first two steps took
    ("first_steps_s": a compiled step compiles then)."""
    import torch

    from pearl_fpga.runtime.threads import AdaptiveThreads, available_cores, learner_callers, thread_candidates
    from pearl_fpga.runtime.update_schedule import schedule_control, schedule_report, step_timing

    old = torch.get_num_threads()
    counts = thread_candidates(available_cores())
    runs: dict[str, dict[str, Any]] = {}
    try:
        for label, (cfg, device) in variants.items():
            learner, batch = _learner(cfg, device)
            t0 = time.perf_counter()
            for _ in range(2):
                learner.update(batch)  # buffers, first-call dispatch, compiling
            first = time.perf_counter() - t0
            learner.update(batch)
            # a compiled step runs on one thread (DDPG's concurrent update included)
            callers = 1 if learner.config.learner_compile else learner_callers(learner.config)
            controller = AdaptiveThreads(callers=callers)
            runs[label] = {"learner": learner, "batch": batch, "callers": callers, "first": first,
                           "controller": controller, "schedule": schedule_control(learner, controller),
                           "per_round": {**{str(n): [] for n in counts}, "auto": []}}
        for _ in range(max(1, rounds)):
            for run in runs.values():
                learner, batch, controller = run["learner"], run["batch"], run["controller"]
                schedule_step = step_timing(run["schedule"])  # update_schedule auto: measured at every count

                def fixed_step() -> None:
                    with schedule_step:
                        learner.update(batch)

                for n in counts:
                    torch.set_num_threads(n)
                    learner.update(batch)
                    run["per_round"][str(n)].append(time_steps(fixed_step, seconds))
                torch.set_num_threads(controller.threads)
                both = step_timing(controller, run["schedule"])

                def adaptive_step() -> None:
                    with both:
                        learner.update(batch)

                run["per_round"]["auto"].append(time_steps(adaptive_step, seconds))
    finally:
        torch.set_num_threads(old)
    return {label: {
        "counts": list(counts),
        "step_s": {k: statistics.median(v) for k, v in run["per_round"].items()},
        "rounds_s": run["per_round"],
        "auto_choice": run["controller"].choice.describe(),
        "auto_threads": run["controller"].choice.current,
        "schedule": schedule_report(run["learner"], run["schedule"]),
        "callers": run["callers"],  # DDPG's concurrent update: two callers, each with the intra-op threads
        "first_steps_s": run["first"],
    } for label, run in runs.items()}


def variants_of(cfg: Any, precision: str, compiled: bool) -> tuple[dict[str, tuple[Any, str]], dict[str, str]]:
    """The learners to time (label -> (config, learn target)) and why a precision asked for is left out."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.placement import bf16_unsupported

    targets = {"float32": "cpu", "bfloat16": "cpu-bf16"}
    wanted = list(targets) if precision == "both" else [precision]
    skipped: dict[str, str] = {}
    from pearl_fpga.algos.registry import learner_class

    reason = bf16_unsupported("cpu")
    if reason is None and "bfloat16" not in learner_class(cfg.algo).precisions:
        reason = f"{cfg.algo}'s learner runs in float32 only"
    if reason is not None and "bfloat16" in wanted:
        wanted.remove("bfloat16")
        skipped["bfloat16"] = reason
    out: dict[str, tuple[Any, str]] = {}
    for name in wanted:
        out[name] = (cfg, targets[name])
        for schedule in schedules_of(cfg):
            out[f"{name} {schedule}"] = (TrainConfig.from_dict({**cfg.to_dict(), "update_schedule": schedule}),
                                         targets[name])
        if compiled:
            out[f"{name} compiled"] = (TrainConfig.from_dict({**cfg.to_dict(), "learner_compile": True}), targets[name])
    return out, skipped


def schedules_of(cfg: Any) -> tuple[str, ...]:
    """The fixed update schedules to time beside `cfg`'s own: serial and concurrent where its learner's step
    has work for a second thread and its schedule is measured (update_schedule auto), else none."""
    from pearl_fpga.algos.registry import learner_class
    from pearl_fpga.config import TrainConfig

    if getattr(cfg, "update_schedule", None) != "auto":
        return ()
    concurrent = TrainConfig.from_dict({**cfg.to_dict(), "update_schedule": "concurrent"})
    return ("serial", "concurrent") if learner_class(cfg.algo).callers(concurrent) > 1 else ()


def time_steps(step: Any, seconds: float) -> float:
    """Mean seconds per call of `step` over calls that fill `seconds`."""
    n, t0 = 0, time.perf_counter()
    while True:
        step()
        n += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return elapsed / n


def profile_text(p: dict[str, Any]) -> str:
    """One `bench learner --profile` entry as a line: each category's microseconds and share of the step."""
    parts = [f"{name} {t * 1e6:.0f} us ({100 * t / p['step_s']:.0f}%)" for name, t in p["seconds"].items()]
    gemm = f"; the GEMMs alone at {p['gemm_gflops']:.0f} GFLOP/s" if p.get("gemm_gflops") else ""
    pieces = [f"{name} {t * 1e6:.0f}" for name, t in p.get("native", {}).items() if name != "clip_adam"][:5]
    native = f"; the largest native passes (us): {', '.join(pieces)}" if pieces else ""
    return ", ".join(parts) + gemm + native


def learner_rows(results: dict[str, Any]) -> list[tuple[str, str, str, float, float, float, str]]:
    """(algo, learner, threads, seconds per step, GFLOP/s, peak GFLOP/s of its precision and busy cores,
    speed against the float32 step at 1 thread) of every timed setting, the base learner first."""
    peaks = {"float32": results["peak_gflops"], "bfloat16": results.get("peak_gflops_bfloat16", {})}
    rows = []
    for algo, base in results["algos"].items():
        reference = base["step_s"]["1"]
        for label, m in [(base.get("label", "float32"), base), *base.get("variants", {}).items()]:
            peak = peaks[label.split()[0]]
            for key, t in m["step_s"].items():
                threads = m["auto_threads"] if key == "auto" else int(key)
                busy = str(max(int(k) for k in peak if int(k) <= max(1, threads * m.get("callers", 1))))  # cores kept busy
                label_threads = f"auto ({m['auto_threads']})" if key == "auto" else key
                rows.append((algo, label, label_threads, t, m["gflops"][key], peak[busy], f"{reference / t:.2f}x"))
        sbx = base.get("sbx", {})
        if "step_s" in sbx:  # JAX's default threads: every core busy
            peak = peaks["float32"]
            rows.append((algo, "SBX (JAX)", "JAX default", sbx["step_s"], sbx["gflops"], peak[max(peak, key=int)],
                         f"{reference / sbx['step_s']:.2f}x"))
    return rows


def measure_all(args: LearnerBench, log: Callable[[str], None]) -> dict[str, Any]:
    """The GEMM peak of each precision at each thread count, then every learner's step times and GFLOP/s
    in each precision (and compiled, when asked), then the peaks again (the better of the two)."""
    from pearl_fpga.runtime.threads import available_cores, thread_candidates

    counts = thread_candidates(available_cores())
    plans = {config.algo: variants_of(config, args.precision, args.compile) for config in args.configs}
    skipped = {f"{name} ({algo})" if len(plans) > 1 else name: reason
               for algo, (_, why) in plans.items() for name, reason in why.items()}
    if not any(variants for variants, _ in plans.values()):
        from pearl_fpga.errors import BackendUnavailable

        raise BackendUnavailable(f"no learner to time: {'; '.join(f'{k}: {v}' for k, v in skipped.items())}")
    precisions = ["float32", *(["bfloat16"] if any("bfloat16" in v for v, _ in plans.values()) else [])]
    peaks = {p: {str(n): peak_gflops(n, p) for n in counts} for p in precisions}
    results: dict[str, Any] = {"peak_gflops": peaks["float32"], "peak_method": f"best of 5 torch.mm {PEAK_N}^3 "
                               "of the precision, before and after the steps", "algos": {}, "skipped": skipped}
    if "bfloat16" in peaks:
        results["peak_gflops_bfloat16"] = peaks["bfloat16"]
    for config in args.configs:
        algo = config.algo
        variants = plans[algo][0]
        log(f"timing the {algo} learner step ({args.rounds} rounds: {', '.join(variants)})...")
        flops = step_flops(config)
        figures = measure_variants(variants, args.rounds, args.seconds)
        for m in figures.values():
            m["config"] = {k: config.to_dict()[k] for k in ("net_arch", "batch_size")}
            m["flops_per_step"] = flops
            m["gflops"] = {k: flops / t / 1e9 for k, t in m["step_s"].items()}
        first = next(iter(figures))
        results["algos"][algo] = {**figures[first], "label": first,
                                  "variants": {k: v for k, v in figures.items() if k != first}}
        if args.profile:
            from pearl_fpga.bench.learner_profile import profile_step

            profiled = ["float32", *(["bfloat16"] if any(v.startswith("bfloat16") for v in variants) else [])]
            log(f"profiling the {algo} learner step (serial schedule, {' and '.join(profiled)})...")
            results["algos"][algo]["profile"] = [profile_step(config, n, precision=p) for p in profiled for n in counts]
        if args.sbx:
            from pearl_fpga.bench.learner_sbx import sbx_step

            log(f"timing SBX's {algo} gradient step ({args.rounds} rounds)...")
            theirs = sbx_step(config, args.rounds, args.seconds)
            if "step_s" in theirs:
                theirs["gflops"] = flops / theirs["step_s"] / 1e9
            results["algos"][algo]["sbx"] = theirs
    for precision, peak in peaks.items():  # the better of two moments: other load lowers one of them
        peak.update({n: max(g, peak_gflops(int(n), precision)) for n, g in peak.items()})
    return results


def run(config: LearnerBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Time every learner of `config`; the JSON record (argv: the command line, for the record)."""
    return measured_record("learner", lambda: measure_all(config, log), argv)


def report(record: dict[str, Any], console: Any) -> None:
    """The record's table and lines, printed to a rich Console."""
    from rich.table import Table

    from pearl_fpga.runtime.threads import available_cores

    results = record["results"]
    cores = available_cores()
    table = Table(title="Learner step by precision and torch thread count (median of interleaved rounds)",
                  caption="% of peak: against the GEMM peak of the step's precision on the cores it keeps busy "
                          "(a concurrent schedule: two callers); speed-up: against the first learner of the "
                          "algorithm at 1 thread")
    for col in ("algo", "learner", "threads", "us/step", "GFLOP/s", "peak GFLOP/s", "% of peak", "speed-up"):
        table.add_column(col, justify="right" if col not in ("algo", "learner", "threads") else "left")
    for algo, label, threads, t, gflops, peak, ratio in learner_rows(results):
        table.add_row(algo, label, threads, f"{t * 1e6:.0f}", f"{gflops:.1f}", f"{peak:.0f}", f"{100 * gflops / peak:.0f}%",
                      ratio)
    console.print(table)
    peaks = {"float32": results["peak_gflops"], **({"bfloat16": results["peak_gflops_bfloat16"]}
                                                   if "peak_gflops_bfloat16" in results else {})}
    for precision, peak in peaks.items():
        console.print(f"Peak {precision} GFLOP/s (best of 5 torch.mm {PEAK_N}^3): "
                      + ", ".join(f"{n} thread{'s' if n != '1' else ''} {g:.0f}" for n, g in peak.items()), markup=False)
    for name, reason in results.get("skipped", {}).items():
        console.print(f"{name}: not timed ({reason})", markup=False)
    for algo, base in results["algos"].items():
        console.print(f"{algo}: {base['flops_per_step'] / 1e6:.1f} MFLOP per step (GEMMs of forward and backward); "
                      f"adaptive: {base['auto_choice']}", markup=False)
        for p in base.get("profile", []):
            console.print(f"{algo} {p.get('precision', 'float32')} serial step at {p['threads']} thread(s), "
                          f"{p['step_s'] * 1e6:.0f} us: "
                          + profile_text(p), markup=False)
        if "skipped" in base.get("sbx", {}):
            console.print(f"{algo}: SBX not timed ({base['sbx']['skipped']})", markup=False)
        elif "sbx" in base:
            console.print(f"{algo}: SBX {base['sbx']['version']} (jax {base['sbx']['jax']}): its first two steps took "
                          f"{base['sbx']['first_steps_s']:.1f} s (XLA compiling); its step includes its replay sample "
                          f"({base['sbx'].get('gradient_steps_per_call', 1)} gradient step(s) per train call)",
                          markup=False)
        if base.get("schedule"):
            console.print(f"{algo} update schedule: {base['schedule']}", markup=False)
        for label, m in base.get("variants", {}).items():
            if "compiled" in label:
                console.print(f"{algo} {label}: the first two steps took {m['first_steps_s']:.1f} s (compiling)",
                              markup=False)
    note = " (UNDER LOAD: other processes kept more than half the cores busy)" if record["under_load"] else ""
    console.print(f"load average {record['load_average_before'][0]:.1f} -> {record['load_average_after'][0]:.1f} "
                  f"on {cores} cores{note}", markup=False)
