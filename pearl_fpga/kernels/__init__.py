"""The FPGA kernels, each behind one backend-agnostic class.

backend= "numpy" (golden reference), "cpu" (the HLS C++ compiled into the package), "rtl" (the
reference RTL built with Verilator, cycle-accurate), "pynq" / "xrt" / "serial" (a board), "auto" (best available).
"""

from __future__ import annotations

import importlib
from typing import Any

from pearl_fpga.spec.descriptor import descriptors

# Each kernel's class lives in pearl_fpga.kernels.<kernel>, named by its descriptor (hls/<kernel>/kernel.json).
_LAZY = {d.python_class: f"pearl_fpga.kernels.{name}" for name, d in descriptors().items()}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pearl_fpga.kernels' has no attribute {name!r}")
