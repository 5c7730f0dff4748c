"""An env actor of the Ray engine (Ape-X): an ActorLoop (runtime.actor: its own vectorized env group and
policy copy, torch or the MLP kernel re-quantized at every weight sync) that inserts its transitions into
its replay shard in one call per credit grant, and reports counts and timings to the learner.

A plain class: the Ray engine wraps it with `ray.remote`, so this module imports without Ray.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from pearl_fpga.replay.transitions import Transitions


def initial_td_errors(module: Any, t: Transitions, gamma: float) -> np.ndarray:
    """Ape-X initial priorities for DQN: |r + gamma (1 - done) max_a Q(s', a) - Q(s, a)| from the
    actor's own Q-network (it has no target network)."""
    import torch

    with torch.no_grad():
        q = module(torch.as_tensor(t.obs, dtype=torch.float32))
        q_next = module(torch.as_tensor(t.next_obs, dtype=torch.float32)).max(dim=1).values.numpy()
    q_taken = q.gather(1, torch.as_tensor(np.asarray(t.action).reshape(-1, 1), dtype=torch.int64)).squeeze(1).numpy()
    target = t.reward + gamma * (1.0 - t.done) * q_next
    return np.abs(target - q_taken).astype(np.float64)


class EnvActor:
    """See the module docstring. `shard` is the Ray handle of the replay shard it feeds."""

    def __init__(self, index: int, spec: dict[str, Any], shard: Any) -> None:
        import torch

        from pearl_fpga.config import TrainConfig
        from pearl_fpga.runtime.actor import ActorLoop
        from pearl_fpga.runtime.placement import parse_placement
        from pearl_fpga.runtime.threads import limit_blas_threads

        torch.set_num_threads(1)
        limit_blas_threads()
        self.index = index
        # the shard's name (the engine's: a restart-safe argument) or its handle (benchmarks, tests)
        self.shard = self._named(shard) if isinstance(shard, str) else shard
        self.config = TrainConfig.from_dict(spec["config"])
        # a restarted actor (Ray re-runs this constructor) must not replay its predecessor's episodes
        seed = int(spec["seed"]) + 1_000_003 * self._incarnation()
        self.actor = ActorLoop.build(self.config, parse_placement(spec["placement"]), spec["calibration"], seed)
        self.version = -1

    @staticmethod
    def _named(name: str) -> Any:
        import ray

        return ray.get_actor(name)

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
            self.actor.set_weights(ray.get(weights[0]))
            self.version = version
        return version

    def run(self, credit: int, start_step: int, weights: list[Any], version: int) -> dict[str, Any]:
        """Step `credit` env steps from global step `start_step`, insert them into the shard, report
        counts, timings and the shard's status."""
        import ray

        from pearl_fpga.runtime.timers import TaskTimer

        timer = TaskTimer()
        began = time.perf_counter()
        if version != self.version:
            with timer.time("weight_sync"):
                self.actor.set_weights(ray.get(weights[0]))
                self.version = version
        out = self.actor.run(credit, start_step, timer)
        assert out.transitions is not None
        td = None
        if self.config.actor_priorities:
            with timer.time("act"):
                td = initial_td_errors(self.actor.policy.module, out.transitions, self.config.gamma)
        with timer.time("replay_insert"):
            status = ray.get(self.shard.add.remote(out.transitions, td))
        return {"n": out.n, "finished": out.finished, "seconds": dict(timer.seconds), "calls": dict(timer.calls),
                "status": status, "elapsed": time.perf_counter() - began}
