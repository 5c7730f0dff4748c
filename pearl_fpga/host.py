"""What this process runs on: the cores it may use, the CPU's identity (the keys of cached probes) and the
vector and matrix features that pick BLAS and native code paths (bfloat16 GEMMs among them)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def thread_candidates(cores: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to `cores`, and `cores` itself."""
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    counts.append(cores)
    return tuple(counts)


@functools.lru_cache(maxsize=1)
def cpu_identity() -> dict[str, Any]:
    """The CPU's model and its vector and matrix features (the flags that pick BLAS code paths)."""
    import platform

    model, flags = platform.processor() or platform.machine(), [platform.machine()]
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = sorted(f for f in value.split() if f.startswith(("avx", "amx", "fma", "sse4", "f16c")))
                break
    except OSError:
        pass
    return {"cpu": model, "features": flags}


BF16_SUFFIX = "-bf16"  # a learn target in bfloat16: "cpu-bf16", "cuda-bf16"


def learn_target(target: str) -> tuple[str, str]:
    """(torch device, precision) of a learn target: "cpu-bf16" -> ("cpu", "bfloat16"), "cuda" -> ("cuda",
    "float32"). A plain torch device string ("cpu", "cuda", "cuda:1") is float32 on that device."""
    target = str(target).strip().lower()
    if target.endswith(BF16_SUFFIX):
        return target[: -len(BF16_SUFFIX)], "bfloat16"
    return target, "float32"


ONEDNN_BF16_ISAS = frozenset({"ALL", "DEFAULT", "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX",
                              "AVX512_CORE_AMX_FP16", "AVX10_1_512", "AVX10_1_512_AMX", "AVX10_1_512_AMX_FP16"})
"""Values of oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA) at or above its bfloat16 GEMM kernels."""


def bf16_unsupported(device: str) -> str | None:
    """None when `device` ("cpu" or "cuda") runs bfloat16 GEMMs in hardware, else what is missing and
    the alternative. The CPU needs AMX (amx_bf16) or AVX512_BF16 (avx512_bf16), and torch with oneDNN:
    elsewhere torch emulates bfloat16 GEMMs, slower than float32."""
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            return "torch sees no CUDA device; use learn=cpu-bf16 or learn=cpu"
        if not torch.cuda.is_bf16_supported():
            return f"the GPU {torch.cuda.get_device_name()} has no bfloat16 arithmetic; use learn=cuda (float32)"
        return None
    features = set(cpu_identity()["features"])
    if not features & {"amx_bf16", "avx512_bf16"}:
        return (f"the CPU ({cpu_identity()['cpu']}) has neither AMX (amx_bf16) nor AVX512_BF16 (avx512_bf16), "
                "so bfloat16 GEMMs would be emulated; use learn=cpu (float32)")
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN (mkldnn), which runs its CPU bfloat16 GEMMs; use learn=cpu (float32)"
    for variable in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        cap = os.environ.get(variable, "").strip().upper()
        if cap and cap not in ONEDNN_BF16_ISAS:
            return (f"{variable}={cap} caps oneDNN below its bfloat16 kernels, so bfloat16 GEMMs would be emulated; "
                    f"unset it or use learn=cpu (float32)")
    return None
