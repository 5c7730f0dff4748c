"""`pearl_fpga.Trainer`: DQN / DDPG / TD3 training with the kernels in the loop.

    trainer = Trainer(algo="dqn", env="CartPole-v1", placement="fpga-emu", seed=0)
    trainer.train(50_000)
    print(trainer.evaluate(20))
    trainer.save("checkpoints/dqn")
    trainer = Trainer.load("checkpoints/dqn")

Schedule (the update-to-data ratio honoured exactly): the learner may run gradient step g only once
the env-step count n satisfies `runtime.schedule.allowed_gradient_steps(config, n) > g`, i.e. the steps Stable-Baselines3
would have run by then (gradient_steps per train_freq env steps, after learning_starts). Where the
actors run is the engine's business (pearl_fpga.runtime.engines: inline, processes, ray): an engine
returns transitions and takes weights, and this module runs the one training loop over it (RLlib's
training_step: sample, add, learn as the schedule allows, update priorities, sync weights).
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pearl_fpga.algos import make_algo
from pearl_fpga.config import TABULAR_ALGOS, TrainConfig, run_config
from pearl_fpga.errors import CheckpointError, DivergenceError, EngineError, TrainingInterrupted
from pearl_fpga.replay.batch import Batch
from pearl_fpga.runtime.actor import ActorLoop, Transitions
from pearl_fpga.runtime.checkpoint import (RESUMABLE_FIELDS, check_writable, checkpoint_lock, first_nonfinite,
                                         global_rng_state, read_newest, recover_checkpoint, restore_run_state,
                                         resumed_config, run_state, set_global_rng_state, write_checkpoint)
from pearl_fpga.runtime.emulation import board_preset, check_fits
from pearl_fpga.runtime.engines import Engine, RunSetup, make_engine, resolve_engine
from pearl_fpga.runtime.envs import EnvGroup, calibration_batch, env_spec, rollout
from pearl_fpga.runtime.logger import logger_for
from pearl_fpga.runtime.placement import Placement, parse_placement
from pearl_fpga.runtime.policy import ActorPolicy
from pearl_fpga.runtime.replay import Replay, ReplayEmpty
from pearl_fpga.runtime.schedule import allowed_gradient_steps, credit_limit, needed_env_steps, target_copy_due
from pearl_fpga.runtime.signals import StopRequest
from pearl_fpga.runtime.state_checks import check_trainer_state
from pearl_fpga.runtime.stats import ClosesRun, EvalResult, LossMeter, Stats
from pearl_fpga.runtime.threads import AdaptiveThreads, learner_callers, limit_blas_threads, reproducible_controller
from pearl_fpga.runtime.timers import TaskTimer
from pearl_fpga.runtime.vocabulary import TASKS

ProgressFn = Callable[[Stats], None]
BULK_SAMPLE_ROWS = 16_384  # most replay rows drawn at once for the coming gradient steps (uniform replay)
BULK_ACT_STEPS = 1_024  # most env steps a lockstep engine acts (and inserts) at once between two events

__all__ = ["RESUMABLE_FIELDS", "Trainer"]


class Trainer(ClosesRun):
    """Trains one agent; see the module docstring for the schedule and `pearl_fpga.runtime` for the parts."""

    def __new__(cls, algo: str = "dqn", *args: Any, **kwargs: Any) -> Any:
        """Trainer(algo="qlearning" or "sarsa", ...) is a TabularTrainer: the same public API on the TabularQ kernel."""
        if str(algo).lower() in TABULAR_ALGOS:
            from pearl_fpga.runtime.tabular import TabularTrainer

            return TabularTrainer(algo, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, algo: str = "dqn", env: str | None = None, placement: str | Placement | dict | None = None,
                 config: TrainConfig | None = None, seed: int = 0, workers: int | None = None,
                 logger: Any = None, checkpoint_dir: str | Path | None = None, engine: str | None = None,
                 ray_address: str | None = None, logdir: str | Path | None = None) -> None:
        """`logger`: an object with RunLogger's methods (episode, evaluation, progress, message); or
        `logdir`: the Trainer logs there as `pearl-fpga train` does (CSV files, TensorBoard events when
        tensorboard is installed, learning_curve.png after each train())."""
        algo = str(algo).lower()
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
        if (algo == "dqn") != self.spec.discrete:
            need = "discrete" if algo == "dqn" else "continuous (Box)"
            raise ValueError(f"{algo.upper()} needs a {need} action space; {config.env_id} does not have one "
                             f"(DQN: e.g. CartPole-v1, DDPG and TD3: e.g. Pendulum-v1)")
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

        self.algo = make_algo(config, self.spec.obs_dim, self.spec.action_dim, device=self.placement.learn, seed=seed)
        self.calibration = calibration_batch(config.env_id, seed)
        # this process's actor: the inline engine acts with it; its envs, policy copy and exploration
        # draws (seed + 2) are part of every checkpoint
        self.actor = ActorLoop(config, EnvGroup(config.env_id, config.n_envs, seed),
                               ActorPolicy(self.algo.policy_module, self.placement, self.spec.discrete, self.calibration),
                               np.random.default_rng(seed + 2))
        self.setup = RunSetup(config, self.placement, self.spec, seed, self.calibration, logger)
        self.engine: Engine = make_engine(self.setup, self.actor)
        self.replay: Replay = self.engine.replay
        self.predict_rng = np.random.default_rng(seed + 3)  # predict(): leaves training's draws as they are
        self.eval_policy = ActorPolicy(self.algo.policy_module, self.placement, self.spec.discrete, self.calibration)

        self.env_steps = 0
        self.grad_steps = 0
        self.episodes = 0
        self.target_checked = 0  # env step up to which target copies have been applied
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
        self._run: dict[str, Any] | None = None  # the current or last train() call: start, end, progress

    # ------------------------------------------------------------------ public API
    def train(self, steps: int, progress: ProgressFn | None = None, progress_interval: float = 0.5) -> Stats:
        """Run `steps` more env steps (and the gradient steps the schedule allows by then).

        SIGINT (Ctrl-C) and SIGTERM only set a flag (as request_stop() does): at the next step boundary
        a checkpoint is written when `checkpoint_dir` is set, and TrainingInterrupted (a
        KeyboardInterrupt) is raised. A second signal before that stops at once, without a checkpoint
        (the last complete one is kept). While training, the checkpoint directory is locked against
        other runs. A non-finite loss, weight or TD error raises DivergenceError; nothing non-finite is
        saved.
        """
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        end = self.env_steps + steps
        self._stop.reset()
        if self.checkpoint_dir is not None:
            self._open_checkpoint_dir()
        self._run = {"start": time.perf_counter(), "start_steps": self.env_steps, "end": end,
                     "progress": progress, "interval": progress_interval, "last": 0.0}
        try:
            with self._stop.handlers():
                try:
                    self.engine.start(self.env_steps, self.policy_weights())
                    self._collect_and_learn(end)
                except EngineError as exc:
                    # raised at a step boundary (e.g. a crash-looping worker): the learner's state is whole
                    if getattr(exc, "at_boundary", False) and self.checkpoint_dir is not None:
                        self.save(self.checkpoint_dir)
                    raise
                finally:
                    self._run["stop"] = time.perf_counter()
                    self.engine.stop()
                if self._stop.requested:
                    self._stop_at_boundary()
                if self.checkpoint_dir is not None:
                    self.save(self.checkpoint_dir)
                else:
                    self._check_finite(full=True)
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None
        stats = self.stats()
        if self.logdir is not None:
            from pearl_fpga.runtime.logger import plot_learning_curve

            plot_learning_curve(self.episode_log, self.eval_log, self.logdir / "learning_curve.png",
                                f"{self.config.algo.upper()} {self.config.env_id} (seed {self.seed}, {self.placement})")
        if progress is not None:
            progress(stats)
        return stats

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """Stable-Baselines3's `predict`: the current policy's action(s) for one observation or a batch,
        in the env's action space (a batch in, a batch out), and the recurrent state (always None here).
        On the act device: the quantized kernel for kernel placements. deterministic=False: DQN acts
        epsilon-greedy at the schedule's current epsilon; DDPG stays deterministic, as SB3's does."""
        del episode_start  # SB3's argument for recurrent policies; these are not
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        batch = obs.reshape(1, -1) if single else obs
        if batch.ndim != 2 or batch.shape[1] != self.spec.obs_dim:
            raise ValueError(f"predict: expected observations of shape ({self.spec.obs_dim},) or (n, {self.spec.obs_dim}) "
                             f"for {self.config.env_id}, got {obs.shape}")
        if self._predict_weights_at != self.grad_steps:
            self.eval_policy.load_weights(self.algo.policy_module.state_dict())
            self._predict_weights_at = self.grad_steps
        actions = self.eval_policy.deterministic(batch)
        if self.spec.discrete:
            if not deterministic:
                explore = self.predict_rng.random(len(batch)) < self.config.epsilon(self.env_steps)
                actions = np.where(explore, self.predict_rng.integers(0, self.spec.action_dim, len(batch)), actions)
        else:
            actions = np.stack([self.actor.envs.to_env_action(a) for a in actions])
        return (actions[0] if single else actions), state

    def request_stop(self) -> None:
        """Ask a running train() to stop at the next step boundary, writing a checkpoint when
        `checkpoint_dir` is set (what SIGINT and SIGTERM do); safe from any thread or a progress callback."""
        self._stop.request()

    def _open_checkpoint_dir(self) -> None:
        """Lock the checkpoint directory, check that it is writable, and put back the newest complete
        copy a crash left (removing temporary copies), before the first step."""
        assert self.checkpoint_dir is not None
        check_writable(self.checkpoint_dir)
        self._lock = checkpoint_lock(self.checkpoint_dir).acquire()
        try:
            recover_checkpoint(self.checkpoint_dir)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def _stop_at_boundary(self) -> None:
        path = self.save(self.checkpoint_dir) if self.checkpoint_dir is not None else None
        raise TrainingInterrupted(f"stopped by {self._stop.reason()} at env step {self.env_steps:,}"
                                  + (f"; checkpoint written to {path}" if path is not None else ""),
                                  self._stop.signum, path)

    def evaluate(self, episodes: int = 20, seed: int | None = None) -> EvalResult:
        """Mean return of the best policy kept by periodic evaluation (else the current one), on
        `episodes` fresh episodes, deterministic, on the act device (the quantized kernel policy
        when the actor is a kernel)."""
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
        self._predict_weights_at = None  # eval_policy gets other weights here
        if self.best is not None:
            self.eval_policy.load_weights(self.best["weights"])
            step, which = int(self.best["step"]), "best"
        else:
            self.eval_policy.load_weights(self.algo.policy_module.state_dict())
            step, which = self.env_steps, "current"
        returns = rollout(self.config.env_id, self.actor.envs, self.eval_policy, episodes,
                          self.seed + 2_000_000 if seed is None else seed)
        return EvalResult(float(np.mean(returns)), float(np.std(returns)), returns, step, which)

    def stats(self) -> Stats:
        """Current counters and recent figures."""
        run = self._run
        elapsed = (run.get("stop", time.perf_counter()) - run["start"]) if run else 0.0
        recent = [r for _, r, _ in self.episode_log[-20:]]
        loss = self.losses.report()
        return Stats(
            env_steps=self.env_steps, grad_steps=self.grad_steps, episodes=self.episodes,
            target_steps=run["end"] if run else self.env_steps, elapsed=elapsed,
            recent_return=float(np.mean(recent)) if recent else float("nan"), loss=loss,
            loss_known=self.losses.known,
            best_eval=float(self.best["mean"]) if self.best else float("nan"),
            worker_restarts=self.faults()["actor_restarts"], shard_restarts=self.faults()["shard_restarts"],
            transitions_lost=self.faults()["transitions_lost"],
            env_steps_run=self.env_steps - run["start_steps"] if run else 0,
        )

    def faults(self) -> dict[str, int]:
        """Actor restarts, replay-shard restarts and the transitions lost with them, over the whole run."""
        out = {"actor_restarts": 0, "shard_restarts": 0, "transitions_lost": 0, "nonfinite_dropped": 0}
        for source in (self._faults_before, self.engine.faults(),
                       {"nonfinite_dropped": getattr(self.replay, "dropped", 0)}):
            for key, value in source.items():
                out[key] = out.get(key, 0) + int(value)
        return out

    @property
    def worker_restarts(self) -> int:
        """Actor restarts (worker processes or Ray actors) over the whole run."""
        return self.faults()["actor_restarts"]

    def _release(self) -> None:
        """close(): the engine's resources (Ray actors and replay shards, the Ray connection it opened)."""
        self.engine.close()

    def task_summary(self) -> dict[str, float]:
        """Seconds per env step of each task (summed over processes) and env steps/s of the last train()."""
        run = self._run
        steps = max(self.env_steps - (run["start_steps"] if run else 0), 1)
        out = {key: self.timer.seconds.get(key, 0.0) / steps for key in TASKS}
        elapsed = (run.get("stop", time.perf_counter()) - run["start"]) if run else 0.0
        out["env_steps_per_s"] = steps / elapsed if elapsed > 0 else 0.0
        return out

    def learner_threads_report(self) -> str:
        """The learner's torch thread count: fixed, or the adaptive choice with its probe times."""
        if self.learner_threads is None:
            return f"{self.config.learner_threads} (fixed)"
        return self.learner_threads.choice.describe()

    def device_of(self, task: str) -> str:
        """Device a task ran on (for the summary table)."""
        if task in ("act",):
            return self.placement.act
        if task.startswith("replay"):
            return self.placement.replay if self.config.per else "cpu (host memory)"
        if task in ("learn",):
            return self.placement.learn
        if task == "weight_sync":
            return f"{self.placement.learn}->{self.placement.act}"
        return "cpu"

    # ------------------------------------------------------------------ the training loop
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
                self._periodic(transitions.n)
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
        for every in (cfg.eval_freq, cfg.checkpoint_freq if self.checkpoint_dir is not None else 0):
            if every:
                limit = min(limit, (n // every + 1) * every)
        return limit

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

    def _periodic(self, n: int) -> None:
        """Evaluation, checkpoint and progress when their interval was crossed by the last n steps."""
        cfg = self.config
        prev = self.env_steps - n
        if cfg.eval_freq and self.env_steps // cfg.eval_freq > prev // cfg.eval_freq:
            self._periodic_eval()
        if cfg.checkpoint_freq and self.checkpoint_dir is not None and \
                self.env_steps // cfg.checkpoint_freq > prev // cfg.checkpoint_freq:
            with self.timer.time("checkpoint"):
                self.save(self.checkpoint_dir)
        run = self._run
        assert run is not None
        now = time.perf_counter()
        if run["progress"] is not None and now - run["last"] >= run["interval"]:
            run["last"] = now
            stats = self.stats()
            if self.logger is not None:
                self.logger.progress(stats)
            run["progress"](stats)
        if self._stop.requested:
            self._stop_at_boundary()

    def _periodic_eval(self) -> None:
        self._check_finite(full=False)
        with self.timer.time("eval"):
            weights = self.policy_weights()
            self.eval_policy.load_weights(weights)
            returns = rollout(self.config.env_id, self.actor.envs, self.eval_policy, self.config.eval_episodes,
                              self.seed + 1_000_000)
        mean, std = float(np.mean(returns)), float(np.std(returns))
        self.eval_log.append((self.env_steps, mean, std))
        if self.logger is not None:
            self.logger.evaluation(self.env_steps, mean, std)
        if self.best is None or mean > self.best["mean"]:
            self.best = {"mean": mean, "step": self.env_steps, "weights": weights}

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
        prioritized, dqn, sync_interval = self.replay.prioritized, cfg.algo == "dqn", cfg.sync_interval
        bulk = self.engine.lockstep and not prioritized
        drawn: list[Batch[torch.Tensor]] = []
        # the learner's time summed here and added once: a timer block per step costs more between two
        # learner calls (cold caches) than the sum
        stepping = self.learner_threads.step() if self.learner_threads is not None else contextlib.nullcontext()
        learn_s, learned = 0.0, 0
        try:
            while self.grad_steps < allowed:
                g = self.grad_steps
                if dqn:
                    n_g = needed_env_steps(cfg, g)
                    # SB3 copies the target every target_update_interval env steps during collection,
                    # while the online net is frozen: one copy before the first step of such a round.
                    if target_copy_due(cfg, n_g, self.target_checked):
                        self.algo.update_target()
                    self.target_checked = max(self.target_checked, n_g)
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
                    loss, td = self.algo.learn(learner_batch)
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
        self._check_finite(full=False)  # before actors (a kernel actor quantizes them) see the weights
        with self.timer.time("weight_sync"):
            self.engine.set_weights(self.algo.policy_module.state_dict())

    def _check_finite(self, full: bool) -> None:
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

    # ------------------------------------------------------------------ checkpoints
    def save(self, directory: str | Path) -> Path:
        """Write a checkpoint (state.pt + manifest.json) crash-consistently: to a temporary directory,
        read back and checked, then renamed into place (runtime.checkpoint.write_checkpoint). Refuses
        (DivergenceError) a state with non-finite weights; CheckpointError on a write error (the
        previous checkpoint is kept)."""
        directory = Path(directory)
        self._check_finite(full=True)
        ours = self._lock is not None and self.checkpoint_dir is not None and \
            Path(self.checkpoint_dir).absolute() == directory.absolute()
        with self._stop.saving_checkpoint(), (contextlib.nullcontext() if ours else checkpoint_lock(directory)):
            path = self._write(directory)
        self._last_checkpoint = (path, self.env_steps)
        return path

    def _check_saved(self, manifest: dict[str, Any], state: dict[str, Any]) -> None:
        """What a checkpoint read back must pass before it replaces the previous one."""
        check = getattr(self.replay, "check_state_dict", None)
        if check is not None:
            check(state["replay"])
        if manifest["counters"]["env_steps"] != self.env_steps or manifest["counters"]["grad_steps"] != self.grad_steps:
            raise CheckpointError("its counters differ from the trainer's")

    def _write(self, directory: Path) -> Path:
        state = run_state(self.algo, self.replay, self.actor, self.best, self.episode_log, self.eval_log)
        return write_checkpoint(directory, state, {
            "algo": self.config.algo, "env_id": self.config.env_id, "seed": self.seed,
            "placement": str(self.placement), "config": self.config.to_dict(),
            "counters": {"env_steps": self.env_steps, "grad_steps": self.grad_steps, "episodes": self.episodes,
                         "target_checked": self.target_checked, "faults": self.faults(),
                         "worker_restarts": self.faults()["actor_restarts"]},
        }, check=self._check_saved)

    @classmethod
    def load(cls, directory: str | Path, placement: str | Placement | dict | None = None,
             workers: int | None = None, logger: Any = None, checkpoint_dir: str | Path | None = None,
             engine: str | None = None, ray_address: str | None = None, expect: dict[str, Any] | None = None,
             overrides: dict[str, Any] | None = None) -> Trainer:
        """Restore a Trainer from `save()`. Networks, optimizers, replay, RNGs, envs and counters come
        back; `placement`/`workers` may differ from the saved run. `expect` (e.g. {"algo": "dqn",
        "env_id": "CartPole-v1"}) must match the manifest. `overrides` are TrainConfig fields asked for
        by the resuming run: those of RESUMABLE_FIELDS are applied, a different value of any other
        field raises CheckpointError listing the differences.

        When a crash left the newest complete copy beside `directory` (a `.tmp-`/`.old-` sibling), it
        is put back in place first. Raises CheckpointError, touching nothing: the process-global RNGs
        (seeded by the Trainer) are restored on any failure."""
        directory = Path(directory)
        from pearl_fpga.runtime.tabular import CHECKPOINT_FILE, TabularTrainer

        if (directory / CHECKPOINT_FILE).is_file():  # a tabular run's checkpoint
            return TabularTrainer.load(directory, placement, workers, logger, checkpoint_dir, engine, ray_address,
                                       expect, overrides)  # type: ignore[return-value]
        rngs = global_rng_state()
        try:
            manifest, state = read_newest(directory, expect)
            try:
                config = TrainConfig.from_dict(manifest["config"])
            except ValueError as exc:
                raise CheckpointError(f"checkpoint {directory}: invalid config in manifest: {exc}") from exc
            if overrides:
                config = resumed_config(config, overrides, directory)
            try:
                trainer = cls(algo=config.algo, env=config.env_id,
                              placement=placement if placement is not None else manifest["placement"],
                              config=config, seed=int(manifest["seed"]), workers=workers, logger=logger,
                              checkpoint_dir=checkpoint_dir, engine=engine, ray_address=ray_address)
            except ValueError as exc:  # e.g. an env id or seed of the manifest that makes no trainer here
                raise CheckpointError(f"checkpoint {directory}: its manifest does not make a trainer: {exc}") from exc
            try:
                trainer._restore(state, manifest["counters"])
            except CheckpointError:
                raise
            except (KeyError, RuntimeError, ValueError, TypeError, IndexError) as exc:
                raise CheckpointError(f"checkpoint {directory} does not fit this trainer: {exc}") from exc
        except BaseException:
            set_global_rng_state(rngs)
            raise
        trainer._last_checkpoint = (directory, trainer.env_steps)
        return trainer

    def _restore(self, state: dict[str, Any], counters: dict[str, Any]) -> None:
        check_trainer_state(state, self)  # everything, before anything changes
        self.best, self.episode_log, self.eval_log = restore_run_state(state, self.algo, self.replay, self.actor)
        self.env_steps = int(counters["env_steps"])
        self.grad_steps = int(counters["grad_steps"])
        self.episodes = int(counters["episodes"])
        self.target_checked = int(counters["target_checked"])
        faults = counters.get("faults", {"actor_restarts": counters.get("worker_restarts", 0)})
        self._faults_before = {k: int(v) for k, v in faults.items()}
