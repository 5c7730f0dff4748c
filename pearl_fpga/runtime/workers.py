"""Actor worker processes: each steps its own group of envs with its own policy copy on the act
device and streams transitions to the replay manager (the trainer's process) in batches.

Flow control is by credit: the trainer grants each worker a number of env steps (plus the global
env-step index they start at, which drives the exploration schedule); a worker steps only while it
holds credit, so actors never run more than `config.actor_lag` steps ahead of the learner. Weights
arrive as state dicts and are loaded without blocking the env loop (re-quantized for kernel actors).
A worker that dies (crash, kill) is restarted with a fresh seed: the data it sent before dying is kept,
and its unreported credit is returned at once (not when its restart is due), so that the steps granted
never run ahead of the steps taken while it waits for its backoff.
Restarts back off (RESTART_BACKOFF_S, doubling) and are limited: a worker that dies RESTART_LIMIT times
within RESTART_WINDOW_S fails the same way every time (a bad env id, a missing module), so the run stops
with the worker's last error (WorkerCrashLoop) instead of restarting it forever.
"""

from __future__ import annotations

import signal
import time
import traceback
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import EngineError
from pearl_fpga.runtime.actor import ActorFailed, Rollout
from pearl_fpga.runtime.placement import Placement
from pearl_fpga.runtime.schedule import MESSAGE_STEPS

RESTART_LIMIT = 5
"""Restarts of one worker within RESTART_WINDOW_S after which the run stops (WorkerCrashLoop)."""
RESTART_WINDOW_S = 120.0
RESTART_BACKOFF_S = 0.5
"""Wait before a worker's first restart in the window; doubled for each further one (at most 16 s)."""
START_TRIES = 6
"""Attempts to start a worker process when the system answers EAGAIN (waits 0.05 s, doubling)."""


class WorkerCrashLoop(EngineError):
    """An actor worker keeps dying: the run stops with its last error. Raised at a step boundary, so the
    learner's state is whole and the Trainer checkpoints it."""

    at_boundary = True


class WorkerPool:
    """`config.workers` actor processes with credit-based flow control."""

    def __init__(self, config: TrainConfig, placement: Placement, calibration: np.ndarray, weights: dict[str, Any],
                 seed: int) -> None:
        self.config = config
        self.placement = placement
        self.calibration = calibration
        self.seed = seed
        import torch
        import torch.multiprocessing as tmp

        self.ctx = tmp.get_context("spawn")  # torch and OpenMP are not fork-safe
        # Weights travel through shared memory (a version counter says when they changed), so a
        # broadcast is one memcpy and never waits for a busy actor.
        self.shared = {k: v.detach().cpu().clone().share_memory_() for k, v in weights.items()}
        self.version = self.ctx.Value("q", 0)
        del torch
        self.n = config.workers
        self.procs: list[Any] = [None] * self.n
        self.conns: list[Connection] = [None] * self.n  # type: ignore[list-item]
        self.credit = [0] * self.n  # granted, not yet reported
        self.starts = [0] * self.n
        self.restarts = 0
        self.errors: list[str | None] = [None] * self.n  # the last error a worker reported before dying
        self.restart_times: list[list[float]] = [[] for _ in range(self.n)]
        self.down_since: list[float | None] = [None] * self.n  # dead, waiting for its backoff
        self.salvaged: list[Rollout] = []  # sent by a worker just before it died: returned by receive()
        for i in range(self.n):
            self._start(i)

    def _start(self, i: int) -> None:
        parent, child = self.ctx.Pipe()
        spec = {"seed": self.seed + 104_729 * i + 7 * self.starts[i], "config": self.config.to_dict(),
                "placement": str(self.placement), "calibration": self.calibration}
        proc = self.ctx.Process(target=worker_main, args=(child, spec, self.shared, self.version), daemon=True,
                                name=f"pearl-actor-{i}")
        for attempt in range(START_TRIES):
            try:
                proc.start()
                break
            except BlockingIOError as exc:
                # EAGAIN from fork/spawn: the user's process or thread limit, often full only for a moment
                # on a shared host; wait and try again rather than die with a raw traceback
                if attempt == START_TRIES - 1:
                    child.close()
                    parent.close()
                    raise EngineError(
                        f"cannot start actor worker {i}: the system refused a new process {START_TRIES} times "
                        f"({exc.strerror or exc}; the process or thread limit of this user, ulimit -u, is "
                        "reached). Use fewer --workers, end other processes, or raise the limit") from exc
                time.sleep(0.05 * 2 ** attempt)
        child.close()
        self.procs[i], self.conns[i], self.credit[i] = proc, parent, 0
        self.starts[i] += 1

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def grant_upto(self, granted: int, limit: int, chunk: int) -> int:
        """Give workers credit (chunks of env steps) while the total granted stays <= limit (rounded
        up to whole env groups). Returns the new total granted."""
        for i in range(self.n):
            while self.down_since[i] is None and granted < limit and self.credit[i] < 2 * chunk:
                c = min(chunk, limit - granted)
                c = -(-c // self.config.n_envs) * self.config.n_envs
                try:
                    self.conns[i].send(("credit", c, granted))
                except (BrokenPipeError, OSError):
                    break  # dead: restart_dead() handles it
                self.credit[i] += c
                granted += c
        return granted

    def broadcast(self, weights: dict[str, Any]) -> None:
        """Send new policy weights to every worker (and keep them for restarts)."""
        with self.version.get_lock():
            for k, v in weights.items():
                self.shared[k].copy_(v)
            self.version.value += 1

    def receive(self, timeout: float) -> list[Rollout]:
        """Transition batches that arrived (waits up to `timeout` s for the first one)."""
        out, self.salvaged = self.salvaged, []
        live = [c for i, c in enumerate(self.conns) if self.down_since[i] is None]
        if not live:
            time.sleep(timeout)
            return out
        if out:
            timeout = 0.0
        for conn in wait(live, timeout=timeout):
            out += self._drain(self.conns.index(conn))  # type: ignore[arg-type]  # one of self.conns
        return out

    def _drain(self, i: int) -> list[Rollout]:
        out = []
        conn = self.conns[i]
        while True:
            try:
                if not conn.poll():
                    break
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if msg[0] == "data":
                self.credit[i] -= msg[1].n
                out.append(msg[1])
            elif msg[0] == "error":
                self.errors[i] = msg[1]
        return out

    def restart_dead(self) -> tuple[int, int]:
        """Restart workers that exited, after their backoff; returns (how many were restarted, credit
        of the workers found dead in this call that they had not reported: the caller takes it back
        whether or not the restart is due yet). Raises WorkerCrashLoop when one died RESTART_LIMIT times
        within RESTART_WINDOW_S."""
        restarted = lost = 0
        now = time.monotonic()
        for i, proc in enumerate(self.procs):
            if self.down_since[i] is None:
                if proc.is_alive():
                    continue
                self.salvaged += self._drain(i)  # data sent before it died (returned by receive), its error
                lost += self.credit[i]
                self.credit[i] = 0
                proc.join(timeout=1)
                self.down_since[i] = now
                recent = [t for t in self.restart_times[i] if now - t < RESTART_WINDOW_S]
                self.restart_times[i] = recent
                if len(recent) >= RESTART_LIMIT:
                    self._give_up(i, proc.exitcode, len(recent))
            down_since = self.down_since[i]
            assert down_since is not None  # set above, when it was found dead
            if now - down_since < min(RESTART_BACKOFF_S * 2 ** (len(self.restart_times[i]) - 1), 16.0) \
                    and self.restart_times[i]:
                continue  # backing off: it died soon after its last restart
            self.conns[i].close()
            self.restart_times[i].append(now)
            self.down_since[i] = None
            self._start(i)
            restarted += 1
        self.restarts += restarted
        return restarted, lost

    def _give_up(self, i: int, exitcode: int | None, restarts: int) -> None:
        last = self.errors[i] or f"it exited with code {exitcode} without reporting an error"
        raise WorkerCrashLoop(
            f"actor worker {i} died {restarts + 1} times within {RESTART_WINDOW_S:.0f} s (restarted {restarts} times); "
            f"its last error: {last}. The failure repeats, so the run stops instead of restarting the worker forever. "
            "Fix the cause; to see it in the trainer's process, run with --workers 0 (a custom env must be "
            "registered in an importable module, e.g. --env my_pkg.envs:Corridor-v0, so that worker processes "
            "can create it)")

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + 5
        for proc in self.procs:
            proc.join(timeout=max(deadline - time.monotonic(), 0.1))
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1)
        for conn in self.conns:
            conn.close()


