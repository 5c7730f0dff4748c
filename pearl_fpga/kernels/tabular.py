"""`TabularQ`: the tabular Q-learning / SARSA kernel behind one API, whatever runs it.

The table is int32 Q16.16 (hls/tabular/SPEC.md); alpha, gamma and rewards become words on the host, so
every backend sees identical integers and produces the identical table. Every argument is validated
here before a backend is called: a rejected call leaves the table exactly as it was.

A batch is strictly in order: ``update(s, a, r, s2, done)`` over n transitions gives the same table as
n calls of one transition each.

    >>> import numpy as np
    >>> from pearl_fpga.kernels import TabularQ
    >>> q = TabularQ(4, 2, alpha=0.5, gamma=0.9, backend="numpy")
    >>> q.update(np.array([0, 0]), np.array([1, 1]), np.array([1.0, 1.0]), np.array([1, 1]), np.array([True, True]))
    >>> q.q[0].tolist()
    [0.0, 0.75]
    >>> q.greedy().tolist()
    [1, 0, 0, 0]
"""

from __future__ import annotations

import operator
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pearl_fpga.backends import registry
from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.host import available_cores
from pearl_fpga.kernels.tabular_partitions import PartitionPlan, plan_threads, slice_bounds
from pearl_fpga.spec.tabular import (
    MAX_ENTRIES,
    ONE,
    alpha_word,
    gamma_word,
    merge_partitions,
    reward_word,
    reward_words,
)

ALGOS = ("q", "sarsa")
__all__ = ["TabularQ", "PartitionPlan", "merge_partitions", "make_backend", "available_backends", "ALGOS"]


def make_backend(name: str, n_states: int, n_actions: int, **options: Any) -> tuple[str, Any]:
    """(resolved name, backend instance) from the registry; "auto" picks cpu when built, else numpy."""
    return registry.create("tabular", name, n_states, n_actions, **options)


def available_backends(include_slow: bool = False) -> list[str]:
    """The backends that construct here (a tiny table each), "auto" left out; the rtl simulator (a
    Verilator build) and the boards only with include_slow=True."""
    found = []
    for name in registry.names("tabular"):
        if name == "auto" or (not include_slow and name not in ("numpy", "cpu")):
            continue
        try:
            make_backend(name, 2, 2)
        except (BackendUnavailable, ImportError, OSError):
            continue
        found.append(name)
    return found


def _as_count(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got a bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}" + ("; 0 chooses it by measurement" if minimum == 0 else ""))
    return v


def _shape(arr: np.ndarray, name: str, n: int | None) -> np.ndarray:
    if arr.ndim == 0:
        arr = arr.reshape(1) if n in (None, 1) else np.full(n, arr)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array (one entry per transition), got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but s has {n}; pass one entry per transition")
    return arr


def _indices(x: Any, name: str, n: int | None, bound: int, what: str) -> np.ndarray:
    # A snapshot: another thread may change the caller's array between the check and the update.
    arr = np.array(x)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}; convert with .astype(np.int64)")
    arr = _shape(arr, name, n)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= bound:
            i = int(np.flatnonzero((arr < 0) | (arr >= bound))[0])
            raise ValueError(f"{name}[{i}] = {int(arr[i])} is out of range; {what} must be in [0, {bound})")
    return np.ascontiguousarray(arr, dtype=np.uint32)  # the snapshot itself where it is uint32 already


def _rewards(x: Any, n: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"r must be a float or integer array, got dtype {arr.dtype}")
    return reward_words(_shape(arr, "r", n))


def _done(x: Any, n: int) -> np.ndarray:
    arr = np.asarray(x)
    if not (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"done must be a bool (or 0/1 integer) array, got dtype {arr.dtype}")
    arr = _shape(arr, "done", n)
    if arr.dtype != np.bool_ and arr.size and (arr.min() < 0 or arr.max() > 1):
        raise ValueError("done must hold only 0/1 (or True/False); pass terminated flags, not step counts")
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _plain(s: Any, a: Any, r: Any, s2: Any, done: Any, a2: Any) -> bool:
    """Whether the arguments are the arrays a training loop passes (int64 indices, float64 rewards, bool
    done, 1-D, contiguous, one length): then a backend may check and apply them in one native call."""
    ints = [x for x in (s, a, s2, a2) if x is not None]
    arrays = [*ints, r, done]
    if not all(isinstance(x, np.ndarray) and x.ndim == 1 and x.flags.c_contiguous for x in arrays):
        return False
    n = s.shape[0]
    return (n > 0 and all(x.shape[0] == n for x in arrays) and all(x.dtype == np.int64 for x in ints)
            and r.dtype == np.float64 and done.dtype == np.bool_)


