"""What this process runs on: the cores it may use and the CPU's identity (the keys of cached probes)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def thread_candidates(cores: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to `cores`, and `cores` itself."""
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    counts.append(cores)
    return tuple(counts)


@functools.lru_cache(maxsize=1)
def cpu_identity() -> dict[str, Any]:
    """The CPU's model and its vector and matrix features (the flags that pick BLAS code paths)."""
    import platform

    model, flags = platform.processor() or platform.machine(), [platform.machine()]
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = sorted(f for f in value.split() if f.startswith(("avx", "amx", "fma", "sse4", "f16c")))
                break
    except OSError:
        pass
    return {"cpu": model, "features": flags}
