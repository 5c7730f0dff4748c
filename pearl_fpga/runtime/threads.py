"""The learner's torch intra-op thread count, chosen by measurement and re-checked while training.

A second core speeds up the learner's GEMMs when it is free and slows them badly when other work
holds it (an OpenMP team waits for its slowest thread). So `TrainConfig.learner_threads = 0` makes the
count a measurement instead of a setting: `AdaptiveThreads` times short probe windows of learner
steps at each candidate count (1, 2, 4, ... up to the cores this process may use), runs the fastest,
and probes again: first soon (a first round on a noisy host may be wrong), then at twice the interval
each round, up to every `period` steps. A count that lost by more than `backoff_ratio` is probed half
as often each time it loses again (up to `max_skip` rounds), so a busy machine costs little.

Which counts give the same bits as one thread on this machine is measured in runtime/thread_bits.py.
"""

from __future__ import annotations


import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pearl_fpga.host import available_cores, thread_candidates


@dataclass
class ThreadChoice:
    """What the controller has seen: the count in use and the latest probe of each count."""

    current: int
    candidates: tuple[int, ...]
    median_step_s: dict[int, float] = field(default_factory=dict)
    rounds: int = 0
    switches: int = 0

    fixed_reason: str = ""  # why the count may not change (set when no other count gives the same bits)

    def describe(self) -> str:
        """One line, e.g. 'auto: 2 threads (1: 612 us, 2: 481 us per step; 3 rounds, 1 switch)'."""
        threads = f"{self.current} thread{'s' if self.current > 1 else ''}"
        if self.fixed_reason:
            return f"auto: {threads}, fixed ({self.fixed_reason})"
        if len(self.candidates) == 1:
            return f"auto: {threads} (the only count that fits the cores this process may use)"
        probes = ", ".join(f"{n}: {t * 1e6:.0f} us" for n, t in sorted(self.median_step_s.items()))
        measured = f"{probes} per step; " if probes else ""
        return (f"auto: {threads} ({measured}{self.rounds} round{'s' if self.rounds != 1 else ''}, "
                f"{self.switches} switch{'es' if self.switches != 1 else ''})")


def limit_blas_threads() -> None:
    """One OpenBLAS thread: numpy's small matmuls (kernel quantization) gain nothing from more, and
    idle spinning threads steal the cores the env, actors and learner need."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1, user_api="blas")


PROBE_PERIOD = 1000
"""Learner steps at the chosen count between two probe rounds of AdaptiveThreads (its default `period`)."""

_PER_CONDITION = ("choice", "_challenger", "_skip", "_wait", "_queue", "_samples", "_since_round", "_interval",
                  "_round_times", "_recent")
"""AdaptiveThreads' state kept for each condition (AdaptiveThreads.condition)."""

RECHECK_FRACTION = 10
"""AdaptiveThreads' default `recheck`, a tenth of the period: the interval after the first round, and after a
challenger's win."""


class _Step:
    """AdaptiveThreads.step()'s context, one per controller (a plain class: a learner step pays little for it)."""

    __slots__ = ("controller", "start")

    def __init__(self, controller: AdaptiveThreads) -> None:
        self.controller = controller
        self.start = 0.0

    def __enter__(self) -> None:
        self.controller._before_step()
        self.start = self.controller._clock()

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.controller._record(self.controller._clock() - self.start)


