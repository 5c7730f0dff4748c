"""Execution engines: where a training run's actors and replay live, behind one small interface.

The distribution policy is data (TrainConfig.engine, .workers, .actors, .replay_shards, .actor_resources,
.shard_resources, .actor_priorities, .ray_address), separate from the algorithm: the DQN/DDPG code, the
update-to-data schedule (runtime.schedule) and the learner are the same in every engine.

- `inline`: acting and learning alternate in this process, in SB3's exact order (deterministic);
- `processes`: `workers` actor processes on this host stream transitions to the learner's replay;
- `ray`: `actors` env actors and `replay_shards` replay shards as Ray actors, on one host or a Ray
  cluster (Ape-X style); see engines/ray_engine.py.
"""

from __future__ import annotations

from typing import Any

from pearl_fpga.runtime.engines.base import ENGINES, Engine, LearnerHost, resolve_engine


def make_engine(config: Any) -> Engine:
    """The engine `config` names (`resolve_engine`), not yet started."""
    name = resolve_engine(config)
    if name == "inline":
        from pearl_fpga.runtime.engines.inline import InlineEngine

        return InlineEngine()
    if name == "processes":
        from pearl_fpga.runtime.engines.processes import ProcessEngine

        return ProcessEngine()
    from pearl_fpga.runtime.engines.ray_engine import RayEngine

    return RayEngine(config)


__all__ = ["ENGINES", "Engine", "LearnerHost", "make_engine", "resolve_engine"]
