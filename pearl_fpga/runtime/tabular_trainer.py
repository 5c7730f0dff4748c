"""Tabular Q-learning and SARSA on the TabularQ kernel, behind the Trainer's public API:
`pearl_fpga.Trainer(algo="qlearning", env="Taxi-v4")` is a TabularTrainer (train(steps), evaluate,
predict, save/load, stats, close, a context manager), configured by the same TrainConfig.

Online: epsilon-greedy episodes on a gymnasium toy-text env. A run stops, evaluates and checkpoints only
between episodes: train(steps) ends with the episode in which the step budget is reached, and every
episode resets the env and draws its exploration from a generator seeded by (seed, episode), so a
resumed run continues exactly as the uninterrupted one would have. Offline: sweeps over a stored
dataset of transitions, sequential or partitioned (SwiftRL). Checkpoints are npz files, loaded without
pickle.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pearl_fpga.algos.tabular import check_env_id, epsilon_greedy, load_dataset, save_dataset
from pearl_fpga import presets as registry
from pearl_fpga.config import MAX_STEPS, TrainConfig, run_config
from pearl_fpga.errors import CheckpointError, TrainingInterrupted
from pearl_fpga.algos.tabular_learner import TabularLearner, TabularTransitions
from pearl_fpga.safe_io import load_npz, parse_json, with_digest
from pearl_fpga.runtime.atomic import describe_write_error, stale_temporaries, write_atomically
from pearl_fpga.runtime.checkpoint import check_writable, resumed_config
from pearl_fpga.runtime.envs import ENV_MODULE_CONSENT, check_env_import
from pearl_fpga.runtime.locks import checkpoint_lock
from pearl_fpga.runtime.signals import StopRequest
from pearl_fpga.runtime.stats import ClosesRun, EvalResult, Stats

CHECKPOINT_FILE = "tabular.npz"
CHECKPOINT_KEYS = ("table", "config", "seed", "episodes", "env_steps", "grad_steps", "episode_log", "eval_log")
CHECKPOINT_KINDS = {"table": "i", "config": "U", "seed": "iu", "episodes": "iu", "env_steps": "iu", "grad_steps": "iu",
                    "episode_log": "f", "eval_log": "f"}
"""numpy dtype kinds of the checkpoint's members (checked in the .npy headers, before loading)."""
EVAL_SEED_BASE = 1 << 30  # evaluation env seeds are >= 2**30, training ones below: never shared
RESUMABLE_FIELDS = ("total_steps", "eval_freq", "eval_episodes", "checkpoint_freq", "backend")
"""TrainConfig fields a resumed tabular run may change; the others are fixed by its checkpoint."""


@dataclass
class TabularEval(EvalResult):
    """An evaluation of the greedy policy, with each episode's success and length."""

    successes: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def success_rate(self) -> float:
        return float(self.successes.mean()) if self.successes.size else float("nan")

    def __str__(self) -> str:
        return f"{super().__str__()}, success rate {self.success_rate:.4f}"


def make_env(env_id: str, max_episode_steps: int = 0) -> Any:
    import gymnasium as gym

    limit = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
    env = gym.make(env_id, disable_env_checker=True, **limit)
    if not hasattr(env.observation_space, "n") or not hasattr(env.action_space, "n"):
        raise ValueError(f"{env_id} does not have discrete states and actions; tabular algorithms need both "
                         "(FrozenLake8x8-v1, Taxi-v4, CliffWalking-v1, ...)")
    return env


def exact_evaluation(env: Any, policy: np.ndarray, success_reward: float) -> tuple[float, float]:
    """(expected return, success probability) of a deterministic policy, computed exactly from the env's
    transition model (toy-text envs expose P and initial_state_distrib) over its time limit, rather
    than sampled; (nan, nan) when the env has no model."""
    base = env.unwrapped
    model, start = getattr(base, "P", None), getattr(base, "initial_state_distrib", None)
    if model is None or start is None:
        return float("nan"), float("nan")
    n = len(model)
    trans, reward, win = np.zeros((n, n)), np.zeros(n), np.zeros(n)
    for s in range(n):
        for p, s2, r, done in model[s][int(policy[s])]:
            reward[s] += p * r
            if done:
                win[s] += p * (r >= success_reward)
            else:
                trans[s, s2] += p
    horizon = env.spec.max_episode_steps if env.spec is not None and env.spec.max_episode_steps else 10 * n
    value, success = np.zeros(n), np.zeros(n)
    for _ in range(horizon):  # value after h steps to go; the time limit truncates at `horizon`
        value, success = reward + trans @ value, win + trans @ success
    return float(start @ value), float(start @ success)



