"""Where a learner step's time goes (`bench learner --profile`): torch.profiler over a few steps of each
algorithm's learner (float32, and bfloat16 where the CPU runs it) in its serial schedule (every op on the calling
thread; a GEMM's intra-op threads work inside its op) at each torch thread count, with the native programs'
pieces timed by the native module (`time_pieces`), the time sorted into:

- "gemm": the matrix products (aten::mm, addmm, bmm, matmul and their oneDNN forms, also where a native
  program calls them, and the fused steps' native GEMM tasks, `pearl_fpga::gemms`), whose FLOPs are the step's
  work, so their own GFLOP/s says how close the products alone come to the GEMM peak of the precision;
- "adam": the optimizer's ops, torch's or the native clip + Adam;
- "native passes": every other piece of the native programs (bias and ReLU passes, thin layers, losses,
  bfloat16 narrowing and widening, a squashed Gaussian's passes; each by name in "native");
- "other torch ops": every other torch op (casts, copies, sums, the small (B, 1) pieces);
- "outside": the step's wall time that none of these accounts for: Python, recording the programs, and
  waiting.

Each category is self time (an op's children excluded), so the five add up to the wall time.
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


def profile_step(cfg: Any, threads: int, steps: int = STEPS, precision: str = "float32") -> dict[str, Any]:
    """Seconds per step of each category for `cfg`'s learner in `precision` ("float32" or "bfloat16") in the serial
    schedule at `threads` torch threads, its native pieces by name, and the GFLOP/s of its products alone."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from pearl_fpga.algos.fused import native_learner
    from pearl_fpga.bench.learner import _learner, step_flops
    from pearl_fpga.config import TrainConfig

    serial = TrainConfig.from_dict({**cfg.to_dict(), "update_schedule": "serial"}) \
        if getattr(cfg, "update_schedule", None) is not None else cfg
    learner, batch = _learner(serial, "cpu-bf16" if precision == "bfloat16" else "cpu")
    native = native_learner()
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for _ in range(3):
            learner.update(batch)
        NativeGemms.profiled = True
        if native is not None:
            native.time_pieces(True)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                learner.update(batch)
            wall = time.perf_counter() - t0
    finally:
        pieces = native.time_pieces(False) if native is not None else {}
        NativeGemms.profiled = False
        torch.set_num_threads(old)
    per_step = {"gemm": 0.0, "adam": 0.0, "native passes": 0.0, "other torch ops": 0.0}
    for event in prof.events():
        per_step[category(event.name)] += event.self_cpu_time_total * 1e-6 / steps
    by_piece = {name: seconds / steps for name, (_, seconds) in sorted(pieces.items(), key=lambda kv: -kv[1][1])}
    for name, seconds in by_piece.items():
        per_step["adam" if name == "clip_adam" else "native passes"] += seconds
    step_s = wall / steps
    per_step["outside"] = max(0.0, step_s - sum(per_step.values()))
    flops = step_flops(cfg)
    return {"threads": threads, "precision": precision, "step_s": step_s, "seconds": per_step, "native": by_piece,
            "gemm_gflops": flops / per_step["gemm"] / 1e9 if per_step["gemm"] > 0 else None}