class AdaptiveThreads:
    """Wrap every learner step in `with controller.step():`; the controller sets torch's thread count.

    A probe round measures each candidate over `warmup` + `probe_steps` consecutive steps (the first
    `warmup` after a switch are not counted: a new OpenMP team and cold caches) and keeps the median.
    The first round's fastest count is taken at once (the starting count is a guess). The next round
    comes `recheck` steps later, and each after it at twice the interval, up to every `period` steps: a
    first decision that noise made is corrected early in a short run. A faster count replaces the current
    one once it has beaten it by more than `margin` in `confirm` rounds in a row (one noisy round does not
    move a run to a worse count; the confirming round comes `recheck` steps after the win, so a core that
    became free is taken up soon), or at once when the current count runs more than `backoff_ratio`
    slower (its core was taken). Between rounds, a current count whose recent steps run `backoff_ratio`
    slower than its probe starts a round at once. A probe whose steps run
    `backoff_ratio` slower than the current count's is cut short after CUT_AFTER of them. `callers` threads call the
    learner's ops at once (DDPG's concurrent actor and critic gradients: 2), so each may use at most
    cores // callers threads. `candidates` (default: 1, 2, 4, ... up to that) restricts the counts it
    may use, e.g. to those that give the same bits (`reproducible_thread_counts`)."""

    def __init__(self, cores: int | None = None, probe_steps: int = 12, warmup: int = 2, period: int = PROBE_PERIOD,
                 margin: float = 0.05, backoff_ratio: float = 1.5, max_skip: int = 32, confirm: int = 2,
                 recheck: int | None = None, callers: int = 1, candidates: tuple[int, ...] | None = None,
                 fixed_reason: str = "",
                 set_threads: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        recheck = max(1, period // RECHECK_FRACTION) if recheck is None else recheck
        if (probe_steps < 1 or warmup < 0 or period < 1 or not 0 <= margin < 1 or backoff_ratio <= 1 or max_skip < 1
                or confirm < 1 or callers < 1 or not 1 <= recheck <= period):
            raise ValueError("AdaptiveThreads: probe_steps >= 1, warmup >= 0, period >= 1, 0 <= margin < 1, "
                             "backoff_ratio > 1, max_skip >= 1, confirm >= 1, 1 <= recheck <= period and callers >= 1")
        if set_threads is None:
            import torch

            set_threads = torch.set_num_threads
        self._set_threads = set_threads
        self._clock = clock
        self.probe_steps, self.warmup, self.period = probe_steps, warmup, period
        self.margin, self.backoff_ratio, self.max_skip, self.confirm = margin, backoff_ratio, max_skip, confirm
        self.recheck = recheck
        cores = cores if cores is not None else available_cores()
        if candidates is None:
            candidates = thread_candidates(max(1, cores // callers))
        elif not candidates or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in candidates):
            raise ValueError(f"AdaptiveThreads: candidates must be thread counts >= 1, got {candidates!r}")
        candidates = tuple(sorted(set(candidates)))
        self._fresh_condition(ThreadChoice(current=candidates[0], candidates=candidates, fixed_reason=fixed_reason))
        self._condition = ""  # the condition the steps run under (condition()): "" is the run's usual one
        self._others: dict[str, dict[str, Any]] = {}  # the other conditions' state (_PER_CONDITION), by name
        self._active = candidates[0]
        self._peers: list[AdaptiveThreads] = []  # controllers timing the same steps (share_steps_with)
        self._step = _Step(self)
        set_threads(self._active)

    def _fresh_condition(self, choice: ThreadChoice) -> None:
        """The state of a condition not seen before, starting at `choice` (its first step starts a round)."""
        candidates = choice.candidates
        self.choice = choice
        self._challenger: tuple[int, int] | None = None  # (count, rounds in a row it beat the current one)
        self._skip = {n: 1 for n in candidates}  # probe n in every skip-th round
        self._wait = {n: 0 for n in candidates}  # rounds left before n is probed again
        self._queue: list[int] = []
        self._samples: list[float] = []
        self._since_round = self.period  # the first step starts a round
        self._interval = self.recheck  # steps from the end of one round to the start of the next
        self._round_times: dict[int, float] = {}
        self._recent: list[float] = []  # step times at the current count since the last round or check

    def condition(self, name: str) -> None:
        """The steps from here on run under condition `name` ("": the usual one), e.g. "actors stepping" while
        actor processes take a core that is free otherwise: each condition has its own choice, probe rounds and
        period, so a count measured under one never stands for the other. A round under way is paused and
        resumes when its condition returns (its samples kept). A new condition starts at the current count,
        with a probe round at its first step. A controller with one candidate has nothing to keep apart."""
        if name == self._condition or len(self.choice.candidates) == 1:
            return
        self._others[self._condition] = {key: getattr(self, key) for key in _PER_CONDITION}
        saved = self._others.pop(name, None)
        if saved is None:
            self._fresh_condition(replace(self.choice, median_step_s={}, rounds=0, switches=0))
        else:
            for key, value in saved.items():
                setattr(self, key, value)
        self._condition = name
        self._use(self._queue[0] if self._queue else self.choice.current)

    def choices(self) -> dict[str, ThreadChoice]:
        """Every condition's choice seen so far, by name ("": the usual one)."""
        seen = {name: state["choice"] for name, state in self._others.items()}
        seen[self._condition] = self.choice
        return dict(sorted(seen.items()))

    def describe(self, one: Callable[[ThreadChoice], str] = ThreadChoice.describe) -> str:
        """The usual condition's choice in a line (`one`), then each other condition's: '...; while actors
        stepping: ...'."""
        choices = self.choices()
        usual = choices.pop("", None)
        parts = [one(usual)] if usual is not None else []
        parts += [f"while {name}: {one(choice)}" for name, choice in choices.items()]
        return "; ".join(parts)

    @property
    def threads(self) -> int:
        """The count the next step runs at."""
        return self._active

    def step(self) -> _Step:
        """`with controller.step():` times one learner step (an exception is not a sample)."""
        return self._step

    @property
    def probing(self) -> bool:
        """A probe round is under way (the steps run at the counts it probes)."""
        return bool(self._queue)

    def share_steps_with(self, other: AdaptiveThreads) -> None:
        """Both controllers time the same steps (e.g. the thread count and the update schedule): while
        one probes, the other starts no round and takes no sample, so neither reads the other's probes."""
        self._peers.append(other)
        other._peers.append(self)

    def _peer_probing(self) -> bool:
        return any(peer.probing for peer in self._peers)

    def _before_step(self) -> None:
        if (not self._queue and self._since_round >= self._interval and len(self.choice.candidates) > 1
                and not self._peer_probing()):
            self._start_round()

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
        # the current count last, so that the round ends where it will most likely stay; first while it has
        # no probe yet, so that the other counts' probes have a reference to be cut short against
        current = self.choice.current
        unmeasured = current not in self.choice.median_step_s
        self._queue = sorted(due, key=lambda n: (n != current) if unmeasured else (n == current))
        self._round_times = {}
        self._samples = []
        self._use(self._queue[0])

    def _record(self, seconds: float) -> None:
        if not self._queue:
            if self._peer_probing():
                return
            self._since_round += 1
            self._watch(seconds)
            return
        self._samples.append(seconds)
        if len(self._samples) < self.warmup + self.probe_steps and not self._clearly_slower():
            return
        self._round_times[self._queue[0]] = statistics.median(self._samples[self.warmup:])
        self._queue.pop(0)
        self._samples = []
        if self._queue:
            self._use(self._queue[0])
        else:
            self._finish_round()

    def _clearly_slower(self) -> bool:
        """The count being probed has run CUT_AFTER counted steps in a row `backoff_ratio` slower than the
        current count: its probe ends early (on a busy machine a second thread can cost 20x a step)."""
        n = self._queue[0]
        reference = self._round_times.get(self.choice.current, self.choice.median_step_s.get(self.choice.current))
        counted = self._samples[self.warmup:]
        return (n != self.choice.current and reference is not None and len(counted) >= CUT_AFTER
                and all(t > reference * self.backoff_ratio for t in counted[-CUT_AFTER:]))

    def _watch(self, seconds: float) -> None:
        """Between rounds: when the current count's recent median runs `backoff_ratio` slower than its
        last probe (another job took a core), probe again now instead of at the end of the period."""
        probed = self.choice.median_step_s.get(self.choice.current)
        if probed is None or len(self.choice.candidates) == 1:
            return
        self._recent.append(seconds)
        if len(self._recent) < self.probe_steps:
            return
        if statistics.median(self._recent) > probed * self.backoff_ratio:
            self._since_round = self.period
            self._wait = {n: 0 for n in self._wait}  # every count is due: the one that lost may win now
        self._recent = []

    def _finish_round(self) -> None:
        choice, times = self.choice, self._round_times
        choice.median_step_s.update(times)
        choice.rounds += 1
        best = min(times, key=times.__getitem__)
        current = choice.current
        if best != current and (current not in times or times[best] < times[current] * (1 - self.margin)):
            wins = self._challenger[1] + 1 if self._challenger and self._challenger[0] == best else 1
            collapsed = current in times and times[current] > times[best] * self.backoff_ratio
            first = choice.rounds == 1  # the starting count was a guess, not a measurement
            if wins >= self.confirm or collapsed or first:
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
        # the next round: `recheck` steps on while a challenger is still to be confirmed, else the interval
        # doubles from `recheck` up to `period` (the first rounds correct a first decision that noise made)
        if self._challenger is not None:
            self._interval = self.recheck
        elif choice.rounds > 1:
            self._interval = min(2 * self._interval, self.period)
        self._since_round = 0
        self._recent = []


CUT_AFTER = 2  # counted steps a probe needs before it may be cut short (one slow step may be noise)


def probe_round_starts(steps: int, period: int = PROBE_PERIOD, recheck: int | None = None) -> list[int]:
    """The steps (0-based, counting the steps outside probe rounds) at which AdaptiveThreads starts its probe rounds
    in a run of `steps` learner steps on a steady host: the first step, then `recheck` steps on, and at twice the
    interval each round up to every `period` steps. Rounds a change of load adds are not predictable and not here."""
    recheck = max(1, period // RECHECK_FRACTION) if recheck is None else recheck
    starts, at, interval = [], 0, recheck
    while at < steps:
        starts.append(at)
        at += interval
        interval = min(2 * interval, period)
    return starts


def learner_callers(config: Any) -> int:
    """Threads that call the learner's ops at once, as the algorithm's learner says (DeepLearner.callers: e.g. 2
    for DDPG's and TD3's concurrent actor and critic gradients and for TD3's twin critics)."""
    from pearl_fpga.algos.registry import learner_class

    return learner_class(config.algo).callers(config)


def measured_thread_count(step: Callable[[], object], cores: int | None = None, callers: int = 1,
                          candidates: tuple[int, ...] | None = None) -> int:
    """The count AdaptiveThreads settles on for `step` after one probe round among `candidates`: what a
    training run with `learner_threads = 0` would use at the machine's present load (the planner
    profiles with it)."""
    controller = AdaptiveThreads(cores, confirm=1, callers=callers, candidates=candidates)
    while len(controller.choice.candidates) > 1 and controller.choice.rounds == 0:
        with controller.step():
            step()
    return controller.choice.current
