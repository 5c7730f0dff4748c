"""`pearl-fpga bench mlp`: latency of the MLP kernel's cpu backend next to torch eager, in one run.

For the networks 4-64-64-2 (DQN CartPole) and 3-256-256-1 (a wide actor/critic) at batch 1, 32 and
1024 it times one `MLPInfer.__call__` (float observations in, float32 out, quantization included)
and one torch eager forward (`torch.inference_mode`, tensor from numpy and back) with 1 thread and
with torch's default threads. Each round times many calls; the table shows the best round of
--repeats (robust on a shared machine: interference only ever adds time), the JSON also the median.
Then the rtl backend's cycles per call and per inference at batch 8 (steady state) against the
target MACs / LANES + 8 * layers + 16 (SPEC.md), if the rtl backend can run here.
Targets (issue 3): batch 1 at least 10x faster than torch; batch 1024 no slower than torch.
Last, one learner weight sync (`MLPInfer.load_weights`) of DQN's Q-network and DDPG/TD3's actor next to
the reference steps it replaces (issue 33), with torch at one thread as in an actor process.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.bench.meta import measured_record

NETWORKS = ((4, 64, 64, 2), (3, 256, 256, 1))
SYNC_NETWORKS = (((4, 64, 64, 2), False), ((3, 400, 300, 1), True))  # (widths, tanh): DQN's Q-net, DDPG/TD3's actor
BATCHES = (1, 32, 1024)
RTL_BATCH = 8
ROUND_SECONDS = 0.05  # each timing round runs about this long


@dataclass(frozen=True)
class MlpBench:
    repeats: int = 7  # timing rounds per figure
    rtl: bool = True  # the rtl backend's cycle counts

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError("repeats must be at least 1")


def _network(widths: tuple[int, ...], seed: int = 0, tanh: bool = False) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for n, m in zip(widths[:-1], widths[1:]):
        mods += [nn.Linear(n, m), nn.ReLU()]
    return nn.Sequential(*mods[:-1], *([nn.Tanh()] if tanh else [])).eval()


def time_call(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(best, median) seconds per call over `repeats` rounds, each about ROUND_SECONDS long."""
    fn()  # warm up (first-call allocations, clone dispatch)
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < ROUND_SECONDS / 5:  # calibrate calls per round
        fn()
        n += 1
    per_round = max(1, int(ROUND_SECONDS * n / (time.perf_counter() - start)))
    rounds = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for _ in range(per_round):
            fn()
        rounds.append((time.perf_counter() - t0) / per_round)
    return float(np.min(rounds)), float(np.median(rounds))


def _rtl_row(policy_layers: Any, widths: tuple[int, ...]) -> dict[str, Any]:
    """Cycles of the rtl backend for one network, or the reason it cannot run here."""
    from pearl_fpga.errors import PearlError
    from pearl_fpga.kernels.mlp import make_backend
    from pearl_fpga.spec.mlp import HEAD_RAW, infer_cycle_bound

    macs = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    try:
        backend = make_backend("rtl")
        lanes = int(getattr(backend, "lanes", 16))
        if max(widths) > backend.max_width:
            return {"available": False, "reason": f"wider than the rtl build's MAX_WIDTH {backend.max_width}"}
        backend.load(policy_layers, HEAD_RAW)
        rng = np.random.default_rng(0)
        x = rng.integers(-4096, 4096, size=(1, widths[0])).astype(np.int16)
        backend.infer(x)
        cycles_1 = backend.last_cycles
        backend.infer(np.repeat(x, RTL_BATCH, axis=0))
        cycles_b = backend.last_cycles
    except (PearlError, ImportError, OSError, RuntimeError) as exc:
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    target = infer_cycle_bound(list(zip(widths[:-1], widths[1:], strict=True)), lanes)
    per_inf = cycles_b / RTL_BATCH if cycles_b else None
    return {
        "available": True,
        "lanes": lanes,
        "cycles_batch1": cycles_1,
        f"cycles_batch{RTL_BATCH}": cycles_b,
        "cycles_per_inference": per_inf,
        "target_cycles_per_inference": target,
        "meets_target": bool(per_inf is not None and per_inf <= target),
    }


