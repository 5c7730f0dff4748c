"""`pearl-fpga bench replay`: the prioritized replay buffer and the replay kernel against the baselines.

For one configuration (default: capacity 2^20, fanout 16, batch 256, obs dim 4) it measures, in one
run, microseconds per sample(), per update_priorities() and per sample+update iteration of
- pearl_fpga's PrioritizedReplayBuffer on the cpu backend (sample returns transitions + weights),
- cpprb's PrioritizedReplayBuffer and TorchRL's TensorDictPrioritizedReplayBuffer where installed,
- the bare ReplaySampler on the numpy and cpu backends,
and clock cycles per batch of the rtl backend (at a smaller capacity: Verilator builds take long).
Figures are medians over --repeats iterations on a full buffer with random priorities; ratios are
against the faster of the baselines. This machine is shared: expect noise, compare within one run.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.bench.meta import measured_record

BASELINES = ("cpprb", "torchrl")


@dataclass(frozen=True)
class ReplayBench:
    """One configuration of the replay benchmark (the rtl row runs at min(rtl_capacity, capacity))."""

    capacity: int = 1 << 20
    fanout: int = 16
    batch: int = 256
    obs_dim: int = 4
    repeats: int = 1000  # timed sample+update iterations per row
    rtl_capacity: int = 4096
    baselines: tuple[str, ...] = BASELINES
    rtl: bool = True  # its first build (Verilator) is slow
    seed: int = 0

    def __post_init__(self) -> None:
        from pearl_fpga.spec.replay import MAX_BATCH, MAX_CAPACITY

        if not 1 <= self.capacity <= MAX_CAPACITY or not 1 <= self.batch <= MAX_BATCH or self.obs_dim < 1 \
                or self.repeats < 1 or self.fanout not in (2, 4, 8, 16):
            raise ValueError(f"need 1 <= capacity <= {MAX_CAPACITY}, 1 <= batch <= {MAX_BATCH}, obs_dim >= 1, "
                             "repeats >= 1 and fanout 2, 4, 8 or 16")
        unknown = set(self.baselines) - set(BASELINES)
        if unknown:
            raise ValueError(f"unknown baselines {sorted(unknown)}; choose from {', '.join(BASELINES)}")


# ---- timing ---------------------------------------------------------------------------------------
def _time_pair(sample: Callable[[], Any], update: Callable[[Any], None], repeats: int) -> dict[str, float]:
    """Median us of sample(), of update(sample's result), and of the pair; a short warm-up first."""
    for _ in range(min(20, repeats)):
        update(sample())
    ts, tu, tp = np.empty(repeats), np.empty(repeats), np.empty(repeats)
    clock = time.perf_counter
    for r in range(repeats):
        t0 = clock()
        out = sample()
        t1 = clock()
        update(out)
        t2 = clock()
        ts[r], tu[r], tp[r] = t1 - t0, t2 - t1, t2 - t0
    return {
        "sample_us": float(np.median(ts) * 1e6),
        "update_us": float(np.median(tu) * 1e6),
        "iteration_us": float(np.median(tp) * 1e6),
    }


def _transitions(n: int, obs_dim: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "obs": rng.random((n, obs_dim), dtype=np.float32),
        "action": rng.integers(0, 2, n).astype(np.int64),
        "reward": rng.random(n, dtype=np.float32),
        "next_obs": rng.random((n, obs_dim), dtype=np.float32),
        "done": (rng.random(n) < 0.01).astype(np.float32),
    }


CHUNK = 65536  # transitions added per call while filling


# ---- rows -----------------------------------------------------------------------------------------
def bench_pearl(args: ReplayBench) -> dict[str, Any]:
    from pearl_fpga.replay import PrioritizedReplayBuffer

    rng = np.random.default_rng(args.seed)
    buf = PrioritizedReplayBuffer(
        args.capacity, (args.obs_dim,), (), action_dtype=np.int64, fanout=args.fanout, backend="cpu", seed=args.seed
    )
    for start in range(0, args.capacity, CHUNK):
        t = _transitions(min(CHUNK, args.capacity - start), args.obs_dim, rng)
        buf.add(t["obs"], t["action"], t["reward"], t["next_obs"], t["done"])
    for start in range(0, args.capacity, 4096):
        idx = np.arange(start, min(start + 4096, args.capacity))
        buf.update_priorities(idx, rng.normal(size=len(idx)))
    td = rng.normal(size=args.batch)
    return _time_pair(lambda: buf.sample(args.batch), lambda b: buf.update_priorities(b.indices, td), args.repeats)


def bench_cpprb(args: ReplayBench) -> dict[str, Any]:
    from cpprb import PrioritizedReplayBuffer as CpprbPER

    rng = np.random.default_rng(args.seed)
    env = {"obs": {"shape": args.obs_dim}, "act": {"dtype": np.int64}, "rew": {}, "next_obs": {"shape": args.obs_dim}, "done": {}}
    rb = CpprbPER(args.capacity, env, alpha=0.6, eps=1e-6)
    for start in range(0, args.capacity, CHUNK):
        t = _transitions(min(CHUNK, args.capacity - start), args.obs_dim, rng)
        rb.add(obs=t["obs"], act=t["action"], rew=t["reward"], next_obs=t["next_obs"], done=t["done"])
    for start in range(0, args.capacity, 4096):
        idx = np.arange(start, min(start + 4096, args.capacity))
        rb.update_priorities(idx, np.abs(rng.normal(size=len(idx))) + 1e-6)
    td = np.abs(rng.normal(size=args.batch)) + 1e-6
    return _time_pair(
        lambda: rb.sample(args.batch, beta=0.4), lambda b: rb.update_priorities(b["indexes"], td), args.repeats
    )


def bench_torchrl(args: ReplayBench) -> dict[str, Any]:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictPrioritizedReplayBuffer

    torch.manual_seed(args.seed)
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=0.6, beta=0.4, eps=1e-6, storage=LazyTensorStorage(args.capacity), batch_size=args.batch
    )
    rng = np.random.default_rng(args.seed)
    for start in range(0, args.capacity, CHUNK):
        t = _transitions(min(CHUNK, args.capacity - start), args.obs_dim, rng)
        td = TensorDict({k: torch.from_numpy(v) for k, v in t.items()}, batch_size=[len(t["reward"])])
        rb.extend(td)
    for start in range(0, args.capacity, 4096):
        idx = torch.arange(start, min(start + 4096, args.capacity))
        rb.update_priority(idx, torch.from_numpy(np.abs(rng.normal(size=len(idx))) + 1e-6))
    prio = torch.from_numpy(np.abs(rng.normal(size=args.batch)) + 1e-6)
    return _time_pair(rb.sample, lambda b: rb.update_priority(b["index"], prio), args.repeats)


