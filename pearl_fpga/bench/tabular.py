"""`pearl-fpga bench tabular`: updates per second of the tabular Q-learning kernel, side by side in one run.

On one stream of random-walk trajectories (each transition starts where the previous one ended, so
consecutive updates often touch the same rows, as in real training) it times, single-threaded:
- the numpy backend (the plain Python/numpy loop a user would write first),
- the same loop compiled with numba (the best CPU loop a user would write), when numba is installed,
- the cpu backend (the HLS C++ compiled into the package), when built,
and the cpu backend's partitioned mode over K threads (throughput of the whole machine, not per core), at
--threads and at the K and threads the kernel chooses by measurement.
Every contender's table is checked bit-exact against the numpy reference on a prefix of the stream.
The rtl backend, when present, reports clock cycles for a batch against the bound N + pipeline depth.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.bench.meta import load_line, measured_record


@dataclass(frozen=True)
class TabularBench:
    states: int = 500  # table rows (Taxi's size)
    actions: int = 6
    updates: int = 1_000_000  # transitions per timed run of the compiled loops
    numpy_updates: int = 50_000  # transitions of the slow numpy loop
    repeats: int = 3  # timed runs per contender (the best is kept)
    threads: int = 2  # K and threads of the partitioned cpu run; a second run leaves both to the kernel's measurement
    rtl_updates: int = 2000  # transitions of the rtl cycle count
    rtl_states: int = 64  # FrozenLake8x8's
    rtl: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("states", "actions", "updates", "numpy_updates", "repeats", "threads", "rtl_updates", "rtl_states"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")


def trajectories(n: int, n_states: int, n_actions: int, seed: int) -> dict[str, np.ndarray]:
    """A random-walk stream: s[i+1] = s2[i] except after done (1%), then a uniform restart."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(-2, 3, n)
    done = rng.random(n) < 0.01
    restart = rng.integers(0, n_states, n)
    s = np.empty(n, np.int64)
    s2 = np.empty(n, np.int64)
    cur = int(restart[0])
    for i in range(n):  # a few hundred ns per step; fine for the sizes here
        s[i] = cur
        s2[i] = (cur + int(steps[i])) % n_states
        cur = int(restart[i]) if done[i] else int(s2[i])
    return dict(s=s, a=rng.integers(0, n_actions, n), r=rng.normal(0.0, 1.0, n), s2=s2, done=done,
                a2=rng.integers(0, n_actions, n))


def hazard_rate(s: np.ndarray, s2: np.ndarray, depth: int = 4) -> float:
    """Fraction of transitions whose bootstrap row s2 was written by one of the previous `depth` updates."""
    hit = np.zeros(s.shape[0], bool)
    for d in range(1, depth + 1):
        hit[d:] |= s2[d:] == s[:-d]
    return float(hit.mean())


