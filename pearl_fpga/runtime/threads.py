"""The learner's torch intra-op thread count, chosen by measurement and re-checked while training.

A second core speeds up the learner's GEMMs when it is free and slows them badly when other work
holds it (an OpenMP team waits for its slowest thread). So `TrainConfig.learner_threads = 0` makes the
count a measurement instead of a setting: `AdaptiveThreads` times short probe windows of learner
steps at each candidate count (1, 2, 4, ... up to the cores this process may use), runs the fastest,
and probes again every `period` steps. A count that lost by more than `backoff_ratio` is probed half
as often each time it loses again (up to `max_skip` rounds), so a busy machine costs little.

Results do not depend on the count: MKL splits these GEMMs along rows and columns, never along the
reduction, so the learner's arithmetic is the same at every count (tests/test_threads.py checks it on
the pinned torch).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


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


@dataclass
class ThreadChoice:
    """What the controller has seen: the count in use and the latest probe of each count."""

    current: int
    candidates: tuple[int, ...]
    median_step_s: dict[int, float] = field(default_factory=dict)
    rounds: int = 0
    switches: int = 0

    def describe(self) -> str:
        """One line, e.g. 'auto: 2 threads (1: 612 us, 2: 481 us per step; 3 rounds, 1 switch)'."""
        probes = ", ".join(f"{n}: {t * 1e6:.0f} us" for n, t in sorted(self.median_step_s.items()))
        return (f"auto: {self.current} thread{'s' if self.current > 1 else ''} ({probes} per step; "
                f"{self.rounds} round{'s' if self.rounds != 1 else ''}, {self.switches} switch"
                f"{'es' if self.switches != 1 else ''})")


def limit_blas_threads() -> None:
    """One OpenBLAS thread: numpy's small matmuls (kernel quantization) gain nothing from more, and
    idle spinning threads steal the cores the env, actors and learner need."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1, user_api="blas")


class AdaptiveThreads:
    """Wrap every learner step in `with controller.step():`; the controller sets torch's thread count.

    A probe round measures each candidate over `warmup` + `probe_steps` consecutive steps (the first
    `warmup` after a switch are not counted: a new OpenMP team and cold caches) and keeps the median.
    A faster count replaces the current one once it has beaten it by more than `margin` in `confirm`
    rounds in a row (one noisy round does not move a run to a worse count), or at once when the current
    count runs more than `backoff_ratio` slower (its core was taken). `callers` threads call the
    learner's ops at once (DDPG's concurrent actor and critic gradients: 2), so each may use at most
    cores // callers threads."""

    def __init__(self, cores: int | None = None, probe_steps: int = 12, warmup: int = 2, period: int = 1000,
                 margin: float = 0.05, backoff_ratio: float = 1.5, max_skip: int = 32, confirm: int = 2,
                 callers: int = 1,
                 set_threads: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if (probe_steps < 1 or warmup < 0 or period < 1 or not 0 <= margin < 1 or backoff_ratio <= 1 or max_skip < 1
                or confirm < 1 or callers < 1):
            raise ValueError("AdaptiveThreads: probe_steps >= 1, warmup >= 0, period >= 1, 0 <= margin < 1, "
                             "backoff_ratio > 1, max_skip >= 1, confirm >= 1 and callers >= 1")
        if set_threads is None:
            import torch

            set_threads = torch.set_num_threads
        self._set_threads = set_threads
        self._clock = clock
        self.probe_steps, self.warmup, self.period = probe_steps, warmup, period
        self.margin, self.backoff_ratio, self.max_skip, self.confirm = margin, backoff_ratio, max_skip, confirm
        cores = cores if cores is not None else available_cores()
        candidates = thread_candidates(max(1, cores // callers))
        self._challenger: tuple[int, int] | None = None  # (count, rounds in a row it beat the current one)
        self.choice = ThreadChoice(current=candidates[0], candidates=candidates)
        self._skip = {n: 1 for n in candidates}  # probe n in every skip-th round
        self._wait = {n: 0 for n in candidates}  # rounds left before n is probed again
        self._queue: list[int] = []
        self._samples: list[float] = []
        self._active = candidates[0]
        self._since_round = period  # the first step starts a round
        self._round_times: dict[int, float] = {}
        set_threads(self._active)

    @property
    def threads(self) -> int:
        """The count the next step runs at."""
        return self._active

    @contextmanager
    def step(self) -> Iterator[None]:
        """Time one learner step (an exception is not a sample)."""
        if not self._queue and self._since_round >= self.period and len(self.choice.candidates) > 1:
            self._start_round()
        t0 = self._clock()
        yield
        self._record(self._clock() - t0)

    # ------------------------------------------------------------------ internals
    def _use(self, n: int) -> None:
        if n != self._active:
            self._set_threads(n)
            self._active = n

    def _start_round(self) -> None:
        due = []
        for n in self.choice.candidates:
            if n == self.choice.current or self._wait[n] <= 0:
                due.append(n)
            else:
                self._wait[n] -= 1
        # the current count last, so that the round ends where it will most likely stay
        self._queue = sorted(due, key=lambda n: n == self.choice.current)
        self._round_times = {}
        self._samples = []
        self._use(self._queue[0])

    def _record(self, seconds: float) -> None:
        if not self._queue:
            self._since_round += 1
            return
        self._samples.append(seconds)
        if len(self._samples) < self.warmup + self.probe_steps:
            return
        self._round_times[self._queue[0]] = statistics.median(self._samples[self.warmup:])
        self._queue.pop(0)
        self._samples = []
        if self._queue:
            self._use(self._queue[0])
        else:
            self._finish_round()

    def _finish_round(self) -> None:
        choice, times = self.choice, self._round_times
        choice.median_step_s.update(times)
        choice.rounds += 1
        best = min(times, key=times.__getitem__)
        current = choice.current
        if best != current and (current not in times or times[best] < times[current] * (1 - self.margin)):
            wins = self._challenger[1] + 1 if self._challenger and self._challenger[0] == best else 1
            collapsed = current in times and times[current] > times[best] * self.backoff_ratio
            if wins >= self.confirm or collapsed:
                choice.current = best
                choice.switches += 1
                self._challenger = None
            else:
                self._challenger = (best, wins)
        else:
            self._challenger = None
        for n, t in times.items():
            if n == choice.current:
                continue
            lost_badly = t > times[choice.current] * self.backoff_ratio
            self._skip[n] = min(self._skip[n] * 2, self.max_skip) if lost_badly else 1
            self._wait[n] = self._skip[n] - 1
        self._use(choice.current)
        self._since_round = 0


def learner_callers(config: object) -> int:
    """Threads that call the learner's ops at once: 2 for DDPG's concurrent actor and critic gradients."""
    return 2 if getattr(config, "algo", None) == "ddpg" and getattr(config, "concurrent_updates", False) else 1


def measured_thread_count(step: Callable[[], object], cores: int | None = None, callers: int = 1) -> int:
    """The count AdaptiveThreads settles on for `step` after one probe round: what a training run with
    `learner_threads = 0` would use at the machine's present load (the planner profiles with it)."""
    controller = AdaptiveThreads(cores, confirm=1, callers=callers)
    while len(controller.choice.candidates) > 1 and controller.choice.rounds == 0:
        with controller.step():
            step()
    return controller.choice.current
