"""Checkpoint files of a training run: a directory holding `state.pt` (torch.save of tensors only,
read back with torch.load(weights_only=True)) and `manifest.json` (format, version, the config,
counters, the state's SHA-256 and size, and a digest of all that: runtime.manifest_checks), validated
before anything is restored; the helpers that turn
numpy and RNG state into tensors and back; and what resuming a run needs (the newest complete copy,
the config a resumed run may change, the process-global RNGs put back after a failed load)."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError, DirectoryInUse, PearlError
from pearl_fpga.runtime.atomic import RecordingFile, fsync_dir as _fsync_dir
from pearl_fpga.runtime.locks import DirLock, checkpoint_lock  # DirLock: re-exported (it lived here)
from pearl_fpga.runtime.manifest_checks import check_counters, check_digest, check_fields, check_size, seal_manifest
from pearl_fpga.safe_io import open_regular, read_json

if TYPE_CHECKING:
    from pearl_fpga.algos.api import DeepLearner
    from pearl_fpga.replay.manager import Replay

CHECKPOINT_FORMAT = "pearl_fpga-checkpoint"
CHECKPOINT_VERSION = 2  # 2: the manifest carries its own digest
STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"


# The writer opens its files through this name, so that tests can point it at a full disk.
_open = open


def write_checkpoint(directory: Path, state: dict[str, Any], fields: dict[str, Any],
                     check: Callable[[dict[str, Any], dict[str, Any]], None] | None = None) -> Path:
    """Write `state` (tensors, numpy arrays, plain values) and a manifest of `fields` plus format,
    version, checksum and date as `directory`, crash-consistently:

    1. everything goes to a temporary sibling `.NAME.tmp-PID` (the manifest last, both fsynced);
    2. the copy is read back (checksum, tensors-only torch.load) and passed to `check`;
    3. only then the previous checkpoint is renamed to `.NAME.old-PID`, the new one into place, and
       the old one removed.

    A crash at any point leaves a complete copy (`directory`, or one of the siblings), which
    `recover_checkpoint` puts back in place. On a write error (full disk, read-only directory) or a
    copy that does not load back, the temporary copy is removed and CheckpointError is raised; the
    previous checkpoint is left as it was."""
    parent = directory.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(_write_error(directory, exc)) from exc
    tmp = parent / f".{directory.name}.tmp-{os.getpid()}"
    try:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        # Through a file object of our own that keeps the OSError of a failed write: on a full disk torch
        # raises its own "unexpected pos" RuntimeError, and the cause (ENOSPC) is reported instead.
        with _open(tmp / STATE_FILE, "wb") as fh:
            recording = RecordingFile(fh)
            try:
                torch.save(pack(state), recording)
            except RuntimeError as exc:
                raise recording.error or exc
            fh.flush()
            os.fsync(fh.fileno())
        manifest = seal_manifest({
            "format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **fields,
            "files": {STATE_FILE: {"sha256": sha256(tmp / STATE_FILE), "bytes": (tmp / STATE_FILE).stat().st_size}},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "created_ns": time.time_ns(),
        })
        with _open(tmp / MANIFEST_FILE, "w") as fh:
            fh.write(json.dumps(manifest, indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        try:
            back_manifest, back_state = read_checkpoint(tmp)
            if check is not None:
                check(back_manifest, back_state)
        except CheckpointError as exc:
            raise CheckpointError(f"the new checkpoint does not load back, so it was discarded and the previous "
                                  f"one at {directory} kept: {exc}") from exc
    except PearlError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except (OSError, RuntimeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(_write_error(directory, exc)) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = parent / f".{directory.name}.old-{os.getpid()}"
    if old.exists():
        shutil.rmtree(old)
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)  # between the two renames the complete copies are `old` and `tmp`
    _fsync_dir(parent)
    shutil.rmtree(old, ignore_errors=True)
    return directory


def _write_error(directory: Path, exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        why = "no space left on the device"
        fix = "free some space or choose another --checkpoint-dir"
    elif isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "the directory is not writable"
        fix = "fix its permissions or choose another --checkpoint-dir"
    else:
        why = f"{type(exc).__name__}: {exc}"
        fix = "check the disk and the directory, or choose another --checkpoint-dir"
    return (f"cannot write the checkpoint {directory}: {why} ({exc}); {fix}. The partial copy was removed and "
            "the previous checkpoint, if any, was kept")


def _siblings(directory: Path) -> list[Path]:
    """Copies a writer may have left beside `directory`: `.NAME.tmp-PID` and `.NAME.old-PID`."""
    parent = directory.parent
    if not parent.is_dir():
        return []
    return sorted(p for pattern in (f".{directory.name}.tmp-*", f".{directory.name}.old-*")
                  for p in parent.glob(pattern) if p.is_dir())


def complete_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of `directory` when it is a complete checkpoint (manifest valid, state.pt matching
    its checksum), else None."""
    try:
        manifest = read_manifest(directory)
        check_size(manifest, directory / STATE_FILE)
        if sha256(directory / STATE_FILE) != manifest["files"][STATE_FILE]["sha256"]:
            return None
    except (CheckpointError, OSError):
        return None
    return manifest


