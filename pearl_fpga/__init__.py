"""pearl_fpga: FPGA-accelerated kernels for off-policy deep RL and a parallel training runtime (the algorithms of pearl_fpga.presets).

Heavy modules (torch, the native extensions) load on first use of the names below.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "PrioritizedReplayBuffer": "pearl_fpga.replay",
    "Trainer": "pearl_fpga.trainer",
    "make_trainer": "pearl_fpga.trainers",
    "load_trainer": "pearl_fpga.trainers",
    "TabularTrainer": "pearl_fpga.runtime.tabular_trainer",
    "TrainerProtocol": "pearl_fpga.runtime.run_protocol",
    "Callback": "pearl_fpga.runtime.callbacks",
    "TrainConfig": "pearl_fpga.config",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        try:
            module = importlib.import_module(_LAZY[name])
        except ImportError as exc:  # a board install has no torch
            from pearl_fpga.errors import missing_dependency

            raise (missing_dependency(exc, f"pearl_fpga.{name}") or exc) from None
        return getattr(module, name)
    raise AttributeError(f"module 'pearl_fpga' has no attribute {name!r}")
