"""The `processes` engine: `config.workers` actor processes on this host (runtime.workers.WorkerPool)
step their envs concurrently with the learner and stream transitions to the learner's replay.

Actors may run at most `config.actor_lag` env steps ahead of the point where the learner is, so the
data every gradient step sees matches the sequential schedule in amount; only the actors' policy can
be up to one weight sync older than in the inline run.
"""

from __future__ import annotations

from typing import Any

from pearl_fpga.runtime.actor import Rollout
from pearl_fpga.runtime.engines.base import RunSetup
from pearl_fpga.runtime.schedule import credit_chunk
from pearl_fpga.runtime.workers import WorkerPool


class ProcessEngine:
    name = "processes"
    lockstep = False
    refill_steps = 0

    def __init__(self, setup: RunSetup) -> None:
        self.setup = setup
        self.replay = setup.make_replay()
        self.pool: WorkerPool | None = None
        self.granted = 0
        self.restarts = 0

    def start(self, env_steps: int, weights: dict[str, Any]) -> None:
        s = self.setup
        self.pool = WorkerPool(s.config, s.placement, s.calibration, weights, seed=s.actor_seed(env_steps))
        self.granted = env_steps

    def sample(self, upto: int, wait: bool) -> list[Rollout]:
        assert self.pool is not None, "start() first"
        pool = self.pool
        self.granted = pool.grant_upto(self.granted, upto, credit_chunk(self.setup.config))
        out = pool.receive(timeout=0.05 if wait else 0.0)
        restarted, lost = pool.restart_dead()
        self.granted -= lost  # a dead worker's unreported credit, returned even while its restart waits
        if restarted:
            self.restarts += restarted
            self.setup.note(f"actor worker died; restarted ({self.restarts} so far)")
        return out

    def set_weights(self, weights: dict[str, Any]) -> None:
        if self.pool is not None:
            self.pool.broadcast({k: v.detach().cpu() for k, v in weights.items()})

    def faults(self) -> dict[str, int]:
        return {"actor_restarts": self.restarts}

    @property
    def pids(self) -> list[int]:
        """Process ids of the running actor workers (empty between train() calls)."""
        return self.pool.pids if self.pool is not None else []

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def close(self) -> None:
        self.stop()
