"""The tabular training loop: online epsilon-greedy Q-learning/SARSA on a gymnasium toy-text env, the
offline mode over a transition dataset, greedy evaluation, and checkpoints (npz, no pickle).

Every training episode resets the env and draws its exploration from a generator seeded by
(seed, episode), so a resumed run continues exactly as the uninterrupted one would have.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pearl_fpga.algos.tabular import TabularConfig, epsilon_greedy, load_dataset, save_dataset
from pearl_fpga.errors import CheckpointError, TrainingInterrupted
from pearl_fpga.kernels.tabular import TabularQ
from pearl_fpga.limits import load_npz
from pearl_fpga.runtime.signals import StopRequest

CHECKPOINT_FILE = "tabular.npz"
EVAL_SEED_BASE = 1 << 30  # evaluation env seeds are >= 2**30, training ones below: never shared


@dataclass
class TabularStats:
    episode: int
    episodes: int
    env_steps: int
    steps_per_s: float
    recent_return: float
    epsilon: float


@dataclass
class TabularEval:
    returns: np.ndarray
    successes: np.ndarray
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def mean(self) -> float:
        return float(self.returns.mean()) if self.returns.size else float("nan")

    @property
    def std(self) -> float:
        return float(self.returns.std()) if self.returns.size else float("nan")

    @property
    def success_rate(self) -> float:
        return float(self.successes.mean()) if self.successes.size else float("nan")


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


class TabularTrainer:
    """Trains a TabularQ on `config.env_id`; `record=True` keeps every transition for save_dataset."""

    def __init__(self, config: TabularConfig, logger: Any = None, checkpoint_dir: str | Path | None = None,
                 record: bool = False, **backend_options: Any) -> None:
        self.config = config
        self.env = make_env(config.env_id, config.max_episode_steps)
        self.n_states = int(self.env.observation_space.n)
        self.n_actions = int(self.env.action_space.n)
        self.kernel = TabularQ(self.n_states, self.n_actions, config.alpha, config.gamma, algo=config.kernel_algo,
                               backend=config.backend, **backend_options)
        self.logger = logger
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else None
        self.episode = 0
        self.env_steps = 0
        self.episode_log: list[tuple[int, float, int]] = []
        self.eval_log: list[tuple[int, float, float]] = []
        self.record = record
        self._transitions: list[tuple[int, int, float, int, bool, int]] = []
        self._stop = StopRequest()  # set by SIGINT, SIGTERM or request_stop(); acted on between episodes

    # ---- online ----------------------------------------------------------------------------------
    def train(self, progress: Callable[[TabularStats], None] | None = None, interval: float = 1.0,
              until: int | None = None) -> None:
        """Run episodes up to config.episodes (or `until`, to stop early on the same schedule),
        checkpointing every config.checkpoint_every episodes and at the end.

        SIGINT and SIGTERM (and request_stop()) only set a flag: after the episode in progress a
        checkpoint is written (when `checkpoint_dir` is set) and TrainingInterrupted is raised, so a
        checkpoint never holds half an update; a second signal stops at once, keeping the last one."""
        self._stop.reset()
        with self._stop.handlers():
            self._train(progress, interval, until)

    def request_stop(self) -> None:
        """Stop train() after the episode in progress, as SIGINT and SIGTERM do; safe from any thread."""
        self._stop.request()

    def _train(self, progress: Callable[[TabularStats], None] | None, interval: float, until: int | None) -> None:
        cfg = self.config
        start, t0, last = self.env_steps, time.perf_counter(), 0.0
        stop = cfg.episodes if until is None else min(until, cfg.episodes)
        while self.episode < stop:
            if self._stop.requested:
                path = self._save_whole(self.checkpoint_dir) if self.checkpoint_dir is not None else None
                raise TrainingInterrupted(f"stopped by {self._stop.reason()} at episode {self.episode:,}"
                                          + (f"; checkpoint written to {path}" if path is not None else ""),
                                          self._stop.signum, path)
            ret, length = self._episode()
            self.episode_log.append((self.env_steps, ret, length))
            if self.logger is not None:
                self.logger.episode(self.env_steps, ret, length)
            if cfg.eval_every and self.episode % cfg.eval_every == 0:
                self.log_evaluation(self.evaluate(cfg.eval_episodes))
            if self.checkpoint_dir is not None and cfg.checkpoint_every and self.episode % cfg.checkpoint_every == 0:
                self._save_whole(self.checkpoint_dir)
            now = time.perf_counter()
            if progress is not None and (now - last >= interval or self.episode == stop):
                last = now
                recent = [r for _, r, _ in self.episode_log[-100:]]
                progress(TabularStats(self.episode, cfg.episodes, self.env_steps,
                                      (self.env_steps - start) / max(now - t0, 1e-9),
                                      float(np.mean(recent)), cfg.epsilon(self.episode)))
        if self.checkpoint_dir is not None:
            self._save_whole(self.checkpoint_dir)

    def _save_whole(self, directory: str | Path) -> Path:
        with self._stop.saving_checkpoint():  # a second signal waits for the write
            return self.save(directory)

    def _episode(self) -> tuple[float, int]:
        cfg, env, k = self.config, self.env, self.kernel
        rng = np.random.default_rng([cfg.seed, self.episode])
        eps = cfg.epsilon(self.episode)
        s, _ = env.reset(seed=int(rng.integers(1 << 30)))
        s = int(s)
        a = epsilon_greedy(k.table[s], eps, rng)
        ret, length, sarsa = 0.0, 0, cfg.kernel_algo == "sarsa"
        while True:
            s2, r, terminated, truncated, _ = env.step(a)
            s2, r = int(s2), float(r)
            # SARSA bootstraps on the action it will take; Q-learning picks it after the update
            a2 = epsilon_greedy(k.table[s2], eps, rng) if sarsa else 0
            k.update_one(s, a, r, s2, bool(terminated), a2)  # truncation is not terminal: bootstrap
            if self.record:
                self._transitions.append((s, a, r, s2, bool(terminated), a2))
            ret += r
            length += 1
            self.env_steps += 1
            if terminated or truncated:
                break
            s, a = s2, (a2 if sarsa else epsilon_greedy(k.table[s2], eps, rng))
        self.episode += 1
        return ret, length

    # ---- offline ---------------------------------------------------------------------------------
    def train_offline(self, dataset: str | Path, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """config.epochs sweeps over a stored dataset, each one `update` (parts=1, strictly in order) or
        `update_partitioned(parts=config.parts)`."""
        data = load_dataset(dataset, self.n_states, self.n_actions, self.config.env_id)
        if self.config.kernel_algo == "sarsa" and "a2" not in data:
            raise CheckpointError(f"dataset {dataset} has no a2 (next actions); SARSA needs them: record with "
                                  "--algo sarsa --save-dataset, or train it with --algo qlearning")
        args = (data["s"], data["a"], data["r"], data["s2"], data["done"])
        a2 = data.get("a2")
        for epoch in range(self.config.epochs):
            if self.config.parts == 1:
                self.kernel.update(*args, a2=a2)
            else:
                self.kernel.update_partitioned(*args, a2=a2, parts=self.config.parts)
            self.env_steps += data["n"]
            if progress is not None:
                progress(epoch + 1, self.config.epochs)
        return data

    def save_dataset(self, path: str | Path) -> Path:
        """The transitions this run experienced (record=True), as a dataset for --dataset."""
        if not self.record:
            raise ValueError("this trainer was made with record=False; nothing was kept")
        cols = list(zip(*self._transitions)) if self._transitions else [[]] * 6
        return save_dataset(path, *(np.array(c) for c in cols[:5]), n_states=self.n_states,
                            n_actions=self.n_actions, env_id=self.config.env_id, a2=np.array(cols[5]))

    # ---- evaluation ------------------------------------------------------------------------------
    def evaluate(self, episodes: int, seed: int | None = None) -> TabularEval:
        """The greedy policy (lowest action on ties) over `episodes` episodes with their own env seeds."""
        policy = self.kernel.greedy()
        seeds = np.random.default_rng([EVAL_SEED_BASE, self.config.seed if seed is None else seed]).integers(
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
        return TabularEval(rets, wins, lens)

    def log_evaluation(self, result: TabularEval) -> None:
        """Record an evaluation in eval_log (the learning curve) and the run's logger."""
        self.eval_log.append((self.env_steps, result.mean, result.std))
        if self.logger is not None:
            self.logger.evaluation(self.env_steps, result.mean, result.std)

    # ---- checkpoints -----------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / CHECKPOINT_FILE
        tmp = directory / (CHECKPOINT_FILE + ".tmp")
        ep = np.array(self.episode_log, np.float64).reshape(-1, 3)
        ev = np.array(self.eval_log, np.float64).reshape(-1, 3)
        with open(tmp, "wb") as fh:
            np.savez(fh, table=self.kernel.table, config=np.str_(json.dumps(self.config.to_dict())),
                     episode=np.int64(self.episode), env_steps=np.int64(self.env_steps), episode_log=ep,
                     eval_log=ev)
        tmp.replace(path)  # a crash mid-write never leaves a half checkpoint
        return path

    @classmethod
    def load(cls, directory: str | Path, expect: dict[str, Any] | None = None, **kwargs: Any) -> TabularTrainer:
        """A trainer restored from `directory`; `expect` fields (e.g. algo, env_id) must match the stored config."""
        path = Path(directory) / CHECKPOINT_FILE
        keys = ("table", "config", "episode", "env_steps", "episode_log", "eval_log")
        data = load_npz(path, "checkpoint", keys, "train without --resume first")
        missing = set(keys) - set(data)
        if missing:
            raise CheckpointError(f"checkpoint {path} lacks {sorted(missing)}; it was not written by this trainer")
        try:
            config = TabularConfig.from_dict(json.loads(str(data["config"])))
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"checkpoint {path} holds an invalid config ({exc})") from exc
        for key, want in (expect or {}).items():
            if getattr(config, key) != want:
                raise CheckpointError(f"checkpoint {path} is for {key}={getattr(config, key)!r}, not {want!r}")
        trainer = cls(config, **kwargs)
        table = data["table"]
        if table.dtype != np.int32 or table.shape != (trainer.n_states, trainer.n_actions):
            raise CheckpointError(f"checkpoint {path}: table is {table.dtype} {table.shape}, expected int32 "
                                  f"({trainer.n_states}, {trainer.n_actions})")
        for key in ("episode_log", "eval_log"):
            if data[key].ndim != 2 or data[key].shape[1] != 3 or not np.isfinite(data[key]).all():
                raise CheckpointError(f"checkpoint {path}: {key} is malformed")
        trainer.kernel.load(table)
        trainer.episode, trainer.env_steps = int(data["episode"]), int(data["env_steps"])
        if not 0 <= trainer.episode or trainer.env_steps < 0:
            raise CheckpointError(f"checkpoint {path}: negative episode or step count")
        trainer.episode_log = [(int(s), float(r), int(n)) for s, r, n in data["episode_log"]]
        trainer.eval_log = [(int(s), float(m), float(d)) for s, m, d in data["eval_log"]]
        return trainer
