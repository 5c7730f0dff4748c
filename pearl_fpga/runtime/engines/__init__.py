"""Execution engines: where a training run's actors and replay live, behind one small interface.

The distribution policy is data (TrainConfig.engine, .workers, .actors, .replay_shards, .actor_resources,
.shard_resources, .actor_priorities, .ray_address), separate from the algorithm: the DQN/DDPG code, the
update-to-data schedule (runtime.schedule) and the learner are the same in every engine. An engine
returns data (Engine in engines/base.py: start, sample, set_weights, replay, faults, stop, close); the
Trainer runs the one training loop over it. Every engine's actors are runtime.actor.ActorLoop.

- `inline`: acting and learning alternate in this process, in SB3's exact order (deterministic);
- `processes`: `workers` actor processes on this host stream transitions to the learner's replay;
- `ray`: `actors` env actors and `replay_shards` replay shards as Ray actors, on one host or a Ray
  cluster (Ape-X style); see engines/ray_engine.py.
"""

from __future__ import annotations

from pearl_fpga.runtime.actor import ActorLoop
from pearl_fpga.runtime.engines.base import ENGINES, Engine, RunSetup, resolve_engine


def make_engine(setup: RunSetup, actor: ActorLoop) -> Engine:
    """The engine `setup.config` names (`resolve_engine`) with its replay, actors not yet started;
    `actor`: the learner process's own ActorLoop (the inline engine acts with it)."""
    name = resolve_engine(setup.config)
    if name == "inline":
        from pearl_fpga.runtime.engines.inline import InlineEngine

        return InlineEngine(setup, actor)
    if name == "processes":
        from pearl_fpga.runtime.engines.processes import ProcessEngine

        return ProcessEngine(setup)
    from pearl_fpga.runtime.engines.ray_engine import RayEngine

    return RayEngine(setup)


__all__ = ["ENGINES", "Engine", "RunSetup", "make_engine", "resolve_engine"]
