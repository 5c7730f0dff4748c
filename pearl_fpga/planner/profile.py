"""Profiles: seconds per call of every (task, target) pair, fitted to t(batch) = a + b * batch.

Host targets ("cpu", "cpu-kernel", "cuda") are measured with short micro-benchmarks of the runtime's
own code (EnvGroup, ActorPolicy and its exploration step, the learner's `learn`, the replay buffer)
at a few batch sizes, least-squares fitted. The worker mode is timed on the runtime's own
WorkerPool (start, polling, stop, and how much slower learner and workers run side by side: see
`worker_pool_costs`). Profiles are cached per machine, profiled code (a fingerprint of its sources and
native extensions) and workload in ~/.cache/pearl_fpga/profiles/<host>-<key>.json
(PEARL_FPGA_CACHE_DIR overrides the folder). The cache is validated on load; a corrupt one is
re-profiled with a warning.

FPGA targets ("fpga-emu", "fpga") are modelled, not measured here: kernel cycles and clock (a Vitis
csynth report when one exists, see pearl_fpga.planner.csynth; else the cycle-accurate "rtl" backend
when requested, else the cycle bound the kernel's SPEC.md guarantees, at the catalog clock), plus
the host <-> kernel transfers of the catalog's link model, plus the host-side work measured here.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.errors import CheckpointError
from pearl_fpga.planner.model import Fit
from pearl_fpga.runtime.schedule import credit_chunk
from pearl_fpga.runtime.threads import measured_thread_count

SCHEMA = 2  # 2: worker start/stop/poll and co-run factors from the runtime's own pool, exploration overhead
HOST_TARGETS = ("cpu", "cpu-kernel", "cuda")
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
# build), the cached profile is stale and is measured again, not rescaled.
PROFILED_CODE = ("algos", "runtime", "kernels", "backends", "native", "replay.py", "trainer.py", "config.py")


def code_fingerprint() -> str:
    """Hash of the profiled code's sources and compiled extensions (pearl_fpga/_*_native*)."""
    pkg = Path(__file__).resolve().parents[1]
    files: list[Path] = sorted(pkg.glob("_*_native*"))
    for name in PROFILED_CODE:
        path = pkg / name
        files += sorted(p for p in path.rglob("*") if p.suffix in (".py", ".cpp", ".h")) if path.is_dir() else [path]
    h = hashlib.sha1()
    for f in files:
        if f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:12]


def machine_info() -> dict[str, Any]:
    """What identifies this machine's speed and the profiled code: host, CPU model and cores, Python,
    torch, pearl_fpga and a fingerprint of the code the profile times."""
    import torch

    from pearl_fpga import __version__
    from pearl_fpga.planner.devices import cpu_cores, cpu_model

    info = {"host": socket.gethostname(), "cpu": cpu_model(), "cores": cpu_cores(),
            "python": platform.python_version(), "torch": torch.__version__, "pearl_fpga": __version__,
            "code": code_fingerprint()}
    info["key"] = hashlib.sha1(json.dumps(info, sort_keys=True).encode()).hexdigest()[:12]
    return info


def cache_dir() -> Path:
    return Path(os.environ.get("PEARL_FPGA_CACHE_DIR") or Path.home() / ".cache" / "pearl_fpga" / "profiles")


def cache_path(machine: Mapping[str, Any]) -> Path:
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(machine["host"]))[:40]
    return cache_dir() / f"{host}-{machine['key']}.json"


def load_cached(machine: dict[str, Any], workload: str, path: Path | None = None) -> Profile | None:
    """The cached profile of `workload`, None when absent; a corrupt cache warns and returns None."""
    path = path or cache_path(machine)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("workloads"), dict):
            raise CheckpointError(f"not a schema-{SCHEMA} profile file")
        if data.get("machine", {}).get("key") != machine["key"]:
            raise CheckpointError("it was written for another machine")
        entry = data["workloads"].get(workload)
        return None if entry is None else Profile.from_json(machine, workload, entry)
    except (OSError, ValueError, CheckpointError) as exc:
        warnings.warn(f"profile cache {path} is unusable ({exc}); re-profiling and overwriting it", stacklevel=2)
        return None


def save_cached(profile: Profile, path: Path | None = None) -> Path:
    """Add or replace this workload's entry in the machine's cache file (atomic rename)."""
    path = path or cache_path(profile.machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    workloads: dict[str, Any] = {}
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(old, dict) and old.get("schema") == SCHEMA and old.get("machine", {}).get("key") == profile.machine["key"]:
            workloads = dict(old.get("workloads") or {})
    except (OSError, ValueError):
        pass
    workloads[profile.workload] = profile.to_json()
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"schema": SCHEMA, "machine": profile.machine, "workloads": workloads}, indent=1))
    tmp.replace(path)
    return path


