"""The replay buffer's saved state: its keys, its validation, and its .npz file.

A state is a dict of numpy arrays, ints, floats and strings (no pickle). `check_state` validates one
against the buffer that will load it before anything is changed, so a bad file leaves the buffer
untouched; `write_npz` / `read_npz` put a state into a file atomically and read it back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from pearl_fpga.errors import CheckpointError
from pearl_fpga.safe_io import load_npz, with_digest
from pearl_fpga.spec.replay import PRIORITY_MAX, PRIORITY_SCALE

STATE_FORMAT = 1
MAX_PRIORITY = PRIORITY_MAX / PRIORITY_SCALE  # largest priority a Q16.16 leaf holds
STATE_KEYS = (
    "format", "capacity", "obs_shape", "action_shape", "obs_dtype", "action_dtype", "alpha", "beta",
    "beta_final", "beta_steps", "eps", "pos", "size", "max_priority", "sample_calls", "rng_state",
    "obs", "action", "reward", "next_obs", "done", "leaves",
)  # fmt: skip


class Layout(NamedTuple):
    """What a state must match to load into a buffer (fixed when the buffer is made)."""

    capacity: int
    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]
    obs_dtype: np.dtype
    action_dtype: np.dtype


def param_problem(alpha: float, beta: float, beta_final: float, beta_steps: int, eps: float) -> str | None:
    """What is wrong with a buffer's prioritization parameters, or None: the one rule the constructor,
    save() and load() share (a dump with eps 0 saved but could not be loaded)."""
    if not (np.isfinite(alpha) and alpha >= 0):
        return f"alpha must be a finite number >= 0, got {alpha}"
    for name, value in (("beta", beta), ("beta_final", beta_final)):
        if not (np.isfinite(value) and 0 <= value <= 1):
            return f"{name} must be in [0, 1], got {value}"
    if beta_steps < 0:
        return f"beta_steps must be >= 0, got {beta_steps}"
    if not (np.isfinite(eps) and eps > 0):
        return f"eps must be a finite number > 0 (it keeps priorities above 0), got {eps}"
    return None


def check_state(state: dict[str, Any], layout: Layout) -> dict[str, Any]:
    """The validated contents of `state` (ints, floats, arrays and a numpy Generator under "rng"), or
    CheckpointError naming the first mismatch with `layout`."""

    def fail(msg: str) -> CheckpointError:
        return CheckpointError(f"replay buffer state does not fit this buffer: {msg}")

    if not isinstance(state, dict):
        raise fail(f"expected a dict from state_dict(), got {type(state).__name__}")
    missing = sorted(set(STATE_KEYS) - set(state))
    if missing:
        raise fail(f"missing entries {missing} (corrupt file or not a replay buffer dump)")

    def scalar(key: str, kind: type) -> Any:
        value = np.asarray(state[key])
        if value.shape != () or (kind is int and value.dtype.kind not in "iu") or (
            kind is float and value.dtype.kind not in "iuf"
        ):
            raise fail(f"{key} must be a scalar {kind.__name__}, got {value.dtype} {value.shape}")
        return kind(value)

    if scalar("format", int) != STATE_FORMAT:
        raise fail(f"format {int(state['format'])} is not the supported {STATE_FORMAT}")
    for key in ("obs_shape", "action_shape"):
        if np.asarray(state[key]).dtype.kind not in "iu":
            raise fail(f"{key} must hold integers, got {np.asarray(state[key]).dtype}")
    ours = {
        "capacity": layout.capacity,
        "obs_shape": layout.obs_shape,
        "action_shape": layout.action_shape,
        "obs_dtype": layout.obs_dtype.str,
        "action_dtype": layout.action_dtype.str,
    }
    theirs = {
        "capacity": scalar("capacity", int),
        "obs_shape": tuple(int(d) for d in np.asarray(state["obs_shape"]).reshape(-1)),
        "action_shape": tuple(int(d) for d in np.asarray(state["action_shape"]).reshape(-1)),
        "obs_dtype": str(np.asarray(state["obs_dtype"])),
        "action_dtype": str(np.asarray(state["action_dtype"])),
    }
    for key, value in ours.items():
        if theirs[key] != value:
            raise fail(f"{key} is {theirs[key]!r} in the state but {value!r} in this buffer; create the buffer with the same settings")
    out: dict[str, Any] = {key: scalar(key, int) for key in ("size", "pos", "beta_steps", "sample_calls")}
    out.update({key: scalar(key, float) for key in ("alpha", "beta", "beta_final", "eps", "max_priority")})
    n, capacity = out["size"], layout.capacity
    if not 0 <= n <= capacity or not 0 <= out["pos"] < capacity or (n < capacity and out["pos"] != n):
        raise fail(f"size {n} / pos {out['pos']} are inconsistent with capacity {capacity}")
    problem = param_problem(out["alpha"], out["beta"], out["beta_final"], out["beta_steps"], out["eps"])
    if problem:
        raise fail(problem)
    if out["sample_calls"] < 0 or not (0 < out["max_priority"] <= MAX_PRIORITY):
        raise fail(f"sample_calls {out['sample_calls']} must be >= 0 and max_priority {out['max_priority']} in "
                   f"(0, {MAX_PRIORITY}]")
    arrays = {
        "obs": ((n, *layout.obs_shape), layout.obs_dtype),
        "next_obs": ((n, *layout.obs_shape), layout.obs_dtype),
        "action": ((n, *layout.action_shape), layout.action_dtype),
        "reward": ((n,), np.dtype(np.float32)),
        "done": ((n,), np.dtype(np.float32)),
        "leaves": ((capacity,), np.dtype(np.uint32)),
    }
    for key, (shape, dtype) in arrays.items():
        try:  # numpy arrays, or anything that converts without copying through Python (torch tensors)
            array = np.asarray(state[key])
        except Exception as exc:
            raise fail(f"{key} is not an array ({type(exc).__name__}: {exc})") from None
        if array.shape != shape or array.dtype != dtype:
            raise fail(f"{key} must be {dtype} with shape {shape}, got {array.dtype} {array.shape}")
        out[key] = array
    for key in ("obs", "next_obs", "action", "reward"):
        if out[key].dtype.kind == "f" and not np.isfinite(out[key]).all():
            row = int(np.flatnonzero(~np.isfinite(out[key].reshape(n, -1)).all(axis=1))[0])
            raise fail(f"{key} of stored transition {row} is NaN or infinite; the dump is corrupt")
    if not np.isin(out["done"], (0.0, 1.0)).all():
        raise fail("done must hold only 0 and 1")
    if out["leaves"][n:].any() or not out["leaves"][:n].all():
        raise fail("priorities must be > 0 exactly for the stored transitions")
    try:
        rng_state = json.loads(str(np.asarray(state["rng_state"])))
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = rng_state
    except (ValueError, TypeError, KeyError) as exc:
        raise fail(f"rng_state is not a valid PCG64 state ({exc})") from None
    out["rng"] = rng
    return out


def write_npz(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Write `state` to `path` (.npz, no pickle): to a temporary file first, then renamed."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            arrays: dict[str, Any] = {key: np.asarray(value) for key, value in state.items()}
            np.savez(f, **with_digest(arrays))  # the digest proves a later load reads exactly this
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not stay full of a partial copy
        raise
    os.replace(tmp, path)


def read_npz(path: str | os.PathLike[str], max_member_bytes: int) -> dict[str, np.ndarray]:
    """The arrays of a file written by write_npz (safe_io.load_npz: no member outside STATE_KEYS, none
    unpacking to more than `max_member_bytes`); CheckpointError when it is missing or corrupt."""
    return load_npz(path, "replay buffer file", STATE_KEYS, "save a buffer there first", max_member_bytes)