def _numba_loop() -> Any:
    """The reference loop compiled with numba (None when numba is not installed)."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=False, nogil=True)
    def run(q, s, a, r, s2, a2, done, alpha, gamma, sarsa):  # pragma: no cover - compiled
        for i in range(s.shape[0]):
            if done[i]:
                boot = 0
            elif sarsa:
                boot = np.int64(q[s2[i], a2[i]])
            else:
                boot = np.int64(q[s2[i], 0])
                for b in range(1, q.shape[1]):
                    boot = max(boot, np.int64(q[s2[i], b]))
            target = np.int64(r[i]) + ((gamma * boot + 32768) >> 16)
            old = np.int64(q[s[i], a[i]])
            v = old + ((alpha * (target - old) + 32768) >> 16)
            q[s[i], a[i]] = min(max(v, -2147483648), 2147483647)

    return run


def _best(fn: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _interleaved(contenders: dict[str, Any], repeats: int) -> dict[str, float]:
    """The best seconds of each contender over `repeats` rounds, each round running every contender once."""
    best = {name: float("inf") for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def measure(args: TabularBench) -> dict[str, Any]:
    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.kernels import TabularQ
    from pearl_fpga.spec.tabular import reward_words

    ns, na, n = args.states, args.actions, args.updates
    data = trajectories(max(n, args.numpy_updates), ns, na, args.seed)
    words = reward_words(data["r"])
    alpha, gamma = 0.1, 0.99
    results: dict[str, Any] = {"states": ns, "actions": na, "updates": n, "numpy_updates": args.numpy_updates,
                               "hazard_rate_4": hazard_rate(data["s"], data["s2"]), "rows": {}, "notes": []}
    rows = results["rows"]
    check_n = min(20_000, args.numpy_updates)

    def sl(m: int) -> dict[str, np.ndarray]:
        return {k: v[:m] for k, v in data.items()}

    ref = TabularQ(ns, na, alpha, gamma, backend="numpy")
    ref.update(**sl(check_n))
    want = ref.table

    def numpy_run() -> None:
        TabularQ(ns, na, alpha, gamma, backend="numpy").update(**sl(args.numpy_updates))

    secs = _best(numpy_run, 1)
    rows["numpy loop"] = {"updates_per_s": args.numpy_updates / secs, "threads": 1, "exact": True}

    loop = _numba_loop()
    if loop is None:
        results["notes"].append("numba is not installed (pip install numba, or the bench extra): no numba row")
    else:
        aw, gw = ref.alpha_word, ref.gamma_word
        args_n = [np.ascontiguousarray(data[k][:n]) for k in ("s", "a")] + [words[:n]] + \
                 [np.ascontiguousarray(data[k][:n]) for k in ("s2", "a2", "done")]
        q = np.zeros((ns, na), np.int32)
        loop(q, *[x[:check_n] for x in args_n], aw, gw, False)  # compiles; then the exactness check
        exact = bool((q == want).all())

        def numba_run() -> None:
            loop(np.zeros((ns, na), np.int32), *args_n, aw, gw, False)

        rows["numba"] = {"updates_per_s": n / _best(numba_run, args.repeats), "threads": 1, "exact": exact}

    try:
        cpu = TabularQ(ns, na, alpha, gamma, backend="cpu")
    except BackendUnavailable as exc:
        results["notes"].append(f"cpu backend unavailable: {exc}")
    else:
        cpu.update(**sl(check_n))
        exact = bool((cpu.table == want).all())
        batch = sl(n)

        def cpu_run() -> None:
            cpu.clear()
            cpu.update(**batch)

        k = args.threads
        part = TabularQ(ns, na, alpha, gamma, backend="cpu")
        part.update_partitioned(**sl(check_n), parts=k, threads=k)
        ref_part = TabularQ(ns, na, alpha, gamma, backend="numpy")
        ref_part.update_partitioned(**sl(check_n), parts=k, threads=1)
        part_exact = bool((part.table == ref_part.table).all())
        auto = TabularQ(ns, na, alpha, gamma, backend="cpu")
        plan = auto.update_partitioned(**batch, parts=0)  # K and threads measured on this machine
        # Interleaved, so that load from other processes falls on every contender alike.
        times = _interleaved({"cpu": cpu_run, "partitioned": lambda: part.update_partitioned(**batch, parts=k, threads=k),
                              "auto": lambda: auto.update_partitioned(**batch, parts=0)}, args.repeats)
        rows["cpu backend"] = {"updates_per_s": n / times["cpu"], "threads": 1, "exact": exact}
        rows[f"cpu partitioned x{k}"] = {"updates_per_s": n / times["partitioned"], "threads": k, "parts": k,
                                         "exact": part_exact}
        rows["cpu partitioned auto"] = {"updates_per_s": n / times["auto"], "threads": plan.threads,
                                        "parts": plan.parts, "exact": None}
        results["partition_plan"] = {"parts": plan.parts, "threads": plan.threads, "how": plan.how,
                                     "rates": {str(t): r for t, r in plan.rates.items()}}
        results["notes"].append(f"cpu partitioned: SwiftRL mode (K tables merged), not sequential Q-learning; "
                                f"machine throughput over its threads, not per core; bit-exact against the numpy "
                                f"reference of the same K; auto chose {plan.describe()}")

    base = rows["numpy loop"]["updates_per_s"]
    for row in rows.values():
        row["vs_numpy_loop"] = row["updates_per_s"] / base
        if "numba" in rows:
            row["vs_numba"] = row["updates_per_s"] / rows["numba"]["updates_per_s"]
        if "cpu backend" in rows:
            row["vs_cpu_backend"] = row["updates_per_s"] / rows["cpu backend"]["updates_per_s"]

    if args.rtl:
        results["rtl"] = _rtl(args, data)
    return results


def _rtl(args: TabularBench, data: dict[str, np.ndarray]) -> dict[str, Any]:
    from pearl_fpga.board.tabular_driver import build_shape
    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.kernels import TabularQ
    from pearl_fpga.spec import tabular as spec

    from pearl_fpga.backends import registry

    if "rtl" not in registry.names("tabular"):
        return {"available": False, "reason": "the tabular kernel has no reference RTL"}
    states = args.rtl_states
    try:
        k = TabularQ(states, args.actions, 0.1, 0.99, backend="rtl")
    except (BackendUnavailable, ImportError) as exc:
        return {"available": False, "reason": str(exc)}
    m = args.rtl_updates
    data = trajectories(m, states, args.actions, args.seed + 1)
    k.update(**data)
    ref = TabularQ(states, args.actions, 0.1, 0.99, backend="numpy")
    ref.update(**data)
    # the RTL keeps the HLS top's schedule: the issue slots of spec.tabular.hls_issue_slots, then its pipeline
    slots = spec.hls_issue_slots(data["s"], data["s2"])
    latency = spec.rtl_latency(build_shape(states, args.actions)[1])  # the build's columns
    out = {"available": True, "states": states, "actions": args.actions, "updates": m, "cycles": k.last_cycles,
           "issue_slots": slots, "latency": latency, "hazard_rate_4": hazard_rate(data["s"], data["s2"]),
           "exact": bool((k.table == ref.table).all())}
    if k.last_cycles is not None:
        out["cycles_per_update"] = k.last_cycles / m
        out["model"] = slots + latency
    return out


def report(record: dict[str, Any], console: Any) -> None:
    """The record's table and notes, printed to a rich Console."""
    from rich.table import Table

    results = record["results"]
    title = (f"tabular kernel, {results['states']} x {results['actions']} table, random-walk stream "
             f"({results['hazard_rate_4']:.0%} of transitions bootstrap on a row one of the 4 previous updates wrote)")
    table = Table(title=title, title_justify="left")
    for col in ("contender", "threads", "updates/s", "x numpy loop", "x numba", "x cpu backend", "bit-exact"):
        table.add_column(col, justify="left" if col == "contender" else "right", no_wrap=col in ("contender", "updates/s"))
    for name, row in results["rows"].items():
        table.add_row(name, str(row["threads"]), f"{row['updates_per_s']:,.0f}", f"{row['vs_numpy_loop']:,.1f}",
                      f"{row['vs_numba']:.3g}" if "vs_numba" in row else "-",
                      f"{row['vs_cpu_backend']:.2f}" if "vs_cpu_backend" in row else "-",
                      "-" if row["exact"] is None else ("yes" if row["exact"] else "NO"))
    console.print(table)
    rtl = results.get("rtl")
    if rtl is not None:
        if rtl.get("available"):
            console.print(f"rtl ({rtl['states']} x {rtl['actions']} table): {rtl['updates']} updates in {rtl['cycles']} cycles "
                          f"({rtl.get('cycles_per_update', float('nan')):.3f}/update); the HLS top's issue slots + the pipeline = "
                          f"{rtl.get('model', '?')} (the rest: the call's control); bit-exact: {rtl['exact']}",
                          markup=False)
        else:
            console.print(f"rtl: not measured ({rtl['reason']})", markup=False)
    for note in results["notes"]:
        console.print(f"  {note}", markup=False)
    console.print(load_line(record), markup=False)


def run(config: TabularBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Time every contender on `config`'s stream; the JSON record (argv: the command line, for the record)."""
    return measured_record("tabular", lambda: measure(config), argv)