# ----------------------------------------------------------------------------------- host micro-benchmarks
@dataclass(frozen=True)
class Sizes:
    """Batch sizes and repeats of the micro-benchmarks; `quick` ones keep tests short."""

    envs: tuple[int, ...] = (1, 2, 4)
    act: tuple[int, ...] = (1, 4, 16)
    insert: tuple[int, ...] = (1, 16, 64)
    repeats: int = 60
    learn_repeats: int = 40  # a gradient step is ~1 ms: 40 of them per batch size keep the fit's noise low
    worker_starts: tuple[int, ...] = (1, 2)  # worker pools started and stopped (each process imports torch: seconds)
    parallel: tuple[int, ...] = (1, 2, 3)  # busy processes run together to measure the CPU we get
    parallel_seconds: float = 0.5

    @staticmethod
    def quick() -> "Sizes":
        return Sizes(envs=(1, 2), act=(1, 4), insert=(1, 8), repeats=5, learn_repeats=2, worker_starts=(),
                     parallel=(1, 2), parallel_seconds=0.15)


def workload_key(config: Any) -> str:
    """The part of a TrainConfig that host task times depend on."""
    arch = "x".join(str(w) for w in config.net_arch)
    return (f"{config.algo}|{config.env_id}|net{arch}|batch{config.batch_size}|cap{config.buffer_size}|"
            f"per{int(config.per)}|envs{config.n_envs}|threads{config.learner_threads}")


