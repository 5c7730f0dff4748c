"""A learner step's second thread and its update schedule, shared by the actor-critic learners.

Parts of an actor-critic step are independent of each other (each twin critic's target value, forward
and backward pass and Adam step; DDPG's actor gradient on the step's starting critic) and can run on a
second thread while the learner's thread takes the rest: torch's GEMMs and the native loops release
the GIL. Whether they do is the step's schedule (`update_schedule`): "serial" runs every part on the
learner's thread, at once and in the same order, "concurrent" hands them to one persistent thread, and
"auto" lets the runtime choose by measurement while training (runtime/update_schedule.py). Both
schedules run the same code on the same data, so they give the same bits and a run may switch between
them at any step.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import torch

from pearl_fpga.algos.api import DeepLearner
from pearl_fpga.algos.common import subnormals_flushed

_T = TypeVar("_T")

SCHEDULES = ("serial", "concurrent")
"""The step's schedules (`update_schedule`): one thread, or a second one beside it."""


def update_schedule(config: Any) -> str:
    """The config's `update_schedule` (auto, serial or concurrent; "auto" where the config has none)."""
    return str(getattr(config, "update_schedule", "auto"))


class TwoThreadLearner(DeepLearner):
    """A deep learner whose step may run parts on a second thread (`_on_grad_thread`), in the schedules
    `schedules` (set_schedule). A subclass calls `_init_schedules` in its constructor, after `config`."""

    config: Any
    schedule: str = "serial"
    _grad_thread: ThreadPoolExecutor | None = None
    _grad_thread_threads = 0  # the torch intra-op threads last set on the second thread (0: none yet)

    def _init_schedules(self, two_threads: bool, why_one: str = "") -> None:
        """The schedules this learner may run: both under `update_schedule` auto where its step has work for a
        second thread (`two_threads`), else the one it runs; the second thread, started only where one of
        them needs it. Auto starts concurrent; the runtime's controller measures both. A step with no work
        for a second thread runs serial, and says so (`why_one`) where "concurrent" was asked for."""
        wanted = update_schedule(self.config)
        if wanted == "concurrent" and not two_threads:
            warnings.warn(f"{type(self).__name__}: update_schedule 'concurrent' runs serial here: {why_one or 'its step has no part for a second thread'}. "
                          "Set update_schedule 'serial' or 'auto' to silence this.", stacklevel=3)
        self.schedules = (SCHEDULES if two_threads and wanted == "auto"
                          else ("concurrent",) if two_threads and wanted == "concurrent" else ("serial",))
        self.schedule = self.schedules[-1]
        name = f"pearl-{type(self).__name__.lower()}-grads"
        self._grad_thread = (ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
                             if "concurrent" in self.schedules else None)

    def set_schedule(self, schedule: str) -> None:
        """Run the following steps "serial" (every part on the calling thread) or "concurrent" (the parallel
        parts on the second thread): the same bits."""
        if schedule not in self.schedules:
            raise ValueError(f"{type(self).__name__}: schedule {schedule!r} is not one of {self.schedules} "
                             f"(update_schedule {update_schedule(self.config)!r})")
        self.schedule = schedule

    def _threads(self) -> int:
        """The threads the current schedule gives a native program's parts beside each other (2 concurrent)."""
        return 1 if self.schedule == "serial" or self._grad_thread is None else 2

    def _on_grad_thread(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        """`fn(*args)` on the second thread, subnormals flushed there as on this one; in the serial schedule
        on this thread, at once (a done Future that holds its result or its error, raised by .result()):
        the same code in the same order, so the same bits."""
        if self.schedule == "serial" or self._grad_thread is None:
            done: Future[_T] = Future()
            try:
                done.set_result(fn(*args))
            except Exception as exc:  # noqa: BLE001 -- re-raised by .result(), where the threaded schedule raises it
                done.set_exception(exc)
            return done

        threads = torch.get_num_threads()

        def flushed() -> _T:
            # BLAS thread counts are per calling thread (MKL's is thread-local, torch.set_num_threads sets
            # only the caller's): without this MKL's GEMMs here take every core beside the caller's
            if self._grad_thread_threads != threads:
                torch.set_num_threads(threads)
                self._grad_thread_threads = threads
            with subnormals_flushed(self.config.flush_subnormals):  # the mode is per thread
                return fn(*args)

        return self._grad_thread.submit(flushed)
