"""The dispatcher: measure, model and choose the task-to-device assignment.

    >>> from pearl_fpga.config import TrainConfig
    >>> from pearl_fpga.planner import choose_placement
    >>> plan = choose_placement("dqn", "CartPole-v1", TrainConfig.preset("dqn"))
    >>> plan.placement, plan.workers          # e.g. ("act=cpu-kernel,replay=cpu,learn=cpu", 1)

Modules: devices (discovery); profile (fits, the per-machine cache), host_probe (micro-benchmarks of
the runtime's own code), loops (the actor and learner loops as profiled), worker_probe (worker-pool
costs) and ray_probe (Ray transport costs); fpga_model (the FPGA targets' model), hls_schedule (a
stated model of the shipped HLS schedule) and csynth (Vitis HLS csynth reports as a cycle source);
power (measured or nominal watts); model (pure throughput/power model), tables (what the model reads:
targets, profile, FPGA fits); assign (search under constraints), ray_plan (the Ray dimension) and plan
(choose_placement and the Plan it returns).
"""

from __future__ import annotations

from pearl_fpga.planner.assign import PlanError
from pearl_fpga.planner.plan import Plan, choose_placement

__all__ = ["Plan", "PlanError", "choose_placement"]
