"""What every `pearl-fpga bench ... --json` record carries besides its figures: the command, the code
(git commit), the date, the machine and its load average before and after, so that a figure can be
traced, reproduced, and set aside when it was taken on a busy machine.

A run is `under_load` when the 1-minute load average exceeded half the cores this process may use
before or after it: other work then shared the cores, and its figures are not headline figures.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
import sys
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


def machine() -> dict[str, Any]:
    """CPU model, cores, memory, OS and the versions of the libraries that set the figures."""
    info: dict[str, Any] = {"cpu": _cpu_model(), "cores": cores(), "os": platform.platform(),
                            "python": platform.python_version()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    for name in ("numpy", "torch"):
        module = sys.modules.get(name)
        if module is not None:
            info[name] = getattr(module, "__version__", "?")
    return info


def with_metadata(benchmark: str, results: dict[str, Any], argv: list[str] | None, load_before: list[float],
                  load_after: list[float] | None = None) -> dict[str, Any]:
    """The JSON record of one benchmark run: metadata, then `results`. `argv`: the command's arguments
    after `pearl-fpga` (as the CLI saw them)."""
    from pearl_fpga import __version__

    load_after = load_after if load_after is not None else load_average()
    return {
        "schema": SCHEMA,
        "benchmark": benchmark,
        "command": shlex.join(["pearl-fpga", *(argv if argv is not None else ["bench", benchmark])]),
        "commit": _commit(),
        "version": __version__,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "under_load": is_under_load(load_before, load_after),
        "results": results,
    }