def bench_sampler(args: ReplayBench, backend: str, repeats: int) -> dict[str, Any]:
    from pearl_fpga.kernels.replay import ReplaySampler
    from pearl_fpga.spec.replay import batch_cycle_bound

    rng = np.random.default_rng(args.seed)
    sampler = ReplaySampler(args.capacity, args.fanout, backend=backend)
    for start in range(0, args.capacity, 4096):
        idx = np.arange(start, min(start + 4096, args.capacity))
        sampler.update(idx, rng.exponential(size=len(idx)))
    prio = rng.exponential(size=args.batch)
    return _time_pair(lambda: sampler.sample(args.batch, rng)[0], lambda idx: sampler.update(idx, prio), repeats)


def bench_rtl(args: ReplayBench) -> dict[str, Any]:
    """Cycles per batch on the rtl backend, and the SPEC bound B + 8*depth + 16."""
    from pearl_fpga.kernels.replay import ReplaySampler
    from pearl_fpga.spec.replay import batch_cycle_bound

    capacity = min(args.rtl_capacity, args.capacity)
    batch = min(args.batch, capacity)
    rng = np.random.default_rng(args.seed)
    sampler = ReplaySampler(capacity, args.fanout, backend="rtl")
    try:
        for start in range(0, capacity, batch):
            idx = np.arange(start, min(start + batch, capacity))
            sampler.update(idx, rng.exponential(size=len(idx)))
        sampler.update(rng.integers(0, capacity, batch), rng.exponential(size=batch))  # one full batch
        update_cycles = sampler.last_cycles
        sampler.sample(batch, rng)
        sample_cycles = sampler.last_cycles
    finally:
        sampler.close()
    return {
        "capacity": capacity,
        "batch": batch,
        "sample_cycles": sample_cycles,
        "update_cycles": update_cycles,
        "bound_cycles": batch_cycle_bound(batch, sampler.depth),
    }


