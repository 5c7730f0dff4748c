"""Actor worker processes: each steps its own group of envs with its own policy copy on the act
device and streams transitions to the replay manager (the trainer's process) in batches.

Flow control is by credit: the trainer grants each worker a number of env steps (plus the global
env-step index they start at, which drives the exploration schedule); a worker steps only while it
holds credit, so actors never run more than `config.actor_lag` steps ahead of the learner. Weights
arrive as state dicts and are loaded without blocking the env loop (re-quantized for kernel actors).
A worker that dies (crash, kill) is restarted with a fresh seed; its unreported credit is returned.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from pearl_fpga.runtime.schedule import MESSAGE_STEPS
from pearl_fpga.runtime.placement import Placement


class WorkerPool:
    """`config.workers` actor processes with credit-based flow control."""

    def __init__(self, config: Any, placement: Placement, calibration: np.ndarray, weights: dict[str, Any],
                 seed: int, env_id: str) -> None:
        self.config = config
        self.placement = placement
        self.calibration = calibration
        self.seed = seed
        self.env_id = env_id
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
        for i in range(self.n):
            self._start(i)

    def _start(self, i: int) -> None:
        parent, child = self.ctx.Pipe()
        spec = {"env_id": self.env_id, "n_envs": self.config.n_envs, "seed": self.seed + 104_729 * i + 7 * self.starts[i],
                "config": self.config.to_dict(), "placement": str(self.placement),
                "calibration": self.calibration}
        proc = self.ctx.Process(target=worker_main, args=(child, spec, self.shared, self.version), daemon=True,
                                name=f"pearl-actor-{i}")
        proc.start()
        child.close()
        self.procs[i], self.conns[i], self.credit[i] = proc, parent, 0
        self.starts[i] += 1

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def grant_upto(self, granted: int, limit: int, chunk: int, collected: int) -> int:
        """Give workers credit (chunks of env steps) while the total granted stays <= limit (rounded
        up to whole env groups). Returns the new total granted."""
        for i in range(self.n):
            while granted < limit and self.credit[i] < 2 * chunk:
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

    def receive(self, timeout: float) -> list[dict[str, Any]]:
        """Transition batches that arrived (waits up to `timeout` s for the first one)."""
        out = []
        ready = wait([c for c in self.conns], timeout=timeout)
        for conn in ready:
            i = self.conns.index(conn)
            while True:
                try:
                    if not conn.poll():
                        break
                    msg = conn.recv()
                except (EOFError, OSError):
                    break
                if msg[0] == "data":
                    data = msg[1]
                    self.credit[i] -= len(data["transitions"]["reward"])
                    out.append(data)
        return out

    def restart_dead(self) -> tuple[int, int]:
        """Restart workers that exited; returns (how many, credit they had not reported)."""
        restarted = lost = 0
        for i, proc in enumerate(self.procs):
            if not proc.is_alive():
                lost += self.credit[i]
                self.conns[i].close()
                proc.join(timeout=1)
                self._start(i)
                restarted += 1
        self.restarts += restarted
        return restarted, lost

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
    """Body of an actor process: step envs while holding credit, stream transitions back."""
    import torch

    from pearl_fpga.algos.common import mlp
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.envs import EnvGroup
    from pearl_fpga.runtime.placement import parse_placement
    from pearl_fpga.runtime.policy import ActorPolicy
    from pearl_fpga.runtime.timers import TaskTimer

    from pearl_fpga.runtime.threads import limit_blas_threads

    torch.set_num_threads(1)
    limit_blas_threads()
    config = TrainConfig.from_dict(spec["config"])
    envs = EnvGroup(spec["env_id"], spec["n_envs"], spec["seed"])
    es = envs.spec
    module = mlp(es.obs_dim, config.net_arch, es.action_dim, tanh_head=not es.discrete)
    with version.get_lock():
        module.load_state_dict(shared)
        seen = version.value
    policy = ActorPolicy(module, parse_placement(spec["placement"]), es.discrete, spec["calibration"])
    rng = np.random.default_rng(spec["seed"] + 1)
    credits: list[list[int]] = []  # [remaining, next global step]
    send_every = MESSAGE_STEPS
    try:
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
                    policy.load_weights(local)
            parts: list[dict[str, np.ndarray]] = []
            finished_all: list[tuple[float, int]] = []
            steps = 0
            while credits and steps < send_every and not conn.poll():
                remaining, step = credits[0]
                with timer.time("act"):
                    actions = policy.explore(envs.obs, step, config, rng, es.action_dim)
                with timer.time("env_step"):
                    transitions, finished = envs.step(actions)
                parts.append({k: np.array(v, copy=True) for k, v in transitions.items()})
                finished_all += finished
                n = len(actions)
                steps += n
                credits[0] = [remaining - n, step + n]
                if credits[0][0] <= 0:
                    credits.pop(0)
            if parts:
                merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
                conn.send(("data", {"transitions": merged, "finished": finished_all,
                                    "seconds": dict(timer.seconds), "calls": dict(timer.calls)}))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    finally:
        envs.close()
