"""An env actor of the Ray engine (Ape-X): steps its own vectorized env group with its own policy copy
(torch, or the MLP kernel re-quantized at every weight sync), inserts its transitions into its replay
shard in one call per credit grant, and reports counts and timings to the learner.

A plain class: the Ray engine wraps it with `ray.remote`, so this module imports without Ray.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np


def initial_td_errors(module: Any, t: dict[str, np.ndarray], gamma: float) -> np.ndarray:
    """Ape-X initial priorities for DQN: |r + gamma (1 - done) max_a Q(s', a) - Q(s, a)| from the
    actor's own Q-network (it has no target network)."""
    import torch

    with torch.no_grad():
        q = module(torch.as_tensor(t["obs"], dtype=torch.float32))
        q_next = module(torch.as_tensor(t["next_obs"], dtype=torch.float32)).max(dim=1).values.numpy()
    q_taken = q.gather(1, torch.as_tensor(np.asarray(t["action"]).reshape(-1, 1), dtype=torch.int64)).squeeze(1).numpy()
    target = t["reward"] + gamma * (1.0 - t["done"]) * q_next
    return np.abs(target - q_taken).astype(np.float64)


class EnvActor:
    """See the module docstring. `shard` is the Ray handle of the replay shard it feeds."""

    def __init__(self, index: int, spec: dict[str, Any], shard: Any) -> None:
        import torch

        from pearl_fpga.algos.common import mlp
        from pearl_fpga.config import TrainConfig
        from pearl_fpga.runtime.envs import EnvGroup
        from pearl_fpga.runtime.placement import parse_placement
        from pearl_fpga.runtime.policy import ActorPolicy
        from pearl_fpga.runtime.threads import limit_blas_threads

        torch.set_num_threads(1)
        limit_blas_threads()
        self.index = index
        self.shard = shard
        self.config = TrainConfig.from_dict(spec["config"])
        # a restarted actor (Ray re-runs this constructor) must not replay its predecessor's episodes
        seed = int(spec["seed"]) + 1_000_003 * self._incarnation()
        self.envs = EnvGroup(self.config.env_id, self.config.n_envs, seed)
        es = self.envs.spec
        module = mlp(es.obs_dim, self.config.net_arch, es.action_dim, tanh_head=not es.discrete)
        self.policy = ActorPolicy(module, parse_placement(spec["placement"]), es.discrete, spec["calibration"])
        self.rng = np.random.default_rng(seed + 1)
        self.version = -1

    @staticmethod
    def _incarnation() -> int:
        try:
            import ray

            return int(ray.get_runtime_context().was_current_actor_reconstructed) * (os.getpid() % 100_003)
        except Exception:  # not in a Ray actor (direct use in tests)
            return 0

    def ping(self) -> int:
        return os.getpid()

    def sync(self, weights: list[Any], version: int) -> int:
        """Load the weights behind a reference now (the broadcast benchmark times this)."""
        import ray

        if version != self.version:
            self.policy.load_weights(ray.get(weights[0]))
            self.version = version
        return version

    def run(self, credit: int, start_step: int, weights: list[Any], version: int) -> dict[str, Any]:
        """Step `credit` env steps from global step `start_step`, insert them into the shard, report."""
        import ray

        from pearl_fpga.runtime.timers import TaskTimer

        timer = TaskTimer()
        began = time.perf_counter()
        if version != self.version:
            with timer.time("weight_sync"):
                self.policy.load_weights(ray.get(weights[0]))
                self.version = version
        parts: list[dict[str, np.ndarray]] = []
        finished_all: list[tuple[float, int]] = []
        es, step, done = self.envs.spec, start_step, 0
        while done < credit:
            with timer.time("act"):
                actions = self.policy.explore(self.envs.obs, step, self.config, self.rng, es.action_dim)
            with timer.time("env_step"):
                transitions, finished = self.envs.step(actions)
            parts.append({k: np.array(v, copy=True) for k, v in transitions.items()})
            finished_all += finished
            done += len(actions)
            step += len(actions)
        merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        td = None
        if self.config.actor_priorities:
            with timer.time("act"):
                td = initial_td_errors(self.policy.module, merged, self.config.gamma)
        with timer.time("replay_insert"):
            status = ray.get(self.shard.add.remote(merged, td))
        return {"n": done, "finished": finished_all, "seconds": dict(timer.seconds), "calls": dict(timer.calls),
                "status": status, "elapsed": time.perf_counter() - began}