def measure(repeats: int, with_rtl: bool, progress: Callable[[str], None]) -> dict[str, Any]:
    import torch

    from pearl_fpga.kernels import MLPInfer

    default_threads = torch.get_num_threads()
    results: dict[str, Any] = {
        "torch_default_threads": default_threads,
        "repeats": repeats,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "networks": [],
    }
    try:
        for widths in NETWORKS:
            name = "-".join(map(str, widths))
            net = _network(widths)
            rng = np.random.default_rng(0)
            calib = rng.standard_normal((1024, widths[0])).astype(np.float32)
            policy = MLPInfer.from_torch(net, backend="cpu", calibration=calib)
            results["cpu_path"] = str(getattr(policy.backend, "path", "plain"))
            entry: dict[str, Any] = {
                "network": name,
                "macs": sum(a * b for a, b in zip(widths[:-1], widths[1:])),
                "max_error": policy.max_error,
                "rows": [],
            }
            for batch in BATCHES:
                progress(f"{name} batch {batch}")
                x = calib[:batch] if batch > 1 else calib[0]
                row: dict[str, Any] = {"batch": batch}
                best, median = time_call(lambda: policy(x), repeats)
                row["cpu_us"], row["cpu_median_us"] = best * 1e6, median * 1e6
                row["cpu_threads"] = int(policy.backend.engine.threads_for(batch))  # batches split over threads

                def torch_call() -> Any:
                    with torch.inference_mode():
                        return net(torch.from_numpy(x)).numpy()

                for label, threads in (("torch_1thread_us", 1), ("torch_default_us", default_threads)):
                    torch.set_num_threads(threads)
                    best, median = time_call(torch_call, repeats)
                    row[label], row[label.replace("_us", "_median_us")] = best * 1e6, median * 1e6
                torch.set_num_threads(default_threads)
                row["speedup_vs_torch_1thread"] = row["torch_1thread_us"] / row["cpu_us"]
                row["speedup_vs_torch_default"] = row["torch_default_us"] / row["cpu_us"]
                row["cpu_ns_per_inference"] = row["cpu_us"] * 1e3 / batch
                entry["rows"].append(row)
            if with_rtl:
                progress(f"{name} rtl cycles")
                entry["rtl"] = _rtl_row(policy.layers, widths)
            else:
                entry["rtl"] = {"available": False, "reason": "skipped (--no-rtl)"}
            results["networks"].append(entry)
        results["weight_sync"] = []
        for widths, tanh in SYNC_NETWORKS:
            name = "-".join(map(str, widths)) + (" tanh" if tanh else "")
            progress(f"{name} weight sync")
            calib = np.random.default_rng(0).standard_normal((256, widths[0])).astype(np.float32)
            results["weight_sync"].append({"network": name, **_sync_row(_network(widths, tanh=tanh), calib, repeats)})
    finally:
        torch.set_num_threads(default_threads)
    return results


def _sync_row(net: Any, calib: np.ndarray, repeats: int) -> dict[str, Any]:
    """One learner weight sync (`MLPInfer.load_weights`) after a drift of the weights like one sync
    interval's (relative 1e-3), timed against the reference steps it replaces, in the same run: a
    calibration pass on every sync, numpy quantization and a copy of the module's state (the formats
    and integers are the same: tests/test_mlp_sync.py)."""
    import torch

    from pearl_fpga.kernels import MLPInfer
    from pearl_fpga.kernels.mlp_torch import INT32_MAX, choose_formats, parse, quantize
    from pearl_fpga.spec.mlp import INT16_MAX, INT16_MIN, QuantizedLayer

    policy = MLPInfer.from_torch(net, backend="cpu", calibration=calib)
    snapshot = copy.deepcopy(net)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for p in net.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 1e-3 * float(p.abs().max()))

    def reference() -> None:
        parsed = parse(net)
        formats, _ = choose_formats(parsed, calib, previous=policy.formats)
        layers = [QuantizedLayer(quantize(w, f.fw, INT16_MIN, INT16_MAX).astype(np.int16),
                                 quantize(b, f.fw + f.fa_in, -INT32_MAX - 1, INT32_MAX).astype(np.int32), f.shift, r)
                  for w, b, f, r in zip(parsed.weights, parsed.biases, formats, parsed.relu)]
        policy.backend.load(layers, parsed.head)
        snapshot.load_state_dict(net.state_dict())

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in an actor process
    timings: dict[str, list[tuple[float, float]]] = {"reference": [], "sync": []}
    try:
        for _ in range(3):  # alternated, so that both sides see the same load
            timings["reference"].append(time_call(reference, repeats))
            timings["sync"].append(time_call(lambda: policy.load_weights(net), repeats))
    finally:
        torch.set_num_threads(threads)
    (ref_best, ref_median), (best, median) = (min(timings[k]) for k in ("reference", "sync"))
    return {"reference_us": ref_best * 1e6, "reference_median_us": ref_median * 1e6, "sync_us": best * 1e6,
            "sync_median_us": median * 1e6, "speedup": ref_best / best}


