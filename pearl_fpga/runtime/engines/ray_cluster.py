"""Connecting to Ray and checking what the cluster has, with errors that say what to do.

- address "" starts a local Ray instance on this host (loopback only, no dashboard, usage stats off);
- "auto" joins the cluster that `ray start --head` started on this node;
- "host:port" joins that cluster's head (reachability is checked first, within a timeout, so a wrong
  address fails in seconds instead of hanging in Ray's retries).
A process already connected to Ray (ray.init called by the user or a test) keeps its connection.

The console keeps the run's own progress: Ray's workers' stdout and stderr stay in Ray's session logs
(log_to_driver off; /tmp/ray/session_latest/logs on the node by default), and Ray's driver-side Python
logging (start-up banners, warnings) and Ray's Python warnings go to `ray.log` in the run's log
directory (`route_ray_logs`), and so do the messages Ray's raylets publish to the driver (a task retried,
a worker killed); without a log directory, only Ray's errors reach the console. An actor's error is
raised as an EngineError that names the actor and the error (`actor_error`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pearl_fpga.errors import BackendUnavailable, EngineError

CONNECT_TIMEOUT_S = 10.0
RAY_EXTRA_HINT = "install the ray extra: pip install 'pearl_fpga[ray]' (make venv installs it)"


def import_ray() -> Any:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError as exc:
        raise BackendUnavailable(f"engine 'ray' needs the ray package, which is not installed: {RAY_EXTRA_HINT}") from exc
    return ray


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise EngineError unless a TCP connection to host:port opens within `timeout` seconds."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise EngineError(f"--ray-address {address!r} is not host:port (e.g. 10.0.0.5:6379), 'auto' or empty")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise EngineError(f"cannot reach the Ray cluster at {address} within {timeout:.0f} s ({exc}); start it there with "
                          "`ray start --head --port PORT`, check the address, or omit --ray-address for a local "
                          "Ray instance") from exc


RAY_LOG_NAME = "ray.log"
"""Ray's driver-side log lines and warnings of a run, in its log directory."""
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SESSION_LOGS = "/tmp/ray/session_latest/logs"
"""Where Ray keeps its processes' logs (raylet, GCS, each worker's stdout and stderr) by default."""


class _RayLogFile(logging.FileHandler):
    """The handler route_ray_logs adds with a log directory (a later run's replaces it)."""