def profile_host(config: Any, targets: Iterable[str] = HOST_TARGETS, sizes: Sizes | None = None,
                 progress: Callable[[str], None] | None = None) -> Profile:
    """Measure every task on every host target (those that cannot run here are listed with the reason)."""
    import torch

    from pearl_fpga.algos import make_algo
    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.runtime.envs import EnvGroup, env_spec
    from pearl_fpga.runtime.placement import Placement
    from pearl_fpga.runtime.policy import ActorPolicy

    targets = tuple(targets)
    sizes = sizes or Sizes()
    note = progress or (lambda _msg: None)
    prof = Profile(machine_info(), workload_key(config))
    spec = env_spec(config.env_id)
    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()

    def record(task: str, target: str, batches: Sequence[int], fn: Callable[[int], Callable[[], Any]], repeats: int) -> None:
        note(f"{task} on {target}")
        pts = [(float(n), time_call(fn(n), repeats, warmup=2 if repeats > 1 else 1)) for n in batches]
        prof.points[(task, target)] = pts
        prof.fits[(task, target)] = fit_line([p[0] for p in pts], [p[1] for p in pts])

    def record_points(task: str, target: str, pts: list[tuple[float, float]]) -> None:
        prof.points[(task, target)] = pts
        prof.fits[(task, target)] = fit_line([p[0] for p in pts], [p[1] for p in pts])

    try:
        torch.set_num_threads(1)  # actors and envs run single-threaded, one process each
        obs_pool = rng.normal(size=(64, spec.obs_dim)).astype(np.float32)
        learner = make_algo(config, spec.obs_dim, spec.action_dim, device="cpu", seed=0)
        module = learner.policy_module
        state = {k: v.clone() for k, v in module.state_dict().items()}
        env_points: list[tuple[float, float]] = []
        for target in targets:
            if target == "cuda" and not torch.cuda.is_available():
                prof.unavailable["act@cuda"] = prof.unavailable["learn@cuda"] = "torch sees no CUDA device"
                continue
            try:
                policy = ActorPolicy(module, Placement(act=target, replay="cpu", learn="cpu"), spec.discrete, obs_pool)
            except (BackendUnavailable, ImportError, ValueError) as exc:
                prof.unavailable[f"act@{target}"] = str(exc)
                continue
            note(f"actor loop (act on {target}, env step)")
            act_pts, envs = _actor_loop(config, policy, sizes.envs, sizes.repeats, EnvGroup)
            record_points("act", target, act_pts)
            env_points = env_points or envs  # the env step does not depend on the act target
            record("weight_sync", target, (1,), lambda _n, p=policy: (lambda: p.load_weights(state)), max(3, sizes.repeats // 4))
        if not env_points:
            _, env_points = _actor_loop(config, None, sizes.envs, sizes.repeats, EnvGroup)
        record_points("env_step", "cpu", env_points)

        # learner loop: sample, learn (the learner's own update, with the run's intra-op threads),
        # priority update and inserts, interleaved in that order as the runtime runs them
        torch.set_num_threads(learner_thread_count(config))
        _profile_learner(config, spec, targets, sizes, prof, record_points, rng, note)
        torch.set_num_threads(1)
        _profile_host_storage(config, spec, sizes, record, rng)
        record_points("explore", "cpu", _explore_overhead(config, spec, sizes.envs, sizes.repeats))
        if sizes.worker_starts:
            note("starting and stopping actor worker processes")
            acts = [t for t in targets if ("act", t) in prof.fits and t != "cuda"]
            for (task, target), pts in worker_pool_costs(config, sizes.worker_starts, acts or ("cpu",)).items():
                record_points(task, target, pts)
        if sizes.parallel:
            note("CPU time several processes get together")
            prof.points[("cpu_parallel", "cpu")] = cpu_parallel(sizes.parallel, sizes.parallel_seconds)
            prof.fits[("cpu_parallel", "cpu")] = Fit(0.0, 0.0, "points only")  # kept with its points in the cache
    finally:
        torch.set_num_threads(threads)
    return prof


def _actor_loop(config: Any, policy: Any, env_counts: Sequence[int], repeats: int,
                env_group: Callable[..., Any]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """The actor's loop (infer, step the envs) for each env count: mean seconds per call of act and
    of the env step, measured together so that each sees the caches the other leaves."""
    act_pts, env_pts = [], []
    rng = np.random.default_rng(1)
    for n in env_counts:
        group = env_group(config.env_id, n, seed=0)
        try:
            t_act = t_env = 0.0
            for i in range(repeats + 2):
                t0 = time.perf_counter()
                if policy is not None:
                    actions = policy.deterministic(group.obs)
                elif group.spec.discrete:
                    actions = rng.integers(0, group.spec.action_dim, size=n)
                else:
                    actions = rng.uniform(-1, 1, size=(n, group.spec.action_dim)).astype(np.float32)
                t1 = time.perf_counter()
                group.step(actions)
                t2 = time.perf_counter()
                if i >= 2:  # the first calls warm up
                    t_act, t_env = t_act + t1 - t0, t_env + t2 - t1
        finally:
            group.close()
        act_pts.append((float(n), t_act / repeats))
        env_pts.append((float(n), t_env / repeats))
    return act_pts, env_pts


def _insert_loop(config: Any, buf: Any, counts: Sequence[int], repeats: int) -> list[tuple[float, float]]:
    """Seconds per insert of n fresh transitions, each made right after stepping n envs."""
    from pearl_fpga.runtime.envs import EnvGroup

    rng = np.random.default_rng(3)
    pts = []
    for n in counts:
        group = EnvGroup(config.env_id, n, seed=1)
        try:
            total = 0.0
            for i in range(repeats + 2):
                if group.spec.discrete:
                    actions = rng.integers(0, group.spec.action_dim, size=n)
                else:
                    actions = rng.uniform(-1, 1, size=(n, group.spec.action_dim)).astype(np.float32)
                transitions, _ = group.step(actions)
                t0 = time.perf_counter()
                buf.add(transitions)
                if i >= 2:
                    total += time.perf_counter() - t0
        finally:
            group.close()
        pts.append((float(n), total / repeats))
    return pts


def _profile_learner(config: Any, spec: Any, targets: Sequence[str], sizes: Sizes, prof: Profile,
                     record_points: Callable[..., None], rng: np.random.Generator, note: Callable[[str], None]) -> None:
    """The learner's loop on each replay target (and on each learn device): per iteration one sample
    of the batch, one gradient step and one priority update (PER), as the runtime does; inserts are
    timed after env steps (where the in-process runtime makes them)."""
    import torch

    from pearl_fpga.algos import Batch, make_algo
    from pearl_fpga.runtime.placement import DEVICES

    buffer_factory = _replay_factory(config, spec)
    b = config.batch_size
    batches = sorted({max(1, b // 2), b, 2 * b})
    inserts = list(sizes.insert)
    measured: dict[str, str] = {}  # replay backend -> first target measured with it
    plans = [(t, "cpu") for t in targets if t in DEVICES["replay"]]
    if "cuda" in targets and "learn@cuda" not in prof.unavailable:
        plans.append(("cpu", "cuda"))
    for target, device in plans:
        try:
            backend_key, make = buffer_factory(target)
            reuse = device == "cpu" and backend_key in measured
            buf = None if reuse else make()
        except Exception as exc:  # noqa: BLE001 - any failure to build the buffer makes the target unusable
            prof.unavailable[f"replay@{target}"] = f"replay buffer: {exc}"
            continue
        if reuse:  # same code path (e.g. "cpu" and "cpu-kernel" share the C++ tree)
            src = measured[backend_key]
            for task in REPLAY_TASKS:
                if (task, src) in prof.fits:
                    prof.fits[(task, target)] = prof.fits[(task, src)]
                    prof.points[(task, target)] = prof.points.get((task, src), [])
            continue
        note(f"learner loop (replay on {target}, learn on {device})")
        algo = make_algo(config, spec.obs_dim, spec.action_dim, device=device, seed=0)
        fill = min(config.buffer_size, max(4 * max(batches), 2048))
        buf.add(_random_batch(rng, fill, spec))
        pts: dict[str, list[tuple[float, float]]] = {"replay_sample": [], "learn": [], "replay_update": []}
        for n in batches:
            t_s = t_l = t_u = 0.0
            for i in range(sizes.learn_repeats + 2):
                t0 = time.perf_counter()
                data = buf.sample(n)
                t1 = time.perf_counter()
                loss, td = algo.learn(Batch.from_numpy(data, device, discrete=spec.discrete))
                if device == "cuda":
                    torch.cuda.synchronize()
                t2 = time.perf_counter()
                if buf.prioritized:
                    buf.update_priorities(data["indices"], td.cpu().numpy())
                t3 = time.perf_counter()
                if i >= 2:
                    t_s, t_l, t_u = t_s + t1 - t0, t_l + t2 - t1, t_u + t3 - t2
            reps = sizes.learn_repeats
            pts["replay_sample"].append((float(n), t_s / reps))
            pts["learn"].append((float(n), t_l / reps))
            pts["replay_update"].append((float(n), t_u / reps))
        record_points("learn", device, pts["learn"])
        if device != "cpu":
            continue
        measured[backend_key] = target
        record_points("replay_sample", target, pts["replay_sample"])
        record_points("replay_insert", target, _insert_loop(config, buf, inserts, sizes.repeats))
        if buf.prioritized:
            record_points("replay_update", target, pts["replay_update"])
        else:
            prof.fits[("replay_update", target)] = Fit(0.0, 0.0, "none without PER")


def _random_batch(rng: np.random.Generator, n: int, spec: Any) -> dict[str, np.ndarray]:
    action = (rng.integers(0, spec.action_dim, size=n) if spec.discrete
              else rng.uniform(-1, 1, size=(n, spec.action_dim)).astype(np.float32))
    return {"obs": rng.normal(size=(n, spec.obs_dim)).astype(np.float32), "action": action,
            "reward": rng.normal(size=n).astype(np.float32),
            "next_obs": rng.normal(size=(n, spec.obs_dim)).astype(np.float32),
            "done": (rng.random(n) < 0.05).astype(np.float32)}


def cpu_parallel(counts: Sequence[int], seconds: float) -> list[tuple[float, float]]:
    """(P, CPU seconds P busy processes get per wall second together, relative to one process).

    On an idle machine this is min(P, cores); when others share the machine it is less, and that
    is what our actor workers and learner will get."""
    import subprocess
    import sys

    code = ("import time, sys\nd = float(sys.argv[1])\nw0 = time.perf_counter(); c0 = time.process_time()\n"
            "while time.perf_counter() - w0 < d: sum(range(1000))\n"
            "print((time.process_time() - c0) / (time.perf_counter() - w0))")
    rates = {}
    for p in counts:
        procs = [subprocess.Popen([sys.executable, "-c", code, str(seconds)], stdout=subprocess.PIPE, text=True)
                 for _ in range(p)]
        rates[p] = sum(float(proc.communicate()[0].strip() or 0.0) for proc in procs)
    one = rates.get(1) or max(rates.values()) or 1.0
    return [(float(p), r / one) for p, r in sorted(rates.items())]


def worker_pool_costs(config: Any, counts: Sequence[int], act_targets: Sequence[str] = ("cpu",),
                      poll_iterations: int = 200, corun_s: float = 1.0,
                      timeout_s: float = 120.0) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """The runtime's own worker pool, timed: for each W in `counts`, start W actor processes with
    `WorkerPool` exactly as the Trainer does, then measure

    - "worker_start": seconds until each worker has delivered its first message of transitions;
    - "worker_poll": seconds of the learner loop's bookkeeping of the pool per iteration (receive,
      grant, restart check) while the workers are up;
    - "learner_corun": how many times longer a learner iteration (sample + gradient step, the
      learner's own `learn`) takes while the W workers step their envs flat out than just before,
      with them idle; on a machine whose cores are shared (with other users, or as hyper-threads)
      it is well above 1;
    - "actor_corun": wall seconds per env step of each worker meanwhile (everything a worker does per
      step: exploration, inference, env step, copying and sending transitions), relative to the
      actor loop (exploration, inference, env step) alone in this process, on the pool's act target;
    - "worker_stop": seconds to close the pool.

    Each act target in `act_targets` gets its own pools; "actor_corun" is kept per act target, the
    others from the first. Returns (task, target) -> [(W, value)] with target "cpu" for all but
    "actor_corun". Start and stop are one-off costs every worker run pays; on a shared machine all of
    these vary with the load, so a benchmark re-measures them right before its run."""
    from pearl_fpga.algos import Batch, make_algo
    from pearl_fpga.runtime.envs import EnvGroup, env_spec
    from pearl_fpga.runtime.placement import Placement
    from pearl_fpga.runtime.policy import ActorPolicy
    from pearl_fpga.runtime.envs import calibration_batch

    import torch

    spec = env_spec(config.env_id)
    algo = make_algo(config, spec.obs_dim, spec.action_dim, device="cpu", seed=0)
    weights = {k: v.detach().cpu().clone() for k, v in algo.policy_module.state_dict().items()}
    calibration = calibration_batch(config.env_id, 0)
    rng = np.random.default_rng(5)
    data = _random_batch(rng, 4096, spec)
    b = config.batch_size

    def learner_step() -> None:
        idx = rng.integers(0, 4096, size=b)
        algo.learn(Batch.from_numpy({k: v[idx] for k, v in data.items()}, "cpu", discrete=spec.discrete))

    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    threads = torch.get_num_threads()
    learner_threads = learner_thread_count(config)
    torch.set_num_threads(learner_threads)
    try:
        for t_index, act in enumerate(act_targets):
            placement = Placement(act=act, replay="cpu", learn="cpu")
            # the actor loop alone, in this process, on the pool's act target: what "actor_corun" is relative to
            torch.set_num_threads(1)
            policy = ActorPolicy(algo.policy_module, placement, spec.discrete, calibration)
            act_pts, env_pts = _actor_loop(config, policy, (config.n_envs,), 60, EnvGroup)
            actor_alone = (act_pts[0][1] + env_pts[0][1]
                           + _explore_overhead(config, spec, (config.n_envs,), 60)[0][1]) / config.n_envs
            torch.set_num_threads(learner_threads)
            for w in counts:
                start, poll, stop, learner_corun, actor_corun = _pool_session(
                    config, w, placement, calibration, weights, learner_step, actor_alone, poll_iterations, corun_s,
                    timeout_s)
                out.setdefault(("actor_corun", act), []).append((float(w), actor_corun))
                if t_index == 0:
                    for task, value in (("worker_start", start), ("worker_poll", poll), ("worker_stop", stop),
                                        ("learner_corun", learner_corun)):
                        out.setdefault((task, "cpu"), []).append((float(w), value))
    finally:
        torch.set_num_threads(threads)
    return out


def _pool_session(config: Any, w: int, placement: Any, calibration: np.ndarray, weights: dict[str, Any],
                  learner_step: Callable[[], None], actor_alone: float, poll_iterations: int, corun_s: float,
                  timeout_s: float) -> tuple[float, float, float, float, float]:
    """One WorkerPool of w workers: (start s, poll s, stop s, learner co-run factor, actor co-run factor)."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.workers import WorkerPool

    cfg = TrainConfig.from_dict({**config.to_dict(), "workers": int(w)})
    chunk = credit_chunk(cfg)  # as the Trainer grants
    t0 = time.perf_counter()
    pool = WorkerPool(cfg, placement, calibration, weights, seed=7919, env_id=cfg.env_id)
    try:
        granted = pool.grant_upto(0, 2 * chunk * w, chunk, 0)
        given = list(pool.credit)
        while any(c >= g for c, g in zip(pool.credit, given)):  # some worker has not reported yet
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError(f"{w} actor worker(s) delivered nothing within {timeout_s:.0f} s")
            pool.receive(timeout=0.05)
            if any(not p.is_alive() for p in pool.procs):
                raise RuntimeError("an actor worker process died while starting")
        t1 = time.perf_counter()
        while any(c > 0 for c in pool.credit):  # let them use up their credit: idle from here on
            pool.receive(timeout=0.05)
        tp = time.perf_counter()
        for _ in range(poll_iterations):  # the learner loop's bookkeeping around each gradient step
            pool.receive(timeout=0.0)
            pool.grant_upto(granted, granted, chunk, 0)
            pool.restart_dead()
        poll = (time.perf_counter() - tp) / max(1, poll_iterations)
        alone = time_call(learner_step, max(5, int(corun_s / 2 / max(time_call(learner_step, 3, 1), 1e-4))))
        # workers step flat out (credit kept topped up) while this process runs learner iterations
        granted = pool.grant_upto(granted, granted + (1 << 40), chunk, 0)
        steps, learn_s, iters = 0, 0.0, 0
        c0 = time.perf_counter()
        while time.perf_counter() - c0 < corun_s:
            steps += sum(len(m["transitions"]["reward"]) for m in pool.receive(timeout=0.0))
            granted = pool.grant_upto(granted, granted + (1 << 40), chunk, 0)
            s0 = time.perf_counter()
            learner_step()
            learn_s += time.perf_counter() - s0
            iters += 1
        wall = time.perf_counter() - c0
    finally:
        t3 = time.perf_counter()
        pool.close()
        t4 = time.perf_counter()
    return t1 - t0, poll, t4 - t3, (learn_s / max(1, iters)) / alone, (wall * w / max(1, steps)) / actor_alone


def _explore_overhead(config: Any, spec: Any, counts: Sequence[int], repeats: int) -> list[tuple[float, float]]:
    """Seconds per call of the runtime's exploration step (`ActorPolicy.explore`) around the policy
    network, with the inference itself left out (it is the "act" task): the random draws, the
    epsilon mask and the merge, at the schedule's final epsilon."""
    from types import SimpleNamespace

    from pearl_fpga.runtime.policy import ActorPolicy

    rng = np.random.default_rng(4)
    step = max(config.total_steps, config.learning_starts)  # past the epsilon decay: the steady state
    pts = []
    for n in counts:
        obs = rng.normal(size=(n, spec.obs_dim)).astype(np.float32)
        if spec.discrete:
            greedy = np.zeros(n, dtype=np.int64)
        else:
            greedy = np.zeros((n, spec.action_dim), dtype=np.float32)
        stub = SimpleNamespace(discrete=spec.discrete, deterministic=lambda _obs, g=greedy: g)
        pts.append((float(n), time_call(lambda: ActorPolicy.explore(stub, obs, step, config, rng, spec.action_dim), repeats)))
    return pts


def _profile_host_storage(config: Any, spec: Any, sizes: Sizes, record: Callable[..., None], rng: np.random.Generator) -> None:
    """Host-side transition storage that stays on the CPU when an FPGA holds the sum tree: writing
    n transitions ("host_store") and gathering a batch of them ("host_gather")."""
    cap = min(config.buffer_size, 1 << 16)
    arrays = _random_batch(rng, cap, spec)

    def store(n: int) -> Callable[[], Any]:
        rows, src = rng.integers(0, cap - n, size=1)[0] + np.arange(n), _random_batch(rng, n, spec)
        return lambda: [arrays[k].__setitem__(rows, src[k]) for k in arrays]

    def gather(n: int) -> Callable[[], Any]:
        return lambda: {k: v[rng.integers(0, cap, size=n)] for k, v in arrays.items()}

    b = config.batch_size
    record("host_store", "cpu", sizes.insert, store, sizes.repeats)
    record("host_gather", "cpu", sorted({max(1, b // 2), b, 2 * b}), gather, sizes.repeats)


def _replay_factory(config: Any, spec: Any) -> Callable[[str], tuple[str, Callable[[], Any]]]:
    """target -> (backend key, maker of the runtime's own replay buffer for that target)."""
    from pearl_fpga.runtime.placement import Placement
    from pearl_fpga.runtime.replay import make_replay

    action_shape = () if spec.discrete else (spec.action_dim,)

    def factory(target: str) -> tuple[str, Callable[[], Any]]:
        placement = Placement(act="cpu", replay=target, learn="cpu")
        backends = placement.replay_backends()  # as the Trainer builds its buffer
        key = f"per-{backends}" if config.per else "uniform"  # without PER the buffer is host memory
        return key, lambda: make_replay(config, spec.obs_dim, action_shape, spec.discrete, 0, backends, placement.replay)

    return factory


# ----------------------------------------------------------------------------------- FPGA cycle models
@dataclass(frozen=True)
class CycleFit:
    """Kernel cycles of one call as c0 + c1 * batch, and where the figures come from."""

    c0: float
    c1: float
    source: str  # "spec bound", "rtl", "csynth"

    def __call__(self, batch: float) -> float:
        return self.c0 + self.c1 * batch


def mlp_layers(obs_dim: int, net_arch: Sequence[int], out_dim: int) -> list[tuple[int, int]]:
    """(n_in, m_out) of each linear layer of the policy network."""
    widths = [obs_dim, *net_arch, out_dim]
    return list(zip(widths[:-1], widths[1:]))


def mlp_cycles_spec(layers: Sequence[tuple[int, int]], lanes: int) -> CycleFit:
    """hls/mlp/SPEC.md's bound: per inference MACs / LANES + 8 L + 16 cycles (steady state)."""
    macs = sum(n * m for n, m in layers)
    return CycleFit(0.0, math.ceil(macs / lanes) + 8 * len(layers) + 16, "spec bound")


def replay_cycles_spec(depth: int) -> CycleFit:
    """hls/replay/SPEC.md's bound: B samples (or updates) in B + 4 * DEPTH + 16 cycles."""
    return CycleFit(4 * depth + 16, 1.0, "spec bound")


def replay_cycles_rtl(capacity: int, fanout: int, batches: Sequence[int] = (8, 64)) -> dict[str, CycleFit]:
    """Cycle counts of the reference RTL (the "rtl" backend), fitted per operation."""
    from pearl_fpga.kernels import ReplaySampler

    s = ReplaySampler(capacity, fanout=fanout, backend="rtl")
    rng = np.random.default_rng(0)
    upd, smp = [], []
    for n in batches:
        s.update(rng.integers(0, capacity, size=n), rng.random(n) + 0.1)
        upd.append(float(s.last_cycles))
        s.sample(n, rng)
        smp.append(float(s.last_cycles))
    out = {}
    for op, ys in (("update", upd), ("sample", smp)):
        f = fit_line(list(batches), ys)
        out[op] = CycleFit(f.a, f.b, "rtl")
    return out


def mlp_cycles_rtl(obs_dim: int, net_arch: Sequence[int], out_dim: int, discrete: bool, lanes: int, max_width: int,
                   batches: Sequence[int] = (1, 8)) -> CycleFit:
    """Cycle counts of the MLP kernel's reference RTL (the "rtl" backend, built with the board's
    lanes and width) on a network of the workload's shape, fitted per call."""
    import torch

    from pearl_fpga.algos.common import mlp
    from pearl_fpga.backends.mlp_rtl import MLPRTLBackend
    from pearl_fpga.kernels import MLPInfer

    torch.manual_seed(0)
    module = mlp(obs_dim, list(net_arch), out_dim, tanh_head=not discrete)
    obs = np.random.default_rng(0).normal(size=(max(batches), obs_dim)).astype(np.float32)
    kernel = MLPInfer.from_torch(module, backend=MLPRTLBackend(lanes=lanes, max_width=max_width), calibration=obs)
    cycles = []
    for n in batches:
        kernel(obs[:n])
        cycles.append(float(kernel.last_cycles))
    f = fit_line(list(batches), cycles)
    return CycleFit(f.a, f.b, "rtl")


def tree_depth(capacity: int, fanout: int) -> int:
    depth, span = 1, fanout
    while span < capacity:
        depth, span = depth + 1, span * fanout
    return depth


def _csynth_report(board: Any, kernel: str, dirs: Sequence[str | Path], notes: list[str]) -> Any:
    """The board's csynth report of `kernel` when one exists and reads cleanly, else None (a
    malformed one warns, naming the file, and the caller keeps its other cycle source)."""
    from pearl_fpga.planner.csynth import CsynthError, find_report, parse_csynth, same_part

    path = find_report(board.name, kernel, dirs)
    if path is None:
        return None
    try:
        report = parse_csynth(path)
    except CsynthError as exc:
        warnings.warn(f"ignoring csynth report: {exc}", stacklevel=3)
        notes.append(f"{kernel}: csynth report unusable ({exc})")
        return None
    if report.part and not same_part(report.part, board.part):
        warnings.warn(f"ignoring csynth report {path}: synthesized for part {report.part}, "
                      f"but {board.name} has {board.part}", stacklevel=3)
        notes.append(f"{kernel}: csynth report {path} is for part {report.part}, not {board.part}: not used")
        return None
    if not report.timing_met:
        notes.append(f"{kernel}: {path} misses the {report.target_period_ns:g} ns target "
                     f"(estimated {report.estimated_period_ns:g} ns): timed at the estimated clock")
    if abs(report.clock_mhz - board.clock_mhz) > 0.01 * board.clock_mhz:
        notes.append(f"{kernel}: {path} was synthesized for {report.clock_mhz:.1f} MHz, the catalog says "
                     f"{board.clock_mhz:g} MHz: using the report's clock")
    return report


def fpga_fits(board: Any, config: Any, obs_dim: int, out_dim: int, discrete: bool, host: Mapping[tuple[str, str], Fit],
              target: str = "fpga-emu", cycles: str = "spec", csynth_dirs: Sequence[str | Path] = ()
              ) -> tuple[dict[tuple[str, str], Fit], dict[str, str], list[str]]:
    """Modelled fits of every task `target` (a board from the catalog) can run.

    Each time = kernel cycles / clock + host <-> kernel transfers (catalog link model) + the host
    work that stays on the CPU (measured on this machine: the driver call, transition storage).
    Cycles and clock come from the board's Vitis csynth report of the kernel when one exists
    (pearl_fpga.planner.csynth; searched where `make hls` puts it and in `csynth_dirs`), else from
    the rtl backend (cycles="rtl") or the bound the kernel's SPEC.md guarantees, at the catalog clock.
    Returns (fits, unavailable "role@target" -> reason, notes on the cycle sources).
    """
    from pearl_fpga.planner.csynth import CsynthError, mlp_cycles, replay_cycles

    fits: dict[tuple[str, str], Fit] = {}
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    f_hz = board.clock_mhz * 1e6
    src = f"cycle model ({{}}) @ {board.name}"

    # ---- act: the MLP kernel
    layers = mlp_layers(obs_dim, config.net_arch, out_dim)
    mk = board.kernels["mlp"]
    widest = max(max(n, m) for n, m in layers)
    host_act = host.get(("act", "cpu-kernel")) or host.get(("act", "cpu"))
    host_sync = host.get(("weight_sync", "cpu-kernel")) or host.get(("weight_sync", "cpu"))
    if widest > mk["max_width"] or len(layers) > mk["max_layers"]:
        unavailable[f"act@{target}"] = (f"network {obs_dim}-{'-'.join(map(str, config.net_arch))}-{out_dim} does not fit "
                                        f"{board.name}'s MLP kernel (max_width {mk['max_width']}, max_layers {mk['max_layers']})")
    elif host_act is None or host_sync is None:
        unavailable[f"act@{target}"] = "no host measurement of act to base the driver overhead on"
    else:
        cyc = mlp_cycles_spec(layers, mk["lanes"])
        f_act = f_hz
        report = _csynth_report(board, "mlp", csynth_dirs, notes)
        if report is not None:
            try:
                cyc, f_act = CycleFit(0.0, mlp_cycles(report, layers, mk), "csynth"), report.clock_mhz * 1e6
            except CsynthError as exc:
                warnings.warn(f"ignoring csynth report: {exc}", stacklevel=2)
                notes.append(f"act: csynth report unusable ({exc})")
                report = None
        if report is None and cycles == "rtl":
            try:
                cyc = mlp_cycles_rtl(obs_dim, config.net_arch, out_dim, discrete, mk["lanes"], mk["max_width"])
            except Exception as exc:  # noqa: BLE001 - no Verilator / backend: say so, keep the spec bound
                notes.append(f"act: rtl cycle counts unavailable ({exc}); using the spec bound")
        notes.append(f"act: {cyc.c0:.0f} + {cyc.c1:.0f} cycles per inference ({cyc.source}"
                     f"{', ' + str(report.path) if report is not None else ''}, {mk['lanes']} lanes) "
                     f"at {f_act / 1e6:g} MHz")
        in_bytes, out_bytes = 2 * obs_dim, 2 * (out_dim + (1 if discrete else 0))
        # per call: driver overhead (the host fit's constant) + two DMA latencies; per observation:
        # kernel cycles + bytes over the link
        a = host_act.a + 2 * board.transfer_seconds(0) + cyc.c0 / f_act
        b = cyc.c1 / f_act + (in_bytes + out_bytes) / (board.link_bandwidth_gbps * 1e9)
        fits[("act", target)] = Fit(a, b, src.format(cyc.source))
        weight_words = sum(n * m + 2 * m + 4 for n, m in layers) + 1
        fits[("weight_sync", target)] = Fit(host_sync.a + board.transfer_seconds(2 * weight_words) + weight_words / f_act,
                                            0.0, src.format("load stream, 1 word/cycle"))

    # ---- replay: the sum tree (only with PER; a uniform buffer is host memory wherever "replay" is placed)
    rk = board.kernels["replay"]
    if not config.per:
        for task in REPLAY_TASKS:
            if (task, "cpu") in host:
                fits[(task, target)] = host[(task, "cpu")]
    elif config.buffer_size > rk["capacity"]:
        unavailable[f"replay@{target}"] = (f"buffer_size {config.buffer_size} exceeds {board.name}'s replay kernel "
                                           f"capacity {rk['capacity']}")
    elif ("host_store", "cpu") not in host or ("host_gather", "cpu") not in host:
        unavailable[f"replay@{target}"] = "no host measurement of transition storage"
    else:
        depth = tree_depth(config.buffer_size, rk["fanout"])
        ops = {"update": replay_cycles_spec(depth), "sample": replay_cycles_spec(depth)}
        report = _csynth_report(board, "replay", csynth_dirs, notes)
        if report is not None:
            try:
                c0, c1 = replay_cycles(report)
                # the synthesized tree holds the board's capacity; the run's buffer only uses part of it
                ops = {"update": CycleFit(c0, c1, "csynth"), "sample": CycleFit(c0, c1, "csynth")}
                f_hz = report.clock_mhz * 1e6
            except CsynthError as exc:
                warnings.warn(f"ignoring csynth report: {exc}", stacklevel=2)
                notes.append(f"replay: csynth report unusable ({exc})")
                report = None
        if report is None and cycles == "rtl":
            try:
                ops = replay_cycles_rtl(config.buffer_size, rk["fanout"])
            except Exception as exc:  # noqa: BLE001 - no Verilator / backend: say so, keep the spec bound
                notes.append(f"replay: rtl cycle counts unavailable ({exc}); using the spec bound")
        notes.append(f"replay: depth {depth}, sample {ops['sample'].c0:.0f} + {ops['sample'].c1:.2f}/item cycles "
                     f"({ops['sample'].source}{', ' + str(report.path) if report is not None else ''}) "
                     f"at {f_hz / 1e6:g} MHz")
        word = 16 / (board.link_bandwidth_gbps * 1e9)  # one 128-bit command or response
        lat = board.transfer_seconds(0)
        store, gather = host[("host_store", "cpu")], host[("host_gather", "cpu")]
        up, sm = ops["update"], ops["sample"]
        fits[("replay_insert", target)] = Fit(store.a + lat + up.c0 / f_hz, store.b + up.c1 / f_hz + word, src.format(up.source))
        fits[("replay_update", target)] = Fit(lat + up.c0 / f_hz, up.c1 / f_hz + word, src.format(up.source))
        fits[("replay_sample", target)] = Fit(gather.a + 2 * lat + sm.c0 / f_hz, gather.b + sm.c1 / f_hz + 2 * word,
                                              src.format(sm.source))
    return fits, unavailable, notes


# ----------------------------------------------------------------------------------- load on a shared machine
def learner_reference(config: Any, repeats: int = 20) -> float:
    """Seconds per learner iteration (sample + gradient step at the run's batch) right now: compared
    with the same figure from the profile it says how much slower or faster this shared machine is
    than when it was profiled."""
    import torch

    threads = torch.get_num_threads()
    step = _learner_step(config, np.random.default_rng(2))
    try:
        torch.set_num_threads(config.learner_threads or measured_thread_count(step))
        return time_call(step, repeats)
    finally:
        torch.set_num_threads(threads)


def learner_thread_count(config: Any) -> int:
    """The learner's torch threads: the configured count, or (learner_threads = 0) the count the
    runtime's adaptive choice settles on at the present load."""
    if config.learner_threads > 0:
        return int(config.learner_threads)
    import torch

    threads = torch.get_num_threads()
    try:
        return measured_thread_count(_learner_step(config, np.random.default_rng(3)))
    finally:
        torch.set_num_threads(threads)


def _learner_step(config: Any, rng: np.random.Generator) -> Callable[[], None]:
    """One learner update on random batches of the run's shapes (a fresh CPU learner)."""
    from pearl_fpga.algos import Batch, make_algo
    from pearl_fpga.runtime.envs import env_spec

    spec = env_spec(config.env_id)
    algo = make_algo(config, spec.obs_dim, spec.action_dim, device="cpu", seed=0)
    data = _random_batch(rng, 4096, spec)
    b = config.batch_size

    def step() -> None:
        idx = rng.integers(0, 4096, size=b)
        algo.learn(Batch.from_numpy({k: v[idx] for k, v in data.items()}, "cpu", discrete=spec.discrete))

    return step


def load_factor(config: Any, profile: Profile, repeats: int = 20) -> float:
    """How much slower (> 1) or faster (< 1) the CPU runs now than when `profile` was measured,
    from the learner iteration both timed; 1.0 when the profile lacks it."""
    learn, sample = profile.fits.get(("learn", "cpu")), profile.fits.get(("replay_sample", "cpu"))
    if learn is None:
        return 1.0
    then = learn(config.batch_size) + (sample(config.batch_size) if sample is not None else 0.0)
    now = learner_reference(config, repeats)
    return float(min(max(now / then, 0.2), 5.0)) if then > 0 else 1.0
