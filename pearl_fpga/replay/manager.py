"""The replay manager's buffers (`make_replay` chooses one for a run): a uniform ring buffer (SB3's
ReplayBuffer semantics) or the prioritized buffer on the replay kernel (pearl_fpga.PrioritizedReplayBuffer),
behind one interface (`Replay`, which the sharded replay, pearl_fpga.replay.sharded, also has):
`add(transitions)` (pearl_fpga.replay.Transitions, non-finite rows refused or dropped there),
`sample(batch_size) -> Batch` (pearl_fpga.replay.Batch, numpy), `update_priorities(indices, td_errors)`
with numpy |TD errors|, `total`, `state_dict()` / `load_state_dict()`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pearl_fpga.backends.registry import first_available
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError, DivergenceError
from pearl_fpga.replay.batch import Batch
from pearl_fpga.replay.transitions import FIELDS, Transitions, nonfinite_rows

NONFINITE_MODES = ("error", "drop")
_WHAT = {"obs": "observation (obs)", "next_obs": "observation (next_obs)", "reward": "reward", "action": "action",
         "done": "done flag", "td_errors": "initial TD error"}


class ReplayEmpty(ValueError):
    """Nothing to sample yet (the Ray engine: every replay shard is empty, at the start or after all of
    them restarted): the learner waits for the actors' data."""


