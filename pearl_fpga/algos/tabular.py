"""Tabular Q-learning and SARSA: the run configuration (with per-env presets), epsilon-greedy action
choice, and transition datasets (npz, no pickle) for the offline mode.

The arithmetic lives in the kernel (pearl_fpga.kernels.TabularQ); the episode loop in
pearl_fpga.runtime.tabular.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.config import UNIT, Range
from pearl_fpga.errors import CheckpointError
from pearl_fpga.limits import load_npz

ALGOS = {"qlearning": "q", "sarsa": "sarsa"}
# ids an older or newer gymnasium spells differently: what to pass instead
RENAMED = {"Taxi-v3": "Taxi-v4", "CliffWalking-v0": "CliffWalking-v1", "FrozenLake8x8-v0": "FrozenLake8x8-v1"}

# Hyper-parameters per env (tuned here; docs/tabular.md has the figures they reach).
PRESETS: dict[str, dict[str, Any]] = {
    "Taxi-v4": dict(episodes=10000, alpha=0.5, gamma=0.99, eps_start=1.0, eps_end=0.01, eps_decay=0.5,
                    success_reward=20.0),
    "CliffWalking-v1": dict(episodes=1000, alpha=0.5, gamma=0.99, eps_start=1.0, eps_end=0.01, eps_decay=0.5,
                            success_reward=-1.0, max_episode_steps=1000),
    "FrozenLake8x8-v1": dict(episodes=20000, alpha=0.05, gamma=0.999, eps_start=1.0, eps_end=0.01,
                             eps_decay=0.7, success_reward=1.0),
    "FrozenLake-v1": dict(episodes=10000, alpha=0.05, gamma=0.99, eps_start=1.0, eps_end=0.01, eps_decay=0.7,
                          success_reward=1.0),
}
# SARSA learns the values of its exploring behaviour; on Taxi it needs a smaller step and more episodes
# to settle on the shortest routes.
SARSA_PRESETS: dict[str, dict[str, Any]] = {"Taxi-v4": dict(alpha=0.2, episodes=20000)}


# The range of every numeric TabularConfig field (an integer field has integer bounds).
TABULAR_RANGES: dict[str, Range] = {
    "episodes": Range(0, 10**9),
    "alpha": Range(0.0, 1.0, lo_open=True, why="the kernel's learning rate"),
    "gamma": UNIT,
    "eps_start": UNIT,
    "eps_end": UNIT,
    "eps_decay": UNIT,
    "success_reward": Range(-32768.0, 32768.0, why="rewards are Q16.16 words"),
    "max_episode_steps": Range(0, 10**9, why="0 = the env's own limit"),
    "eval_episodes": Range(1, 10**6, why="the final evaluation's episodes"),
    "eval_every": Range(0, 10**9),
    "checkpoint_every": Range(0, 10**9),
    "seed": Range(0, 2**32 - 1),
    "epochs": Range(1, 10**6),
    "parts": Range(1, 1024, why="one table copy each"),
}


@dataclass
class TabularConfig:
    """Every hyper-parameter of a tabular run.

    epsilon decays linearly from eps_start to eps_end over the first eps_decay fraction of the episodes,
    then stays at eps_end. An episode is a success when it terminates with a final reward >=
    success_reward (the goal of FrozenLake, the drop-off of Taxi, the goal of CliffWalking).
    max_episode_steps truncates episodes (0 = the env's own limit; CliffWalking has none, and an
    early greedy policy can walk in circles there for a very long time).
    epochs/parts are for the offline mode: sweeps over the dataset, and partitions (1 = sequential).
    """

    algo: str = "qlearning"
    env_id: str = "Taxi-v4"
    episodes: int = 3000
    alpha: float = 0.5
    gamma: float = 0.99
    eps_start: float = 1.0
    eps_end: float = 0.01
    eps_decay: float = 0.5
    success_reward: float = 1.0
    max_episode_steps: int = 0
    eval_episodes: int = 100
    eval_every: int = 0  # episodes between evaluations during training (0 = only at the end)
    checkpoint_every: int = 1000  # episodes between checkpoints (0 = only at the end)
    backend: str = "auto"
    seed: int = 0
    epochs: int = 1
    parts: int = 1

    def __post_init__(self) -> None:
        self.validate()

    @classmethod
    def preset(cls, algo: str = "qlearning", env_id: str = "Taxi-v4", **overrides: Any) -> TabularConfig:
        env_id = check_env_id(env_id)
        tuned = {**PRESETS.get(env_id, {}), **(SARSA_PRESETS.get(env_id, {}) if algo == "sarsa" else {})}
        return cls(**{"algo": algo, "env_id": env_id, **tuned, **overrides})

    def validate(self) -> None:
        if self.algo not in ALGOS:
            raise ValueError(f"algo must be one of {', '.join(ALGOS)}, got {self.algo!r}")
        for name, allowed in TABULAR_RANGES.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float) if isinstance(allowed.lo, float) else int):
                kind = "a number" if isinstance(allowed.lo, float) else "an integer"
                raise ValueError(f"TabularConfig.{name} must be {kind}, got {v!r}")
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"TabularConfig.{name} must be finite, got {v!r}")
            allowed.check("TabularConfig", name, v)

    def epsilon(self, episode: int) -> float:
        span = self.eps_decay * self.episodes
        if span <= 0 or episode >= span:
            return self.eps_end
        return self.eps_start + (self.eps_end - self.eps_start) * episode / span

    @property
    def kernel_algo(self) -> str:
        return ALGOS[self.algo]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TabularConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TabularConfig field(s) {unknown}; known: {sorted(known)}")
        return cls(**data)

    @classmethod
    def from_json(cls, path: str | Path, base: TabularConfig | None = None) -> TabularConfig:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read config {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"config {path} must hold a JSON object of TabularConfig fields")
        return cls.from_dict({**(base.to_dict() if base else {}), **data})


def check_env_id(env_id: str) -> str:
    """The id if gymnasium registers it; else a ValueError naming the id to use instead."""
    from gymnasium.envs.registration import registry

    if env_id in registry:
        return env_id
    for old, new in (*RENAMED.items(), *((b, a) for a, b in RENAMED.items())):
        if env_id == old and new in registry:
            raise ValueError(f"gymnasium {_gym_version()} has no {env_id}; use --env {new}, its successor id there")
    raise ValueError(f"unknown gymnasium id {env_id!r}; tabular presets: {', '.join(PRESETS)}")


def _gym_version() -> str:
    import gymnasium

    return gymnasium.__version__


def epsilon_greedy(row: np.ndarray, eps: float, rng: np.random.Generator) -> int:
    """A uniformly random action with probability eps, else a greedy one (ties broken at random, so an
    untrained all-zero row explores rather than always taking action 0)."""
    if rng.random() < eps:
        return int(rng.integers(row.shape[0]))
    best = np.flatnonzero(row == row.max())
    return int(best[0] if best.size == 1 else best[rng.integers(best.size)])


# ---- transition datasets -------------------------------------------------------------------------

DATASET_KEYS = ("s", "a", "r", "s2", "done")


def save_dataset(path: str | Path, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray,
                 done: np.ndarray, n_states: int, n_actions: int, env_id: str = "", a2: np.ndarray | None = None
                 ) -> Path:
    """Write transitions as an npz of plain arrays (loads without pickle); a2 (next actions) for SARSA."""
    arrays = dict(s=np.asarray(s, np.int64), a=np.asarray(a, np.int64), r=np.asarray(r, np.float64),
                  s2=np.asarray(s2, np.int64), done=np.asarray(done, bool), n_states=np.int64(n_states),
                  n_actions=np.int64(n_actions), env_id=np.str_(env_id))
    if a2 is not None:
        arrays["a2"] = np.asarray(a2, np.int64)
    path = Path(path)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_dataset(path: str | Path, n_states: int | None = None, n_actions: int | None = None,
                 env_id: str | None = None) -> dict[str, Any]:
    """Read and validate a dataset written by save_dataset (keys, dtypes, 1-D equal lengths, ranges,
    finite rewards); a CheckpointError names what is wrong. Never unpickles."""
    path = Path(path)
    data = load_npz(path, "dataset", (*DATASET_KEYS, "a2", "n_states", "n_actions", "env_id"),
                    "write one with --save-dataset")
    missing = [k for k in (*DATASET_KEYS, "n_states", "n_actions") if k not in data]
    if missing:
        raise CheckpointError(f"dataset {path} lacks key(s) {missing}; it needs {DATASET_KEYS} + n_states, n_actions")
    ns, na = int(data["n_states"]), int(data["n_actions"])
    if (n_states is not None and ns != n_states) or (n_actions is not None and na != n_actions):
        raise CheckpointError(f"dataset {path} is for {ns} states x {na} actions, the env has {n_states} x {n_actions}")
    stored_env = str(data["env_id"]) if "env_id" in data else ""
    if env_id and stored_env and stored_env != env_id:
        raise CheckpointError(f"dataset {path} was recorded on {stored_env}, not {env_id}; pass --env {stored_env}")
    n = data["s"].shape[0] if data["s"].ndim == 1 else -1
    out: dict[str, Any] = {"n_states": ns, "n_actions": na, "env_id": stored_env}
    for key, bound in (("s", ns), ("a", na), ("s2", ns), ("a2", na)):
        if key not in data:
            continue
        v = data[key]
        if not np.issubdtype(v.dtype, np.integer) or v.ndim != 1 or v.shape[0] != n:
            raise CheckpointError(f"dataset {path}: {key} must be a 1-D integer array of {max(n, 0)} entries, "
                                  f"got {v.dtype} {v.shape}")
        if v.size and (v.min() < 0 or v.max() >= bound):
            raise CheckpointError(f"dataset {path}: {key} holds values outside [0, {bound})")
        out[key] = v.astype(np.int64)
    r, done = data["r"], data["done"]
    if not (np.issubdtype(r.dtype, np.floating) or np.issubdtype(r.dtype, np.integer)) or r.shape != (n,):
        raise CheckpointError(f"dataset {path}: r must be a 1-D float array of {n} entries, got {r.dtype} {r.shape}")
    if not np.isfinite(r.astype(np.float64)).all() or (np.abs(r.astype(np.float64)) >= 32768).any():
        raise CheckpointError(f"dataset {path}: r holds NaN/inf or values outside the Q16.16 range")
    if done.dtype != np.bool_ or done.shape != (n,):
        raise CheckpointError(f"dataset {path}: done must be a 1-D bool array of {n} entries, got {done.dtype}")
    out["r"], out["done"] = r.astype(np.float64), done
    out["n"] = n
    return out
