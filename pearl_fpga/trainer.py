"""`pearl_fpga.Trainer`: the training loop of the deep algorithms (DQN, DDPG, TD3, SAC and any other the
registry holds), with the kernels in the loop.

    trainer = Trainer(algo="dqn", env="CartPole-v1", placement="fpga-emu", seed=0)
    trainer.train(50_000)
    print(trainer.evaluate(20))
    trainer.save("checkpoints/dqn")
    trainer = Trainer.load("checkpoints/dqn")

This module is the loop and nothing else: the algorithm owns its step (pearl_fpga.algos.api.Learner:
update, before_update, its policy network and actor head), the engine owns where actors and replay run
(pearl_fpga.runtime.engines: inline, processes, ray), callbacks own evaluation, checkpoints and progress
(pearl_fpga.runtime.callbacks), and the reporting and checkpoint API lives in runtime.run_reports and
runtime.run_checkpoints. Schedule (the update-to-data ratio honoured exactly): gradient step g runs only
once the env-step count n satisfies `runtime.schedule.allowed_gradient_steps(config, n) > g`, i.e. the steps
Stable-Baselines3 would have run by then (RLlib's training_step: sample, add, learn as the schedule allows,
update priorities, sync weights).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pearl_fpga import presets as registry
from pearl_fpga.algos import Learner, make_learner
from pearl_fpga.config import TrainConfig, run_config
from pearl_fpga.errors import DivergenceError, EngineError, TrainingInterrupted
from pearl_fpga.replay.batch import Batch
from pearl_fpga.runtime.actor import ActorLoop, Transitions
from pearl_fpga.runtime.callbacks import (Callback, CallbackList, CheckpointCallback, EvalCallback, ProgressCallback,
                                        as_callback)
from pearl_fpga.runtime.checkpoint import RESUMABLE_FIELDS, first_nonfinite
from pearl_fpga.runtime.emulation import board_preset, check_fits
from pearl_fpga.runtime.engines import Engine, RunSetup, make_engine, resolve_engine
from pearl_fpga.runtime.envs import EnvGroup, calibration_batch, check_action_space, env_spec
from pearl_fpga.runtime.logger import logger_for
from pearl_fpga.runtime.placement import Placement, parse_placement
from pearl_fpga.runtime.policy import ActorPolicy
from pearl_fpga.runtime.replay import Replay, ReplayEmpty
from pearl_fpga.runtime.run_checkpoints import CheckpointedRun
from pearl_fpga.runtime.run_protocol import TrainerProtocol
from pearl_fpga.runtime.run_reports import RunReports
from pearl_fpga.runtime.schedule import allowed_gradient_steps, credit_limit, needed_env_steps
from pearl_fpga.runtime.signals import StopRequest
from pearl_fpga.runtime.stats import ClosesRun, LossMeter, Stats
from pearl_fpga.runtime.threads import AdaptiveThreads, learner_callers, limit_blas_threads, reproducible_controller
from pearl_fpga.runtime.timers import TaskTimer

ProgressFn = Callable[[Stats], None]
BULK_SAMPLE_ROWS = 16_384  # most replay rows drawn at once for the coming gradient steps (uniform replay)
BULK_ACT_STEPS = 1_024  # most env steps a lockstep engine acts (and inserts) at once between two events

__all__ = ["RESUMABLE_FIELDS", "Trainer", "make_trainer", "load_trainer"]


class Trainer(RunReports, CheckpointedRun, ClosesRun):
    """Trains one agent of a deep algorithm; see the module docstring."""

    def __init__(self, algo: str = "dqn", env: str | None = None, placement: str | Placement | dict | None = None,
                 config: TrainConfig | None = None, seed: int = 0, workers: int | None = None,
                 logger: Any = None, checkpoint_dir: str | Path | None = None, engine: str | None = None,
                 ray_address: str | None = None, logdir: str | Path | None = None) -> None:
        """`logger`: an object with RunLogger's methods (episode, evaluation, progress, message); or
        `logdir`: the Trainer logs there as `pearl-fpga train` does (CSV files, TensorBoard events when
        tensorboard is installed, learning_curve.png after each train())."""
        algo = str(algo).lower()
        if registry.get(algo).family != "deep":
            raise ValueError(f"{algo} is a tabular algorithm: use pearl_fpga.TabularTrainer({algo!r}, ...) or "
                             f"pearl_fpga.make_trainer({algo!r}, ...), which takes every algorithm")
        preset = config is None
        config = run_config(algo, env, config, stacklevel=2)
        if workers is not None:
            config.workers = int(workers)
        if engine is not None:
            config.engine = str(engine).lower()
        if ray_address is not None:
            config.ray_address = str(ray_address)
        config.validate()
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.config = config
        self.seed = seed
        self.placement = parse_placement(placement)
        self.logdir = Path(logdir) if logdir is not None else None
        self.logger = logger_for(logger, self.logdir)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.spec = env_spec(config.env_id)
        check_action_space(algo, config.env_id, self.spec.discrete)
        # an emulated board holds the sizes it was synthesized for: a preset is fitted, a given config checked
        self.preset_note = None
        if preset:
            config, self.preset_note = board_preset(config, self.placement, self.spec.obs_dim, self.spec.action_dim)
            self.config = config
        check_fits(config, self.spec.obs_dim, self.spec.action_dim, self.placement)
        if self.placement.learn_device == "cuda" and not torch.cuda.is_available():
            from pearl_fpga.errors import BackendUnavailable

            raise BackendUnavailable(f"placement learn={self.placement.learn}, but torch sees no CUDA device; use learn=cpu")
        # learner_threads 0: the count is measured and re-measured while training (runtime.threads); an
        # inline float32 run promises the same bits for a seed, so it uses only the counts that give them
        # here (a bf16 or compiled learner makes no such promise: the probe would time another step)
        self.learner_threads: AdaptiveThreads | None = None
        if config.learner_threads == 0:
            reproducible = (resolve_engine(config) == "inline" and self.placement.learn == "cpu"
                            and not config.learner_compile)
            self.learner_threads = (reproducible_controller(config, self.spec.obs_dim, self.spec.action_dim)
                                    if reproducible else AdaptiveThreads(callers=learner_callers(config)))
        if self.learner_threads is None:
            torch.set_num_threads(config.learner_threads)
        limit_blas_threads()
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

        self.algo: Learner = make_learner(config, self.spec.obs_dim, self.spec.action_dim, device=self.placement.learn,
                                          seed=seed)
        self.calibration = calibration_batch(config.env_id, seed)
        head = self.algo.actor_head(config, self.spec.action_dim)
        # this process's actor: the inline engine acts with it; its envs, policy copy and exploration
        # draws (seed + 2) are part of every checkpoint
        self.actor = ActorLoop(config, EnvGroup(config.env_id, config.n_envs, seed),
                               ActorPolicy(self.algo.policy_module, self.placement, head, self.calibration),
                               np.random.default_rng(seed + 2))
        self.setup = RunSetup(config, self.placement, self.spec, seed, self.calibration, logger)
        self.engine: Engine = make_engine(self.setup, self.actor)
        self.replay: Replay = self.engine.replay
        self.predict_rng = np.random.default_rng(seed + 3)  # predict(): leaves training's draws as they are
        self.eval_policy = ActorPolicy(self.algo.policy_module, self.placement, head, self.calibration)

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
        defaults: list[Callback] = [EvalCallback(cfg.eval_freq, cfg.eval_episodes, self.seed + 1_000_000)]
        if self.checkpoint_dir is not None:
            defaults.append(CheckpointCallback(cfg.checkpoint_freq))
        defaults.append(ProgressCallback(progress, progress_interval))
        self._callback = CallbackList(defaults + as_callback(callback))
        end = self.env_steps + steps
        self._stop.reset()
        if self.checkpoint_dir is not None:
            self._open_checkpoint_dir()
        self._run = {"start": time.perf_counter(), "start_steps": self.env_steps, "end": end}
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
        while self.env_steps < end:
            limit = self._lockstep_limit(end) if engine.lockstep else credit_limit(cfg, self.grad_steps, end)
            if engine.refill_steps and not self.replay.can_sample():  # e.g. every Ray shard restarted empty
                limit = min(end, max(limit, self.env_steps + engine.refill_steps))
            can_learn = allowed_gradient_steps(cfg, self.env_steps) > self.grad_steps
            for transitions in engine.sample(limit, wait=not can_learn):
                self._add(transitions)
                if engine.lockstep:
                    self._learn_until(allowed_gradient_steps(cfg, self.env_steps))
                self._on_step(transitions.n)
            if not engine.lockstep and allowed_gradient_steps(cfg, self.env_steps) > self.grad_steps \
                    and self.replay.can_sample():
                self._learn_until(self.grad_steps + 1)
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

    def _add(self, transitions: Transitions) -> None:
        """Store collected transitions (unless an actor stored them in its shard) and count them."""
        if transitions.data is not None:
            with self.timer.time("replay_insert"):
                self.replay.add(transitions.data)
        self.timer.merge(transitions.seconds, transitions.calls)
        start = self.env_steps
        self.env_steps += transitions.n
        for i, (ret, length) in enumerate(transitions.finished):
            # an episode is logged at the env step its group ended at, where the actor says (inline)
            step = start + transitions.ended_at[i] if transitions.ended_at else self.env_steps
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
        cfg, timer = self.config, self.timer
        next_batch = None
        # Uniform replay on a lockstep engine does not change while the learner runs: the batches of the
        # next steps are drawn, converted and sliced at once (the same draws, in order), so that a step
        # adds little to the learner's own code between two learner calls.
        prioritized, sync_interval, learner = self.replay.prioritized, cfg.sync_interval, self.algo
        bulk = self.engine.lockstep and not prioritized
        drawn: list[Batch[torch.Tensor]] = []
        # the learner's time summed here and added once: a timer block per step costs more between two
        # learner calls (cold caches) than the sum
        stepping = self.learner_threads.step() if self.learner_threads is not None else contextlib.nullcontext()
        learn_s, learned = 0.0, 0
        try:
            while self.grad_steps < allowed:
                g = self.grad_steps
                learner.before_update(needed_env_steps(cfg, g))  # e.g. DQN's target copy
                learner_batch: Batch[torch.Tensor] | None = None
                if bulk:
                    if not drawn:  # reversed: each step pops its batch off the end
                        start = time.perf_counter()
                        count = min(allowed - g, max(1, BULK_SAMPLE_ROWS // cfg.batch_size))
                        stacked = self.replay.sample_many(cfg.batch_size, count).to_torch(
                            self.algo.device, discrete=self.spec.discrete)
                        drawn = stacked.split(cfg.batch_size)[::-1] if count > 1 else [stacked]
                        timer.add("replay_sample", time.perf_counter() - start, calls=count)
                    learner_batch = drawn.pop()
                else:
                    with timer.time("replay_sample"):
                        batch = next_batch if next_batch is not None else self.replay.sample(cfg.batch_size)
                        next_batch = self.replay.sample(cfg.batch_size) if g + 1 < allowed else None
                start = time.perf_counter()
                with stepping:
                    if learner_batch is None:
                        learner_batch = batch.to_torch(self.algo.device, discrete=self.spec.discrete)
                    loss, td = learner.update(learner_batch)
                learn_s += time.perf_counter() - start
                learned += 1
                if isinstance(loss, float) and not math.isfinite(loss):  # the fused CPU step: no sync needed
                    self._diverged(f"the loss of gradient step {g + 1:,} is {loss}")
                self.losses.add(loss)
                if prioritized:
                    with timer.time("replay_update"):
                        td_np = td.cpu().numpy()
                        if not np.isfinite(td_np).all():
                            self._diverged(f"the TD errors of gradient step {g + 1:,} are not finite")
                        assert batch.indices is not None  # a replay's sample always has them
                        self.replay.update_priorities(batch.indices, td_np)
                self.grad_steps += 1
                if self.grad_steps % sync_interval == 0:
                    self._sync_weights()
        except ReplayEmpty:
            self.setup.note("every replay shard is empty (restarted); the learner waits for the actors")
        finally:
            timer.add("learn", learn_s, learned)

    def _sync_weights(self) -> None:
        self.check_finite(full=False)  # before actors (a kernel actor quantizes them) see the weights
        with self.timer.time("weight_sync"):
            self.engine.set_weights(self.algo.policy_module.state_dict())

    def check_finite(self, full: bool) -> None:
        """DivergenceError when the losses since the last report, or the policy's weights (full: every
        tensor of the algorithm, optimizer moments included), hold a NaN or an infinity."""
        problem = self.losses.problem()
        if problem is not None:
            self._diverged(problem)
        where = first_nonfinite(self.algo.state_dict() if full else self.algo.policy_module.state_dict(),
                                "" if full else "policy.")
        if where is not None:
            self._diverged(f"the weights are not finite ({where})")

    def _diverged(self, cause: str) -> None:
        cfg = self.config
        if self._last_checkpoint is not None:
            path, step = self._last_checkpoint
            kept = f"the last checkpoint, {path} (env step {step:,}), is intact"
        else:
            kept = "no checkpoint of this run was written before"
        raise DivergenceError(f"training diverged at env step {self.env_steps:,}, after {self.grad_steps:,} gradient steps: "
                              f"{cause}. Lower learning_rate (now {cfg.learning_rate:g}) or clip the gradients "
                              f"(max_grad_norm, now {cfg.max_grad_norm:g}) and start again or resume; {kept}, "
                              "nothing non-finite was saved")

    def policy_weights(self) -> dict[str, torch.Tensor]:
        """A CPU copy of the current policy network's weights (for actors)."""
        return {k: v.detach().cpu().clone() for k, v in self.algo.policy_module.state_dict().items()}



def make_trainer(algo: str = "dqn", env: str | None = None, **kwargs: Any) -> TrainerProtocol:
    """A trainer of any registered algorithm: pearl_fpga.Trainer for the deep ones, pearl_fpga.TabularTrainer
    for qlearning and sarsa (the arguments are theirs)."""
    if registry.get(algo).family == "tabular":
        from pearl_fpga.runtime.tabular_trainer import TabularTrainer

        return TabularTrainer(algo, env, **kwargs)
    return Trainer(algo, env, **kwargs)


def load_trainer(directory: str | Path, **kwargs: Any) -> TrainerProtocol:
    """The trainer a checkpoint directory holds, deep or tabular (Trainer.load's arguments)."""
    from pearl_fpga.runtime.tabular_trainer import CHECKPOINT_FILE, TabularTrainer

    if (Path(directory) / CHECKPOINT_FILE).is_file():
        return TabularTrainer.load(directory, **kwargs)
    return Trainer.load(directory, **kwargs)
