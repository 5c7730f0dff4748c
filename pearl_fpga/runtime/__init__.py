"""The training runtime: placement of tasks on devices, envs, actor policy and worker processes,
replay manager buffers, per-task timers. `pearl_fpga.trainer.Trainer` drives them."""

from pearl_fpga.runtime.placement import Placement, default_placement, parse_placement

__all__ = ["Placement", "default_placement", "parse_placement"]
