"""What every `pearl-fpga bench ... --json` record carries besides its figures: the command, the code
(git commit), the date, the machine and its load average before and after, so that a figure can be
traced, reproduced, and set aside when it was taken on a busy machine.

A run is `under_load` when other processes kept more than half the cores busy on average while it ran:
its figures are then not headline figures. That is measured from /proc/stat (all CPU time, stolen time
included) minus this process's own CPU time, because the load average also counts the benchmark's own
threads (a two-thread learner alone lifts it to 2). Where /proc/stat is missing, the 1-minute load
average before the run, above half the cores, decides. Both load averages are recorded either way.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time
import platform
import resource
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = 1


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages (zeros where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return [0.0, 0.0, 0.0]


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def is_under_load(*loads: list[float]) -> bool:
    """True when any 1-minute load average exceeds half the cores."""
    return any(load[0] > cores() / 2 for load in loads)


def _busy_seconds() -> float | None:
    """CPU seconds all processes used since boot (user, system, interrupts, stolen), from /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(x) for x in fields[:8]]
    busy = sum(ticks) - ticks[3] - ticks[4]  # minus idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def _self_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _own_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _descendant_seconds() -> dict[int, float]:
    """CPU seconds so far of every live process descended from this one (from /proc), by pid."""
    parent: dict[int, int] = {}
    used: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    mine, frontier = set(), [os.getpid()]
    while frontier:
        pid = frontier.pop()
        kids = [c for c, p in parent.items() if p == pid and c not in mine]
        mine.update(kids)
        frontier += kids
    return {pid: used[pid] for pid in mine}


class LoadProbe:
    """How busy the machine was while a run took place: `with LoadProbe() as probe: run()`, then
    `probe.figures()` gives the load averages, the cores other processes kept busy, and `under_load`.
    Our own CPU time includes every process the run started (worker processes, a local Ray instance's
    raylet and actors), sampled from /proc while it runs, so they do not count as other load."""

    def start(self) -> LoadProbe:
        self.load_before = load_average()
        self._busy, self._own, self._t0 = _busy_seconds(), _own_seconds(), time.monotonic()
        self._self0 = _self_seconds()
        self._baseline = _descendant_seconds() if Path("/proc").is_dir() else {}
        self._seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self._record()

    def _record(self) -> None:
        try:
            for pid, secs in _descendant_seconds().items():
                self._seen[pid] = max(self._seen.get(pid, 0.0), secs - self._baseline.get(pid, 0.0))
        except OSError:
            pass

    def stop(self) -> None:
        self._stop.set()
        self._sampler.join()
        self._record()
        self.load_after = load_average()
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        busy = _busy_seconds()
        self_and_reaped = _own_seconds() - self._own
        own = max(self_and_reaped, _self_seconds() - self._self0 + sum(self._seen.values()))
        self.other_cores = (None if busy is None or self._busy is None
                            else max(0.0, (busy - self._busy) - own) / elapsed)

    def __enter__(self) -> LoadProbe:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def figures(self) -> dict[str, Any]:
        if self.other_cores is None:
            busy = is_under_load(self.load_before)
        else:
            busy = self.other_cores > cores() / 2
        return {"load_before": self.load_before, "load_after": self.load_after,
                "other_cores_busy": None if self.other_cores is None else round(self.other_cores, 3),
                "under_load": bool(busy)}


def _commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=False)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU vendor's folder name for per-vendor records (pearl_fpga.bench.records): /proc/cpuinfo's
    vendor_id (GenuineIntel: intel, AuthenticAMD: amd, another sanitised), else the machine's architecture."""
    from pearl_fpga.bench.records import vendor_name

    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("vendor_id"):
                return vendor_name(line.split(":", 1)[1].strip())
    except OSError:
        pass
    return vendor_name(platform.machine())


def machine() -> dict[str, Any]:
    """CPU model and vendor, cores, memory, OS and the versions of the libraries that set the figures."""
    info: dict[str, Any] = {"cpu": _cpu_model(), "vendor": _cpu_vendor(), "cores": cores(),
                            "os": platform.platform(), "python": platform.python_version()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    for name in ("numpy", "torch"):
        module = sys.modules.get(name)
        if module is not None:
            info[name] = getattr(module, "__version__", "?")
    return info


def with_metadata(benchmark: str, results: dict[str, Any], argv: list[str] | None, probe: LoadProbe) -> dict[str, Any]:
    """The JSON record of one benchmark run: metadata, then `results`. `argv`: the command's arguments
    after `pearl-fpga` (as the CLI saw them); `probe`: a LoadProbe around the whole run. A benchmark
    whose results hold `under_load` per run sets the record's flag to `results["runs_under_load"] > 0`."""
    from pearl_fpga import __version__

    load = probe.figures()
    under_load = results["runs_under_load"] > 0 if "runs_under_load" in results else load["under_load"]
    return {
        "schema": SCHEMA,
        "benchmark": benchmark,
        "command": shlex.join(["pearl-fpga", *(argv if argv is not None else ["bench", benchmark])]),
        "commit": _commit(),
        "version": __version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": load["load_before"],
        "load_average_after": load["load_after"],
        "other_cores_busy": load["other_cores_busy"],
        "under_load": under_load,
        "results": results,
    }


def measured_record(benchmark: str, measure: Callable[[], dict[str, Any]], argv: list[str] | None) -> dict[str, Any]:
    """Run `measure` under a LoadProbe and return its JSON record (with_metadata)."""
    with LoadProbe() as probe:
        results = measure()
    return with_metadata(benchmark, results, argv, probe)


def load_line(record: dict[str, Any]) -> str:
    """How busy the machine was during the run, in one line for the tables."""
    state = "UNDER LOAD" if record["under_load"] else "quiet"
    return (f"machine: {state} (load average {record['load_average_before']} -> {record['load_average_after']}, "
            f"other processes kept {record['other_cores_busy']} cores busy); compare ratios within this run only")
