"""Wall-clock time per task, for the summary table and the planner's measured-vs-predicted report."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from collections.abc import Iterator



class TaskTimer:
    """Accumulates seconds and call counts per task name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    @contextmanager
    def time(self, task: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[task] += time.perf_counter() - start
            self.calls[task] += 1

    def add(self, task: str, seconds: float, calls: int = 1) -> None:
        """Add time measured elsewhere (e.g. in an actor worker)."""
        self.seconds[task] += seconds
        self.calls[task] += calls

    def merge(self, seconds: dict[str, float], calls: dict[str, int]) -> None:
        for k, v in seconds.items():
            self.seconds[k] += v
        for k, v in calls.items():
            self.calls[k] += v

    def state(self) -> dict[str, dict]:
        return {"seconds": dict(self.seconds), "calls": dict(self.calls)}
