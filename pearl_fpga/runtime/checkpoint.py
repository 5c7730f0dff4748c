"""Checkpoint files of a training run: a directory holding `state.pt` (torch.save of tensors only,
read back with torch.load(weights_only=True)) and `manifest.json` (format, version, the config,
counters and the state's SHA-256), validated before anything is restored; plus the helpers that turn
numpy and RNG state into tensors and back."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pearl_fpga.errors import CheckpointError

CHECKPOINT_FORMAT = "pearl_fpga-checkpoint"
CHECKPOINT_VERSION = 1
STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"


def write_checkpoint(directory: Path, state: dict[str, Any], fields: dict[str, Any]) -> Path:
    """Write `state` (tensors, numpy arrays, plain values) and a manifest of `fields` plus format,
    version, checksum and date, atomically: a temporary directory renamed into place."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.parent / f".{directory.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    torch.save(pack(state), tmp / STATE_FILE)
    manifest = {
        "format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **fields,
        "files": {STATE_FILE: {"sha256": sha256(tmp / STATE_FILE), "bytes": (tmp / STATE_FILE).stat().st_size}},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    old = directory.parent / f".{directory.name}.old-{os.getpid()}"
    if directory.exists():
        directory.rename(old)
    tmp.rename(directory)
    if old.exists():
        shutil.rmtree(old)
    return directory


def read_checkpoint(directory: Path, expect: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(manifest, state) of a checkpoint, validated: the manifest's fields, `expect` (e.g. {"algo": "dqn"}),
    the state's checksum, and a tensors-only torch.load. CheckpointError names any problem."""
    manifest = read_manifest(directory)
    for key, value in (expect or {}).items():
        if value is not None and manifest.get(key) != value:
            raise CheckpointError(f"checkpoint {directory} is for {key}={manifest.get(key)!r}, "
                                  f"but this run asks for {value!r}; use another --checkpoint-dir or matching options")
    state_path = directory / STATE_FILE
    if sha256(state_path) != manifest["files"][STATE_FILE]["sha256"]:
        raise CheckpointError(f"checkpoint {directory}: {STATE_FILE} does not match the checksum in "
                              f"{MANIFEST_FILE} (corrupt or partially written); use an older checkpoint")
    try:
        state = unpack(torch.load(state_path, weights_only=True, map_location="cpu"))
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"checkpoint {directory}: cannot read {STATE_FILE}: {exc}") from exc
    return manifest, state


def read_manifest(directory: Path) -> dict[str, Any]:
    """Read and validate a checkpoint manifest (CheckpointError on any problem)."""
    path = Path(directory) / MANIFEST_FILE
    if not Path(directory).is_dir():
        raise CheckpointError(f"no checkpoint at {directory}: the directory does not exist")
    from pearl_fpga.limits import read_json

    try:
        manifest = read_json(path, "checkpoint manifest")  # bounded, UTF-8, no RecursionError from deep nesting
    except FileNotFoundError as exc:
        raise CheckpointError(f"{directory} is not a checkpoint: {MANIFEST_FILE} is missing") from exc
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {directory}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a pearl_fpga checkpoint manifest")
    if manifest.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"checkpoint {directory} has format version {manifest.get('version')}, this "
                              f"pearl_fpga reads version {CHECKPOINT_VERSION}")
    schema = {"algo": str, "env_id": str, "seed": int, "placement": str, "config": dict, "counters": dict,
              "files": dict}
    for key, kind in schema.items():
        if not isinstance(manifest.get(key), kind):
            raise CheckpointError(f"checkpoint manifest {path}: field {key!r} missing or not a {kind.__name__}")
    for key in ("env_steps", "grad_steps", "episodes", "target_checked"):
        value = manifest["counters"].get(key)
        if not isinstance(value, int) or value < 0:
            raise CheckpointError(f"checkpoint manifest {path}: counter {key!r} missing or invalid")
    entry = manifest["files"].get(STATE_FILE)
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        raise CheckpointError(f"checkpoint manifest {path}: no checksum for {STATE_FILE}")
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


class sigint_ignored:
    """Ignore a second Ctrl-C while the interrupt checkpoint is written."""

    def __enter__(self) -> None:
        try:
            self._old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: nothing to guard
            self._old = None

    def __exit__(self, *exc: Any) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
