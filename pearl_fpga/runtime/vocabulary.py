"""The words of placement, with one meaning each, everywhere (code, CLI, docs):

- **role**: a part of the off-policy protocol that is placed as one: `act` (policy inference), `replay`
  (the replay manager's buffer), `learn` (the gradient step). A placement maps each role to a target.
- **task**: one of the seven timed pieces of work of an off-policy step. Each belongs to a role
  (ROLE_TASKS) except `env_step`, which always runs on the host CPU.
- **target**: a placement token naming how and where a role runs: `cpu` (torch), `cpu-kernel` (the
  kernels' C++ build), `cuda`, `fpga` (a board), `fpga-emu` (the kernels' C++ build computes, the
  planner models a catalog board's time).
- **device**: a physical resource that targets share: the CPU cores, `cuda:N`, `fpga:N`.
- **engine**: where the roles' work runs as processes: `inline` (one process), `processes` (actor
  processes on this host), `ray` (Ray actors and replay shards on one host or a cluster); see
  runtime/engines. A placement says which device, an engine says which process and node.
"""

ROLES = ("act", "replay", "learn")
TASKS = ("env_step", "act", "replay_insert", "replay_sample", "replay_update", "learn", "weight_sync")
STAGES: dict[str, tuple[str, ...]] = {
    "actor": ("env_step", "act"),  # each actor (runtime/actor.py ActorLoop) steps its envs and acts
    "learner": ("replay_insert", "replay_sample", "replay_update", "learn", "weight_sync"),  # the Trainer's process
}
"""The processes of the `processes` and `ray` engines and the tasks each runs: the actors (an ActorLoop in
a worker process, runtime/workers.py, or a Ray env actor, engines/env_actor.py) act and step envs; the
Trainer's process runs the rest."""
ROLE_TASKS: dict[str, tuple[str, ...]] = {
    "act": ("act", "weight_sync"),
    "replay": ("replay_insert", "replay_sample", "replay_update"),
    "learn": ("learn",),
}