class Replay:
    """What the learner uses of a replay; the local buffers below also refuse (or count and drop)
    non-finite transitions before they are stored: one NaN in the replay turns every later gradient
    step into NaN."""

    prioritized = False
    env_id = ""
    on_nonfinite = "error"
    dropped = 0  # transitions dropped for non-finite values (on_nonfinite="drop")

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def total(self) -> float:
        """What sampling is proportional to, summed: the priorities, or the size for uniform replay."""
        return float(len(self))

    def can_sample(self) -> bool:
        return self.total > 0

    def add(self, t: Transitions, td_errors: np.ndarray | None = None) -> None:
        """Insert a block of transitions; `td_errors`: their initial priorities' TD errors (Ape-X actors;
        prioritized replay only)."""
        raise NotImplementedError

    def sample(self, batch_size: int) -> Batch[np.ndarray]:
        raise NotImplementedError

    def sample_many(self, batch_size: int, count: int) -> Batch[np.ndarray]:
        """`count` batches as `count` sample() calls would draw them from the unchanged buffer, stacked:
        batch k is rows k * batch_size .. (k + 1) * batch_size - 1."""
        return Batch.concatenate([self.sample(batch_size) for _ in range(count)])

    def sample_with_priorities(self, batch_size: int) -> tuple[Batch[np.ndarray], np.ndarray, float]:
        """sample(), plus each drawn transition's priority and the total (for sharded replay)."""
        raise NotImplementedError

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """New priorities from the learner's |TD errors| (numpy); uniform replay has none."""

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def load_state_dict(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    def _finite(self, t: Transitions, td_errors: np.ndarray | None = None) -> tuple[Transitions, np.ndarray | None]:
        """`t` (and `td_errors`) without its non-finite rows, as `on_nonfinite` says: refused
        (DivergenceError, nothing stored) or counted in `dropped` and left out. The one finiteness
        scan of a transition on its way into a replay."""
        found = nonfinite_rows(t, td_errors)
        if found is None:
            return t, td_errors
        bad, field = found
        n = int(bad.sum())
        if self.on_nonfinite == "drop":
            self.dropped += n
            keep = ~bad
            return t.rows(keep), None if td_errors is None else np.asarray(td_errors)[keep]
        source = np.asarray(td_errors) if field == "td_errors" else np.asarray(getattr(t, field))
        value = source[bad][0]
        value = value.tolist() if hasattr(value, "tolist") else value
        if field == "action":
            raise DivergenceError(f"the policy chose a non-finite action ({value}) in {n} of {len(bad)} transitions: "
                                  "its weights diverged; lower learning_rate (or set max_grad_norm) and resume "
                                  "from the last checkpoint")
        raise DivergenceError(
            f"{f'env {self.env_id}' if self.env_id else 'the environment'} returned a non-finite {_WHAT[field]} ({value}) "
            f"in {n} of {len(bad)} transitions; nothing of this batch was stored. Fix the environment (or wrap it to "
            "clip its values), or set nonfinite_transitions=drop (--set nonfinite_transitions=drop) to count and "
            "drop such transitions")


class UniformReplay(Replay):
    """Ring buffer of transitions sampled uniformly with replacement (as SB3's ReplayBuffer)."""

    def __init__(self, capacity: int, obs_dim: int, action_shape: tuple[int, ...], discrete: bool, seed: int) -> None:
        from pearl_fpga.limits import require_memory

        per_transition = 4 * (2 * obs_dim + 2) + (8 if discrete else 4) * int(np.prod(action_shape, dtype=np.int64))
        require_memory(capacity * per_transition, f"buffer_size={capacity:,} ({per_transition} bytes per transition)",
                       "lower buffer_size (--set buffer_size=N)")
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.action = np.zeros((capacity, *action_shape), dtype=np.int64 if discrete else np.float32)
        self.reward = np.zeros(capacity, dtype=np.float32)
        self.done = np.zeros(capacity, dtype=np.float32)
        self.pos = 0
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, t: Transitions, td_errors: np.ndarray | None = None) -> None:
        """Insert a block of transitions (no priorities, so `td_errors` is not used); non-finite ones are
        refused (DivergenceError) or dropped, as `on_nonfinite` says."""
        t, _ = self._finite(t)
        n = len(t)
        if n == 0:
            return
        # a slice while the rows do not wrap around the ring (the usual case): cheaper than an index array
        idx: slice | np.ndarray = slice(self.pos, self.pos + n)
        if self.pos + n > self.capacity:
            idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx] = t.obs
        self.next_obs[idx] = t.next_obs
        self.action[idx] = np.asarray(t.action).reshape((n, *self.action.shape[1:]))
        self.reward[idx] = t.reward
        self.done[idx] = t.done
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def sample_with_priorities(self, batch_size: int) -> tuple[Batch[np.ndarray], np.ndarray, float]:
        """sample(), with every transition's priority 1 and the total = size (for sharded replay)."""
        return self.sample(batch_size), np.ones(batch_size), float(self.size)

    def sample(self, batch_size: int) -> Batch[np.ndarray]:
        return self._gather(self.rng.integers(0, self.size, size=batch_size))

    def sample_many(self, batch_size: int, count: int) -> Batch[np.ndarray]:
        # one draw of count * batch_size indices is the same stream as count draws of batch_size (numpy
        # draws bounded integers one at a time), and one gather per field replaces count of them
        return self._gather(self.rng.integers(0, self.size, size=batch_size * count))

    def _gather(self, idx: np.ndarray) -> Batch[np.ndarray]:
        return Batch(obs=self.obs.take(idx, axis=0), action=self.action.take(idx, axis=0), reward=self.reward.take(idx),
                     next_obs=self.next_obs.take(idx, axis=0), done=self.done.take(idx), indices=idx)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "uniform", "capacity": self.capacity, "pos": self.pos, "size": self.size,
                "rng": self.rng.bit_generator.state,
                **{f: getattr(self, f)[: self.size].copy() for f in FIELDS}}

    def check_state_dict(self, state: dict[str, Any]) -> None:
        """CheckpointError unless `state` loads into this buffer (nothing is changed)."""
        if state.get("kind") != "uniform" or state.get("capacity") != self.capacity:
            raise CheckpointError(f"checkpoint replay is {state.get('kind')!r} with capacity {state.get('capacity')}, "
                                  f"this run uses a uniform buffer of {self.capacity}")
        size = int(state["size"])
        for f in FIELDS:
            arr = np.asarray(state[f])
            if arr.shape[0] != size or arr.shape[1:] != getattr(self, f).shape[1:]:
                raise CheckpointError(f"checkpoint replay field {f!r} has shape {arr.shape}, expected "
                                      f"({size}, {', '.join(map(str, getattr(self, f).shape[1:]))})")

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.check_state_dict(state)
        size = int(state["size"])
        for f in FIELDS:
            getattr(self, f)[:size] = state[f]
        self.pos, self.size = int(state["pos"]), size
        self.rng.bit_generator.state = state["rng"]