def recover_checkpoint(directory: Path) -> Path | None:
    """Put the newest complete checkpoint that a crash left (in `directory` or a `.tmp-`/`.old-`
    sibling) in place as `directory`, then remove the other siblings. Returns `directory`, or None when
    no complete copy exists (then nothing is changed). Call it only while holding the directory's lock."""
    directory = Path(directory)
    found = []
    for rank, path in enumerate([directory, *_siblings(directory)]):
        manifest = complete_manifest(path) if path.is_dir() else None
        if manifest is not None:
            counters = manifest["counters"]
            created = manifest.get("created_ns") if isinstance(manifest.get("created_ns"), int) else 0
            # newest write first; on a tie the one in place
            found.append(((created, counters["env_steps"], counters["grad_steps"], -rank), path))
    if not found:
        return None
    best = max(found)[1]
    if best != directory:
        if directory.exists():
            directory.rename(directory.parent / f".{directory.name}.old-{os.getpid()}-replaced")
        best.rename(directory)
        _fsync_dir(directory.parent)
    for path in _siblings(directory):
        shutil.rmtree(path, ignore_errors=True)
    return directory


def check_writable(directory: Path, what: str = "checkpoint directory") -> None:
    """CheckpointError unless `directory`'s parent can take a checkpoint: it is created if missing and
    a probe directory is made and removed in it (the writer renames siblings there)."""
    parent = Path(directory).parent
    probe = parent / f".{Path(directory).name}.probe-{os.getpid()}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe.mkdir(exist_ok=True)
        (probe / "probe").write_bytes(b"")
    except OSError as exc:
        raise CheckpointError(f"the {what} {directory} is not writable ({exc}); fix its permissions or choose "
                              "another --checkpoint-dir before training (nothing was trained)") from exc
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def read_checkpoint(directory: Path, expect: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(manifest, state) of a checkpoint, validated: the manifest's fields, `expect` (e.g. {"algo": "dqn"}),
    the state's checksum, and a tensors-only torch.load. CheckpointError names any problem."""
    manifest = read_manifest(directory)
    for key, value in (expect or {}).items():
        if value is not None and manifest.get(key) != value:
            raise CheckpointError(f"checkpoint {directory} is for {key}={manifest.get(key)!r}, "
                                  f"but this run asks for {value!r}; use another --checkpoint-dir or matching options")
    state_path = directory / STATE_FILE
    check_size(manifest, state_path)  # before hashing: a file of another size is not read
    if sha256(state_path) != manifest["files"][STATE_FILE]["sha256"]:
        raise CheckpointError(f"checkpoint {directory}: {STATE_FILE} does not match the checksum in "
                              f"{MANIFEST_FILE} (corrupt or partially written); use an older checkpoint")
    try:
        with open_regular(state_path, "checkpoint state", 1 << 44, CheckpointError) as fh:
            state = unpack(torch.load(fh, weights_only=True, map_location="cpu"))
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"checkpoint {directory}: cannot read {STATE_FILE}: {exc}") from exc
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {directory}: {STATE_FILE} does not hold a training run's state")
    if RUN_STATE_KEYS <= set(state):  # a training run's state (run_state): its counters must describe it
        check_counters(manifest, state, directory)
    return manifest, state