def _table(results: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="MLP inference latency per call (us, best round): cpu backend vs torch eager")
    for col in ("net", "B", "cpu", "torch 1t", f"torch {results['torch_default_threads']}t", "x 1t", "x dflt",
                "ns/inf", "target"):
        table.add_column(col, justify="right")
    for entry in results["networks"]:
        for row in entry["rows"]:
            table.add_row(
                entry["network"], str(row["batch"]), f"{row['cpu_us']:.2f}", f"{row['torch_1thread_us']:.2f}",
                f"{row['torch_default_us']:.2f}", f"{row['speedup_vs_torch_1thread']:.1f}",
                f"{row['speedup_vs_torch_default']:.1f}", f"{row['cpu_ns_per_inference']:.0f}",
                _target_text(row),
            )
    return table


TARGETS = {1: (10.0, "speedup_vs_torch_1thread"), 1024: (1.0, "speedup_vs_torch_default")}
"""Batch -> the speedup the cpu backend must reach, and against what: batch 1 10x torch at one thread;
batch 1024 no slower than torch at its default threads (issue 22)."""


def _target_met(row: dict[str, Any]) -> bool | None:
    if row["batch"] not in TARGETS:
        return None
    factor, key = TARGETS[row["batch"]]
    return bool(row[key] >= factor)


def _target_text(row: dict[str, Any]) -> str:
    met = _target_met(row)
    if met is None:
        return ""
    factor, key = TARGETS[row["batch"]]
    return f">={factor:g}x {'1t' if key.endswith('1thread') else 'dflt'}: {'met' if met else 'NOT MET'}"


def _verdict(results: dict[str, Any]) -> str:
    """One line: the targets, and which rows miss them."""
    missed = [f"{entry['network']} B={row['batch']} ({row[TARGETS[row['batch']][1]]:.2f}x)"
              for entry in results["networks"] for row in entry["rows"] if _target_met(row) is False]
    line = ("Targets: batch 1 >= 10x faster than torch at one thread (x 1t >= 10); batch 1024 no slower than torch "
            "at its default threads (x dflt >= 1)")
    return f"{line}: NOT MET by {', '.join(missed)}." if missed else f"{line}: all met."


def _rtl_table(results: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title=f"rtl backend cycles (batch 1, batch {RTL_BATCH}) vs target MACs/LANES + 8*layers + 16")
    for col in ("net", "lanes", "b=1", f"b={RTL_BATCH}", "per inf", "target", "ok"):
        table.add_column(col, justify="right")
    for entry in results["networks"]:
        rtl = entry["rtl"]
        if not rtl["available"]:
            table.add_row(entry["network"], "-", "-", "-", "-", "-", "n/a")
            first_line = rtl["reason"].strip().splitlines()[0] if rtl["reason"].strip() else "?"
            table.caption = f"rtl unavailable: {first_line[:160]} (--json has the full reason)"
            continue
        table.add_row(
            entry["network"], str(rtl["lanes"]), str(rtl["cycles_batch1"]), str(rtl[f"cycles_batch{RTL_BATCH}"]),
            f"{rtl['cycles_per_inference']:.1f}", f"{rtl['target_cycles_per_inference']:.1f}",
            "yes" if rtl["meets_target"] else "NO",
        )
    return table


def run(config: MlpBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Time every network and batch of `config`; the JSON record (argv: the command line, for the record)."""
    return measured_record("mlp", lambda: measure(config.repeats, config.rtl, log), argv)


def report(record: dict[str, Any], console: Any) -> None:
    """The record's tables and verdict, printed to a rich Console."""
    results = record["results"]
    console.print(_table(results))
    console.print(_rtl_table(results))
    for sync in results.get("weight_sync", []):
        console.print(f"{sync['network']} weight sync (load_weights, 256 calibration obs): {sync['sync_us']:.0f} us; "
                      f"the reference steps {sync['reference_us']:.0f} us: {sync['speedup']:.1f}x", markup=False)
    load = record["load_average_before"][0]
    console.print(f"cpu backend MAC array: {results.get('cpu_path')}; load average {load:.1f} on "
                  f"{record['machine']['cores']} cores.", markup=False)
    console.print(_verdict(results), markup=False)
