"""`ReplaySampler`: the prioritized-replay sum-tree kernel behind one API, whatever runs it.

Every argument is validated here, before any backend is called, so a rejected call leaves the tree
exactly as it was. Priorities become Q16.16 words and sampling targets are drawn on the host
(pearl_fpga.spec.replay), so all backends see identical integers and return identical
indices for the same seed.

    >>> import numpy as np
    >>> from pearl_fpga.kernels import ReplaySampler
    >>> s = ReplaySampler(1000, fanout=16, backend="numpy")
    >>> s.update(np.array([3, 7]), np.array([1.0, 3.0]))
    >>> idx, pri = s.sample(4, np.random.default_rng(0))
    >>> sorted(set(idx.tolist()))
    [3, 7]
"""

from __future__ import annotations

import operator
import threading
import warnings
from typing import Any

import numpy as np

from pearl_fpga.backends import registry
from pearl_fpga.backends.replay_base import ReplayBackend
from pearl_fpga.spec.replay import (
    FANOUTS,
    MAX_BATCH,
    MAX_CAPACITY,
    PRIORITY_MAX,
    PRIORITY_SCALE,
    fixed_to_priorities,
    priorities_to_fixed,
    stratified_targets,
    tree_depth,
)


try:  # C++ versions of the two host-side conversions, bit-identical (tested), faster on small batches
    from pearl_fpga import _replay_native as _native
except ImportError:
    _native = None


def priority_words(priorities: np.ndarray) -> tuple[np.ndarray, int]:
    """Q16.16 words of float priorities and the count that saturated: spec.replay.priorities_to_fixed,
    in C++ when the extension is built (tests/test_replay_sampler.py checks they agree)."""
    if _native is None:
        return priorities_to_fixed(priorities)
    words, saturated, first_bad = _native.to_fixed(np.ascontiguousarray(priorities, dtype=np.float64))
    if first_bad >= 0:
        priorities_to_fixed(priorities)  # raises the reference's ValueError naming the position
    return words, saturated


