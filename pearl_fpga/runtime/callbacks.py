"""Callbacks: the work a run does beside the loop (Stable-Baselines3's common/callbacks.py, the same idea).

The Trainer's loop calls every callback of a run at each step boundary (`on_step`, after a batch of env
steps was added and the gradient steps due were run), at the start and at the end of `train()`. The
default ones of a run come from its config: periodic evaluation keeping the best policy
(`EvalCallback`, every `eval_freq` env steps), periodic checkpoints (`CheckpointCallback`, every
`checkpoint_freq` env steps when the run has a checkpoint directory) and progress reports
(`ProgressCallback`). Users add their own with `trainer.train(steps, callback=...)`:

    class StopAt(Callback):
        def on_step(self, trainer, new_steps):
            return trainer.stats().recent_return < 475  # False stops the run at this boundary

A callback that wants to run at an exact env step says so with `next_due(trainer)`: a lockstep engine
then acts no further than that step before the callback runs (evaluations and checkpoints happen at
the same steps on every engine that can honour it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from pearl_fpga.runtime.envs import rollout
from pearl_fpga.runtime.stats import Stats


class Callback:
    """Base class: every hook does nothing; override the ones you need."""

    def on_training_start(self, trainer: Any) -> None:
        """train() starts (after the engine started, before the first env step)."""

    def on_step(self, trainer: Any, new_steps: int) -> bool | None:
        """`new_steps` env steps were just added (and the gradient steps due by then run). Return False to
        stop the run at this boundary (as request_stop() does)."""
        return None

    def on_training_end(self, trainer: Any) -> None:
        """train() ends (also when it stops early on a request or a signal)."""

    def next_due(self, trainer: Any) -> int | None:
        """The env step this callback wants the loop to stop at next (None: no exact step)."""
        return None


class CallbackList(Callback):
    """Several callbacks, called in order."""

    def __init__(self, callbacks: Iterable[Callback]) -> None:
        self.callbacks = list(callbacks)

    def on_training_start(self, trainer: Any) -> None:
        for c in self.callbacks:
            c.on_training_start(trainer)

    def on_step(self, trainer: Any, new_steps: int) -> bool | None:
        go_on = True
        for c in self.callbacks:
            go_on = c.on_step(trainer, new_steps) is not False and go_on
        return go_on

    def on_training_end(self, trainer: Any) -> None:
        for c in self.callbacks:
            c.on_training_end(trainer)

    def next_due(self, trainer: Any) -> int | None:
        due = [d for d in (c.next_due(trainer) for c in self.callbacks) if d is not None]
        return min(due) if due else None


class EveryNSteps(Callback):
    """A callback that acts each time the env-step count crosses a multiple of `every` (0: never)."""

    def __init__(self, every: int) -> None:
        self.every = int(every)

    def on_step(self, trainer: Any, new_steps: int) -> bool | None:
        n = trainer.env_steps
        if self.every and n // self.every > (n - new_steps) // self.every:
            return self.on_event(trainer)
        return None

    def next_due(self, trainer: Any) -> int | None:
        return (trainer.env_steps // self.every + 1) * self.every if self.every else None

    def on_event(self, trainer: Any) -> bool | None:
        """The multiple was crossed."""
        return None


class EvalCallback(EveryNSteps):
    """Evaluate the current policy (deterministic, `episodes` episodes, on the act device) every `every` env
    steps; log the result and keep the best policy's weights in `trainer.best` (what evaluate() and the
    checkpoint's best policy use)."""

    def __init__(self, every: int, episodes: int, seed: int) -> None:
        super().__init__(every)
        self.episodes = episodes
        self.seed = seed

    def on_event(self, trainer: Any) -> None:
        trainer.check_finite(full=False)
        with trainer.timer.time("eval"):
            weights = trainer.policy_weights()
            trainer.eval_policy.load_weights(weights)
            returns = rollout(trainer.config.env_id, trainer.actor.envs, trainer.eval_policy, self.episodes, self.seed)
        mean, std = float(np.mean(returns)), float(np.std(returns))
        trainer.eval_log.append((trainer.env_steps, mean, std))
        if trainer.logger is not None:
            trainer.logger.evaluation(trainer.env_steps, mean, std)
        if trainer.best is None or mean > trainer.best["mean"]:
            trainer.best = {"mean": mean, "step": trainer.env_steps, "weights": weights}


class CheckpointCallback(EveryNSteps):
    """Write a checkpoint to the run's checkpoint directory every `every` env steps."""

    def on_event(self, trainer: Any) -> None:
        with trainer.timer.time("checkpoint"):
            trainer.save(trainer.checkpoint_dir)


class ProgressCallback(Callback):
    """Report `trainer.stats()` to the run's logger and to `fn` at most every `interval` seconds."""

    def __init__(self, fn: Callable[[Stats], None] | None, interval: float = 0.5) -> None:
        self.fn = fn
        self.interval = interval
        self._last = 0.0

    def on_training_start(self, trainer: Any) -> None:
        self._last = 0.0

    def on_step(self, trainer: Any, new_steps: int) -> None:
        now = time.perf_counter()
        if self.fn is not None and now - self._last >= self.interval:
            self._last = now
            stats = trainer.stats()
            if trainer.logger is not None:
                trainer.logger.progress(stats)
            self.fn(stats)


def as_callback(callback: Callback | Iterable[Callback] | None) -> list[Callback]:
    """A user's `callback` argument as a list (None: none); TypeError naming what it got otherwise."""
    if callback is None:
        return []
    items = [callback] if isinstance(callback, Callback) else list(callback)
    for c in items:
        if not isinstance(c, Callback):
            raise TypeError(f"callback must be a pearl_fpga.runtime.callbacks.Callback (or a list of them), "
                            f"got {type(c).__name__}")
    return items
