"""How `TabularQ.update_partitioned` runs: K slices on how many threads, chosen by measurement where the
caller leaves it open.

The table a partitioned update gives depends on K (the slices) and never on the threads (each slice runs
on its own copy; the copies are summed in integers). So the thread count is always safe to choose by
measurement, and K only when the caller asks for it (`parts=0`): then K = the thread count chosen, the
fewest slices that keep the chosen threads busy, as SwiftRL gives each core one slice.

The choice is a short probe of the cpu backend's partitioned mode on a random stream the size of the
call (at most PROBE_TRANSITIONS transitions): each candidate thread count (1, 2, 4, ... up to the
cores this process may use) runs PROBE_ROUNDS times, interleaved, and keeps its median rate; the
fewest threads within 5% of the fastest win (a thread that gains less leaves its core to other work).
The choice is kept for the process, and, when the machine was not busy during the probe (1-minute load
average at most half the cores), in the cache folder for later processes, as the learner's thread
probe is (pearl_fpga.runtime.thread_bits): keyed on the machine (CPU, cores, the native module) and the
call (table, algorithm, K or open, batch size rounded up to a power of two). Delete
`tabular_partitions.json` there to measure again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.data import cache_root, read_probe_cache, write_probe_cache
from pearl_fpga.host import available_cores, cpu_identity, thread_candidates

PROBE_TRANSITIONS = 1 << 18  # long enough that waking a thread is a small part of a run
PROBE_ROUNDS = 5
GAIN_NEEDED = 1.05  # more threads only for at least this much more throughput


@dataclass(frozen=True)
class PartitionPlan:
    """K slices (`parts`) on `threads` threads; `how` says where they come from, `rates` holds the
    probe's updates/s per thread count (K = that count where parts was left open)."""

    parts: int
    threads: int
    how: str
    rates: dict[int, float] = field(default_factory=dict)

    def describe(self) -> str:
        """One line, e.g. 'parts 2 on 2 threads (measured: 1: 190 M/s, 2: 350 M/s updates)'."""
        probes = ", ".join(f"{t}: {r / 1e6:.0f} M/s" for t, r in sorted(self.rates.items()))
        detail = f"{self.how}: {probes} updates" if probes else self.how
        return f"parts {self.parts} on {self.threads} thread{'s' if self.threads != 1 else ''} ({detail})"


def slice_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """(lo, hi) of each of `parts` contiguous slices of n, as np.array_split cuts them (the first n % parts
    one longer)."""
    base, longer = divmod(n, parts)
    bounds, lo = [], 0
    for k in range(parts):
        hi = lo + base + (k < longer)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def plan_threads(n_states: int, n_actions: int, algo: str, n: int, parts: int | None, cores: int | None = None,
                 cache: Path | None = None) -> PartitionPlan:
    """The cpu backend's plan for a call of n transitions: K = parts on the measured thread count, or,
    for parts=None, K = the measured thread count. At most `cores` threads (default: the cores this
    process may use), and never more than K."""
    cores = available_cores() if cores is None else cores
    limit = max(1, min(cores, parts if parts is not None else cores))
    if limit == 1:
        why = "one core" if cores == 1 else "one slice"
        return PartitionPlan(parts=parts or 1, threads=1, how=why)
    batch = min(PROBE_TRANSITIONS, 1 << max(0, n - 1).bit_length())
    call = (n_states, n_actions, algo, batch, parts, cores)
    rates, how = _SEEN.get(call), "cached"  # this process's choice: no key to hash on every call
    if rates is None:
        key = {**cpu_identity(), "cores": cores, "native": _native_fingerprint(), "n_states": n_states,
               "n_actions": n_actions, "algo": algo, "batch": batch, "parts": parts if parts is not None else "open"}
        key_id = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        rates = _remembered(key_id, cache)
        if rates is None:
            rates, how = _measure(n_states, n_actions, algo == "sarsa", batch, parts, list(thread_candidates(limit))), "measured"
            if not _busy(cores):  # a probe that other work slowed is not kept for later processes
                _remember(key_id, key, rates, cache)
        _SEEN[call] = rates
    best = max(rates.values())
    threads = min(t for t, r in rates.items() if r * GAIN_NEEDED >= best)
    return PartitionPlan(parts=parts if parts is not None else threads, threads=threads, how=how, rates=rates)


def _measure(n_states: int, n_actions: int, sarsa: bool, batch: int, parts: int | None,
             candidates: list[int]) -> dict[int, float]:
    """Median updates/s of each thread count over PROBE_ROUNDS interleaved rounds, on a scratch table."""
    from pearl_fpga import _tabular_native as native

    rng = np.random.default_rng(0)
    s, s2 = rng.integers(0, n_states, batch), rng.integers(0, n_states, batch)
    a, a2 = rng.integers(0, n_actions, batch), rng.integers(0, n_actions, batch)
    r, done = rng.normal(0.0, 1.0, batch), rng.random(batch) < 0.01
    table = np.zeros((n_states, n_actions), np.int32)
    alpha, gamma = 1 << 12, 1 << 16

    def run(threads: int) -> float:
        t0 = time.perf_counter()
        native.update_partitioned(table, alpha, gamma, sarsa, s, a, r, s2, a2 if sarsa else None, done,
                                  parts if parts is not None else threads, threads)
        return time.perf_counter() - t0

    for t in candidates:  # warm-up: starts the pool's threads and touches the buffers
        run(t)
    times: dict[int, list[float]] = {t: [] for t in candidates}
    for _ in range(PROBE_ROUNDS):
        for t in candidates:
            times[t].append(run(t))
    return {t: batch / statistics.median(v) for t, v in times.items()}


@functools.lru_cache(maxsize=1)
def _native_fingerprint() -> str:
    """Hash of the tabular extension: a rebuilt kernel is measured again."""
    from pearl_fpga import _tabular_native as native

    return hashlib.sha256(Path(native.__file__).read_bytes()).hexdigest()[:16]


_SEEN: dict[tuple[Any, ...], dict[int, float]] = {}  # this process's choices, by call shape


def _cache_file() -> Path:
    return cache_root() / "tabular_partitions.json"


def _remembered(key_id: str, cache: Path | None = None) -> dict[int, float] | None:
    entry = read_probe_cache(cache or _cache_file()).get(key_id)
    try:
        rates = {int(t): float(r) for t, r in entry["rates"].items()}  # type: ignore[index]
    except (TypeError, KeyError, ValueError, AttributeError):
        return None
    return rates if rates and min(rates.values()) > 0 else None


def _busy(cores: int) -> bool:
    """Whether other work holds cores: the 1-minute load average above half of them."""
    try:
        return os.getloadavg()[0] > cores / 2
    except (AttributeError, OSError):  # no load average on this OS: keep the probe
        return False


def _remember(key_id: str, key: dict[str, Any], rates: dict[int, float], cache: Path | None) -> None:
    cache = cache or _cache_file()
    entries = read_probe_cache(cache)
    entries[key_id] = {"key": key, "rates": {str(t): r for t, r in rates.items()}}
    write_probe_cache(cache, entries)
