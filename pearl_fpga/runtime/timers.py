"""Wall-clock time per task, for the summary table and the planner's measured-vs-predicted report."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any


class _Span:
    """One timed `with` block of a task (a plain class: cheaper per block than a generator context manager)."""

    __slots__ = ("seconds", "calls", "task", "start")

    def __init__(self, seconds: dict[str, float], calls: dict[str, int], task: str) -> None:
        self.seconds, self.calls, self.task = seconds, calls, task

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: Any) -> None:
        self.seconds[self.task] += time.perf_counter() - self.start
        self.calls[self.task] += 1


class TaskTimer:
    """Accumulates seconds and call counts per task name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def time(self, task: str) -> _Span:
        """`with timer.time(task):` adds the block's wall-clock time (also when it raises) and one call."""
        return _Span(self.seconds, self.calls, task)

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
