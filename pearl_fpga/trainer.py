"""`pearl_fpga.Trainer`: the training loop of the deep algorithms (every deep algorithm the registry,
pearl_fpga.presets, holds), with the kernels in the loop.

    trainer = Trainer(algo="dqn", env="CartPole-v1", placement="fpga-emu", seed=0)
    trainer.train(50_000)
    print(trainer.evaluate(20))
    trainer.save("checkpoints/dqn")
    trainer = Trainer.load("checkpoints/dqn")

This module is the loop and nothing else: the algorithm owns its step (pearl_fpga.algos.api.DeepLearner:
update, before_update, its policy network and actor head), the engine owns where actors and replay run
(pearl_fpga.runtime.engines: inline, processes, ray), callbacks own evaluation, checkpoints and progress
(pearl_fpga.runtime.callbacks), and the reporting and checkpoint API lives in runtime.run_reports and
runtime.run_checkpoints. Schedule (the update-to-data ratio honoured exactly): gradient step g runs only
once the env-step count n satisfies `runtime.schedule.allowed_gradient_steps(config, n) > g`, i.e. the steps
Stable-Baselines3 would have run by then (RLlib's training_step: sample, add, learn as the schedule allows,
update priorities, sync weights).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pearl_fpga.algos import DeepLearner, make_learner
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import EngineError, NoLearningError, NoLearningWarning, TrainingInterrupted
from pearl_fpga.runtime.actor import ActorLoop, Rollout
from pearl_fpga.runtime.callbacks import (Callback, CallbackList, CheckpointCallback, EvalCallback, ProgressCallback,
                                        as_callback)
from pearl_fpga.runtime.checkpoint import RESUMABLE_FIELDS
from pearl_fpga.runtime.engines import Engine, RunSetup, make_engine
from pearl_fpga.runtime.envs import EnvGroup, calibration_batch, env_id_for
from pearl_fpga.runtime.learner_batches import LearnerBatches
from pearl_fpga.runtime.logger import logger_for
from pearl_fpga.runtime.placement import Placement
from pearl_fpga.runtime.policy import ActorPolicy
from pearl_fpga.replay.manager import Replay, ReplayEmpty
from pearl_fpga.runtime.run_checkpoints import CheckpointedRun
from pearl_fpga.runtime.run_reports import RunReports
from pearl_fpga.runtime.run_setup import plan_run
from pearl_fpga.runtime.schedule import (BULK_ACT_STEPS, allowed_gradient_steps, credit_limit, needed_env_steps,
                                         no_learning_problem)
from pearl_fpga.runtime.signals import StopRequest
from pearl_fpga.runtime.stats import ClosesRun, LossMeter, Stats
from pearl_fpga.runtime.timers import TaskTimer
from pearl_fpga.runtime.update_schedule import ACTORS_STEPPING, schedule_control, set_condition, step_timing

ProgressFn = Callable[[Stats], None]

__all__ = ["RESUMABLE_FIELDS", "Trainer"]


class Trainer(RunReports, CheckpointedRun, ClosesRun):
    """Trains one agent of a deep algorithm; see the module docstring."""

    def __init__(self, algo: str = "dqn", env: Any = None, placement: str | Placement | dict | None = None,
                 config: TrainConfig | None = None, seed: int = 0, workers: int | None = None,
                 logger: Any = None, checkpoint_dir: str | Path | None = None, engine: str | None = None,
                 ray_address: str | None = None, logdir: str | Path | None = None, strict: bool = False) -> None:
        """`logger`: an object with RunLogger's methods (episode, evaluation, progress, message); or
        `logdir`: the Trainer logs there as `pearl-fpga train` does (CSV files, TensorBoard events when
        tensorboard is installed, learning_curve.png after each train()). `strict`: a train() call whose
        budget ends before the schedule allows a gradient step raises NoLearningError (else it warns,
        NoLearningWarning, and runs). `env`: a gymnasium id, or as in SB3 a gymnasium.Env (made again from
        its spec) or a callable that makes one; the inline engine only (runtime.envs.env_id_for)."""
        made_from = getattr(getattr(env, "spec", None), "id", None)  # an instance gym.make made: its id's preset
        if config is None and not isinstance(env, str) and isinstance(made_from, str) and made_from in gym.registry:
            config = TrainConfig.preset(str(algo).lower(), made_from)
        plan = plan_run(algo, env_id_for(env), placement, config, seed, workers, engine, ray_address)
        self.config, self.placement, self.spec = config, placement, spec = plan.config, plan.placement, plan.spec
        self.preset_note, self.learner_threads, self.seed = plan.preset_note, plan.learner_threads, seed
        self.strict = bool(strict)
        self.board_fit = plan.board_fit  # the preset's fields fitted to an emulated board, or None
        self.logdir = Path(logdir) if logdir is not None else None
        self.logger = logger_for(logger, self.logdir)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.algo: DeepLearner = make_learner(config, spec.obs_dim, spec.action_dim, device=placement.learn, seed=seed)
        # DDPG's and TD3's serial or concurrent step, measured while training (update_schedule auto)
        self.update_schedule = schedule_control(self.algo, self.learner_threads)
        self.calibration = calibration_batch(config.env_id, seed)
        head = self.algo.actor_head(config, spec.action_dim)
        # this process's actor: the inline engine acts with it; its envs, policy copy and exploration
        # draws (seed + 2) are part of every checkpoint
        self.actor = ActorLoop(config, EnvGroup(config.env_id, config.n_envs, seed),
                               ActorPolicy(self.algo.policy_module, placement, head, self.calibration),
                               np.random.default_rng(seed + 2))
        logs = self.logdir if self.logdir is not None else getattr(self.logger, "logdir", None)
        self.setup = RunSetup(config, placement, spec, seed, self.calibration, logger,
                              logdir=Path(logs) if logs is not None else None)
        self.engine: Engine = make_engine(self.setup, self.actor)
        self.replay: Replay = self.engine.replay
        self.predict_rng = np.random.default_rng(seed + 3)  # predict(): leaves training's draws as they are
        self.eval_policy = ActorPolicy(self.algo.policy_module, placement, head, self.calibration)

        self.env_steps = 0
        self.grad_steps = 0
        self.episodes = 0
        self.episode_log: list[tuple[int, float, int]] = []  # (env step, return, length)
        self.eval_log: list[tuple[int, float, float]] = []  # (env step, mean, std)
        self.best: dict[str, Any] | None = None  # {"mean", "step", "weights"}
        self.timer = TaskTimer()
        self._faults_before: dict[str, int] = {}  # fault counters of earlier runs (restored from a checkpoint)
        self.losses = LossMeter()
        self._stop = StopRequest()  # set by SIGINT, SIGTERM or request_stop(); acted on at a step boundary
        self._lock: Any = None  # the checkpoint directory's lock while train() runs
        self._last_checkpoint: tuple[Path, int] | None = None  # (directory, env step) of the last good one
        self._predict_weights_at: int | None = None  # grad step of the weights eval_policy holds for predict()
        self._run: dict[str, Any] | None = None  # the current or last train() call: start, end
        self._callback = CallbackList([])  # the current train() call's

    # ------------------------------------------------------------------ the loop
    def train(self, steps: int, progress: ProgressFn | None = None, progress_interval: float = 0.5,
              callback: Callback | Iterable[Callback] | None = None) -> Stats:
        """Run `steps` more env steps (and the gradient steps the schedule allows by then).

        The run's callbacks: periodic evaluation (config.eval_freq) and checkpoints (config.checkpoint_freq,
        with a `checkpoint_dir`), progress reports to `progress` every `progress_interval` seconds, then
        `callback` (one pearl_fpga.runtime.callbacks.Callback or a list; one returning False from on_step
        stops the run as request_stop() does).

        SIGINT (Ctrl-C) and SIGTERM only set a flag (as request_stop() does): at the next step boundary
        a checkpoint is written when `checkpoint_dir` is set, and TrainingInterrupted (a
        KeyboardInterrupt) is raised. A second signal before that stops at once, without a checkpoint
        (the last complete one is kept). While training, the checkpoint directory is locked against
        other runs. A non-finite loss, weight or TD error raises DivergenceError; nothing non-finite is
        saved.
        """
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        cfg = self.config
        end = self.env_steps + steps
        problem = self.no_learning_problem(steps)
        if problem is not None:
            if self.strict:
                raise NoLearningError(problem)
            warnings.warn(problem, NoLearningWarning, stacklevel=2)
        defaults: list[Callback] = [EvalCallback(cfg.eval_freq, cfg.eval_episodes, self.seed + 1_000_000)]
        if self.checkpoint_dir is not None:
            defaults.append(CheckpointCallback(cfg.checkpoint_freq))
        defaults.append(ProgressCallback(progress, progress_interval))
        self._callback = CallbackList(defaults + as_callback(callback))
        self._stop.reset()
        if self.checkpoint_dir is not None:
            self._open_checkpoint_dir()
        self._run = {"start": time.perf_counter(), "start_steps": self.env_steps, "start_grad_steps": self.grad_steps,
                     "end": end}
        try:
            with self._stop.handlers():
                try:
                    self.engine.start(self.env_steps, self.policy_weights())
                    self._callback.on_training_start(self)
                    self._collect_and_learn(end)
                except EngineError as exc:
                    # raised at a step boundary (e.g. a crash-looping worker): the learner's state is whole
                    if getattr(exc, "at_boundary", False) and self.checkpoint_dir is not None:
                        self.save(self.checkpoint_dir)
                    raise
                finally:
                    self._run["stop"] = time.perf_counter()
                    set_condition("", self.learner_threads, self.update_schedule)  # also after an error mid-loop
                    self.engine.stop()
                    self._callback.on_training_end(self)
                if self._stop.requested:
                    self._stop_at_boundary()
                if self.checkpoint_dir is not None:
                    self.save(self.checkpoint_dir)
                else:
                    self.check_finite(full=True)
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
        stats = self.stats()
        if self.logdir is not None:
            from pearl_fpga.runtime.logger import plot_learning_curve

            plot_learning_curve(self.episode_log, self.eval_log, self.logdir / "learning_curve.png",
                                f"{cfg.algo.upper()} {cfg.env_id} (seed {self.seed}, {self.placement})")
        if progress is not None:
            progress(stats)
        return stats

    def no_learning_problem(self, steps: int) -> str | None:
        """Why `train(steps)` would run no gradient step (the schedule's learning_starts and train_freq), with
        the fix; None when it would run one."""
        return no_learning_problem(self.config, self.env_steps, self.grad_steps, self.env_steps + steps)

    @property
    def emulated_board(self) -> str | None:
        """The catalog board whose kernels the run emulates (fpga-emu), or None."""
        return self.placement.board

    def request_stop(self) -> None:
        """Ask a running train() to stop at the next step boundary, writing a checkpoint when
        `checkpoint_dir` is set (what SIGINT and SIGTERM do); safe from any thread or a callback."""
        self._stop.request()

    def _stop_at_boundary(self) -> None:
        path = self.save(self.checkpoint_dir) if self.checkpoint_dir is not None else None
        raise TrainingInterrupted(f"stopped by {self._stop.reason()} at env step {self.env_steps:,}"
                                  + (f"; checkpoint written to {path}" if path is not None else ""),
                                  self._stop.signum, path)

    def _release(self) -> None:
        """close(): the engine's resources (Ray actors and replay shards, the Ray connection it opened)."""
        self.engine.close()

    def _collect_and_learn(self, end: int) -> None:
        """Collect env steps from the engine until `end`, learning as the schedule allows: after every
        batch of transitions on a lockstep engine (SB3's order), else one gradient step per poll while
        the actors, granted at most actor_lag env steps ahead, keep stepping."""
        cfg, engine = self.config, self.engine
        controllers = (self.learner_threads, self.update_schedule)
        while self.env_steps < end:
            if self._stop.requested:  # also while no transitions arrive (every actor down or backing off)
                self._stop_at_boundary()
            limit = self._lockstep_limit(end) if engine.lockstep else credit_limit(cfg, self.grad_steps, end)
            if engine.refill_steps and not self.replay.can_sample():  # e.g. every Ray shard restarted empty
                limit = min(end, max(limit, self.env_steps + engine.refill_steps))
            can_learn = allowed_gradient_steps(cfg, self.env_steps) > self.grad_steps
            for rollout in engine.sample(limit, wait=not can_learn):
                self._add(rollout)
                if engine.lockstep:
                    self._learn_until(allowed_gradient_steps(cfg, self.env_steps))
                self._on_step(rollout.n)
            if not engine.lockstep and allowed_gradient_steps(cfg, self.env_steps) > self.grad_steps \
                    and self.replay.can_sample():
                # the actors hold a core until they have taken the env steps granted (up to limit)
                set_condition(ACTORS_STEPPING if self.env_steps < limit else "", *controllers)
                self._learn_until(self.grad_steps + 1)
        set_condition("", *controllers)  # the actors are done
        self._learn_until(allowed_gradient_steps(cfg, self.env_steps))

    def _lockstep_limit(self, end: int) -> int:
        """The env step a lockstep engine may act up to before the loop has something to do: where the
        next gradient step, evaluation or checkpoint is due, at most BULK_ACT_STEPS ahead (and no more
        than the replay holds, so one insert equals the per-step ones), at most `end`."""
        cfg, n = self.config, self.env_steps
        limit = min(end, n + max(1, min(BULK_ACT_STEPS, cfg.buffer_size)))
        due = needed_env_steps(cfg, self.grad_steps) if cfg.gradient_steps > 0 else end
        if due > n:
            limit = min(limit, due)
        wanted = self._callback.next_due(self)
        return min(limit, wanted) if wanted is not None else limit

    def _add(self, rollout: Rollout) -> None:
        """Store a rollout's transitions (unless an actor stored them in its shard) and count them."""
        if rollout.transitions is not None:
            with self.timer.time("replay_insert"):
                self.replay.add(rollout.transitions)
        self.timer.merge(rollout.seconds, rollout.calls)
        start = self.env_steps
        self.env_steps += rollout.n
        for i, (ret, length) in enumerate(rollout.finished):
            # an episode is logged at the env step its group ended at, where the actor says (inline)
            step = start + rollout.ended_at[i] if rollout.ended_at else self.env_steps
            self.episodes += 1
            self.episode_log.append((step, ret, length))
            if self.logger is not None:
                self.logger.episode(step, ret, length)

    def _on_step(self, n: int) -> None:
        """The callbacks at a step boundary after n new env steps; a stop asked for is acted on here."""
        if self._callback.on_step(self, n) is False:
            self._stop.request()
        if self._stop.requested:
            self._stop_at_boundary()

    def _learn_until(self, allowed: int) -> None:
        """Run gradient steps up to `allowed`; the next batch is sampled before the current step's
        priorities are written back (relaxed sample/update dependency, fixed order: deterministic)."""
        if self.grad_steps >= allowed:  # the usual case between two rounds of gradient steps
            return
        cfg, timer, learner, prioritized = self.config, self.timer, self.algo, self.replay.prioritized
        batches = LearnerBatches(self.replay, self.engine.lockstep and not prioritized, cfg.batch_size,
                                 learner.device, self.spec.discrete, timer)
        # the learner's time summed here and added once: a timer block per step costs more between two
        # learner calls (cold caches) than the sum
        stepping = step_timing(self.learner_threads, self.update_schedule)
        learn_s, learned = 0.0, 0
        try:
            while self.grad_steps < allowed:
                g = self.grad_steps
                learner.before_update(needed_env_steps(cfg, g))  # e.g. DQN's target copy
                batch, learner_batch = batches.take(g, allowed)
                start = time.perf_counter()
                with stepping:
                    if learner_batch is None:
                        assert batch is not None  # take() returns one of the two
                        learner_batch = batches.to_learner(batch)
                    loss, td = learner.update(learner_batch)
                learn_s += time.perf_counter() - start
                learned += 1
                if isinstance(loss, float) and not math.isfinite(loss):  # the fused CPU step: no sync needed
                    self._diverged(f"the loss of gradient step {g + 1:,} is {loss}")
                self.losses.add(loss)
                if prioritized:
                    assert batch is not None and batch.indices is not None  # a replay's sample has them
                    with timer.time("replay_update"):
                        td_np = td.cpu().numpy()
                        if not np.isfinite(td_np).all():
                            self._diverged(f"the TD errors of gradient step {g + 1:,} are not finite")
                        self.replay.update_priorities(batch.indices, td_np)
                self.grad_steps += 1
                if self.grad_steps % cfg.sync_interval == 0:
                    self._sync_weights()
        except ReplayEmpty:
            self.setup.note("every replay shard is empty (restarted); the learner waits for the actors")
        finally:
            timer.add("learn", learn_s, learned)

    def _sync_weights(self) -> None:
        self.check_finite(full=False)  # before actors (a kernel actor quantizes them) see the weights
        with self.timer.time("weight_sync"):
            self.engine.set_weights(self.algo.policy_module.state_dict())

    def policy_weights(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the current policy network's weights (for actors)."""
        return {k: v.detach().cpu().clone() for k, v in self.algo.policy_module.state_dict().items()}