def read_manifest(directory: Path) -> dict[str, Any]:
    """Read and validate a checkpoint manifest (CheckpointError on any problem)."""
    path = Path(directory) / MANIFEST_FILE
    if not Path(directory).is_dir():
        raise CheckpointError(f"no checkpoint at {directory}: the directory does not exist")
    try:
        manifest = read_json(path, "checkpoint manifest", error=CheckpointError)  # regular file, bounded, UTF-8, depth
    except FileNotFoundError as exc:
        raise CheckpointError(f"{directory} is not a checkpoint: {MANIFEST_FILE} is missing") from exc
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {directory}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a pearl_fpga checkpoint manifest")
    if manifest.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint {directory} has format version {manifest.get('version')}, this "
                              f"pearl_fpga reads version {CHECKPOINT_VERSION}")
    check_digest(manifest, path)
    schema = {"algo": str, "env_id": str, "seed": int, "placement": str, "config": dict, "counters": dict,
              "files": dict}
    for key, kind in schema.items():
        if not isinstance(manifest.get(key), kind):
            raise CheckpointError(f"checkpoint manifest {path}: field {key!r} missing or not a {kind.__name__}")
    entry = manifest["files"].get(STATE_FILE)
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        raise CheckpointError(f"checkpoint manifest {path}: no checksum for {STATE_FILE}")
    check_fields(manifest, path)  # counters, seed and size within bounds
    if not (Path(directory) / STATE_FILE).is_file():
        raise CheckpointError(f"checkpoint {directory}: {STATE_FILE} is missing")
    return manifest


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pack(obj: Any) -> Any:
    """numpy arrays -> tagged tensors so that torch.load(weights_only=True) can read them back."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj).copy())}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(pack(v) for v in obj)
    return obj


def unpack(obj: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__"}:
            return obj["__ndarray__"].numpy()
        return {k: unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(unpack(v) for v in obj)
    return obj


def np_global_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    return {"name": name, "keys": keys, "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(gauss)}


def set_np_global_state(s: dict[str, Any]) -> None:
    np.random.set_state((s["name"], np.asarray(s["keys"], dtype=np.uint32), s["pos"], s["has_gauss"], s["gauss"]))


def as_tuple(obj: Any) -> Any:
    return tuple(as_tuple(v) for v in obj) if isinstance(obj, (list, tuple)) else obj


# ---- a training run's state ------------------------------------------------------------------------
RUN_STATE_KEYS = frozenset({"algo", "replay", "episode_log", "eval_log"})
Log = list[tuple[int, float, int]]  # (env step, return, length) of each episode
EvalLog = list[tuple[int, float, float]]  # (env step, mean, std) of each periodic evaluation


def run_state(algo: DeepLearner, replay: Replay, actor: Any, best: dict[str, Any] | None, episode_log: Log,
              eval_log: EvalLog) -> dict[str, Any]:
    """A training run's state.pt: the learner, the replay, this process's actor (envs, policy copy,
    exploration draws), the process-global RNGs, the best evaluation and the logs."""
    return {
        "algo": algo.state_dict(),
        "replay": replay.state_dict(),
        "envs": actor.envs.snapshot(),
        "policy": actor.policy.module.state_dict(),
        "rng": {"numpy_global": np_global_state(), "python": random.getstate(), "torch": torch.get_rng_state(),
                "explore": actor.rng.bit_generator.state},
        "best": best,
        "episode_log": np.asarray(episode_log, dtype=np.float64).reshape(-1, 3),
        "eval_log": np.asarray(eval_log, dtype=np.float64).reshape(-1, 3),
    }


def restore_run_state(state: dict[str, Any], algo: DeepLearner, replay: Replay,
                      actor: Any) -> tuple[dict[str, Any] | None, Log, EvalLog]:
    """Put run_state()'s parts back (checked beforehand: runtime.state_checks); returns the best
    evaluation and the episode and evaluation logs."""
    algo.load_state_dict(state["algo"])
    replay.load_state_dict(state["replay"])
    actor.envs.restore(state["envs"])
    actor.policy.load_weights(state["policy"])
    set_np_global_state(state["rng"]["numpy_global"])
    random.setstate(as_tuple(state["rng"]["python"]))
    torch.set_rng_state(state["rng"]["torch"])
    actor.rng.bit_generator.state = state["rng"]["explore"]
    return (state["best"], [(int(s), float(r), int(n)) for s, r, n in np.asarray(state["episode_log"])],
            [(int(s), float(m), float(d)) for s, m, d in np.asarray(state["eval_log"])])


# ---- resuming a run --------------------------------------------------------------------------------
RESUMABLE_FIELDS = ("total_steps", "eval_freq", "eval_episodes", "checkpoint_freq", "workers", "engine", "actors",
                    "ray_address", "actor_resources", "shard_resources", "max_actor_lag", "learner_threads",
                    "nonfinite_transitions", "learner_compile", "update_schedule")
"""TrainConfig fields a resumed run may change (Trainer.load(overrides=...), `train --resume`): the run's
length, evaluation and checkpoint intervals, where actors run, whether the learner step is compiled, and
DDPG's and TD3's update schedule (the same bits in each). Every other field (the algorithm's
hyper-parameters, the replay's kind and size, the network) is fixed by the checkpoint."""


def resumed_config(config: TrainConfig, overrides: dict[str, Any], directory: Path,
                   resumable: tuple[str, ...] = RESUMABLE_FIELDS) -> TrainConfig:
    """The checkpoint's config with the `resumable` `overrides` applied; CheckpointError listing every
    field whose asked value differs from the checkpoint's but may not change on resume."""
    try:
        asked = TrainConfig.from_dict({**config.to_dict(), **overrides})
    except ValueError as exc:
        raise CheckpointError(f"resuming {directory}: {exc}") from exc
    changed = [name for name in overrides if getattr(asked, name) != getattr(config, name)]
    fixed = [name for name in changed if name not in resumable]
    if fixed:
        diffs = "; ".join(f"{name}: checkpoint {getattr(config, name)!r}, asked {getattr(asked, name)!r}" for name in fixed)
        raise CheckpointError(f"cannot resume {directory} with different settings ({diffs}). These are fixed by the "
                              "checkpoint: resume without them, or start a new run (another --logdir). A resumed run may "
                              f"change only {', '.join(resumable)}")
    return asked


def read_newest(directory: Path, expect: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """read_checkpoint, after putting back the newest complete copy a crash left beside `directory`
    (only when no other run holds the directory's lock: a live run's copies are its own business)."""
    lock = None
    if directory.parent.is_dir():
        try:
            lock = checkpoint_lock(directory).acquire()
        except DirectoryInUse:
            lock = None  # another run, or a read-only place: read what is there
    try:
        if lock is not None:
            try:
                recover_checkpoint(directory)
            except OSError:
                pass  # cannot rename here (read-only): read what is in place
        return read_checkpoint(directory, expect)
    finally:
        if lock is not None:
            lock.release()


def global_rng_state() -> dict[str, Any]:
    """The process-global RNGs (Python, numpy, torch, CUDA when in use), to put back after a failed load."""
    out = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_global_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def all_finite(tensor: torch.Tensor) -> bool:
    """No NaN or inf in a floating tensor. One sum is the cheap test (a NaN or inf anywhere makes it
    non-finite); only then, or when finite values overflow it, is each element examined."""
    return math.isfinite(float(tensor.sum())) or bool(torch.isfinite(tensor).all())


def first_nonfinite(obj: Any, prefix: str = "") -> str | None:
    """Name and value of the first floating tensor in `obj` (nested dicts/lists) holding NaN or inf."""
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() and not all_finite(obj):
            bad = obj[~torch.isfinite(obj)].flatten()[0].item()
            return f"{prefix.rstrip('.')} holds {bad}"
        return None
    if isinstance(obj, dict):
        items: Any = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return None
    for key, value in items:
        found = first_nonfinite(value, f"{prefix}{key}.")
        if found is not None:
            return found
    return None
