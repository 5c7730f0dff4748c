"""Limits on what users hand the package: the memory that a size would need.

`require_memory` refuses a size up front (the bytes it needs, the bytes available, the fix) instead of
letting numpy fail deep inside with an ArrayMemoryError. Files users hand the package are read by
pearl_fpga.safe_io.
"""

from __future__ import annotations

from pathlib import Path


def available_memory() -> int | None:
    """Bytes this process can still allocate: MemAvailable, and the cgroup's limit where one is set;
    None where neither is readable."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def require_memory(nbytes: int, what: str, fix: str) -> None:
    """ValueError when `what` (e.g. "buffer_size=10^11") needs more than the available memory."""
    free = available_memory()
    if free is not None and nbytes > free:
        raise ValueError(f"{what} needs {human_size(nbytes)} of memory, but {human_size(free)} are available; {fix}")


def human_size(n: float) -> str:
    """A byte count in B, KiB, MiB, GiB or TiB."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while n >= 1024 and len(units) > 1:
        n /= 1024
        units.pop(0)
    return f"{n:,.0f} B" if units[0] == "B" else f"{n:,.1f} {units[0]}"
