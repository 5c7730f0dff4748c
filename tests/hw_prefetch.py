"""The open-flow tool runs of the hardware tests, started in the background as the session starts.

Yosys and nextpnr-ecp5 run one thread each, and most of the suite before tests/test_hw_flow.py and
tests/test_hw_netlist.py is single-threaded Python: so the small implementations and the netlist
syntheses those modules need run on the core the rest of the suite leaves idle, and are done (or
under way) when their tests start. A test module lists its runs in a `prefetch()` function that
calls `submit`; conftest.py calls it for each module with a selected test (pytest_collection_finish),
and the module's fixtures call `submit` with the same keys to get the same runs (started then, if
the session did not prefetch them: a module run on its own).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_pool: ThreadPoolExecutor | None = None
_workers = 2
_runs: dict[str, Future[Any]] = {}


def set_workers(workers: int) -> None:
    """How many tool runs go at once (set before the first `submit`): one beside a whole suite, more
    when only the hardware modules run."""
    global _workers
    _workers = max(1, workers)


def submit(key: str, run: Callable[[], Any]) -> Future[Any]:
    """The run named `key`: the one already submitted under that key, or `run` started now."""
    global _pool
    if key not in _runs:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_workers, thread_name_prefix="hw-prefetch")
        _runs[key] = _pool.submit(run)
    return _runs[key]


def shutdown() -> None:
    """Drop the runs no test has started (session end); a run under way finishes its tool call."""
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
    _pool = None
    _runs.clear()
