"""Profiles: seconds per call of every (task, target) pair, fitted to t(batch) = a + b * batch, and
their cache.

Host targets ("cpu", "cpu-kernel", "cpu-bf16", "cuda") are measured by pearl_fpga.planner.host_probe (and
the worker mode by planner.worker_probe); FPGA targets ("fpga-emu", "fpga") are modelled by
planner.fpga_model. Profiles are cached per machine, profiled code (a fingerprint of its sources and
native extensions) and workload in ~/.cache/pearl_fpga/profiles/<host>-<key>.json
($PEARL_FPGA_CACHE moves the cache root). The cache is validated on load; a corrupt one is
re-profiled with a warning.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import socket
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.data import cache_root
from pearl_fpga.errors import CheckpointError
from pearl_fpga.safe_io import read_json
from pearl_fpga.planner.model import Fit

SCHEMA = 3  # 2: worker start/stop/poll and co-run factors from the runtime's own pool, exploration overhead;
# 3: the in-process loop's own terms (actor_loop, learner_loop, learner_convert, lockstep_sample, thread_probe)
HOST_TARGETS = ("cpu", "cpu-kernel", "cpu-bf16", "cuda")
REPLAY_TASKS = ("replay_insert", "replay_sample", "replay_update")


# ----------------------------------------------------------------------------------- fitting
def fit_line(batches: Sequence[float], seconds: Sequence[float], source: str = "measured") -> Fit:
    """Least-squares t = a + b * batch over the points; a and b are clipped at 0 (time never
    shrinks with the batch: a negative slope is noise, and then the mean is the better constant)."""
    x = np.asarray(batches, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    if x.shape != y.shape or x.size == 0 or not np.all(np.isfinite(y)) or np.any(y < 0):
        raise ValueError(f"fit_line needs matching non-empty finite non-negative points, got {batches} / {seconds}")
    if np.unique(x).size < 2:
        return Fit(float(y.mean()), 0.0, source)
    a, b = np.linalg.lstsq(np.stack([np.ones_like(x), x], axis=1), y, rcond=None)[0]
    if b < 0:
        return Fit(float(y.mean()), 0.0, source)
    if a < 0:  # through the origin instead
        return Fit(0.0, float((x @ y) / (x @ x)), source)
    return Fit(float(a), float(b), source)


def time_call(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> float:
    """Wall seconds per call: the plain mean of `repeats` timed calls. No outlier is dropped: on a
    shared machine the training run is descheduled just as often as the benchmark, and the mean
    carries that cost while a median or trimmed mean would hide it."""
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    for _ in range(max(1, repeats)):
        fn()
    return (time.perf_counter() - start) / max(1, repeats)


# ----------------------------------------------------------------------------------- the profile
@dataclass
class Profile:
    """Fitted host task times of one workload on one machine (FPGA fits are added at plan time)."""

    machine: dict[str, Any]
    workload: str
    fits: dict[tuple[str, str], Fit] = field(default_factory=dict)
    points: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)  # "role@target" -> reason
    created: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "fits": {f"{task}@{target}": {"a": f.a, "b": f.b, "source": f.source,
                                          "points": self.points.get((task, target), [])}
                     for (task, target), f in sorted(self.fits.items())},
            "unavailable": dict(self.unavailable),
        }

    @staticmethod
    def from_json(machine: dict[str, Any], workload: str, data: Any) -> "Profile":
        """Rebuild from the cache; raises CheckpointError naming what is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("fits"), dict) or not isinstance(data.get("unavailable"), dict):
            raise CheckpointError(f"profile entry {workload!r} must hold 'fits' and 'unavailable' objects")
        prof = Profile(machine, workload, created=_number(data.get("created"), "created"))
        for key, entry in data["fits"].items():
            task, sep, target = str(key).partition("@")
            if not sep or not isinstance(entry, dict):
                raise CheckpointError(f"profile fit {key!r} is not 'task@target': {{a, b, source}}")
            a, b = _number(entry.get("a"), f"{key}.a"), _number(entry.get("b"), f"{key}.b")
            source = entry.get("source")
            if not isinstance(source, str):
                raise CheckpointError(f"profile fit {key!r}: source must be a string")
            points = entry.get("points", [])
            if not isinstance(points, list) or not all(isinstance(p, list) and len(p) == 2 for p in points):
                raise CheckpointError(f"profile fit {key!r}: points must be [batch, seconds] pairs")
            prof.fits[(task, target)] = Fit(a, b, source)
            prof.points[(task, target)] = [(_number(x, key), _number(y, key)) for x, y in points]
        for target, reason in data["unavailable"].items():
            if not isinstance(reason, str):
                raise CheckpointError(f"profile: reason for {target!r} must be a string")
            prof.unavailable[str(target)] = reason
        return prof


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise CheckpointError(f"profile field {what} must be a finite number >= 0, got {value!r}")
    return float(value)


