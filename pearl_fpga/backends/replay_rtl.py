"""The "rtl" replay backend: the reference RTL (hls/replay/rtl/) run cycle by cycle under Verilator.

The RTL is built once per (capacity, fanout) with `FREE_RUN=1` into a shared library (cached on disk by
`pearl_fpga.sim.verilator.build_library`, and per process here) and driven through the `extern "C"`
harness in hls/replay/rtl/harness.cpp: each call streams its batch of command words into the kernel
and clocks it until every response is out and the kernel is idle. `last_cycles` holds the clock
cycles that took, the figure the planner's FPGA model uses.

`leaves()` comes from a host-side mirror of the priorities written (the RTL has no read-back port);
samples and totals always come from the RTL.
"""

from __future__ import annotations

import ctypes

import numpy as np

from pearl_fpga.data import data_path
from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.spec.replay import (
    FANOUTS,
    MAX_CAPACITY,
    OP_CLEAR,
    OP_SAMPLE,
    OP_TOTAL,
    OP_UPDATE,
    REG_CAPACITY,
    REG_FANOUT,
    batch_cycle_bound,
    decode_responses,
    encode_commands,
    tree_depth,
)
from pearl_fpga.sim.verilator import kernel_rtl, load_library

RTL_DIR = data_path("hls", "replay", "rtl")

_OK, _TIMEOUT, _TOO_MANY = 0, 1, 2

_u64p = ctypes.POINTER(ctypes.c_uint64)
_u32p = ctypes.POINTER(ctypes.c_uint32)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.replay_rtl_create.restype = ctypes.c_void_p
    lib.replay_rtl_create.argtypes = []
    lib.replay_rtl_destroy.restype = None
    lib.replay_rtl_destroy.argtypes = [ctypes.c_void_p]
    lib.replay_rtl_reset.restype = ctypes.c_int
    lib.replay_rtl_reset.argtypes = [ctypes.c_void_p, ctypes.c_uint64, _u64p]
    lib.replay_rtl_run.restype = ctypes.c_int
    lib.replay_rtl_run.argtypes = [
        ctypes.c_void_p, _u64p, ctypes.c_uint32, _u64p, ctypes.c_uint32, ctypes.c_uint64, _u32p, _u32p, _u64p,
    ]
    lib.replay_rtl_read_reg.restype = ctypes.c_int
    lib.replay_rtl_read_reg.argtypes = [ctypes.c_void_p, ctypes.c_uint32, _u32p, ctypes.c_uint64]
    lib.replay_rtl_cycles.restype = ctypes.c_uint64
    lib.replay_rtl_cycles.argtypes = [ctypes.c_void_p]
    return lib


def rtl_library(capacity: int, fanout: int) -> ctypes.CDLL:
    """The Verilated replay_top for this shape, built on first use (10-60 s) and cached."""
    return load_library(
        f"replay_rtl_c{capacity}_k{fanout}",
        "replay_top",
        kernel_rtl("replay"),
        RTL_DIR / "harness.cpp",
        parameters={"CAPACITY": capacity, "FANOUT": fanout, "FREE_RUN": 1},
        declare=_declare,
        what=f"the replay RTL (capacity={capacity}, fanout={fanout})",
        verilator_args=["-CFLAGS", "-O1"],  # a third less compile time than -O2, same speed here
    )


