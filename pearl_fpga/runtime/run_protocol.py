"""What every trainer offers, deep (pearl_fpga.Trainer) or tabular (pearl_fpga.TabularTrainer): the one
protocol the CLI, the examples and users program against."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pearl_fpga.runtime.stats import EvalResult, Stats


@runtime_checkable
class TrainerProtocol(Protocol):
    """A training run: train, evaluate, predict, checkpoint, report, close."""

    config: Any
    seed: int
    env_steps: int
    grad_steps: int
    episodes: int
    strict: bool
    """True: a train() call in which no update could run raises NoLearningError (else it warns)."""

    @property
    def emulated_board(self) -> str | None:
        """The catalog board whose kernels the run emulates (fpga-emu), or None."""

    def no_learning_problem(self, steps: int) -> str | None:
        """Why `train(steps)` would run no update, with the fix; None when it would run one."""

    def train(self, steps: int, progress: Any = None, progress_interval: float = 0.5) -> Stats:
        """Run `steps` more env steps."""

    def evaluate(self, episodes: int = 20, seed: int | None = None) -> EvalResult:
        """Mean return (and more) of the kept policy over fresh episodes."""

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[Any, Any]:
        """Stable-Baselines3's predict."""

    def save(self, directory: str | Path) -> Path:
        """Write a checkpoint."""

    def stats(self) -> Stats:
        """Counters and recent figures."""

    def request_stop(self) -> None:
        """Stop a running train() at the next boundary."""

    def close(self) -> None:
        """Release the run's resources."""
