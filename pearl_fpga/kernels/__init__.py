"""The FPGA kernels, each behind one backend-agnostic class.

backend= "numpy" (golden reference), "cpu" (the HLS C++ compiled into the package), "rtl" (the
reference RTL built with Verilator, cycle-accurate), "pynq" / "xrt" (a board), "auto" (best available).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {"ReplaySampler": "pearl_fpga.kernels.replay", "MLPInfer": "pearl_fpga.kernels.mlp",
         "TabularQ": "pearl_fpga.kernels.tabular"}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pearl_fpga.kernels' has no attribute {name!r}")
