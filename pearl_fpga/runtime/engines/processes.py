"""The `processes` engine: `config.workers` actor processes on this host (runtime.workers.WorkerPool)
step their envs concurrently with the learner and stream transitions to the learner's replay.

Actors may run at most `config.actor_lag` env steps ahead of the point where the learner is, so the
data every gradient step sees matches the sequential schedule in amount; only the actors' policy can
be up to one weight sync older than in the inline run.
"""

from __future__ import annotations

from typing import Any

from pearl_fpga.runtime.engines.base import LearnerHost
from pearl_fpga.runtime.schedule import allowed_gradient_steps, credit_chunk, needed_env_steps


def credit_limit(config: Any, grad_steps: int, end: int) -> int:
    """Env steps the actors may have been granted when the learner has run `grad_steps` steps."""
    if config.gradient_steps <= 0:
        return end
    return min(end, max(needed_env_steps(config, grad_steps), config.learning_starts) + config.actor_lag)


class ProcessEngine:
    name = "processes"

    def __init__(self) -> None:
        self.pool: Any = None
        self.restarts = 0

    def make_replay(self, host: LearnerHost, build: Any) -> Any:
        return build(0)

    def run(self, host: LearnerHost, end: int) -> None:
        from pearl_fpga.runtime.workers import WorkerPool

        cfg = host.config
        self.pool = pool = WorkerPool(cfg, host.placement, host.calibration, host.policy_weights(),
                                      seed=host.seed + 7919 * (1 + host.env_steps), env_id=cfg.env_id)
        granted = host.env_steps
        chunk = credit_chunk(cfg)
        while host.env_steps < end:
            granted = pool.grant_upto(granted, credit_limit(cfg, host.grad_steps, end), chunk, host.env_steps)
            can_learn = allowed_gradient_steps(cfg, host.env_steps) > host.grad_steps
            for msg in pool.receive(timeout=0.0 if can_learn else 0.05):
                with host.timer.time("replay_insert"):
                    host.replay.add(msg["transitions"])
                host.timer.merge(msg["seconds"], msg["calls"])
                n = len(msg["transitions"]["reward"])
                host.record_env_steps(n, msg["finished"])
                host.periodic(n)
            restarted, lost = pool.restart_dead()
            if restarted:
                self.restarts += restarted
                granted -= lost
                if host.logger is not None:
                    host.logger.message(f"actor worker died; restarted ({self.restarts} so far)")
            if allowed_gradient_steps(cfg, host.env_steps) > host.grad_steps:
                host.learn_until(host.grad_steps + 1)
        host.learn_until(allowed_gradient_steps(cfg, host.env_steps))

    def broadcast(self, host: LearnerHost, weights: dict[str, Any]) -> None:
        if self.pool is not None:
            self.pool.broadcast({k: v.detach().cpu() for k, v in weights.items()})
        else:
            host.policy.load_weights(weights)

    def report(self) -> dict[str, int]:
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
