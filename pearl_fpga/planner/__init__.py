"""The dispatcher: measure, model and choose the task-to-device assignment.

    >>> from pearl_fpga.config import TrainConfig
    >>> from pearl_fpga.planner import choose_placement
    >>> plan = choose_placement("dqn", "CartPole-v1", TrainConfig.preset("dqn"))
    >>> plan.placement, plan.workers          # e.g. ("act=cpu-kernel,replay=cpu,learn=cpu", 1)

Modules, in the order the planner uses them:

- devices: what this machine has (CPU, CUDA, boards) and the targets it offers;
- host_probe: the runtime's own code timed on the host targets, and the learner's speed now against
  the profile's; worker_probe: the worker pool's start, polling, stop and co-run costs, and the CPU
  several processes get together; loops: the actor and learner loops as both probes time them;
- profile: the fits of those measurements and their per-machine cache;
- fpga_model: the FPGA targets' model; hls_schedule: a stated model of the shipped HLS schedule;
  csynth: Vitis HLS csynth reports as a cycle source;
- power: measured or nominal watts;
- tables: what the model reads (targets, profile, FPGA fits); model: the pure throughput and power model;
- assign: the search under constraints; plan: choose_placement and the Plan it returns;
- ray_probe: the Ray transport's cost per call and per byte; ray_plan: the Ray dimension (env actors
  per node).

The benchmarks that check the planner against measured runs live in pearl_fpga.bench (plan, ray).
"""

from __future__ import annotations

from pearl_fpga.planner.assign import PlanError
from pearl_fpga.planner.plan import Plan, choose_placement

__all__ = ["Plan", "PlanError", "choose_placement"]