def _targets(total: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """spec.replay.stratified_targets, with the arithmetic in C++ when the extension is built."""
    if _native is None or total <= 0:
        return stratified_targets(total, batch_size, rng)
    return _native.targets_from_uniform(rng.random(batch_size), total)


def make_backend(name: str, capacity: int, fanout: int, **options: Any) -> tuple[str, ReplayBackend]:
    """(resolved name, backend instance) for backend `name` ("auto" picks cpu, else numpy)."""
    return registry.create("replay", name, capacity, fanout, **options)


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None


class ReplaySampler:
    """Prioritized-replay sum tree: batched priority updates and stratified sampling.

    Args:
        capacity: number of leaves (1 .. 2^20).
        fanout: children per tree node (2, 4, 8 or 16).
        backend: "cpu" (the HLS C++ compiled into the package), "numpy" (golden reference), "rtl"
            (reference RTL under Verilator, cycle counts in `last_cycles`), "pynq"/"xrt"/"serial" (a board),
            or "auto" (cpu when the native extension loads, else numpy).
        max_batch: most updates or samples in one call (1 .. 4096).
        rng: generator used by `sample` when none is passed (default: a fresh unseeded one).
        **backend_options: passed to the rtl/board backends (e.g. a board handle).

    Priorities are stored as Q16.16 words (hls/replay/SPEC.md): `priorities()` and the priorities
    returned by `sample` are those words / 65536, not the floats that were passed in.
    """

    def __init__(
        self,
        capacity: int,
        fanout: int = 16,
        backend: str = "cpu",
        max_batch: int = MAX_BATCH,
        rng: np.random.Generator | None = None,
        **backend_options: Any,
    ) -> None:
        capacity = _as_int(capacity, "capacity")
        fanout = _as_int(fanout, "fanout")
        max_batch = _as_int(max_batch, "max_batch")
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"capacity must be in 1..{MAX_CAPACITY} (2^20), got {capacity}")
        if fanout not in FANOUTS:
            raise ValueError(f"fanout must be one of {FANOUTS}, got {fanout}")
        if not 1 <= max_batch <= MAX_BATCH:
            raise ValueError(f"max_batch must be in 1..{MAX_BATCH}, got {max_batch}")
        if backend not in registry.names("replay"):
            raise ValueError(f"unknown replay backend {backend!r}; choose one of {', '.join(registry.names('replay'))}")
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator (np.random.default_rng(seed)) or None")
        self._capacity = capacity
        self._fanout = fanout
        self._depth = tree_depth(capacity, fanout)
        self.max_batch = max_batch
        self._rng = rng if rng is not None else np.random.default_rng()
        self._backend_name, self._backend = make_backend(backend, capacity, fanout, **backend_options)
        # Sampling reads the total, then descends: both under one lock, so that an update from
        # another thread (e.g. a learner writing priorities back) cannot fall in between.
        self._lock = threading.Lock()

    # ---- properties ----------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Number of leaves."""
        return self._capacity

    @property
    def fanout(self) -> int:
        """Children per node (K)."""
        return self._fanout

    @property
    def depth(self) -> int:
        """Levels below the root: ceil(log_K(capacity)), at least 1."""
        return self._depth

    @property
    def backend(self) -> str:
        """Name of the backend in use ("auto" resolved)."""
        return self._backend_name

    @property
    def last_cycles(self) -> int | None:
        """Clock cycles of the last update/sample call on a cycle-accurate backend ("rtl"), else None."""
        return self._backend.last_cycles

    @property
    def total_fixed(self) -> int:
        """Sum of all leaf words (Q16.16), exact."""
        return int(self._backend.total())

    @property
    def total(self) -> float:
        """Sum of all priorities (total_fixed / 65536)."""
        return self.total_fixed / PRIORITY_SCALE

    def leaves(self) -> np.ndarray:
        """Copy of the leaf words (uint32, length capacity)."""
        return np.asarray(self._backend.leaves(), dtype=np.uint32)

    def priorities(self) -> np.ndarray:
        """Leaf priorities as float64 (the stored Q16.16 words / 65536)."""
        return fixed_to_priorities(self.leaves())

    # ---- validation ----------------------------------------------------------------------------
    def check_indices(self, indices: Any, what: str = "update", limit: int | None = None,
                      whole_batch: bool = True) -> np.ndarray:
        """Validated uint32 copy of `indices`: integers, 1-D, each < limit (default: capacity); at most
        max_batch of them unless whole_batch is False (callers that split the work, like the replay
        buffer). A ValueError or TypeError names the problem otherwise."""
        limit = self._capacity if limit is None else limit
        idx = np.atleast_1d(np.asarray(indices))
        if idx.size == 0:
            return np.zeros(0, dtype=np.uint32)
        if idx.dtype.kind not in "iu":
            raise TypeError(
                f"{what} indices must be integers, got dtype {idx.dtype}; pass e.g. np.asarray(indices, dtype=np.int64)"
            )
        if idx.ndim != 1:
            raise ValueError(f"{what} indices must be 1-D, got shape {idx.shape}; flatten them first")
        if whole_batch:
            self._check_batch(len(idx), what)
        if _native is not None:  # cast and range check in one pass
            out, bad = _native.indices_to_u32(np.ascontiguousarray(idx), limit)
        else:  # one reduction checks both ends: negative values wrap to huge unsigned ones
            wrapped = idx.astype(np.uint64, copy=False)
            out = np.ascontiguousarray(idx, dtype=np.uint32)
            bad = int(np.flatnonzero(wrapped >= limit)[0]) if int(wrapped.max()) >= limit else -1
        if bad >= 0:
            what_limit = f"capacity {self._capacity}" if limit == self._capacity else f"{limit} entries in use"
            raise ValueError(
                f"index {int(idx[bad])} at position {bad} is out of range: indices must be in "
                f"0..{limit - 1} ({what_limit}); nothing was changed"
            )
        return out

    def _check_batch(self, n: int, what: str) -> None:
        if n > self.max_batch:
            raise ValueError(
                f"a batch of {n} {what}s is larger than max_batch={self.max_batch}; split it into chunks of "
                f"at most {self.max_batch} (or create the sampler with a larger max_batch, up to {MAX_BATCH})"
            )

    def _values(self, values: Any, n: int, what: str, kinds: str) -> np.ndarray:
        v = np.atleast_1d(np.asarray(values))
        if v.size == 0 and n == 0:
            return v
        if v.dtype.kind not in kinds:
            expected = "integers" if kinds == "iu" else "real numbers"
            raise TypeError(f"{what} must be {expected}, got dtype {v.dtype}")
        if v.shape != (n,):
            raise ValueError(f"{what} has shape {v.shape} but there are {n} indices; pass one value per index")
        return v

    # ---- operations ----------------------------------------------------------------------------
    def update(self, indices: Any, priorities: Any = None, *, words: Any = None) -> None:
        """Set the priority of each leaf indices[b], in order (the last of a repeated index wins): the one
        way priorities reach the tree (the replay buffer's add, update_priorities and load use it).

        `priorities`: finite reals >= 0, stored as Q16.16 words; a positive one never rounds to 0, values
        above 65535.99998 saturate (with a warning giving the count). Or `words`: the Q16.16 integers
        themselves (0..2^32-1), e.g. a saved tree's leaves. At most max_batch indices per call."""
        if (priorities is None) == (words is None):
            raise TypeError("update takes priorities (real numbers) or words= (Q16.16 integers): pass exactly one")
        idx = self.check_indices(indices, "update")
        if words is None:
            p = self._values(priorities, len(idx), "priorities", "iuf")
            if len(idx) == 0:
                return
            w, saturated = priority_words(p)
            if saturated:
                warnings.warn(
                    f"{saturated} of {len(w)} priorities exceed the Q16.16 maximum "
                    f"{PRIORITY_MAX / PRIORITY_SCALE:.5f} and were saturated to it; scale the priorities down",
                    RuntimeWarning,
                    stacklevel=2,
                )
        else:
            w = self._values(words, len(idx), "words", "iu")
            if len(idx) == 0:
                return
            if int(w.astype(np.uint64, copy=False).max()) > PRIORITY_MAX or (w.dtype.kind == "i" and int(w.min()) < 0):
                raise ValueError(f"words must be in 0..{PRIORITY_MAX} (Q16.16); the tree was not changed")
            w = np.ascontiguousarray(w, dtype=np.uint32)
        with self._lock:
            self._backend.update(idx, w)

    def clear(self) -> None:
        """Set every leaf to 0."""
        with self._lock:
            self._backend.clear()

    def _batch_size(self, batch_size: Any) -> int:
        n = _as_int(batch_size, "batch_size")
        if n < 1:
            raise ValueError(f"batch_size must be at least 1, got {n}")
        self._check_batch(n, "sample")
        return n

    def _total_for_sampling(self) -> int:
        total = int(self._backend.total())
        if total == 0:
            raise ValueError(
                "cannot sample: every priority in the tree is 0 (update some priorities to values > 0 first)"
            )
        return total

    def sample_fixed(self, batch_size: int, rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Stratified sample: (leaf indices as int64, leaf words as uint32)."""
        n = self._batch_size(batch_size)
        if rng is None:
            rng = self._rng
        elif not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator (np.random.default_rng(seed)) or None")
        with self._lock:
            targets = _targets(self._total_for_sampling(), n, rng)
            idx, words = self._backend.sample(targets)
        return np.asarray(idx, dtype=np.int64), np.asarray(words, dtype=np.uint32)

    def sample(self, batch_size: int, rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Stratified sample of `batch_size` leaves with probability proportional to priority.

        Returns (indices as int64, priorities as float64). The same `rng` state gives the same
        indices on every backend. A zero-priority leaf is never returned.
        """
        idx, words = self.sample_fixed(batch_size, rng)
        return idx, fixed_to_priorities(words)

    def sample_targets(self, targets: Any) -> tuple[np.ndarray, np.ndarray]:
        """The descent for explicit targets (integers in [0, total_fixed)): (indices int64, words uint32).
        For tests and drivers that choose their own targets."""
        t = np.atleast_1d(np.asarray(targets))
        if t.dtype.kind not in "iu":
            raise TypeError(f"targets must be integers, got dtype {t.dtype}")
        if t.ndim != 1 or t.size == 0:
            raise ValueError(f"targets must be a non-empty 1-D array, got shape {t.shape}")
        self._check_batch(len(t), "sample")
        with self._lock:
            total = self._total_for_sampling()
            if (t.dtype.kind == "i" and int(t.min()) < 0) or int(t.astype(np.uint64, copy=False).max()) >= total:
                raise ValueError(f"targets must be in [0, total_fixed) = [0, {total})")
            idx, words = self._backend.sample(np.ascontiguousarray(t, dtype=np.uint64))
        return np.asarray(idx, dtype=np.int64), np.asarray(words, dtype=np.uint32)

    def close(self) -> None:
        """Release the backend's resources (simulator, board handle) where it holds any."""
        close = getattr(self._backend, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return (
            f"ReplaySampler(capacity={self._capacity}, fanout={self._fanout}, backend={self._backend_name!r}, "
            f"total={self.total:g})"
        )