class PrioritizedReplay(Replay):
    """Adapter over pearl_fpga.PrioritizedReplayBuffer (the replay kernel on the replay device)."""

    prioritized = True

    def __init__(self, capacity: int, obs_dim: int, action_shape: tuple[int, ...], discrete: bool, seed: int,
                 config: TrainConfig, backend: str, beta_steps: int, fanout: int = 16, max_batch: int | None = None) -> None:
        from pearl_fpga.replay import PrioritizedReplayBuffer

        self.buffer = PrioritizedReplayBuffer(
            capacity, (obs_dim,), action_shape, alpha=config.per_alpha, beta=config.per_beta, beta_final=1.0,
            beta_steps=max(beta_steps, 1), eps=config.per_eps, obs_dtype=np.float32,
            action_dtype=np.int64 if discrete else np.float32, backend=backend, seed=seed, fanout=fanout,
            **({"max_batch": max_batch} if max_batch else {}),
        )
        self.action_shape = action_shape

    def __len__(self) -> int:
        return len(self.buffer)

    @property
    def total(self) -> float:
        return self.buffer.total

    def add(self, t: Transitions, td_errors: np.ndarray | None = None) -> None:
        """Insert a block; with `td_errors` their priorities are set from them (Ape-X actors). Non-finite
        transitions are refused (DivergenceError) or dropped, as `on_nonfinite` says (checked here, so
        the buffer does not scan them again)."""
        t, td_errors = self._finite(t, td_errors)
        if len(t) == 0:
            return
        if np.ndim(t.action) != 1 + len(self.action_shape):
            t = replace(t, action=np.asarray(t.action).reshape((len(t), *self.action_shape)))
        self.buffer.add_transitions(t, td_errors, check_finite=False)

    def sample(self, batch_size: int) -> Batch[np.ndarray]:
        return self.buffer.sample(batch_size)

    def sample_with_priorities(self, batch_size: int) -> tuple[Batch[np.ndarray], np.ndarray, float]:
        return self.buffer.sample_with_priorities(batch_size)

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        self.buffer.update_priorities(indices, td_errors)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "prioritized", "buffer": self.buffer.state_dict()}

    def check_state_dict(self, state: dict[str, Any]) -> None:
        """CheckpointError unless `state` loads into this buffer (nothing is changed)."""
        from pearl_fpga.replay.state import check_state

        if state.get("kind") != "prioritized":
            raise CheckpointError(f"checkpoint replay is {state.get('kind')!r}, this run uses prioritized replay "
                                  "(--per); resume with the same setting")
        try:
            check_state(state["buffer"], self.buffer.layout)
        except (ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"checkpoint replay does not fit this buffer: {exc}") from exc

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "prioritized":
            raise CheckpointError(f"checkpoint replay is {state.get('kind')!r}, this run uses prioritized replay "
                                  "(--per); resume with the same setting")
        try:
            self.buffer.load_state_dict(state["buffer"])
        except CheckpointError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"checkpoint replay does not fit this buffer: {exc}") from exc



def make_replay(config: TrainConfig, obs_dim: int, action_shape: tuple[int, ...], discrete: bool, seed: int,
                replay_backends: tuple[str, ...] = ("cpu",), device: str = "cpu",
                sizes: dict[str, int] | None = None, *, beta_steps: int) -> Replay:
    """Uniform buffer, or the prioritized one on the replay kernel (first available of
    `replay_backends`, the placement's for `device`; `sizes`: its fan-out and batch, an emulated
    board's) when config.per is set. `beta_steps`: the sample() calls over which the importance
    exponent anneals to 1 (the run's gradient steps, runtime.schedule.allowed_gradient_steps)."""
    if not config.per:
        replay: Replay = UniformReplay(config.buffer_size, obs_dim, action_shape, discrete, seed)
    else:
        replay = first_available(
            lambda backend: PrioritizedReplay(config.buffer_size, obs_dim, action_shape, discrete, seed, config,
                                              backend, beta_steps=beta_steps, **(sizes or {})),
            replay_backends, f"placement replay={device} (replay kernel)")
    replay.env_id = config.env_id
    replay.on_nonfinite = config.nonfinite_transitions
    return replay
