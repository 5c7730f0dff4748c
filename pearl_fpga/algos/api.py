"""The interface every learner implements, and what one update returns.

`Learner` is what every algorithm's learner has (the deep ones and the tabular ones): `update(batch)`,
`before_update`, and its state. `DeepLearner` adds what the deep algorithms' actors and runtime need
(their policy network, actor head, threads). The Trainer is the loop (engine, update-to-data schedule,
logging); it never branches on the algorithm's name. It asks the deep learner, through this interface, for:

- `update(batch)`: one gradient update, returning an `UpdateResult` (the loss, and |TD error| per
  sample for the prioritized replay);
- `before_update(env_steps)`: the algorithm's own work tied to the env-step clock before an update
  that SB3 would run once `env_steps` steps were collected (DQN: the target copy every
  `target_update_interval` env steps);
- `policy_module`, `policy_network(...)` and `actor_head(...)`: the network the actors run (on the MLP
  kernel or in torch) and what the actor does with its outputs (greedy action, exploration);
- `state_dict()`/`load_state_dict()` (networks, optimizers, RNGs) and `progress_state()`/
  `load_progress_state()` (counters of its own, written in the checkpoint's manifest).

Its after-update work (target averaging, policy delay, entropy tuning) stays inside `update`, as in
SB3's `train()` and RLlib's `after_gradient_based_update`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch
    from torch import nn

    from pearl_fpga.algos.heads import ActorHead
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.replay.batch import Batch


class UpdateResult(NamedTuple):
    """One gradient update's outcome: the loss (a float, or a 0-d tensor not yet synced) and |TD error|
    per sample (the new priorities of a prioritized replay's batch)."""

    loss: Any
    td_abs: Any


class Learner(ABC):
    """What every algorithm's learner implements (see the module docstring)."""

    @abstractmethod
    def update(self, batch: Any) -> UpdateResult:
        """One update on `batch` (a deep learner: one gradient step on a replay's Batch)."""

    def before_update(self, env_steps: int) -> None:
        """Work due on the env-step clock before an update SB3 runs after `env_steps` collected steps."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """What the learner needs to continue exactly: networks or tables, optimizers, its own RNG state."""

    @abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what state_dict() returned (strict: shapes must match)."""

    def progress_state(self) -> dict[str, int]:
        """Counters of the learner's own schedule, written in a checkpoint's manifest."""
        return {}

    def load_progress_state(self, counters: dict[str, Any]) -> None:
        """Restore progress_state()'s counters from a checkpoint manifest's."""


class DeepLearner(Learner):
    """A learner of the deep algorithms: networks trained from a replay, a policy network the actors run."""

    device: torch.device
    discrete: bool = False
    precisions: tuple[str, ...] = ("float32", "bfloat16")
    """The precisions its CPU step's GEMMs can run in (bfloat16: placement learn=cpu-bf16)."""
    schedules: tuple[str, ...] = ()
    """The update schedules the learner may switch between while training (set_schedule; the runtime
    measures them when there are two), or the one it runs; empty: its step has no schedule to choose."""

    @classmethod
    @abstractmethod
    def policy_network(cls, obs_dim: int, action_dim: int, config: TrainConfig) -> nn.Sequential:
        """A fresh policy network of this algorithm's shape (the actors' copy; the MLP kernel runs it)."""

    @classmethod
    @abstractmethod
    def actor_head(cls, config: TrainConfig, action_dim: int) -> ActorHead:
        """What the actors do with the policy network's outputs."""

    @property
    @abstractmethod
    def policy_module(self) -> nn.Sequential:
        """The live policy network (its state_dict is what weight syncs send to the actors)."""

    @abstractmethod
    def update(self, batch: Batch) -> UpdateResult:
        """One gradient update on a replay's `batch`."""

    @classmethod
    def callers(cls, config: TrainConfig) -> int:
        """Threads that call torch ops at once during one update (the learner's thread control shares the
        cores among them)."""
        return 1

    @classmethod
    def baseline_kwargs(cls, config: TrainConfig, action_space: Any, jax: bool) -> dict[str, Any]:
        """Stable-Baselines3's (or SBX's, `jax`) constructor arguments of its class of this algorithm's name
        beyond the shared ones (learning rate, buffer, batch, gamma, schedule, net_arch), for `bench train`
        to run the same algorithm at the same settings."""
        return {}

    def set_schedule(self, schedule: str) -> None:
        """Run the following updates in `schedule`, one of `schedules`."""
        raise ValueError(f"{type(self).__name__} has no update schedule to set (asked for {schedule!r})")