def worker_main(conn: Connection, spec: dict[str, Any], shared: dict[str, Any], version: Any) -> None:
    """Body of an actor process: run the ActorLoop while holding credit, stream its transitions back."""
    import torch

    from pearl_fpga.runtime.actor import ActorLoop
    from pearl_fpga.runtime.placement import parse_placement
    from pearl_fpga.runtime.threads import limit_blas_threads
    from pearl_fpga.runtime.timers import TaskTimer

    # Ctrl-C reaches the whole process group: the trainer stops the workers itself (a worker that
    # exited on SIGINT would be restarted, and counted towards its crash limit).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    limit_blas_threads()
    actor = None
    try:
        config = TrainConfig.from_dict(spec["config"])
        with version.get_lock():
            actor = ActorLoop.build(config, parse_placement(spec["placement"]), spec["calibration"], spec["seed"],
                                    weights=shared)
            seen = version.value
        credits: list[list[int]] = []  # [remaining, next global step]
        while True:
            # Block only when out of credit; otherwise just drain what is there.
            while not credits or conn.poll():
                msg = conn.recv()
                if msg[0] == "stop":
                    return
                if msg[0] == "credit":
                    credits.append([msg[1], msg[2]])
            timer = TaskTimer()
            if version.value != seen:
                with timer.time("weight_sync"):
                    with version.get_lock():
                        local = {k: v.clone() for k, v in shared.items()}
                        seen = version.value
                    actor.set_weights(local)
            remaining, step = credits[0]
            out = actor.run(min(remaining, MESSAGE_STEPS), step, timer)
            credits[0] = [remaining - out.n, step + out.n]
            if credits[0][0] <= 0:
                credits.pop(0)
            conn.send(("data", out))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    except Exception as exc:
        # the trainer shows this if the worker keeps failing; the steps taken before an env error are kept
        cause: BaseException = exc
        if isinstance(exc, ActorFailed):
            cause = exc.cause
        where = traceback.extract_tb(cause.__traceback__)[-1]
        try:
            if isinstance(exc, ActorFailed) and exc.partial.n:
                conn.send(("data", exc.partial))
            conn.send(("error", f"{type(cause).__name__}: {cause} (at {where.filename}:{where.lineno})"))
        except (BrokenPipeError, OSError):
            pass
        raise
    finally:
        if actor is not None:
            actor.envs.close()