class TabularQ:
    """An int32 Q16.16 Q table updated by Q-learning (algo="q") or SARSA (algo="sarsa").

    alpha in (0, 1] and gamma in [0, 1] are rounded to 16 fractional bits (gamma = 1 is exact).
    backend: "numpy" (golden reference), "cpu" (the kernel's C++ of hls/tabular compiled in), "auto"
    (cpu if built, else numpy), "rtl" (the reference RTL under Verilator, cycle counts), "pynq"/"xrt"/"serial" (the
    kernel on a board, hls/tabular/SPEC.md "Board interface"; docs/hardware.md).
    backend_options go to the rtl/board backend.

    Thread-safe: one lock serializes updates, loads and reads of the table, so threads sharing a table
    lose no update (the kernel's C++ releases the GIL, and two read-modify-writes of one entry at once
    kept only one). For parallel speed use update_partitioned, whose partitions run on private copies.
    """

    def __init__(self, n_states: int, n_actions: int, alpha: float = 0.1, gamma: float = 0.99, algo: str = "q",
                 backend: str = "auto", **backend_options: Any) -> None:
        self.n_states = _as_count(n_states, "n_states")
        self.n_actions = _as_count(n_actions, "n_actions")
        if self.n_states * self.n_actions > MAX_ENTRIES:
            raise ValueError(f"n_states * n_actions = {self.n_states * self.n_actions:,} exceeds {MAX_ENTRIES:,}; "
                             "discretise the state more coarsely")
        if algo not in ALGOS:
            raise ValueError(f"unknown algo {algo!r}; choose 'q' (Q-learning) or 'sarsa'")
        self.algo = algo
        self.alpha_word = alpha_word(alpha)
        self.gamma_word = gamma_word(gamma)
        self._options = dict(backend_options)
        self._lock = threading.Lock()  # one call at a time: two threads' read-modify-writes lost updates
        self.backend_name, self._backend = make_backend(backend, self.n_states, self.n_actions, **backend_options)
        self._backend.configure(self.alpha_word, self.gamma_word, algo == "sarsa")
        self.partition_plan: PartitionPlan | None = None  # how the last update_partitioned ran

    @property
    def alpha(self) -> float:
        return self.alpha_word / ONE

    @property
    def gamma(self) -> float:
        return self.gamma_word / ONE

    @property
    def last_cycles(self) -> int | None:
        """Clock cycles of the last update on a cycle-accurate backend (rtl), else None."""
        return self._backend.last_cycles

    def __repr__(self) -> str:
        return (f"TabularQ({self.n_states}, {self.n_actions}, alpha={self.alpha:g}, gamma={self.gamma:g}, "
                f"algo={self.algo!r}, backend={self.backend_name!r})")

    def _validate(self, s: Any, a: Any, r: Any, s2: Any, done: Any, a2: Any) -> tuple[np.ndarray, ...]:
        s_ = _indices(s, "s", None, self.n_states, "states")
        n = s_.shape[0]
        a_ = _indices(a, "a", n, self.n_actions, "actions")
        s2_ = _indices(s2, "s2", n, self.n_states, "states")
        r_ = _rewards(r, n)
        d_ = _done(done, n)
        if a2 is None:
            if self.algo == "sarsa":
                raise ValueError("SARSA needs a2 (the action taken in s2); pass a2=..., or use algo='q'")
            a2_ = np.zeros(n, dtype=np.uint32)
        else:
            a2_ = _indices(a2, "a2", n, self.n_actions, "actions")
            if self.algo == "q":
                a2_ = np.zeros(n, dtype=np.uint32)  # Q-learning bootstraps on the max; a2 is unused
        return s_, a_, r_, s2_, a2_, d_

    def update(self, s: Any, a: Any, r: Any, s2: Any, done: Any, a2: Any = None) -> None:
        """Apply transitions (s, a, r, s2, done[, a2]) in order; 1-D arrays of equal length (a scalar r or
        done applies to every transition). a2 (the next action) is required for SARSA, ignored by Q-learning."""
        with self._lock:
            checked = getattr(self._backend, "update_checked", None)
            if checked is not None and _plain(s, a, r, s2, done, a2) and checked(s, a, r, s2, done, a2):
                return  # the backend checked and applied the usual arrays in one call
            args = self._validate(s, a, r, s2, done, a2)  # (a refused fast call changed nothing; this names why)
            if args[0].size:
                s_, a_, r_, s2_, a2_, d_ = args
                self._backend.update(s_, a_, r_, s2_, a2_, d_)

    def update_one(self, s: int, a: int, r: float, s2: int, done: bool, a2: int | None = None) -> None:
        """One transition from Python scalars: the same checks and result as `update`, with less overhead
        per call (the online training loop)."""
        ns, na = self.n_states, self.n_actions
        for name, v, bound in (("s", s, ns), ("a", a, na), ("s2", s2, ns)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not 0 <= v < bound:
                raise ValueError(f"{name} = {v!r} is out of range; it must be an integer in [0, {bound})")
        if a2 is None:
            if self.algo == "sarsa":
                raise ValueError("SARSA needs a2 (the action taken in s2); pass a2=..., or use algo='q'")
            a2 = 0
        elif isinstance(a2, (bool, np.bool_)) or not isinstance(a2, (int, np.integer)) or not 0 <= a2 < na:
            raise ValueError(f"a2 = {a2!r} is out of range; it must be an integer in [0, {na})")
        word = reward_word(r)
        with self._lock:  # also guards the one-transition buffers
            u = self._one
            u[0][0], u[1][0], u[2][0], u[3][0] = s, a, word, s2
            u[4][0] = a2 if self.algo == "sarsa" else 0
            u[5][0] = 1 if done else 0
            self._backend.update(*u)

    @property
    def _one(self) -> tuple[np.ndarray, ...]:
        if not hasattr(self, "_one_buf"):
            self._one_buf = (np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.int32),
                             np.zeros(1, np.uint32), np.zeros(1, np.uint32), np.zeros(1, np.uint8))
        return self._one_buf

    def update_partitioned(self, s: Any, a: Any, r: Any, s2: Any, done: Any, a2: Any = None, parts: int = 2,
                           threads: int | None = None) -> PartitionPlan:
        """SwiftRL-style partitioned update: NOT sequential Q-learning.

        The transitions are split into `parts` contiguous slices (np.array_split); each slice updates its
        own copy of the current table, in order, independently of the others; the copies are merged by
        the integer mean rounded half up (merge_partitions). A slice never sees the updates of another
        slice, so the result differs from `update` over the whole batch (which it equals for parts=1);
        it is what K independent kernels compute: K threads of the cpu backend; on a board, the bitstream's
        kernel instances at once (slice i on instance i mod instances, each instance's slices in order).

        threads: how many slices run at once (never more than parts, nor than the cores this process may
        use); None or 0 chooses by a short measurement on the cpu backend (tabular_partitions), which
        never changes the result. parts=0 leaves K to that measurement too (K = the threads chosen;
        the result then depends on this machine). Returns the plan it ran (also `partition_plan`).
        """
        k = _as_count(parts, "parts", minimum=0)
        workers = 0 if threads is None else _as_count(threads, "threads", minimum=0)
        with self._lock:  # the merged table replaces the one it started from: no update may come between
            plan = self._plan(k, workers, int(np.shape(s)[0]) if np.ndim(s) == 1 else 1)
            if hasattr(self._backend, "update_partitioned"):
                self._update_partitioned_native(s, a, r, s2, done, a2, plan)
            else:
                self._update_partitioned(s, a, r, s2, done, a2, plan)
            self.partition_plan = plan
            return plan

    def _plan(self, parts: int, threads: int, n: int) -> PartitionPlan:
        """K and the threads of one call: as given (threads capped at K and the cores), else measured on
        the cpu backend; elsewhere an open K is the board's instances (1 on the numpy and rtl backends,
        whose slices run one after another) and open threads are min(K, cores)."""
        cores = available_cores()
        if threads:
            k = parts or threads  # an open K with given threads: one slice per thread
            return PartitionPlan(parts=k, threads=max(1, min(threads, k, cores)), how="given")
        if hasattr(self._backend, "update_partitioned"):
            return plan_threads(self.n_states, self.n_actions, self.algo, n, parts or None, cores)
        k = parts or getattr(self._backend, "instances", 1)
        return PartitionPlan(parts=k, threads=min(k, cores), how="given" if parts else "the backend's instances")

    def _update_partitioned_native(self, s: Any, a: Any, r: Any, s2: Any, done: Any, a2: Any,
                                   plan: PartitionPlan) -> None:
        # One native call runs every slice on the backend's thread pool and merges. It takes the arrays a
        # training loop passes; anything else is validated here and handed over in that form.
        if not _plain(s, a, r, s2, done, a2):
            s_, a_, r_, s2_, a2_, d_ = self._validate(s, a, r, s2, done, a2)
            s, a, s2 = s_.astype(np.int64), a_.astype(np.int64), s2_.astype(np.int64)
            r, done = r_.astype(np.float64) / ONE, d_.astype(np.bool_)  # word / 2^16 converts back to the word
            a2 = a2_.astype(np.int64) if self.algo == "sarsa" else None
        if s.shape[0] == 0:
            return
        if not self._backend.update_partitioned(s, a, r, s2, done, a2, plan.parts, plan.threads):
            self._validate(s, a, r, s2, done, a2)  # a transition was refused: this names it and raises
            raise AssertionError("the cpu backend refused transitions that the validator accepts")

    def _update_partitioned(self, s: Any, a: Any, r: Any, s2: Any, done: Any, a2: Any, plan: PartitionPlan) -> None:
        # The backends without a native partitioned mode: each slice on a backend of its own (validated
        # here first), K threads of Python; on a board, slice i on kernel instance i mod I (I = the
        # bitstream's instances, at most K), one worker per instance, each instance's slices in order.
        k = plan.parts
        args = self._validate(s, a, r, s2, done, a2)
        start = self._backend.table()
        slices = slice_bounds(args[0].shape[0], k)
        on_board = self.backend_name in ("pynq", "xrt", "serial")
        if on_board:
            units = [self._backend] + [self._spawn(instance=j) for j in range(1, min(k, self._backend.instances))]
            backends = [units[i % len(units)] for i in range(k)]
        else:
            units = backends = [self._spawn() for _ in range(k)]

        def run(i: int) -> np.ndarray:
            lo, hi = slices[i]
            be = backends[i]
            be.load(start)
            if hi > lo:
                be.update(*[x[lo:hi] for x in args])
            return be.table()

        def run_unit(u: int) -> list[np.ndarray]:  # every slice of one kernel instance, in order
            return [run(i) for i in range(u, k, len(units))]

        if on_board:
            with ThreadPoolExecutor(max_workers=len(units)) as pool:
                per_unit = list(pool.map(run_unit, range(len(units))))
            tables = [per_unit[i % len(units)][i // len(units)] for i in range(k)]
        elif plan.threads == 1:
            tables = [run(i) for i in range(k)]
        else:
            with ThreadPoolExecutor(max_workers=plan.threads) as pool:
                tables = list(pool.map(run, range(k)))
        self._backend.load(merge_partitions(tables))

    def _spawn(self, **extra: Any) -> Any:
        """A backend of the same kind and configuration, for one partition (`extra`: e.g. instance=j)."""
        _, be = make_backend(self.backend_name, self.n_states, self.n_actions, **{**self._options, **extra})
        be.configure(self.alpha_word, self.gamma_word, self.algo == "sarsa")
        return be

    @property
    def table(self) -> np.ndarray:
        """The raw int32 Q16.16 table (a copy), shape (n_states, n_actions)."""
        with self._lock:
            return self._backend.table()

    @property
    def q(self) -> np.ndarray:
        """The table as float64 Q values (a copy)."""
        return self.table.astype(np.float64) / ONE

    def greedy(self) -> np.ndarray:
        """The greedy action of every state (lowest index on ties), int64 array of n_states."""
        return np.argmax(self.table, axis=1).astype(np.int64)  # argmax gives intp: int32 on a 32-bit board

    def load(self, table: Any) -> None:
        """Replace the table with an int32 Q16.16 array of shape (n_states, n_actions)."""
        arr = np.asarray(table)
        if arr.dtype != np.int32:
            raise TypeError(f"load takes the raw int32 Q16.16 table (as `.table` returns), got dtype {arr.dtype}; "
                            "convert float Q values with np.floor(q * 65536 + 0.5).astype(np.int32)")
        if arr.shape != (self.n_states, self.n_actions):
            raise ValueError(f"load needs shape ({self.n_states}, {self.n_actions}), got {arr.shape}")
        with self._lock:
            self._backend.load(np.ascontiguousarray(arr))

    def clear(self) -> None:
        """Zero the table (the kernel's CLEAR command)."""
        with self._lock:
            self._backend.clear()
