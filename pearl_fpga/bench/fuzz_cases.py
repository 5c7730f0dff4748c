"""The files of `pearl-fpga bench fuzz`: a pristine file of each kind users hand the package, the loader
that reads it as the package does, a fingerprint of what a load returned, and the worker that loads a
batch of cases in its own process (`python -m pearl_fpga.bench.fuzz_cases CASES.json`).

The worker prints `ready` once the loaders are imported, then `start ID` before each case and `done ID {json}` after it, so the parent that runs
it with a timeout knows which case hung. A case's outcome is `refused` (the exception's type, whether
it is a PearlError, and whether its message names the file), `loaded` (with the fingerprint) or
`traceback` (any other exception)."""

from __future__ import annotations

import hashlib
import json
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

KINDS = ("config", "catalog", "manifest", "profile", "replay", "dataset", "tabular-checkpoint", "checkpoint", "policy")
"""Every kind of file a user hands the package."""
FILE_NAMES = {"config": "config.json", "catalog": "catalog.json", "manifest": "manifest.json",
              "profile": "profile.json", "replay": "replay.npz", "dataset": "dataset.npz",
              "tabular-checkpoint": "tabular.npz", "checkpoint": "state.pt", "policy": "policy.npz"}
"""The file each kind's case folder holds (a deep checkpoint: state.pt beside manifest.json; an exported
policy: policy.npz beside policy.json)."""
MODULES = {"config": "pearl_fpga.config", "catalog": "pearl_fpga.board.catalog", "manifest": "pearl_fpga.board.manifest",
           "profile": "pearl_fpga.planner.profile", "replay": "pearl_fpga.replay.buffer",
           "dataset": "pearl_fpga.algos.tabular", "tabular-checkpoint": "pearl_fpga.runtime.tabular_trainer",
           "checkpoint": "pearl_fpga.trainer", "policy": "pearl_fpga.kernels.mlp_artifact"}
"""The loader's module of each kind: the worker imports them before its first case, so that a case's
timeout measures the load alone."""
DUMPS = ("replay", "dataset", "tabular-checkpoint", "checkpoint", "policy")
"""Kinds the package writes with a content digest: a load after corruption must return the original."""
PROFILE_MACHINE = {"host": "fuzz", "key": "fuzz-machine"}
TABULAR_ENV = "CliffWalking-v1"


