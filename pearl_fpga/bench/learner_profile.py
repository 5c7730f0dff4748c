"""Where a learner step's time goes (`bench learner --profile`): torch.profiler over a few steps of each
algorithm's float32 learner in its serial schedule (every op on the calling thread; a GEMM's intra-op
threads work inside its op) at each torch thread count, the time sorted into:

- "gemm": the matrix products (aten::mm, addmm, bmm, matmul and their oneDNN forms, and the fused
  steps' native GEMM tasks, `pearl_fpga::gemms`), whose FLOPs are the step's work, so their own GFLOP/s
  says how close the products alone come to the GEMM peak;
- "adam": the optimizer's ops;
- "other torch ops": every other op (ReLU and its mask, casts, copies, sums, the loss);
- "outside torch ops": the step's wall time that no torch op accounts for: Python, the fused step's
  native calls (bias, ReLU, thin layers and Adam of pearl_fpga._learner_native), and waiting.

Each category is an op's self time (its children excluded), so the four add up to the wall time.
"""

from __future__ import annotations

import time
from typing import Any

from pearl_fpga.algos.fused import GEMMS_EVENT, NativeGemms

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::_addmm_activation", "mkldnn::", "onednn::",
            GEMMS_EVENT)
STEPS = 20


def category(name: str) -> str:
    """The category of a profiler event's name (see the module docstring)."""
    if name.startswith(GEMM_OPS):
        return "gemm"
    if "adam" in name.lower():
        return "adam"
    return "other torch ops"


def profile_step(cfg: Any, threads: int, steps: int = STEPS) -> dict[str, Any]:
    """Seconds per step of each category for `cfg`'s learner in the serial schedule at `threads` torch
    threads, and the GFLOP/s of its products alone."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from pearl_fpga.bench.learner import _learner, step_flops
    from pearl_fpga.config import TrainConfig

    serial = TrainConfig.from_dict({**cfg.to_dict(), "update_schedule": "serial"}) \
        if getattr(cfg, "update_schedule", None) is not None else cfg
    learner, batch = _learner(serial)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(3):
            learner.update(batch)
        NativeGemms.profiled = True
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                learner.update(batch)
            wall = time.perf_counter() - t0
    finally:
        NativeGemms.profiled = False
        torch.set_num_threads(old)
    per_step = {"gemm": 0.0, "adam": 0.0, "other torch ops": 0.0}
    for event in prof.events():
        per_step[category(event.name)] += event.self_cpu_time_total * 1e-6 / steps
    step_s = wall / steps
    per_step["outside torch ops"] = max(0.0, step_s - sum(per_step.values()))
    flops = step_flops(cfg)
    return {"threads": threads, "step_s": step_s, "seconds": per_step,
            "gemm_gflops": flops / per_step["gemm"] / 1e9 if per_step["gemm"] > 0 else None}
