"""`PrioritizedReplayBuffer`: transitions in numpy arrays, priorities in the replay kernel's sum tree.

Prioritized experience replay (Schaul et al. 2016, proportional variant):
- a transition's priority is (|td error| + eps) ** alpha; new transitions get the largest priority
  seen so far (1.0 at first), so each is sampled at least once with high probability;
- sampling is stratified over the total priority (pearl_fpga.kernels.ReplaySampler);
- importance weights w_i = (N * P(i)) ** -beta, divided by the largest weight in the batch, with beta
  annealed linearly from `beta` to `beta_final` over `beta_steps` calls of `sample`.

    >>> import numpy as np
    >>> from pearl_fpga import PrioritizedReplayBuffer
    >>> buf = PrioritizedReplayBuffer(1000, obs_shape=(4,), action_shape=(), action_dtype=np.int64, seed=0)
    >>> buf.add(np.zeros((8, 4)), np.zeros(8, dtype=np.int64), np.ones(8), np.zeros((8, 4)), np.zeros(8))
    >>> batch = buf.sample(4)
    >>> buf.update_priorities(batch.indices, np.array([0.5, 1.0, 2.0, 0.1]))
    >>> len(buf)
    8
"""

from __future__ import annotations

import functools
import json
import os
import threading
from typing import Any

import numpy as np

from pearl_fpga.errors import CheckpointError
from pearl_fpga.kernels.replay import ReplaySampler
from pearl_fpga.limits import require_memory
from pearl_fpga.replay.batch import Batch
from pearl_fpga.replay.transitions import Transitions
from pearl_fpga.replay.state import (MAX_PRIORITY, STATE_FORMAT, Layout, check_state, param_problem, read_npz,
                                     write_npz)
from pearl_fpga.spec.replay import MAX_BATCH, PRIORITY_SCALE


try:
    from pearl_fpga._replay_native import importance_weights as _native_weights
except ImportError:
    _native_weights = None


def _importance_weights(words: np.ndarray, beta: float) -> np.ndarray:
    """(N P_i)^-beta / max_j (N P_j)^-beta = (min_j p_j / p_i)^beta as float32: N and the total cancel."""
    if _native_weights is not None:
        return _native_weights(words, beta)
    p = words.astype(np.float64)
    return np.power(p.min() / p, beta).astype(np.float32)


