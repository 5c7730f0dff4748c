"""Every trainer behind one protocol (pearl_fpga.TrainerProtocol): `make_trainer` builds the one of any
registered algorithm, `load_trainer` restores whichever a checkpoint directory holds. Both trainers
implement TrainerProtocol (tests/test_registry.py checks it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pearl_fpga import presets as registry
from pearl_fpga.runtime.run_protocol import TrainerProtocol
from pearl_fpga.runtime.run_checkpoints import run_checkpoint_dir
from pearl_fpga.runtime.tabular_trainer import CHECKPOINT_FILE, TabularTrainer
from pearl_fpga.trainer import Trainer

__all__ = ["TrainerProtocol", "load_trainer", "make_trainer"]


def make_trainer(algo: str = "dqn", env: str | None = None, **kwargs: Any) -> Trainer | TabularTrainer:
    """A trainer of any registered algorithm: pearl_fpga.Trainer for the deep ones, pearl_fpga.TabularTrainer
    for qlearning and sarsa (the arguments are theirs)."""
    if registry.get(algo).family == "tabular":
        return TabularTrainer(algo, env, **kwargs)
    return Trainer(algo, env, **kwargs)


def load_trainer(directory: str | Path, **kwargs: Any) -> Trainer | TabularTrainer:
    """The trainer a checkpoint directory (or a run directory's checkpoint/) holds, deep or tabular
    (Trainer.load's arguments)."""
    directory = run_checkpoint_dir(Path(directory))
    if (directory / CHECKPOINT_FILE).is_file():
        return TabularTrainer.load(directory, **kwargs)
    return Trainer.load(directory, **kwargs)
