"""The training schedule every engine honours, and the planner models, in one place: Stable-Baselines3's
update-to-data schedule (when gradient step g may run, and its inverse), DQN's target-copy rule, and
the actor workers' message and credit sizes. tests/test_schedule.py checks the schedule against a
transcription of SB3's loop."""

from __future__ import annotations

from typing import Any

from pearl_fpga.config import TrainConfig

MESSAGE_STEPS = 64
"""Actor workers send their transitions every this many env steps (one replay insert per message)."""


BULK_ACT_STEPS = 1_024
"""Most env steps a lockstep (inline) engine acts, and inserts into the replay at once, between two events."""


def lockstep_insert_steps(config: TrainConfig) -> int:
    """Env steps per replay insert of a lockstep engine in steady state: it acts up to the next training
    round (train_freq steps later), at most BULK_ACT_STEPS and the buffer's size, in whole env groups."""
    steps = min(BULK_ACT_STEPS, config.buffer_size, config.train_freq if config.gradient_steps > 0 else BULK_ACT_STEPS)
    return max(config.n_envs, steps // config.n_envs * config.n_envs)


RAY_MESSAGE_STEPS = 512
"""Ray engine: env steps per grant (one Ray call that steps them and inserts them into a shard), so that
the per-call cost stays a small part of the env time of the data (`pearl-fpga bench ray` measures it)."""


def allowed_gradient_steps(config: TrainConfig, collected: int) -> int:
    """Gradient steps SB3's loop has run once `collected` env steps exist: training rounds happen at
    collected = k * train_freq for every k with k * train_freq > learning_starts; each runs
    gradient_steps updates."""
    rounds = collected // config.train_freq - config.learning_starts // config.train_freq
    return max(rounds, 0) * config.gradient_steps


def needed_env_steps(config: TrainConfig, g: int) -> int:
    """The inverse: env steps after which SB3's loop runs gradient step g (0-based)."""
    return config.train_freq * (config.learning_starts // config.train_freq + g // config.gradient_steps + 1)


def no_learning_problem(config: TrainConfig, start: int, grad_steps: int, end: int) -> str | None:
    """Why a run from env step `start` (with `grad_steps` gradient steps done) to `end` can make no
    gradient step by the schedule, with the numbers and the fix; None when it can learn."""
    if allowed_gradient_steps(config, end) > grad_steps:
        return None
    if config.gradient_steps <= 0:
        return ("gradient_steps is 0: this run collects data and never updates the network; "
                "set it above 0 (--set gradient_steps=N)")
    need = needed_env_steps(config, grad_steps)
    below = config.train_freq * (end // config.train_freq)  # learning_starts below this lets a round run by `end`
    lower = (f"a lower learning_starts (--set learning_starts=N with N below {below:,})" if below > 0 else
             f"a smaller train_freq (--set train_freq=N, now {config.train_freq:,}, longer than the run)")
    return (f"no gradient step can run in this run: it ends at env step {end:,} ({end - start:,} steps from "
            f"{start:,}), and with learning_starts {config.learning_starts:,} and train_freq {config.train_freq:,} "
            f"the first gradient step runs at env step {need:,}; the network would not learn. Fix: a budget of at "
            f"least {need:,} env steps (--steps {need}; Trainer.train({need - start})) or {lower}")


def target_copy_due(config: TrainConfig, needed: int, checked: int) -> bool:
    """DQN: copy the target before a gradient step needing `needed` env steps when a multiple of
    target_update_interval lies in (checked, needed]: SB3 copies every target_update_interval env steps
    during collection, while the online net is frozen, so one copy before the round's first step is the
    same."""
    return needed // config.target_update_interval > checked // config.target_update_interval


def credit_chunk(config: TrainConfig) -> int:
    """Env steps granted to a worker at a time: a message, at most the allowed lag, whole env groups."""
    return max(config.n_envs, min(MESSAGE_STEPS, config.actor_lag) // config.n_envs * config.n_envs)


def credit_limit(config: TrainConfig, grad_steps: int, end: int) -> int:
    """Env steps actors may have been granted when the learner has run `grad_steps` steps: the steps the
    next gradient step needs (at least learning_starts) plus the allowed lag, at most `end`."""
    if config.gradient_steps <= 0:
        return end
    return min(end, max(needed_env_steps(config, grad_steps), config.learning_starts) + config.actor_lag)