def _attempt(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one row; a baseline that is missing or fails to load becomes a note, not a crash."""
    try:
        return fn()
    except ImportError as exc:
        return {"error": f"not installed ({exc.name or exc})"}
    except Exception as exc:  # a baseline that fails to load (e.g. an extension built for another torch)
        first_sentence = str(exc).split(". ")[0].splitlines()[0] if str(exc) else type(exc).__name__
        return {"error": f"failed to load: {first_sentence[:100]}"}


def measure(args: ReplayBench, progress: Callable[[str], None]) -> dict[str, Any]:
    from pearl_fpga.errors import PearlError

    results: dict[str, Any] = {}
    progress("pearl_fpga PrioritizedReplayBuffer (cpu)")
    results["pearl_fpga"] = bench_pearl(args)
    chosen = set(args.baselines)
    for name, label, fn in (("cpprb", "cpprb PrioritizedReplayBuffer", bench_cpprb), ("torchrl", "TorchRL TensorDictPrioritizedReplayBuffer", bench_torchrl)):
        if name in chosen:
            progress(label)
            results[name] = _attempt(functools.partial(fn, args))
        else:
            results[name] = {"error": "skipped (--baselines)"}
    progress("ReplaySampler cpu")
    results["sampler_cpu"] = bench_sampler(args, "cpu", args.repeats)
    progress("ReplaySampler numpy")
    results["sampler_numpy"] = bench_sampler(args, "numpy", max(3, min(args.repeats, 30)))
    if not args.rtl:
        rtl: dict[str, Any] = {"error": "skipped (--no-rtl)"}
    else:
        progress("ReplaySampler rtl (first run builds the RTL with Verilator)")
        try:
            rtl = bench_rtl(args)
        except (PearlError, ImportError) as exc:
            rtl = {"error": f"not available: {exc}"}
    baselines = [results[k]["iteration_us"] for k in ("cpprb", "torchrl") if "iteration_us" in results[k]]
    best = min(baselines) if baselines else None
    if best is not None:
        for row in results.values():
            if "iteration_us" in row:
                row["speedup_vs_best_baseline"] = best / row["iteration_us"]
    return {
        "config": {
            "capacity": args.capacity,
            "fanout": args.fanout,
            "batch": args.batch,
            "obs_dim": args.obs_dim,
            "repeats": args.repeats,
            "statistic": "median",
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "results": results,
        "best_baseline_iteration_us": best,
        "rtl": rtl,
    }


LABELS = {
    "pearl_fpga": "pearl_fpga buffer (cpu)",
    "cpprb": "cpprb PER buffer",
    "torchrl": "TorchRL PER buffer",
    "sampler_cpu": "ReplaySampler cpu",
    "sampler_numpy": "ReplaySampler numpy",
}


def report(record: dict[str, Any], console: Any) -> None:
    """The record's table, printed to a rich Console."""
    from rich.table import Table

    report = record["results"]
    cfg = report["config"]
    table = Table(
        title=f"replay: capacity {cfg['capacity']}, fanout {cfg['fanout']}, batch {cfg['batch']}, "
        f"obs dim {cfg['obs_dim']} (median of {cfg['repeats']})"
    )
    notes: list[str] = []
    table.add_column("implementation", no_wrap=True)
    for col in ("sample us", "update us", "sample+update", "speed-up"):
        table.add_column(col, justify="right")
    for key, row in report["results"].items():
        if "error" in row:
            notes.append(f"{LABELS[key]}: {row['error']}")
            table.add_row(LABELS[key], "n/a", "n/a", "n/a", "")
            continue
        ratio = row.get("speedup_vs_best_baseline")
        table.add_row(
            LABELS[key],
            f"{row['sample_us']:.1f}",
            f"{row['update_us']:.1f}",
            f"{row['iteration_us']:.1f}",
            f"{ratio:.2f}x" if ratio is not None else "no baseline",
        )
    rtl = report["rtl"]
    if "error" in rtl:
        table.add_row("rtl (cycles/batch)", "n/a", "n/a", "", "")
        notes.append(f"rtl backend: {rtl['error']}")
    else:
        table.add_row("rtl (cycles/batch)", str(rtl["sample_cycles"]), str(rtl["update_cycles"]), "", "")
        notes.append(
            f"rtl backend at capacity {rtl['capacity']}, batch {rtl['batch']}: cycles per batch, "
            f"SPEC bound B + 8*depth + 16 = {rtl['bound_cycles']}"
        )
    console.print(table)
    for note in notes:
        console.print(f"  {note}", markup=False)


def run(config: ReplayBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Measure every row of `config`; the JSON record (argv: the command line, for the record)."""
    return measured_record("replay", lambda: measure(config, lambda step: log(f"measuring {step}")), argv)