# ---- pristine files --------------------------------------------------------------------------------
def make_pristine(kind: str, folder: Path) -> Path:
    """Write a valid file of `kind` into `folder` (created); returns the path the loader is given."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAMES[kind]
    if kind == "config":
        from pearl_fpga.config import TrainConfig

        TrainConfig.preset("dqn").to_json(path)
    elif kind == "catalog":
        from pearl_fpga.data import data_path

        path.write_bytes(data_path("bitstreams", "catalog.json").read_bytes())
    elif kind == "manifest":
        from pearl_fpga.board.manifest import build_manifest, write_manifest

        write_manifest(build_manifest("pynq-z2", {"bit": "a.bit", "hwh": "a.hwh"}, {"vivado": "2024.2"}), path)
    elif kind == "profile":
        from pearl_fpga.planner.model import Fit
        from pearl_fpga.planner.profile import SCHEMA, Profile

        prof = Profile(dict(PROFILE_MACHINE), "w", fits={("learn", "cpu"): Fit(1e-4, 2e-6, "measured")},
                       points={("learn", "cpu"): [(32.0, 1.6e-4), (256.0, 6e-4)]}, unavailable={"cuda": "no GPU"},
                       created=1.7e9)
        path.write_text(json.dumps({"schema": SCHEMA, "machine": PROFILE_MACHINE, "workloads": {"w": prof.to_json()}}))
    elif kind == "replay":
        buf = _buffer()
        rng = np.random.default_rng(1)
        for _ in range(40):
            buf.add(rng.normal(size=3).astype(np.float32), int(rng.integers(0, 2)), float(rng.normal()),
                    rng.normal(size=3).astype(np.float32), bool(rng.random() < 0.1))
        buf.save(path)
    elif kind == "dataset":
        from pearl_fpga.algos.tabular import save_dataset

        rng = np.random.default_rng(2)
        save_dataset(path, rng.integers(0, 48, 200), rng.integers(0, 4, 200), rng.normal(size=200),
                     rng.integers(0, 48, 200), rng.random(200) < 0.05, 48, 4, TABULAR_ENV, a2=rng.integers(0, 4, 200))
    elif kind == "tabular-checkpoint":
        from pearl_fpga.config import TrainConfig
        from pearl_fpga.runtime.tabular_trainer import TabularTrainer

        cfg = TrainConfig.preset("qlearning", TABULAR_ENV, backend="numpy", eval_freq=0, checkpoint_freq=0)
        tabular = TabularTrainer("qlearning", TABULAR_ENV, config=cfg, seed=3)
        tabular.train(300)
        tabular.save(folder)
        tabular.close()
    elif kind == "checkpoint":
        from pearl_fpga.config import TrainConfig
        from pearl_fpga.trainer import Trainer

        cfg = TrainConfig.preset("dqn", learning_starts=50, train_freq=16, gradient_steps=2, net_arch=[8],
                                 buffer_size=500, batch_size=16, eval_freq=0, checkpoint_freq=0, total_steps=200)
        trainer = Trainer("dqn", placement="cpu", config=cfg, seed=0)
        trainer.train(100)
        trainer.save(folder / "ck")
        trainer.close()
        for name in ("manifest.json", "state.pt"):
            (folder / "ck" / name).replace(folder / name)
        (folder / "ck").rmdir()
    elif kind == "policy":  # what `pearl-fpga export` writes: a quantized 4-16-2 DQN policy
        import torch

        from pearl_fpga.kernels.mlp import MLPInfer

        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        calibration = np.random.default_rng(4).normal(size=(64, 4)).astype(np.float32)
        MLPInfer.from_torch(net, backend="numpy", calibration=calibration).save(folder)
    else:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    return path


def _buffer() -> Any:
    from pearl_fpga.replay.buffer import PrioritizedReplayBuffer

    return PrioritizedReplayBuffer(64, obs_shape=(3,), action_shape=(), action_dtype=np.int64, backend="numpy", seed=0)


# ---- loading as the package does -------------------------------------------------------------------
def load(kind: str, path: Path) -> Any:
    """What the package's own loader returns for `path` (a deep checkpoint: its folder, with every
    check of Trainer.load; a profile: its warning becomes an error, as a refusal)."""
    if kind == "config":
        from pearl_fpga.config import TrainConfig

        return TrainConfig.from_json(path).to_dict()
    if kind == "catalog":
        from pearl_fpga.board.catalog import default_board, load_catalog

        return {name: repr(spec) for name, spec in load_catalog(path).items()}, default_board(path)
    if kind == "manifest":
        import dataclasses

        from pearl_fpga.board.manifest import load_manifest

        return repr(dataclasses.replace(load_manifest(path), path=None))  # the content, not where it lies
    if kind == "profile":
        from pearl_fpga.errors import CheckpointError
        from pearl_fpga.planner.profile import load_cached

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            prof = load_cached(dict(PROFILE_MACHINE), "w", path)
        if caught:  # load_cached warns, re-profiles and overwrites: the file was refused
            raise CheckpointError(str(caught[0].message))
        return None if prof is None else prof.to_json()
    if kind == "replay":
        buf = _buffer()
        buf.load(path)
        return buf.state_dict()
    if kind == "dataset":
        from pearl_fpga.algos.tabular import load_dataset

        return load_dataset(path)
    if kind == "tabular-checkpoint":
        from pearl_fpga.runtime.tabular_trainer import TabularTrainer

        tabular = TabularTrainer.load(path.parent, record=False)
        out = {"table": tabular.kernel.table, "config": tabular.config.to_dict(), "seed": tabular.seed,
               "counts": [tabular.episodes, tabular.env_steps, tabular.grad_steps],
               "logs": [tabular.episode_log, tabular.eval_log]}
        tabular.close()
        return out
    if kind == "checkpoint":
        from pearl_fpga.runtime.checkpoint import read_checkpoint
        from pearl_fpga.trainer import Trainer

        manifest, state = read_checkpoint(path.parent)
        trainer = Trainer.load(path.parent, placement="cpu")
        trainer.close()
        return manifest, state
    if kind == "policy":
        from pearl_fpga.kernels.mlp_artifact import read_artifact

        artifact = read_artifact(path.parent)
        return {"layers": [(a.weight, a.bias, a.shift, a.relu) for a in artifact.layers],
                "formats": [repr(f) for f in artifact.formats], "head": artifact.head, "low": artifact.action_low,
                "high": artifact.action_high, "info": artifact.info, "action": artifact.action_rule}
    raise ValueError(f"unknown kind {kind!r}")


def fingerprint(value: Any) -> str:
    """SHA-256 of a loaded value: dicts by key, arrays and tensors by dtype, shape and bytes."""
    h = hashlib.sha256()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            h.update(b"{")
            for k in sorted(v, key=str):
                h.update(str(k).encode() + b":")
                walk(v[k])
            h.update(b"}")
        elif isinstance(v, (list, tuple)):
            h.update(b"[")
            for x in v:
                walk(x)
            h.update(b"]")
        elif hasattr(v, "detach"):  # a torch tensor
            walk(v.detach().cpu().numpy())
        elif isinstance(v, np.ndarray):
            h.update(f"{v.dtype.str}{v.shape}".encode() + np.ascontiguousarray(v).tobytes())
        else:
            h.update(repr(v).encode())

    walk(value)
    return h.hexdigest()


def names_file(message: str, path: Path, kind: str) -> bool:
    """The message names the file (a deep checkpoint, an exported policy: the file or its folder)."""
    return path.name in message or (kind in ("checkpoint", "policy") and path.parent.name in message)


def run_case(kind: str, path: Path) -> dict[str, Any]:
    """One case's outcome (see the module docstring)."""
    from pearl_fpga.errors import PearlError

    try:
        value = load(kind, path)
    except PearlError as exc:
        message = str(exc)
        return {"outcome": "refused", "type": type(exc).__name__, "names_file": names_file(message, path, kind),
                "message": message[:400]}
    except Exception as exc:  # noqa: BLE001 - what the suite counts as a traceback
        return {"outcome": "traceback", "type": type(exc).__name__, "message": str(exc)[:400],
                "where": traceback.format_exc(limit=-3)[-1200:]}
    return {"outcome": "loaded", "fingerprint": fingerprint(value)}


def worker(cases_file: Path, emit: Callable[[str], None] = print) -> None:
    """Run every case of `cases_file` ([{"id", "kind", "path"}]), printing start and done lines."""
    import importlib
    import logging

    logging.disable(logging.WARNING)
    cases = json.loads(cases_file.read_text())
    for kind in sorted({case["kind"] for case in cases}):
        importlib.import_module(MODULES[kind])
    emit("ready")
    sys.stdout.flush()
    for case in cases:
        emit(f"start {case['id']}")
        sys.stdout.flush()
        result = run_case(case["kind"], Path(case["path"]))
        emit(f"done {case['id']} {json.dumps(result)}")
        sys.stdout.flush()


if __name__ == "__main__":
    worker(Path(sys.argv[1]))
