"""What a training checkpoint's manifest must satisfy beyond its schema (runtime.checkpoint calls these):

- one digest covers the whole manifest: `manifest_sha256` is the SHA-256 of every other field (the
  config, the counters, and state.pt's own SHA-256 and size), so a flipped bit anywhere in the
  manifest, or in the tensors, is refused;
- state.pt's size is compared with the manifest's before it is hashed (a huge or sparse file is not
  read to find out that it is not the one written);
- the counters lie within bounds and agree with the state they describe: episodes with the episode
  log, gradient steps with the schedule, the replay's transitions with the env steps.

CheckpointError names the first problem."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError
from pearl_fpga.runtime.schedule import allowed_gradient_steps

DIGEST_FIELD = "manifest_sha256"
COUNTERS = ("env_steps", "grad_steps", "episodes", "target_checked")
MAX_COUNT = 2**53
"""Bound of every counter: a float64 holds every integer below it exactly, and no run comes near it."""
SEED_LIMIT = 2**32  # the Trainer seeds numpy's global generator, which takes seeds below 2**32


def manifest_digest(manifest: dict[str, Any]) -> str:
    """SHA-256 of the manifest's fields except the digest itself, as canonical JSON (sorted keys)."""
    body = {k: v for k, v in manifest.items() if k != DIGEST_FIELD}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` with its digest set (what write_checkpoint writes)."""
    return {**{k: v for k, v in manifest.items() if k != DIGEST_FIELD}, DIGEST_FIELD: manifest_digest(manifest)}


def check_digest(manifest: dict[str, Any], path: Path) -> None:
    """CheckpointError unless the manifest's digest matches its fields."""
    if manifest.get(DIGEST_FIELD) != manifest_digest(manifest):
        what = "has no digest" if DIGEST_FIELD not in manifest else "does not match its digest"
        raise CheckpointError(f"checkpoint manifest {path} {what} ({DIGEST_FIELD}): it is corrupt or was edited, "
                              "so neither it nor the state it describes is trusted; use an older checkpoint")


def _count(value: Any, where: str, path: Path, limit: int = MAX_COUNT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise CheckpointError(f"checkpoint manifest {path}: {where} is {value!r}, it must be an integer in "
                              f"[0, {limit}); the checkpoint is corrupt")
    return value


def check_fields(manifest: dict[str, Any], path: Path) -> None:
    """Bounds of the counters, the seed and state.pt's size entry."""
    counters = manifest["counters"]
    for key in COUNTERS:
        _count(counters.get(key), f"counter {key!r}", path)
    faults = counters.get("faults", {})
    if not isinstance(faults, dict):
        raise CheckpointError(f"checkpoint manifest {path}: field 'counters.faults' must map fault names to counts "
                              f">= 0, got {faults!r}; the manifest is corrupt: use an older checkpoint")
    for key, value in faults.items():
        _count(value, f"counters.faults.{key}", path)
    if "worker_restarts" in counters:
        _count(counters["worker_restarts"], "counter 'worker_restarts'", path)
    _count(manifest["seed"], "seed", path, SEED_LIMIT)
    entry = manifest["files"]["state.pt"]
    _count(entry.get("bytes"), "files['state.pt'].bytes", path)


def check_size(manifest: dict[str, Any], state_path: Path) -> None:
    """CheckpointError when state.pt's size differs from the manifest's (checked before hashing it)."""
    want, have = manifest["files"]["state.pt"]["bytes"], state_path.stat().st_size
    if want != have:
        raise CheckpointError(f"checkpoint {state_path.parent}: {state_path.name} is {have:,} bytes, manifest.json says "
                              f"{want:,} (truncated, replaced or partially written); use an older checkpoint")


def check_counters(manifest: dict[str, Any], state: dict[str, Any], path: Path) -> None:
    """CheckpointError unless the manifest's counters agree with the state of a Trainer checkpoint:
    episodes = logged episodes, every logged step <= env_steps, grad_steps <= what the schedule allows
    by env_steps, target_checked <= env_steps, and the replay holding what env_steps put in it."""
    c = manifest["counters"]
    env_steps, grad_steps, episodes = c["env_steps"], c["grad_steps"], c["episodes"]

    def fail(what: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path}: its counters do not agree with its state ({what}); the checkpoint "
                               "is corrupt, use an older one")

    try:
        config = TrainConfig.from_dict(manifest["config"])
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"checkpoint {path}: invalid config in manifest: {exc}") from exc
    replay = state.get("replay")
    if isinstance(replay, dict):
        stored = _stored(replay)
        dropped = int(c.get("faults", {}).get("nonfinite_dropped", 0))
        if stored > env_steps:
            raise fail(f"the replay holds {stored:,} transitions, more than the {env_steps:,} env steps taken")
        capacity = _capacity(replay)
        if capacity is not None and stored != min(env_steps - dropped, capacity):
            raise fail(f"the replay holds {stored:,} transitions, {env_steps:,} env steps ({dropped:,} dropped as "
                       f"non-finite) into a buffer of {capacity:,} leave {min(env_steps - dropped, capacity):,}")
    if grad_steps > allowed_gradient_steps(config, env_steps):
        raise fail(f"grad_steps {grad_steps:,} is more than the schedule allows after {env_steps:,} env steps")
    if c["target_checked"] > env_steps:
        raise fail(f"target_checked {c['target_checked']:,} is past env_steps {env_steps:,}")
    log = np.asarray(state.get("episode_log", np.zeros((0, 3))))
    if log.ndim != 2 or len(log) != episodes:
        raise fail(f"episodes is {episodes:,}, the episode log holds {len(log):,}")
    for name in ("episode_log", "eval_log"):
        steps = np.asarray(state.get(name, np.zeros((0, 3))))
        if steps.size and (steps.ndim != 2 or not np.isfinite(steps).all() or steps[:, 0].max() > env_steps):
            raise fail(f"{name} holds steps past env_steps {env_steps:,}")


def _stored(replay: dict[str, Any]) -> int:
    """Transitions a replay state holds (every shard's)."""
    if replay.get("kind") == "sharded":
        return sum(_stored(shard.get("replay", {})) for shard in replay.get("shards", ()) if isinstance(shard, dict))
    inner = replay.get("buffer", replay) if replay.get("kind") == "prioritized" else replay
    size = inner.get("size", 0)
    return int(size) if isinstance(size, (int, np.integer)) else 0


def _capacity(replay: dict[str, Any]) -> int | None:
    """The capacity of a single buffer (whose size follows from env_steps); None for shards, which
    restart empty and so may hold less."""
    if replay.get("kind") == "uniform":
        return int(replay["capacity"])
    if replay.get("kind") == "prioritized":
        buffer = replay.get("buffer", {})
        capacity = buffer.get("capacity") if isinstance(buffer, dict) else None
        return int(capacity) if isinstance(capacity, (int, np.integer)) else None
    return None