class _RayErrors(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler route_ray_logs adds without one: Ray's errors on stderr."""


def route_ray_logs(logdir: Path | None) -> Path | None:
    """Ray's Python logging and warnings to `logdir`/ray.log (returned), not the console; without a log
    directory, Ray's errors only, on stderr. Call after importing ray (its import installs a console handler)."""
    logger = logging.getLogger("ray")
    for handler in list(logger.handlers):
        # a console handler (Ray's import installs one on stderr), or an earlier run's file; a file of the user's stays
        if not isinstance(handler, logging.FileHandler) or isinstance(handler, _RayLogFile):
            logger.removeHandler(handler)
            handler.close()
    logger.propagate = False
    logger.setLevel(logging.INFO)
    path = Path(logdir) / RAY_LOG_NAME if logdir is not None else None
    route: logging.Handler
    if path is not None:
        route = _RayLogFile(path, encoding="utf-8")
        route.setLevel(logging.INFO)
    else:
        route = _RayErrors(sys.stderr)
        route.setLevel(logging.ERROR)
    route.setFormatter(logging.Formatter(LOG_FORMAT))
    logger.addHandler(route)
    if path is not None:
        logger.info("Ray's driver-side log of this run; Ray's processes (raylet, GCS, workers' stdout and stderr) "
                    "log on each node under its session directory, by default %s", SESSION_LOGS)
    _route_ray_warnings()
    _route_raylet_messages()
    return path


def _route_raylet_messages() -> None:
    """The messages Ray's raylets publish to the driver (a task retried, a worker killed), which a thread of
    Ray's driver prints to stdout whatever log_to_driver says, go to the "ray" logger. Ray has no setting
    for it, so its printing function is wrapped; where a Ray version lacks it they print as before."""
    import importlib

    worker = importlib.import_module("ray._private.worker")
    original = getattr(worker, "print_to_stdstream", None)
    if original is None or getattr(original, "_pearl_ray_route", False):
        return

    def routed(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if data.get("pid") == "raylet":
            for line in data.get("lines", []):
                logging.getLogger("ray").warning("(raylet) %s", line)
        else:
            original(data, *args, **kwargs)

    routed._pearl_ray_route = True  # type: ignore[attr-defined]
    setattr(worker, "print_to_stdstream", routed)  # noqa: B010 -- a module attribute mypy cannot see


def _route_ray_warnings() -> None:
    """Python warnings raised in Ray's own modules go to the "ray" logger; every other one as before."""
    if getattr(warnings.showwarning, "_pearl_ray_route", False):
        return
    ray_dir = str(Path(import_ray().__file__).resolve().parent)
    previous = warnings.showwarning

    def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        if str(Path(filename).resolve()).startswith(ray_dir):
            logging.getLogger("ray").warning("%s: %s (%s:%d)", category.__name__, message, filename, lineno)
        else:
            previous(message, category, filename, lineno, file, line)

    show._pearl_ray_route = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def actor_error(exc: BaseException, what: str, ray_log: Path | None) -> EngineError:
    """The EngineError of an exception a Ray task raised (a RayTaskError) in `what` (e.g. "env actor 1"): it
    names the error; the remote traceback goes to Ray's log (`ray_log`, the run's ray.log, or stderr)."""
    from pearl_fpga.runtime.actor import ActorFailed

    cause = getattr(exc, "cause", None)
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # Ray colours the remote frames' headers
    if isinstance(cause, ActorFailed):  # the env's own error, already named ("EnvBroke: ...")
        error = str(cause)
    else:
        error = f"{type(cause).__name__}: {cause}" if cause is not None else traceback.strip().splitlines()[-1]
    logging.getLogger("ray").error("Ray %s failed:\n%s", what, traceback)
    where = f"in {ray_log}" if ray_log is not None else "above"
    return EngineError(f"Ray {what} failed: {error} (its traceback is {where})")


def connect(address: str, num_cpus: int | None = None, logdir: Path | None = None) -> bool:
    """Connect this process to Ray; returns True when it started a local instance (to shut down later).
    Ray's driver-side logs go to `logdir`/ray.log (route_ray_logs), unless this process was connected already."""
    if address in ("", "local") and "ray" not in sys.modules:
        # Ray's switch for single-host use: node addresses on loopback, so nothing listens on the network
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():  # the caller's connection, and its logging, as they are
        return False
    route_ray_logs(logdir)
    # Ray keeps the "ray" logger's handlers (route_ray_logs' file) when it configures logging, and clears them when not
    quiet = {"include_dashboard": False, "log_to_driver": False, "configure_logging": True,
             "logging_level": logging.INFO, "logging_format": LOG_FORMAT}
    if address in ("", "local"):
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, _node_ip_address="127.0.0.1", **quiet)
        return True
    if address != "auto":
        check_reachable(address[len("ray://"):] if address.startswith("ray://") else address)
    try:
        ray.init(address=address, **{k: v for k, v in quiet.items() if k != "include_dashboard"})
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "on this node (none was found: run `ray start --head` first)" if address == "auto" else f"at {address}"
        raise EngineError(f"cannot join the Ray cluster {where}: {exc}") from exc
    return False


def as_options(resources: dict[str, float]) -> dict[str, Any]:
    """Ray actor options for a resource request: CPU and GPU as num_cpus/num_gpus, the rest custom."""
    opts: dict[str, Any] = {"num_cpus": float(resources.get("CPU", 0.0))}
    if resources.get("GPU"):
        opts["num_gpus"] = float(resources["GPU"])
    custom = {k: float(v) for k, v in resources.items() if k not in ("CPU", "GPU")}
    if custom:
        opts["resources"] = custom
    return opts


def check_resources(requests: Sequence[tuple[str, int, dict[str, float]]], cluster: dict[str, float]) -> None:
    """Raise EngineError when the cluster lacks a resource the actors ask for, naming it and the fix.
    `requests`: (what, how many, resources each)."""
    need: dict[str, float] = {}
    for _, count, resources in requests:
        for name, amount in resources.items():
            need[name] = need.get(name, 0.0) + count * amount
    short = {name: amount for name, amount in need.items() if amount > cluster.get(name, 0.0) + 1e-9}
    if not short:
        return
    asked = "; ".join(f"{count} {what} x {resources}" for what, count, resources in requests)
    have = ", ".join(f"{k}={v:g}" for k, v in sorted(cluster.items()) if k in need or k in ("CPU", "GPU")) or "nothing"
    missing = ", ".join(f"{name} {amount:g} (has {cluster.get(name, 0.0):g})" for name, amount in short.items())
    raise EngineError(f"the Ray cluster lacks resources: needs {missing} for {asked}; it has {have}. Add nodes "
                      "with them (`ray start --address HEAD --resources '{\"fpga\": 1}'`), or lower actors, "
                      "replay_shards, actor_resources or shard_resources (fractional CPU such as 0.25 is fine)")


# Sizing by default: an env actor asks for up to one CPU, a replay shard for half an actor's share; below
# MIN_ACTOR_CPU an actor would mostly wait for its core, so explicit counts that need less fail instead.
MAX_ACTOR_CPU = 1.0
SHARD_SHARE = 0.5
MIN_ACTOR_CPU = 0.1


def size_to_cluster(actors: int, shards: int, actor_resources: dict[str, float], shard_resources: dict[str, float],
                    cluster: dict[str, float]) -> tuple[dict[str, float], dict[str, float], str]:
    """The resources of each env actor and each replay shard, and a line saying how they were chosen.

    Resources given explicitly are kept as they are (check_resources judges them). Empty ones share the
    CPUs the cluster has left after the explicit ones: each actor min(1, its share), each shard half an
    actor's, in hundredths of a CPU (Ray's fractional resources), so that the defaults fit a 2-core host."""
    explicit_cpu = (actors * actor_resources.get("CPU", 0.0) if actor_resources else 0.0) + (
        shards * shard_resources.get("CPU", 0.0) if shard_resources else 0.0)
    units = (actors if not actor_resources else 0) + (shards * SHARD_SHARE if not shard_resources else 0)
    if units == 0:
        return actor_resources, shard_resources, "resources as configured"
    free = cluster.get("CPU", 0.0) - explicit_cpu
    share = min(MAX_ACTOR_CPU, int(max(free, 0.0) / units * 100) / 100)
    if share < MIN_ACTOR_CPU:
        share = MIN_ACTOR_CPU  # too little: check_resources names the shortfall and the fix
    actor = actor_resources or {"CPU": share}
    shard = shard_resources or {"CPU": int(share * SHARD_SHARE * 100) / 100}
    parts = [f"{actors} env actor{'s' if actors != 1 else ''} x {actor['CPU']:g} CPU" if not actor_resources else "",
             f"{shards} replay shard{'s' if shards != 1 else ''} x {shard['CPU']:g} CPU" if not shard_resources else ""]
    return actor, shard, (f"sized to the cluster's {cluster.get('CPU', 0.0):g} CPUs: "
                          + ", ".join(p for p in parts if p))


def nodes() -> list[dict[str, Any]]:
    """The live nodes of the connected cluster: address and resources (for the planner)."""
    ray = import_ray()
    return [{"node_id": n["NodeID"], "address": n["NodeManagerAddress"],
             "resources": {k: float(v) for k, v in n["Resources"].items() if not k.startswith("node:")}}
            for n in ray.nodes() if n.get("Alive")]
