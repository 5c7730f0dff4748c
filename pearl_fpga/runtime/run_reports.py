"""What a deep training run tells about itself (the Trainer's reporting API, apart from its loop):
SB3's `predict`, `evaluate` of the best kept policy, counters (`stats`), faults, per-task times and
the device each task ran on."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pearl_fpga.runtime.envs import rollout
from pearl_fpga.runtime.stats import EvalResult, Stats
from pearl_fpga.runtime.update_schedule import schedule_report
from pearl_fpga.runtime.vocabulary import TASKS


class RunReports:
    """Mixed into pearl_fpga.Trainer; reads the attributes its loop keeps."""

    config: Any
    spec: Any
    placement: Any
    seed: int
    env_steps: int
    grad_steps: int
    episodes: int
    episode_log: list[tuple[int, float, int]]
    best: dict[str, Any] | None
    algo: Any
    actor: Any
    eval_policy: Any
    engine: Any
    replay: Any
    timer: Any
    losses: Any
    learner_threads: Any
    update_schedule: Any
    predict_rng: np.random.Generator
    _faults_before: dict[str, int]
    _run: dict[str, Any] | None
    _predict_weights_at: int | None

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[np.ndarray, Any]:
        """Stable-Baselines3's `predict`: the current policy's action(s) for one observation or a batch,
        in the env's action space (a batch in, a batch out), and the recurrent state (always None here).
        On the act device: the quantized kernel for kernel placements. deterministic=False acts as SB3's
        predict does (the actor head's `stochastic`: e.g. DQN epsilon-greedy at the current epsilon, DDPG
        and TD3 deterministic, a stochastic policy a sample of itself), from a generator of predict()'s own."""
        del episode_start  # SB3's argument for recurrent policies; these are not
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        batch = obs.reshape(1, -1) if single else obs
        if batch.ndim != 2 or batch.shape[1] != self.spec.obs_dim:
            raise ValueError(f"predict: expected observations of shape ({self.spec.obs_dim},) or (n, {self.spec.obs_dim}) "
                             f"for {self.config.env_id}, got {obs.shape}")
        if self._predict_weights_at != self.grad_steps:
            self.eval_policy.load_weights(self.algo.policy_module.state_dict())
            self._predict_weights_at = self.grad_steps
        if deterministic:
            actions = self.eval_policy.deterministic(batch)
        else:
            actions = self.eval_policy.head.stochastic(self.eval_policy, batch, self.env_steps, self.predict_rng)
        if not self.spec.discrete:
            actions = np.stack([self.actor.envs.to_env_action(a) for a in actions])
        return (actions[0] if single else actions), state

    def evaluate(self, episodes: int = 20, seed: int | None = None) -> EvalResult:
        """Mean return of the best policy kept by periodic evaluation (else the current one), on
        `episodes` fresh episodes, deterministic, on the act device (the quantized kernel policy
        when the actor is a kernel)."""
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
        self._predict_weights_at = None  # eval_policy gets other weights here
        if self.best is not None:
            self.eval_policy.load_weights(self.best["weights"])
            step, which = int(self.best["step"]), "best"
        else:
            self.eval_policy.load_weights(self.algo.policy_module.state_dict())
            step, which = self.env_steps, "current"
        returns = rollout(self.config.env_id, self.actor.envs, self.eval_policy, episodes,
                          self.seed + 2_000_000 if seed is None else seed)
        return EvalResult(float(np.mean(returns)), float(np.std(returns)), returns, step, which)

    def stats(self) -> Stats:
        """Current counters and recent figures."""
        run = self._run
        elapsed = (run.get("stop", time.perf_counter()) - run["start"]) if run else 0.0
        recent = [r for _, r, _ in self.episode_log[-20:]]
        faults = self.faults()
        return Stats(
            env_steps=self.env_steps, grad_steps=self.grad_steps, episodes=self.episodes,
            target_steps=run["end"] if run else self.env_steps, elapsed=elapsed,
            recent_return=float(np.mean(recent)) if recent else float("nan"), loss=self.losses.report(),
            loss_known=self.losses.known,
            best_eval=float(self.best["mean"]) if self.best else float("nan"),
            worker_restarts=faults["actor_restarts"], shard_restarts=faults["shard_restarts"],
            transitions_lost=faults["transitions_lost"],
            env_steps_run=self.env_steps - run["start_steps"] if run else 0,
            grad_steps_run=self.grad_steps - run.get("start_grad_steps", 0) if run else 0,
        )

    def faults(self) -> dict[str, int]:
        """Actor restarts, replay-shard restarts and the transitions lost with them, over the whole run."""
        out = {"actor_restarts": 0, "shard_restarts": 0, "transitions_lost": 0, "nonfinite_dropped": 0}
        for source in (self._faults_before, self.engine.faults(),
                       {"nonfinite_dropped": getattr(self.replay, "dropped", 0)}):
            for key, value in source.items():
                out[key] = out.get(key, 0) + int(value)
        return out

    @property
    def worker_restarts(self) -> int:
        """Actor restarts (worker processes or Ray actors) over the whole run."""
        return self.faults()["actor_restarts"]

    def task_summary(self) -> dict[str, float]:
        """Seconds per env step of each task (summed over processes) and env steps/s of the last train()."""
        run = self._run
        steps = max(self.env_steps - (run["start_steps"] if run else 0), 1)
        out = {key: self.timer.seconds.get(key, 0.0) / steps for key in TASKS}
        elapsed = (run.get("stop", time.perf_counter()) - run["start"]) if run else 0.0
        out["env_steps_per_s"] = steps / elapsed if elapsed > 0 else 0.0
        return out

    def learner_threads_report(self) -> str:
        """The learner's torch thread count: fixed, or the adaptive choice with its probe times."""
        if self.learner_threads is None:
            return f"{self.config.learner_threads} (fixed)"
        return self.learner_threads.describe()

    def update_schedule_report(self) -> str | None:
        """DDPG's and TD3's update schedule: the measured choice with its probe times, or the fixed one;
        None for a learner without one."""
        return schedule_report(self.algo, self.update_schedule)

    def device_of(self, task: str) -> str:
        """Device a task ran on (for the summary table)."""
        if task == "act":
            return str(self.placement.act)
        if task.startswith("replay"):
            return str(self.placement.replay) if self.config.per else "cpu (host memory)"
        if task == "learn":
            return str(self.placement.learn)
        if task == "weight_sync":
            return f"{self.placement.learn}->{self.placement.act}"
        return "cpu"
