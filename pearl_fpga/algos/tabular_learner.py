"""Q-learning's and SARSA's learner: the TabularQ kernel's update behind the Learner interface.

The deep learners take a gradient step on a replay's Batch; this one applies a block of transitions to
the Q table strictly in order, as the hardware kernel does (or, with config.parts > 1, the kernel's
SwiftRL-style partitioned update: K copies of the table merged, not sequential Q-learning). Its state is the table. The episode loop, exploration and datasets are
the tabular trainer's (pearl_fpga.runtime.tabular_trainer) and algos/tabular.py's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from pearl_fpga.algos.api import Learner, UpdateResult
from pearl_fpga.algos.tabular import KERNEL_ALGO
from pearl_fpga.kernels.tabular import TabularQ


class TabularTransitions(NamedTuple):
    """n transitions, one row each: state, action, reward, next state, terminated, and the next action
    (SARSA's; None for Q-learning)."""

    s: np.ndarray
    a: np.ndarray
    r: np.ndarray
    s2: np.ndarray
    done: np.ndarray
    a2: np.ndarray | None = None


class TabularLearner(Learner):
    """The Q table of `config.algo` ("qlearning" or "sarsa") on the TabularQ kernel of `config.backend`."""

    def __init__(self, config: Any, n_states: int, n_actions: int, **backend_options: Any) -> None:
        self.kernel = TabularQ(n_states, n_actions, config.learning_rate, config.gamma, algo=KERNEL_ALGO[config.algo],
                               backend=config.backend, **backend_options)
        self.parts = int(config.parts)
        self.last_plan: Any = None  # the partitioned update's plan of the last update (parts > 1)
        # one transition, the online episode loop's step: the kernel's own method (no arrays, no extra call)
        self.update_one = self.kernel.update_one

    def update(self, batch: TabularTransitions) -> UpdateResult:
        """The transitions applied in order (parts > 1: TabularQ.update_partitioned, which is not the
        sequential update). The kernel reports no loss or TD errors (its update is a table write), so
        both are None."""
        args = (batch.s, batch.a, batch.r, batch.s2, batch.done)
        if self.parts == 1:
            self.kernel.update(*args, a2=batch.a2)
        else:
            self.last_plan = self.kernel.update_partitioned(*args, a2=batch.a2, parts=self.parts)
        return UpdateResult(None, None)

    def greedy(self) -> np.ndarray:
        """The greedy action of every state (lowest on ties)."""
        return self.kernel.greedy()

    def state_dict(self) -> dict[str, Any]:
        return {"table": self.kernel.table}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.kernel.load(state["table"])