# The code whose speed a profile measures: when any of it changes (a faster learner, a new kernel
# build), the cached profile is stale and is measured again, not rescaled. Paths are relative to the
# package; each must exist (tests/test_planner_profile.py checks), so a rename cannot drop a folder.
PROFILED_CODE = ("algos", "runtime", "kernels", "backends", "native", "replay", "trainer.py", "config.py")


def code_fingerprint(pkg: Path | None = None) -> str:
    """Hash of the profiled code's sources and compiled extensions (pearl_fpga/_*_native*) under `pkg`
    (the installed package by default); each file is hashed with its path inside the package."""
    pkg = pkg or Path(__file__).resolve().parents[1]
    files: list[Path] = sorted(pkg.glob("_*_native*"))
    for name in PROFILED_CODE:
        path = pkg / name
        if not path.exists():
            raise FileNotFoundError(f"planner.profile.PROFILED_CODE names {name!r}, which {pkg} does not have")
        files += sorted(p for p in path.rglob("*") if p.suffix in (".py", ".cpp", ".h")) if path.is_dir() else [path]
    h = hashlib.sha1()
    for f in files:
        if f.is_file():
            h.update(f.relative_to(pkg).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def machine_info() -> dict[str, Any]:
    """What identifies this machine's speed and the profiled code: host, CPU model and cores, Python,
    torch, pearl_fpga and a fingerprint of the code the profile times."""
    import torch

    from pearl_fpga import __version__
    from pearl_fpga.planner.devices import cpu_cores, cpu_model
    from pearl_fpga.host import cpu_identity

    # the CPU's vector and matrix features too: hosts of one cloud model name differ in them
    info = {"host": socket.gethostname(), "cpu": cpu_model(), "cpu_features": cpu_identity()["features"],
            "cores": cpu_cores(),
            "python": platform.python_version(), "torch": torch.__version__, "pearl_fpga": __version__,
            "code": code_fingerprint()}
    info["key"] = hashlib.sha1(json.dumps(info, sort_keys=True).encode()).hexdigest()[:12]
    return info


def cache_dir() -> Path:
    """cache_root()/profiles ($PEARL_FPGA_CACHE moves the root; the old $PEARL_FPGA_CACHE_DIR still
    works, with a deprecation message)."""
    old = os.environ.get("PEARL_FPGA_CACHE_DIR")
    if old:
        warnings.warn("PEARL_FPGA_CACHE_DIR is deprecated: set PEARL_FPGA_CACHE (the root of every pearl_fpga "
                      "cache; profiles go to its profiles/ folder)", FutureWarning, stacklevel=2)
        return Path(old)
    return cache_root() / "profiles"


def cache_path(machine: Mapping[str, Any]) -> Path:
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(machine["host"]))[:40]
    return cache_dir() / f"{host}-{machine['key']}.json"


def _read_cache(path: Path, machine: Mapping[str, Any]) -> dict[str, Any]:
    """The workloads of this machine's cache file (read_json: bounded, UTF-8); OSError or ValueError
    (CheckpointError) naming the problem when it is not a schema-SCHEMA profile file of this machine."""
    data = read_json(path, "profile cache", error=CheckpointError)
    if (not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("workloads"), dict)
            or not isinstance(data.get("machine"), dict)):
        raise CheckpointError(f"not a schema-{SCHEMA} profile file")
    if data["machine"].get("key") != machine["key"]:
        raise CheckpointError("it was written for another machine")
    return data["workloads"]


def load_cached(machine: dict[str, Any], workload: str, path: Path | None = None) -> Profile | None:
    """The cached profile of `workload`, None when absent; a corrupt cache warns and returns None."""
    path = path or cache_path(machine)
    if not path.exists():
        return None
    try:
        entry = _read_cache(path, machine).get(workload)
        return None if entry is None else Profile.from_json(machine, workload, entry)
    except (OSError, ValueError) as exc:
        warnings.warn(f"profile cache {path} is unusable ({exc}); re-profiling and overwriting it", stacklevel=2)
        return None


def save_cached(profile: Profile, path: Path | None = None) -> Path:
    """Add or replace this workload's entry in the machine's cache file (atomic rename)."""
    path = path or cache_path(profile.machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        workloads = dict(_read_cache(path, profile.machine))
    except (OSError, ValueError):
        workloads = {}  # an unusable file is replaced (load_cached warned about it)
    workloads[profile.workload] = profile.to_json()
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"schema": SCHEMA, "machine": profile.machine, "workloads": workloads}, indent=1))
    tmp.replace(path)
    return path
