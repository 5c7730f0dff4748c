"""The actor-critic learner's update schedule, chosen by measurement and re-checked while training.

DDPG's concurrent update and TD3's twin critics can run part of a gradient step on a second thread
(algos/td3.py). A free second core makes the step faster; when other work holds that core, the step
waits for the thread the OS has parked, and loses many times over what it could gain. So
`update_schedule = "auto"` (the default) makes it a measurement, by the learner threads' controller
(runtime.threads.AdaptiveThreads) with the two schedules as its candidates: short probe windows of
learner steps in each, the faster kept, probed again at doubling intervals up to every `period` steps
(and soon after a win, to confirm it), a schedule that lost badly probed less and less often, and a new
round at once when the kept one's steps slow down (a host that becomes shared mid-run goes back to
serial). Both schedules give the same bits, so switching changes nothing but the time. When the thread
count is measured as well, the two controllers take turns: while one probes, the other waits
(AdaptiveThreads.share_steps_with). While actor processes step their envs beside the learner (the
processes and Ray engines), they hold a core that is free between their bursts: the Trainer runs those
steps under a condition of their own (ACTORS_STEPPING, AdaptiveThreads.condition), so each phase keeps
the schedule that is fastest in it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pearl_fpga.runtime.threads import AdaptiveThreads, ThreadChoice

SCHEDULE_THREADS = {"serial": 1, "concurrent": 2}
"""Each schedule as the controller's candidate: the threads one step runs on."""


def schedule_control(learner: Any, threads: AdaptiveThreads | None = None, **probing: Any) -> AdaptiveThreads | None:
    """The controller of `learner`'s schedule when it may choose (`learner.schedules` holds more than one:
    update_schedule auto, a step with work for a second thread), else None. `threads`: the thread count's
    controller, which times the same steps. `probing`: AdaptiveThreads' probe settings (tests)."""
    schedules = tuple(getattr(learner, "schedules", ()))
    if len(schedules) < 2:
        return None
    by_threads = {SCHEDULE_THREADS[s]: s for s in schedules}
    control = AdaptiveThreads(cores=max(by_threads), candidates=tuple(by_threads),
                              set_threads=lambda n: learner.set_schedule(by_threads[n]), **probing)
    if threads is not None:
        control.share_steps_with(threads)
    return control


ACTORS_STEPPING = "actors stepping"
"""The condition of learner steps taken while the run's actor processes have env steps to take."""


def set_condition(name: str, *controllers: AdaptiveThreads | None) -> None:
    """The learner steps from here on run under condition `name` ("": the usual one) for every controller given."""
    for control in controllers:
        if control is not None:
            control.condition(name)


def describe_schedule(choice: ThreadChoice) -> str:
    """One line, e.g. 'auto: serial (serial: 612 us, concurrent: 4810 us per step; 3 rounds, 1 switch)'."""
    names = {n: s for s, n in SCHEDULE_THREADS.items()}
    probes = ", ".join(f"{names[n]}: {t * 1e6:.0f} us" for n, t in sorted(choice.median_step_s.items()))
    measured = f"{probes} per step; " if probes else ""
    return (f"auto: {names[choice.current]} ({measured}{choice.rounds} round{'s' if choice.rounds != 1 else ''}, "
            f"{choice.switches} switch{'es' if choice.switches != 1 else ''})")


def schedule_report(learner: Any, control: AdaptiveThreads | None) -> str | None:
    """The summary's line: the measured choice, the fixed schedule, or None for a learner without one."""
    if control is not None:
        return control.describe(describe_schedule)
    schedules = tuple(getattr(learner, "schedules", ()))
    return f"{schedules[0]} (fixed)" if schedules else None


class _Both:
    """Both controllers' step contexts around one learner step (a plain class: a step pays little for it)."""

    __slots__ = ("outer", "inner")

    def __init__(self, outer: Any, inner: Any) -> None:
        self.outer, self.inner = outer, inner

    def __enter__(self) -> None:
        self.outer.__enter__()
        self.inner.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.inner.__exit__(*exc)
        self.outer.__exit__(*exc)


def step_timing(*controllers: AdaptiveThreads | None) -> Any:
    """The context to wrap each learner step in: every controller given times it (none: a no-op)."""
    steps = [c.step() for c in controllers if c is not None]
    if not steps:
        return contextlib.nullcontext()
    context: Any = steps[0]
    for inner in steps[1:]:
        context = _Both(context, inner)
    return context
