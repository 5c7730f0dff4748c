"""Tabular Q-learning and SARSA: what the algorithms add to the TabularQ kernel (epsilon-greedy action
choice, the env-id check) and transition datasets (npz, no pickle) for the offline mode.

Their hyper-parameters and presets are TrainConfig's (pearl_fpga.config, algo "qlearning" or "sarsa");
the arithmetic lives in the kernel (pearl_fpga.kernels.TabularQ); the episode loop in
pearl_fpga.runtime.tabular_trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.presets.tabular import TABULAR_PRESETS
from pearl_fpga.errors import CheckpointError
from pearl_fpga.safe_io import load_npz, with_digest

KERNEL_ALGO = {"qlearning": "q", "sarsa": "sarsa"}
"""The TabularQ kernel's name of each tabular algorithm."""
# ids an older or newer gymnasium spells differently: what to pass instead
RENAMED = {"Taxi-v3": "Taxi-v4", "CliffWalking-v0": "CliffWalking-v1", "FrozenLake8x8-v0": "FrozenLake8x8-v1"}


def check_env_id(env_id: str) -> str:
    """The id if gymnasium registers it; else a ValueError naming the id to use instead."""
    from gymnasium.envs.registration import registry

    if env_id in registry:
        return env_id
    for old, new in (*RENAMED.items(), *((b, a) for a, b in RENAMED.items())):
        if env_id == old and new in registry:
            raise ValueError(f"gymnasium {_gym_version()} has no {env_id}; use --env {new}, its successor id there")
    raise ValueError(f"unknown gymnasium id {env_id!r}; tabular presets: {', '.join(TABULAR_PRESETS)}")


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
DATASET_KINDS = {"s": "iu", "a": "iu", "r": "iuf", "s2": "iu", "done": "b", "a2": "iu", "n_states": "iu",
                 "n_actions": "iu", "env_id": "U"}
"""The members a dataset may hold and their numpy dtype kinds (checked in the .npy headers, before loading)."""


def save_dataset(path: str | Path, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray,
                 done: np.ndarray, n_states: int, n_actions: int, env_id: str = "", a2: np.ndarray | None = None
                 ) -> Path:
    """Write transitions as an npz of plain arrays (loads without pickle); a2 (next actions) for SARSA."""
    arrays: dict[str, Any] = dict(s=np.asarray(s, np.int64), a=np.asarray(a, np.int64), r=np.asarray(r, np.float64),
                  s2=np.asarray(s2, np.int64), done=np.asarray(done, bool), n_states=np.int64(n_states),
                  n_actions=np.int64(n_actions), env_id=np.str_(env_id))
    if a2 is not None:
        arrays["a2"] = np.asarray(a2, np.int64)
    path = Path(path)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **with_digest(arrays))  # the digest proves a later load reads exactly this
    return path


def load_dataset(path: str | Path, n_states: int | None = None, n_actions: int | None = None,
                 env_id: str | None = None) -> dict[str, Any]:
    """Read and validate a dataset written by save_dataset (keys, dtypes, 1-D equal lengths, ranges,
    finite rewards); a CheckpointError names what is wrong. Never unpickles."""
    path = Path(path)
    data = load_npz(path, "dataset", DATASET_KINDS, "write one with --save-dataset")
    missing = [k for k in (*DATASET_KEYS, "n_states", "n_actions") if k not in data]
    if missing:
        raise CheckpointError(f"dataset {path} lacks key(s) {missing}; it needs {DATASET_KEYS} + n_states, n_actions")
    if data["n_states"].shape != () or data["n_actions"].shape != () or ("env_id" in data and data["env_id"].shape != ()):
        raise CheckpointError(f"dataset {path}: n_states, n_actions and env_id must be single values; it is corrupt")
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