def _locked(method):
    """Run the method under the buffer's lock (an actor thread may add while the learner samples)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def _shape(value: Any, name: str) -> tuple[int, ...]:
    shape = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not all(isinstance(d, (int, np.integer)) and d >= 1 for d in shape):
        raise ValueError(f"{name} must be a tuple of positive ints (() for a scalar), got {value!r}")
    return tuple(int(d) for d in shape)


class PrioritizedReplayBuffer:
    """Prioritized replay buffer on the replay kernel (any backend of ReplaySampler).

    Args:
        capacity: transitions kept; older ones are overwritten first (1 .. 2^20).
        obs_shape, action_shape: shape of one observation / action (() for a discrete action).
        alpha: priority exponent (0 = uniform).
        beta, beta_final, beta_steps: importance-weight exponent, annealed linearly from beta to
            beta_final over beta_steps calls of sample().
        eps: added to |td error| so that no transition gets priority 0.
        obs_dtype, action_dtype: storage dtypes (e.g. np.int64 actions for DQN).
        fanout, backend: passed to ReplaySampler ("cpu", "numpy", "rtl", "pynq", "xrt", "serial", "auto").
        seed: seed of the buffer's own generator (sampling is reproducible with it, also after load).
        max_batch: most samples per sample() call (larger add/update calls are split).

    add, sample, update_priorities and the state methods hold one lock, so an actor thread may add
    while the learner samples. Transitions are stored as one record each (obs, next_obs, action,
    reward, done), so gathering a sampled transition touches one or two cache lines.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...] | int,
        action_shape: tuple[int, ...] | int = (),
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
        obs_dtype: Any = np.float32,
        action_dtype: Any = np.float32,
        fanout: int = 16,
        backend: str = "cpu",
        seed: int | None = None,
        max_batch: int = MAX_BATCH,
    ) -> None:
        problem = param_problem(alpha, beta, beta_final, int(beta_steps), eps)
        if problem:
            raise ValueError(problem)
        for name, dtype in (("obs_dtype", obs_dtype), ("action_dtype", action_dtype)):
            if np.dtype(dtype).kind not in "biuf":  # an object dtype saved dumps that np.load (no pickle) refuses
                raise TypeError(f"{name} must be a numeric dtype (e.g. np.float32, np.int64), got {np.dtype(dtype)}")
        self._sampler = ReplaySampler(capacity, fanout=fanout, backend=backend, max_batch=max_batch)
        self.capacity = self._sampler.capacity
        self.obs_shape = _shape(obs_shape, "obs_shape")
        self.action_shape = _shape(action_shape, "action_shape")
        self.obs_dtype = np.dtype(obs_dtype)
        self.action_dtype = np.dtype(action_dtype)
        self.alpha = float(alpha)
        self.beta_initial = float(beta)
        self.beta_final = float(beta_final)
        self.beta_steps = int(beta_steps)
        self.eps = float(eps)
        self._rng = np.random.default_rng(seed)
        # One record per transition: a sampled transition costs one or two cache misses instead of
        # one per field (the gathers dominate sample() at large capacities).
        self._record = np.dtype(
            [
                ("obs", self.obs_dtype, self.obs_shape),
                ("next_obs", self.obs_dtype, self.obs_shape),
                ("action", self.action_dtype, self.action_shape),
                ("reward", np.float32),
                ("done", np.float32),
            ],
            align=True,
        )
        require_memory(self.capacity * self._record.itemsize, f"a replay buffer of capacity {self.capacity:,} "
                       f"({self._record.itemsize} bytes per transition)", "lower the capacity (buffer_size)")
        self._data = np.zeros(self.capacity, dtype=self._record)
        self._pos = 0  # next slot to write
        self._size = 0
        self._max_priority = 1.0
        self._sample_calls = 0
        self._lock = threading.RLock()  # add / sample / update_priorities may come from different threads

    # ---- properties ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._size

    @property
    def sampler(self) -> ReplaySampler:
        """The sum tree holding the priorities."""
        return self._sampler

    @property
    def total(self) -> float:
        """Sum of the stored priorities (as the sampler holds them: Q16.16 words / 65536)."""
        return self._sampler.total

    @property
    def backend(self) -> str:
        return self._sampler.backend

    @property
    def beta(self) -> float:
        """The importance-weight exponent the next sample() uses."""
        if self.beta_steps == 0:
            return self.beta_final
        frac = min(1.0, self._sample_calls / self.beta_steps)
        return self.beta_initial + (self.beta_final - self.beta_initial) * frac

    @property
    def layout(self) -> Layout:
        """What a saved state must match to load into this buffer."""
        return Layout(self.capacity, self.obs_shape, self.action_shape, self.obs_dtype, self.action_dtype)

    @property
    def max_priority(self) -> float:
        """Priority given to new transitions: the largest seen so far (starts at 1)."""
        return self._max_priority

    # ---- add -----------------------------------------------------------------------------------
    @_locked
    def add(self, obs: Any, action: Any, reward: Any, next_obs: Any, done: Any, td_errors: Any = None) -> None:
        """Add one transition, or a batch (leading axis n on every argument): add_transitions of
        Transitions(obs, action, reward, next_obs, done)."""
        arrays: tuple[Any, ...] = (obs, action, reward, next_obs, done)
        if np.shape(obs) == self.obs_shape:  # a single transition
            arrays = tuple(np.array(x)[None] for x in arrays)
        self.add_transitions(Transitions(*arrays), td_errors)

    @_locked
    def add_transitions(self, t: Transitions, td_errors: Any = None, check_finite: bool = True) -> None:
        """Add a block of n transitions (pearl_fpga.replay.Transitions). The oldest transitions are
        overwritten once the buffer is full; new ones get max_priority, or with `td_errors` (one per
        transition, as Ape-X's actors compute them) (|td| + eps) ** alpha. A NaN or infinity is refused
        (ValueError, nothing added); `check_finite=False` skips that scan for a caller that has made it
        (the runtime's replay, pearl_fpga.replay.manager, filters once at insertion)."""
        # copied before they are checked: another thread changing the caller's arrays after the checks
        # cannot slip a NaN into the buffer (np.array copies)
        obs, action, reward, next_obs, done = (np.array(x) for x in t.arrays())
        n = obs.shape[0] if obs.ndim else -1
        expected = {
            "obs": (obs, (n, *self.obs_shape)),
            "next_obs": (next_obs, (n, *self.obs_shape)),
            "action": (action, (n, *self.action_shape)),
            "reward": (reward, (n,)),
            "done": (done, (n,)),
        }
        for name, (array, shape) in expected.items():
            if array.shape != shape:
                raise ValueError(
                    f"{name} has shape {array.shape}, expected {shape} (obs_shape={self.obs_shape}, "
                    f"action_shape={self.action_shape}; a batch has the same leading length n on every argument)"
                )
            if array.dtype.kind not in "biuf":
                raise TypeError(f"{name} must be numeric, got dtype {array.dtype}")
        if self.action_dtype.kind in "iu" and action.dtype.kind == "f":
            raise TypeError(f"action must be integers for action_dtype {self.action_dtype}, got {action.dtype}")
        if check_finite:
            for name, array in (("obs", obs), ("next_obs", next_obs), ("action", action), ("reward", reward)):
                if array.dtype.kind == "f" and not np.isfinite(array).all():
                    raise ValueError(f"{name} contains NaN or inf; check the environment (one NaN in the buffer "
                                     "turns every later gradient step into NaN); nothing was added")
        if not np.isin(done, (0, 1)).all():
            raise ValueError("done must hold only 0/1 (or True/False): pass terminated flags; nothing was added")
        initial = None
        if td_errors is not None:
            td = np.atleast_1d(np.array(td_errors, dtype=np.float64))
            if td.shape != (n,) or (check_finite and not np.isfinite(td).all()):
                raise ValueError(f"td_errors must be {n} finite numbers, one per transition; got shape {td.shape}")
            initial = np.minimum(np.power(np.abs(td) + self.eps, self.alpha), MAX_PRIORITY)
        if n == 0:
            return
        if n > self.capacity:  # only the newest `capacity` transitions would survive
            obs, action, reward, next_obs, done = (x[n - self.capacity :] for x in (obs, action, reward, next_obs, done))
            initial = None if initial is None else initial[n - self.capacity :]
            n = self.capacity
        slots = (self._pos + np.arange(n)) % self.capacity
        for name, value in (("obs", obs), ("next_obs", next_obs), ("action", action), ("reward", reward), ("done", done)):
            self._data[name][slots] = value
        self._write(slots, np.full(n, self._max_priority) if initial is None else initial)
        if initial is not None:
            self._max_priority = max(self._max_priority, float(initial.max()))
        self._pos = int((self._pos + n) % self.capacity)
        self._size = min(self._size + n, self.capacity)

    # ---- sample / update -----------------------------------------------------------------------
    @_locked
    def sample(self, batch_size: int) -> Batch[np.ndarray]:
        """Draw batch_size transitions (with replacement) with probability proportional to priority."""
        return self._draw(batch_size)[0]

    @_locked
    def sample_with_priorities(self, batch_size: int) -> tuple[Batch[np.ndarray], np.ndarray, float]:
        """sample(), plus each drawn transition's priority p_i and the total priority (float64, as the
        sampler stores them), so that a caller drawing from several buffers can compute the global
        sampling probabilities and importance weights (pearl_fpga.replay.sharded)."""
        batch, words = self._draw(batch_size)
        return batch, words.astype(np.float64) / PRIORITY_SCALE, self._sampler.total

    def _draw(self, batch_size: int) -> tuple[Batch[np.ndarray], np.ndarray]:
        if self._size == 0:
            raise ValueError("cannot sample from an empty buffer; add transitions first")
        idx, words = self._sampler.sample_fixed(batch_size, self._rng)
        beta = self.beta
        self._sample_calls += 1
        weights = _importance_weights(words, beta)
        rows = self._data.take(idx)
        return Batch(
            obs=np.ascontiguousarray(rows["obs"]),
            action=np.ascontiguousarray(rows["action"]),
            reward=np.ascontiguousarray(rows["reward"]),
            next_obs=np.ascontiguousarray(rows["next_obs"]),
            done=np.ascontiguousarray(rows["done"]),
            weights=weights,
            indices=idx,
        ), words

    @_locked
    def update_priorities(self, indices: Any, td_errors: Any) -> None:
        """Priority of transition indices[b] := (|td_errors[b]| + eps) ** alpha (the last of a
        repeated index wins). Indices must be of stored transitions (0 <= index < len(self))."""
        idx = np.atleast_1d(np.asarray(indices))
        td = np.atleast_1d(np.asarray(td_errors))
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers (as returned in batch.indices), got dtype {idx.dtype}")
        if td.dtype.kind not in "iuf":
            raise TypeError(f"td_errors must be real numbers, got dtype {td.dtype}")
        if idx.ndim != 1 or td.shape != idx.shape:
            raise ValueError(f"indices {idx.shape} and td_errors {td.shape} must be 1-D of the same length")
        if idx.size == 0:
            return
        self._sampler.check_indices(idx, "update", limit=self._size, whole_batch=False)  # all, before any write
        if not np.isfinite(td).all():
            raise ValueError("td_errors contain NaN or inf; the priorities were not changed (check the loss)")
        priorities = np.abs(td, dtype=np.float64)
        priorities += self.eps
        np.power(priorities, self.alpha, out=priorities)
        self._write(idx, priorities)
        self._max_priority = min(max(self._max_priority, float(priorities.max())), MAX_PRIORITY)

    def _write(self, slots: np.ndarray, priorities: np.ndarray | None = None, words: np.ndarray | None = None) -> None:
        """Priorities (or Q16.16 words) into the sum tree through ReplaySampler.update, max_batch at a time."""
        step = self._sampler.max_batch
        for start in range(0, len(slots), step):
            part = slice(start, start + step)
            if priorities is not None:
                self._sampler.update(slots[part], priorities[part])
            elif words is not None:
                self._sampler.update(slots[part], words=words[part])

    # ---- state ---------------------------------------------------------------------------------
    @_locked
    def state_dict(self) -> dict[str, Any]:
        """The whole buffer as numpy arrays, ints, floats and strings (no pickle needed)."""
        n = self._size
        return {
            "format": STATE_FORMAT,
            "capacity": self.capacity,
            "obs_shape": np.array(self.obs_shape, dtype=np.int64),
            "action_shape": np.array(self.action_shape, dtype=np.int64),
            "obs_dtype": self.obs_dtype.str,
            "action_dtype": self.action_dtype.str,
            "alpha": self.alpha,
            "beta": self.beta_initial,
            "beta_final": self.beta_final,
            "beta_steps": self.beta_steps,
            "eps": self.eps,
            "pos": self._pos,
            "size": n,
            "max_priority": self._max_priority,
            "sample_calls": self._sample_calls,
            "rng_state": json.dumps(self._rng.bit_generator.state),
            "obs": self._data["obs"][:n].copy(),
            "action": self._data["action"][:n].copy(),
            "reward": self._data["reward"][:n].copy(),
            "next_obs": self._data["next_obs"][:n].copy(),
            "done": self._data["done"][:n].copy(),
            "leaves": self._sampler.leaves(),
        }

    @_locked
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state_dict(). Everything is checked first: on a mismatch CheckpointError is
        raised and the buffer is left untouched."""
        checked = check_state(state, self.layout)
        n = checked["size"]
        rng = checked["rng"]
        leaves = checked["leaves"]
        self._data[n:] = np.zeros(1, dtype=self._record)
        for name in ("obs", "next_obs", "action", "reward", "done"):
            self._data[name][:n] = checked[name]
        self._sampler.clear()
        nonzero = np.flatnonzero(leaves)
        self._write(nonzero, words=leaves[nonzero])
        self._size, self._pos = n, checked["pos"]
        self.alpha, self.beta_initial, self.beta_final = checked["alpha"], checked["beta"], checked["beta_final"]
        self.beta_steps, self.eps = checked["beta_steps"], checked["eps"]
        self._max_priority, self._sample_calls = checked["max_priority"], checked["sample_calls"]
        self._rng = rng

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the buffer to `path` (.npz, no pickle); written to a temporary file, then renamed.
        The state is checked as load() checks it first: a buffer whose state would not load back (e.g.
        a stored transition with priority 0 after `sampler.update`) raises CheckpointError and writes
        nothing, so a file at `path` is never replaced by one that cannot be loaded."""
        state = self.state_dict()
        try:
            check_state(state, self.layout)
        except CheckpointError as exc:
            raise CheckpointError(f"not saved to {str(path)!r}: {exc}. Priorities of stored transitions are set by "
                                  "add() and update_priorities(); a direct sampler.update() with 0 breaks them") from None
        write_npz(path, state)

    def load(self, path: str | os.PathLike[str]) -> None:
        """Restore from a file written by save(). Raises CheckpointError (buffer untouched) when the
        file is missing, corrupt or made by a buffer with other settings."""
        state = read_npz(path, max_member_bytes=self._data.nbytes + 4096)  # + the .npy header
        try:
            self.load_state_dict(state)
        except CheckpointError as exc:
            raise CheckpointError(f"replay buffer file {path}: {exc}") from None

    def __repr__(self) -> str:
        return (
            f"PrioritizedReplayBuffer(capacity={self.capacity}, size={self._size}, obs_shape={self.obs_shape}, "
            f"action_shape={self.action_shape}, backend={self.backend!r})"
        )