class TabularTrainer(ClosesRun):
    """Trains a TabularQ on `config.env_id` (see the module docstring). The arguments are the Trainer's;
    `placement`, `workers`, `engine` and `ray_address` place the deep algorithms' tasks and are refused
    here (the table's device is config.backend). `record=True` keeps every transition for save_dataset."""

    def __init__(self, algo: str = "qlearning", env: str | None = None, placement: Any = None,
                 config: TrainConfig | None = None, seed: int = 0, workers: int | None = None, logger: Any = None,
                 checkpoint_dir: str | Path | None = None, engine: str | None = None, ray_address: str | None = None,
                 logdir: str | Path | None = None, record: bool = False, **backend_options: Any) -> None:
        algo = str(algo).lower()
        if algo not in registry.tabular_names():
            raise ValueError(f"TabularTrainer trains {' or '.join(registry.tabular_names())}, not {algo!r}; use "
                             "pearl_fpga.Trainer (or pearl_fpga.make_trainer, which takes every algorithm)")
        for name, value in (("placement", placement), ("workers", workers or None), ("ray_address", ray_address),
                            ("engine", None if engine in (None, "auto", "inline") else engine)):
            if value is not None:
                raise ValueError(f"{name} is for dqn/ddpg/td3; {algo} updates a table on the TabularQ kernel, whose "
                                 "backend is config.backend (--backend)")
        if env is not None:
            check_env_id(env)  # a renamed id is named before a preset note about it
        config = run_config(algo, env, config, stacklevel=3)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
        from pearl_fpga.runtime.logger import logger_for

        self.config = config
        self.seed = seed
        self.env = make_env(check_env_id(config.env_id), config.max_episode_steps)
        self.n_states = int(self.env.observation_space.n)
        self.n_actions = int(self.env.action_space.n)
        self.learner = TabularLearner(config, self.n_states, self.n_actions, **backend_options)
        self.kernel = self.learner.kernel  # the table, its backend and its cycle counts
        self.placement = f"table={self.kernel.backend_name}"
        self.strict = False  # every env step updates the table: no train() call runs without learning
        self.logdir = Path(logdir) if logdir is not None else None
        self.logger = logger_for(logger, logdir)
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.episodes = 0
        self.env_steps = 0
        self.grad_steps = 0  # table updates: one per env step online, one per transition and epoch offline
        self.episode_log: list[tuple[int, float, int]] = []  # (env step, return, length)
        self.eval_log: list[tuple[int, float, float]] = []  # (env step, mean, std)
        self.record = record
        self._transitions: list[tuple[int, int, float, int, bool, int]] = []
        self._stop = StopRequest()  # set by SIGINT, SIGTERM or request_stop(); acted on between episodes
        self._lock: Any = None  # the checkpoint directory's lock while train() runs (the deep runs' lock)
        self._run: dict[str, Any] | None = None
        self.predict_rng = np.random.default_rng([seed, 3])  # predict(deterministic=False): not training's draws

    # ---- online ----------------------------------------------------------------------------------
    def train(self, steps: int, progress: Callable[[Stats], None] | None = None,
              progress_interval: float = 0.5) -> Stats:
        """Run episodes until `steps` more env steps are done; the last episode runs to its end, so the
        count may pass the budget by less than one episode. Evaluates every config.eval_freq and
        checkpoints every config.checkpoint_freq env steps (at the end of the episode that reaches
        them) and at the end, when `checkpoint_dir` is set.

        SIGINT and SIGTERM (and request_stop()) only set a flag: after the episode in progress a
        checkpoint is written (when `checkpoint_dir` is set) and TrainingInterrupted is raised, so a
        checkpoint never holds half an update; a second signal stops at once, keeping the last one."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be a positive integer, got {steps!r}")
        end = self.env_steps + steps
        self._run = {"start": time.perf_counter(), "start_steps": self.env_steps, "end": end}
        last = 0.0
        self._stop.reset()
        if self.checkpoint_dir is not None:
            self._open_checkpoint_dir()
        try:
            with self._stop.handlers():
                while True:
                    if self._stop.requested:
                        path = self._save_whole(self.checkpoint_dir) if self.checkpoint_dir is not None else None
                        raise TrainingInterrupted(f"stopped by {self._stop.reason()} at episode {self.episodes:,}, env "
                                                  f"step {self.env_steps:,}"
                                                  + (f"; checkpoint written to {path}" if path is not None else ""),
                                                  self._stop.signum, path)
                    if self.env_steps >= end:
                        break
                    before = self.env_steps
                    ret, length = self._episode()
                    self.episode_log.append((self.env_steps, ret, length))
                    if self.logger is not None:
                        self.logger.episode(self.env_steps, ret, length)
                    self._periodic(before)
                    now = time.perf_counter()
                    if progress is not None and now - last >= progress_interval:
                        last = now
                        stats = self.stats()
                        if self.logger is not None:
                            self.logger.progress(stats)
                        progress(stats)
                if self.checkpoint_dir is not None:
                    self._save_whole(self.checkpoint_dir)
        finally:
            self._run["stop"] = time.perf_counter()
            if self._lock is not None:
                self._lock.release()
                self._lock = None
        stats = self.stats()
        if self.logdir is not None:
            self.plot_learning_curve()
        if progress is not None:
            progress(stats)
        return stats

    def _open_checkpoint_dir(self) -> None:
        """Before the first episode: the checkpoint directory is writable (else nothing is trained), locked
        against other runs (deep or tabular), and cleared of temporary files that killed writers left."""
        assert self.checkpoint_dir is not None
        check_writable(self.checkpoint_dir / CHECKPOINT_FILE, "checkpoint directory of")
        self._lock = checkpoint_lock(self.checkpoint_dir).acquire()
        for stale in stale_temporaries(self.checkpoint_dir / CHECKPOINT_FILE):
            stale.unlink(missing_ok=True)

    def _periodic(self, before: int) -> None:
        """Evaluation and checkpoint when the last episode crossed their interval."""
        cfg = self.config
        if cfg.eval_freq and self.env_steps // cfg.eval_freq > before // cfg.eval_freq:
            self.log_evaluation(self.evaluate(cfg.eval_episodes))
        if cfg.checkpoint_freq and self.checkpoint_dir is not None and \
                self.env_steps // cfg.checkpoint_freq > before // cfg.checkpoint_freq:
            self._save_whole(self.checkpoint_dir)

    def request_stop(self) -> None:
        """Stop train() after the episode in progress, as SIGINT and SIGTERM do; safe from any thread."""
        self._stop.request()

    def _save_whole(self, directory: str | Path) -> Path:
        with self._stop.saving_checkpoint():  # a second signal waits for the write
            return self.save(directory)

    def _episode(self) -> tuple[float, int]:
        cfg, env, k, learner = self.config, self.env, self.kernel, self.learner
        rng = np.random.default_rng([self.seed, self.episodes])
        eps = cfg.episode_epsilon(self.episodes)
        s, _ = env.reset(seed=int(rng.integers(1 << 30)))
        s = int(s)
        a = epsilon_greedy(k.table[s], eps, rng)
        ret, length, sarsa = 0.0, 0, cfg.algo == "sarsa"
        while True:
            s2, r, terminated, truncated, _ = env.step(a)
            s2, r = int(s2), float(r)
            # SARSA bootstraps on the action it will take; Q-learning picks it after the update
            a2 = epsilon_greedy(k.table[s2], eps, rng) if sarsa else 0
            learner.update_one(s, a, r, s2, bool(terminated), a2)  # truncation is not terminal: bootstrap
            if self.record:
                self._transitions.append((s, a, r, s2, bool(terminated), a2))
            ret += r
            length += 1
            self.env_steps += 1
            self.grad_steps += 1
            if terminated or truncated:
                break
            s, a = s2, (a2 if sarsa else epsilon_greedy(k.table[s2], eps, rng))
        self.episodes += 1
        return ret, length

    # ---- offline ---------------------------------------------------------------------------------
    def train_offline(self, dataset: str | Path, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """config.epochs sweeps over a stored dataset, each one `update` (parts=1, strictly in order) or
        `update_partitioned(parts=config.parts)`; counts the updates in grad_steps (no env step is taken)."""
        data = load_dataset(dataset, self.n_states, self.n_actions, self.config.env_id)
        if self.config.algo == "sarsa" and "a2" not in data:
            raise CheckpointError(f"dataset {dataset} has no a2 (next actions); SARSA needs them: record with "
                                  "--algo sarsa --save-dataset, or train it with --algo qlearning")
        batch = TabularTransitions(data["s"], data["a"], data["r"], data["s2"], data["done"], data.get("a2"))
        self._run = {"start": time.perf_counter(), "start_steps": self.env_steps, "end": self.env_steps}
        for epoch in range(self.config.epochs):
            self.learner.update(batch)
            if epoch == 0 and self.learner.last_plan is not None and self.logger is not None:
                self.logger.message(f"partitioned update: {self.learner.last_plan.describe()}")
            self.grad_steps += data["n"]
            if progress is not None:
                progress(epoch + 1, self.config.epochs)
        self._run["stop"] = time.perf_counter()
        return data

    def save_dataset(self, path: str | Path) -> Path:
        """The transitions this run experienced (record=True), as a dataset for --dataset."""
        if not self.record:
            raise ValueError("this trainer was made with record=False; nothing was kept")
        s, a, r, s2, done, a2 = ([np.array(c) for c in zip(*self._transitions)] if self._transitions
                                 else [np.zeros(0, np.int64)] * 6)
        return save_dataset(path, s, a, r, s2, done, n_states=self.n_states, n_actions=self.n_actions,
                            env_id=self.config.env_id, a2=a2)

    # ---- evaluation, prediction, counters --------------------------------------------------------
    def evaluate(self, episodes: int = 20, seed: int | None = None) -> TabularEval:
        """The greedy policy (lowest action on ties) over `episodes` episodes with their own env seeds."""
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
        policy = self.kernel.greedy()
        seeds = np.random.default_rng([EVAL_SEED_BASE, self.seed if seed is None else seed]).integers(
            1 << 30, 1 << 31, episodes)
        rets, wins, lens = np.zeros(episodes), np.zeros(episodes, bool), np.zeros(episodes, np.int64)
        for i in range(episodes):
            s, _ = self.env.reset(seed=int(seeds[i]))
            while True:
                s, r, terminated, truncated, _ = self.env.step(int(policy[int(s)]))
                rets[i] += r
                lens[i] += 1
                if terminated or truncated:
                    wins[i] = bool(terminated) and r >= self.config.success_reward
                    break
        return TabularEval(float(rets.mean()), float(rets.std()), rets.tolist(), self.env_steps, "current", wins, lens)

    def exact_evaluation(self) -> tuple[float, float]:
        """(expected return, success probability) of the greedy policy from the env's model (module function)."""
        return exact_evaluation(self.env, self.kernel.greedy(), self.config.success_reward)

    def log_evaluation(self, result: EvalResult) -> None:
        """Record an evaluation in eval_log (the learning curve) and the run's logger."""
        self.eval_log.append((self.env_steps, result.mean, result.std))
        if self.logger is not None:
            self.logger.evaluation(self.env_steps, result.mean, result.std)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[Any, Any]:
        """Stable-Baselines3's `predict`: the greedy action of a state index, or of each of a 1-D array of
        them, and the recurrent state (always None). deterministic=False acts epsilon-greedy at the
        epsilon of the next training episode."""
        del episode_start  # SB3's argument for recurrent policies
        obs = np.asarray(observation)
        if obs.ndim > 1 or not np.issubdtype(obs.dtype, np.integer) or (obs.size and not (
                0 <= obs.min() and obs.max() < self.n_states)):
            raise ValueError(f"predict: expected a state index in [0, {self.n_states}) of {self.config.env_id}, or a "
                             f"1-D integer array of them, got {observation!r}")
        batch = obs.reshape(-1)
        actions = self.kernel.greedy()[batch]
        if not deterministic:
            explore = self.predict_rng.random(batch.size) < self.config.episode_epsilon(self.episodes)
            actions = np.where(explore, self.predict_rng.integers(0, self.n_actions, batch.size), actions)
        return (actions[0] if obs.ndim == 0 else actions), state

    def stats(self) -> Stats:
        """Current counters and recent figures (the Trainer's Stats; loss does not apply)."""
        run = self._run
        elapsed = (run.get("stop", time.perf_counter()) - run["start"]) if run else 0.0
        recent = [r for _, r, _ in self.episode_log[-100:]]
        return Stats(env_steps=self.env_steps, grad_steps=self.grad_steps, episodes=self.episodes,
                     target_steps=run["end"] if run else self.env_steps, elapsed=elapsed,
                     recent_return=float(np.mean(recent)) if recent else float("nan"),
                     best_eval=max((m for _, m, _ in self.eval_log), default=float("nan")),
                     env_steps_run=self.env_steps - run["start_steps"] if run else 0)

    def faults(self) -> dict[str, int]:
        """The Trainer's fault counters: a tabular run has no actors or shards to lose."""
        return {"actor_restarts": 0, "shard_restarts": 0, "transitions_lost": 0, "nonfinite_dropped": 0}

    emulated_board: str | None = None  # the table runs on its backend (config.backend), not an emulated board

    def no_learning_problem(self, steps: int) -> str | None:
        """None: every env step of a train() call updates the table."""
        return None

    def device_of(self, task: str) -> str:
        """Where a task runs: the table's kernel backend (acting and learning both read it)."""
        del task
        return f"TabularQ {self.kernel.backend_name}"

    def plot_learning_curve(self, path: str | Path | None = None) -> Path:
        """learning_curve.png (in logdir when no path is given)."""
        from pearl_fpga.runtime.logger import plot_learning_curve

        target = Path(path) if path is not None else Path(self.logdir or ".") / "learning_curve.png"
        return plot_learning_curve(self.episode_log, self.eval_log, target,
                                   f"{self.config.algo} {self.config.env_id} (seed {self.seed}, {self.kernel.backend_name})")

    def _release(self) -> None:
        """close(): the env."""
        self.env.close()

    # ---- checkpoints -----------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write directory/tabular.npz (plain arrays: loads without pickle) atomically (runtime.atomic: a
        crash, a kill or a full disk leaves the previous file and no partial one), holding the directory's
        lock unless this run holds it; CheckpointError names a write error (full disk, not writable)."""
        directory = Path(directory)
        ours = self._lock is not None and self.checkpoint_dir is not None and \
            self.checkpoint_dir.absolute() == directory.absolute()
        path = directory / CHECKPOINT_FILE
        ep = np.array(self.episode_log, np.float64).reshape(-1, 3)
        ev = np.array(self.eval_log, np.float64).reshape(-1, 3)
        try:
            with contextlib.nullcontext() if ours else checkpoint_lock(directory):
                directory.mkdir(parents=True, exist_ok=True)
                return write_atomically(path, lambda fh: np.savez(fh, **with_digest(dict(  # the digest proves a
                    table=self.kernel.table, config=np.str_(json.dumps(self.config.to_dict())),  # later load reads this
                    seed=np.int64(self.seed), episodes=np.int64(self.episodes), env_steps=np.int64(self.env_steps),
                    grad_steps=np.int64(self.grad_steps), episode_log=ep, eval_log=ev))))
        except OSError as exc:
            why = describe_write_error(exc, "choose another --checkpoint-dir")
            raise CheckpointError(f"cannot write the checkpoint {path}: {why}. No partial file was left; the previous "
                                  "checkpoint, if any, is kept") from exc

    @classmethod
    def load(cls, directory: str | Path, placement: Any = None, workers: int | None = None, logger: Any = None,
             checkpoint_dir: str | Path | None = None, engine: str | None = None, ray_address: str | None = None,
             expect: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None,
             trust_env_module: bool = False, **kwargs: Any) -> TabularTrainer:
        """A trainer restored from `directory` (Trainer.load's arguments): `expect` fields (e.g. algo,
        env_id) must match the stored config; `overrides` may change RESUMABLE_FIELDS only; an env id
        naming a module is refused unless `trust_env_module` or `expect` names it (Trainer.load)."""
        path = Path(directory) / CHECKPOINT_FILE
        data = load_npz(path, "checkpoint", {**CHECKPOINT_KINDS, "episode": ""}, "train without --resume first")
        if "episode" in data:
            raise CheckpointError(f"checkpoint {path} was written by an earlier pearl_fpga, whose tabular runs counted "
                                  "episodes (TabularConfig); this one counts env steps and cannot continue it: start a "
                                  "new run (the npz's int32 `table` is its Q table in Q16.16, for TabularQ.load)")
        missing = set(CHECKPOINT_KEYS) - set(data)
        if missing:
            raise CheckpointError(f"checkpoint {path} lacks {sorted(missing)}; it was not written by this trainer")
        try:
            config = TrainConfig.from_dict(parse_json(str(data["config"]), f"checkpoint {path}: member config",
                                                      CheckpointError, top=dict))
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"checkpoint {path} holds an invalid config ({exc})") from exc
        for key, want in (expect or {}).items():
            if getattr(config, key) != want:
                raise CheckpointError(f"checkpoint {path} is for {key}={getattr(config, key)!r}, not {want!r}")
        config = resumed_config(config, overrides or {}, path, RESUMABLE_FIELDS)
        check_env_import(config.env_id, f"checkpoint {path}",
                         trust_env_module or (expect or {}).get("env_id") == config.env_id, ENV_MODULE_CONSENT)
        scalars = [key for key in ("seed", "episodes", "env_steps", "grad_steps") if data[key].shape != ()]
        if scalars:
            raise CheckpointError(f"checkpoint {path}: field(s) {scalars} must be single integers; the file is corrupt")
        counts = {key: int(data[key]) for key in ("seed", "episodes", "env_steps", "grad_steps")}
        if min(counts.values()) < 0 or counts["seed"] >= 2**32 or max(counts.values()) > MAX_STEPS:
            raise CheckpointError(f"checkpoint {path}: a seed, episode or step count out of range (seeds in [0, 2**32), "
                                  f"counts in [0, {MAX_STEPS:.0e}]); the file is corrupt")
        trainer = cls(config.algo, config=config, seed=counts["seed"], placement=placement, workers=workers,
                      logger=logger, checkpoint_dir=checkpoint_dir, engine=engine, ray_address=ray_address, **kwargs)
        table = data["table"]
        if table.dtype != np.int32 or table.shape != (trainer.n_states, trainer.n_actions):
            raise CheckpointError(f"checkpoint {path}: table is {table.dtype} {table.shape}, expected int32 "
                                  f"({trainer.n_states}, {trainer.n_actions})")
        for key in ("episode_log", "eval_log"):
            if data[key].ndim != 2 or data[key].shape[1] != 3 or not np.isfinite(data[key]).all():
                raise CheckpointError(f"checkpoint {path}: {key} is malformed")
        trainer.learner.load_state_dict({"table": table})
        trainer.episodes, trainer.env_steps, trainer.grad_steps = (counts[k] for k in ("episodes", "env_steps", "grad_steps"))
        trainer.episode_log = [(int(s), float(r), int(n)) for s, r, n in data["episode_log"]]
        trainer.eval_log = [(int(s), float(m), float(d)) for s, m, d in data["eval_log"]]
        return trainer