class ReplayRTLBackend:
    """Sum tree of `capacity` leaves and fan-out `fanout` on the cycle-accurate reference RTL.

    Operations take the integer words of hls/replay/SPEC.md (Q16.16 priorities, u64 targets);
    `last_cycles` is the number of clock cycles of the last call. `cycle_limit` bounds one call
    (default: 64 cycles per command plus the pipeline fill and a clear sweep); exceeding it raises
    KernelTimeout and restores the tree to its state before the call.
    """

    name = "rtl"

    def __init__(self, capacity: int, fanout: int = 16, cycle_limit: int | None = None) -> None:
        if fanout not in FANOUTS:
            raise ValueError(f"fanout={fanout} is not supported: use one of {FANOUTS}")
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"capacity={capacity} is out of range: use 1 .. {MAX_CAPACITY}")
        self.capacity = int(capacity)
        self.fanout = int(fanout)
        self.depth = tree_depth(self.capacity, self.fanout)
        if cycle_limit is not None and (not isinstance(cycle_limit, int) or cycle_limit < 1):
            raise ValueError(f"cycle_limit must be a positive number of cycles or None (automatic), got {cycle_limit!r}")
        self.cycle_limit = cycle_limit
        self.last_cycles = 0
        self._restoring = False
        self._lib = rtl_library(self.capacity, self.fanout)
        self._sim = self._lib.replay_rtl_create()
        if not self._sim:
            raise MemoryError("could not allocate the Verilated replay_top model")
        self._leaves = np.zeros(self.capacity, dtype=np.uint32)
        self._total = 0
        self._reset()
        self._check_registers()

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        """Free the simulator (the backend cannot be used afterwards)."""
        sim, self._sim = getattr(self, "_sim", None), None
        if sim:
            self._lib.replay_rtl_destroy(sim)

    def __del__(self) -> None:
        self.close()

    def _handle(self) -> int:
        if not self._sim:
            raise RuntimeError("this rtl replay backend was closed: create a new ReplaySampler")
        return self._sim

    def _default_limit(self, n_cmds: int) -> int:
        clear = -(-self.capacity // self.fanout)
        return 64 * batch_cycle_bound(n_cmds, self.depth) + 2 * clear + 1000

    def _reset(self) -> None:
        cycles = ctypes.c_uint64()
        limit = self._default_limit(0)
        if self._lib.replay_rtl_reset(self._handle(), limit, ctypes.byref(cycles)) != _OK:
            raise KernelTimeout(
                f"replay RTL (capacity={self.capacity}, fanout={self.fanout}) did not finish clearing its tree "
                f"within {limit} cycles after reset; the RTL is broken: rebuild it or use backend='cpu'"
            )
        self.last_cycles = int(cycles.value)

    def _check_registers(self) -> None:
        for reg, want, what in ((REG_CAPACITY, self.capacity, "capacity"), (REG_FANOUT, self.fanout, "fanout")):
            value = ctypes.c_uint32()
            status = self._lib.replay_rtl_read_reg(self._handle(), reg, ctypes.byref(value), 1000)
            if status != _OK or value.value != want:
                raise BackendUnavailable(
                    f"the replay RTL library reports {what}={value.value} (status {status}), expected {want}: "
                    "clear the RTL build cache (~/.cache/pearl_fpga/rtl) and retry"
                )

    def _run(self, words: np.ndarray, n_expected: int, what: str) -> np.ndarray:
        """Stream command words (N, 2) through the kernel; returns the (n_expected, 2) response words."""
        words = np.ascontiguousarray(words, dtype=np.uint64)
        n = len(words)
        resp = np.zeros((max(n_expected, 1), 2), dtype=np.uint64)
        limit = self.cycle_limit if self.cycle_limit is not None else self._default_limit(n)
        taken, got, cycles = ctypes.c_uint32(), ctypes.c_uint32(), ctypes.c_uint64()
        status = self._lib.replay_rtl_run(
            self._handle(),
            words.ctypes.data_as(_u64p),
            n,
            resp.ctypes.data_as(_u64p),
            n_expected,
            limit,
            ctypes.byref(taken),
            ctypes.byref(got),
            ctypes.byref(cycles),
        )
        self.last_cycles = int(cycles.value)
        if status != _OK or got.value != n_expected:
            if self._restoring:
                raise KernelTimeout(
                    f"replay RTL (capacity={self.capacity}, fanout={self.fanout}) failed while restoring its tree "
                    f"after an earlier error (status {status}); the RTL is broken: use backend='cpu'"
                )
            state = (
                f"{taken.value} of {n} commands taken, {got.value} of {n_expected} responses out "
                f"after {cycles.value} cycles"
            )
            self._restore()
            if status == _TIMEOUT:
                raise KernelTimeout(
                    f"replay RTL kernel (capacity={self.capacity}, fanout={self.fanout}) did not finish {what} "
                    f"within the cycle limit of {limit}: {state}. The tree was restored to its state before "
                    "the call; raise `cycle_limit` (None = automatic) if the limit was set too low."
                )
            raise RuntimeError(
                f"replay RTL kernel (capacity={self.capacity}, fanout={self.fanout}) gave the wrong number of "
                f"responses during {what}: {state} (status {status}); the tree was restored. This is an RTL bug."
            )
        return resp[:n_expected]

    def _restore(self) -> None:
        """Reset the model and write the mirrored leaves back (after a failed call)."""
        self._reset()
        nz = np.flatnonzero(self._leaves)
        if len(nz):
            saved_limit, self.cycle_limit = self.cycle_limit, None
            self._restoring = True
            try:
                cmds = encode_commands(np.full(len(nz), OP_UPDATE), nz, self._leaves[nz])
                self._run(cmds, 0, "restoring the tree")
            finally:
                self.cycle_limit = saved_limit
                self._restoring = False

    # ------------------------------------------------------------------ operations
    def update(self, indices: np.ndarray, words: np.ndarray) -> None:
        """Leaf indices[i] := words[i], in order (a repeated index: the last one wins)."""
        idx = np.ascontiguousarray(indices).reshape(-1)
        w = np.ascontiguousarray(words).reshape(-1)
        if len(idx) != len(w):
            raise ValueError(f"update got {len(idx)} indices but {len(w)} priorities: pass one priority per index")
        if len(idx) == 0:
            self.last_cycles = 0
            return
        idx = idx.astype(np.int64)
        bad = (idx < 0) | (idx >= self.capacity)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise IndexError(f"index {idx[i]} at position {i} is out of range: indices must be in [0, {self.capacity})")
        w = w.astype(np.uint32)
        self._run(encode_commands(np.full(len(idx), OP_UPDATE), idx, w), 0, f"{len(idx)} updates")
        # mirror: the last write to each index wins
        rev_unique, rev_pos = np.unique(idx[::-1], return_index=True)
        last_words = w[::-1][rev_pos]
        self._total += int(last_words.sum(dtype=np.uint64)) - int(self._leaves[rev_unique].sum(dtype=np.uint64))
        self._leaves[rev_unique] = last_words

    def sample(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One leaf per target (0 <= target < total): (indices as int64, priority words as uint32)."""
        t = np.ascontiguousarray(targets).reshape(-1).astype(np.uint64)
        if len(t) == 0:
            self.last_cycles = 0
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32)
        if self._total == 0:
            raise ValueError("cannot sample: every priority in the tree is 0 (update priorities first)")
        if int(t.max()) >= self._total:
            raise ValueError(f"sample target {int(t.max())} is not below the total {self._total}: targets must be in [0, total)")
        resp = self._run(encode_commands(np.full(len(t), OP_SAMPLE), np.zeros(len(t)), t), len(t), f"{len(t)} samples")
        ops, idx, values = decode_responses(resp)
        if (ops != OP_SAMPLE).any():
            raise RuntimeError(f"replay RTL answered a SAMPLE with opcode {int(ops[ops != OP_SAMPLE][0])}: RTL bug")
        return idx, values.astype(np.uint32)

    def total(self) -> int:
        """The root sum (u64), read from the RTL with a TOTAL command (last_cycles is left alone)."""
        cycles = self.last_cycles
        resp = self._run(encode_commands(np.array([OP_TOTAL]), np.zeros(1), np.zeros(1)), 1, "a total")
        self.last_cycles = cycles
        ops, _, values = decode_responses(resp)
        if ops[0] != OP_TOTAL:
            raise RuntimeError(f"replay RTL answered TOTAL with opcode {int(ops[0])}: RTL bug")
        return int(values[0])

    def clear(self) -> None:
        """Every leaf to 0 (a CLEAR command: a sweep of ceil(capacity / fanout) cycles; last_cycles is left alone)."""
        cycles = self.last_cycles
        self._run(encode_commands(np.array([OP_CLEAR]), np.zeros(1), np.zeros(1)), 0, "a clear")
        self.last_cycles = cycles
        self._leaves[:] = 0
        self._total = 0

    def leaves(self) -> np.ndarray:
        """Copy of the leaf priority words (uint32, from the host-side mirror)."""
        return self._leaves.copy()
