"""The "rtl" tabular backend: the reference RTL (hls/tabular/rtl/tabular_core.sv) run clock by clock
under Verilator, through the extern "C" harness in hls/tabular/rtl/harness.cpp. Built once per build
shape (build_shape: rows and columns rounded up) into a shared library, cached on disk by
pearl_fpga.sim.verilator. Each update() streams its
transitions in one per clock; `last_cycles` is the clocks until the last one was written (at most
n + PIPELINE_DEPTH)."""

from __future__ import annotations

import ctypes

import numpy as np

from pearl_fpga.data import data_path
from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.spec.tabular import PIPELINE_DEPTH
from pearl_fpga.sim.verilator import load_library

RTL_DIR = data_path("hls", "tabular", "rtl")
MAX_RTL_ENTRIES = 1 << 14
"""The reference RTL keeps the table in registers: larger tables take minutes to verilate."""

_i32p = ctypes.POINTER(ctypes.c_int32)
_u32p = ctypes.POINTER(ctypes.c_uint32)
_u8p = ctypes.POINTER(ctypes.c_uint8)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.tabular_rtl_create.restype = ctypes.c_void_p
    lib.tabular_rtl_create.argtypes = []
    lib.tabular_rtl_destroy.restype = None
    lib.tabular_rtl_destroy.argtypes = [ctypes.c_void_p]
    lib.tabular_rtl_configure.restype = None
    lib.tabular_rtl_configure.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_int,
                                          ctypes.c_uint32]
    lib.tabular_rtl_run.restype = ctypes.c_int
    lib.tabular_rtl_run.argtypes = [ctypes.c_void_p, _u32p, _u32p, _i32p, _u32p, _u32p, _u8p, ctypes.c_uint32,
                                    ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]
    for name, ptr in (("tabular_rtl_read", _i32p), ("tabular_rtl_write", _i32p)):
        getattr(lib, name).restype = None
        getattr(lib, name).argtypes = [ctypes.c_void_p, ptr, ctypes.c_uint32]
    lib.tabular_rtl_clear.restype = None
    lib.tabular_rtl_clear.argtypes = [ctypes.c_void_p]
    return lib


def build_shape(n_states: int, n_actions: int) -> tuple[int, int]:
    """The RTL build that holds a table: rows and columns rounded up to powers of two (at least 16 x 4),
    so that small tables of many shapes share one Verilator build."""
    return max(16, 1 << (n_states - 1).bit_length()), max(4, 1 << (n_actions - 1).bit_length())


class TabularRTLBackend:
    """The table on the cycle-accurate reference RTL; inputs arrive validated by TabularQ."""

    def __init__(self, n_states: int, n_actions: int, max_cycles_per_update: int = 4) -> None:
        rows, cols = build_shape(n_states, n_actions)
        if rows * cols > MAX_RTL_ENTRIES:
            raise BackendUnavailable(f"backend 'rtl' simulates tables of at most {MAX_RTL_ENTRIES} entries (the "
                                     f"reference RTL holds the table in registers); {n_states} x {n_actions} is "
                                     "larger: use backend='cpu' (bit-exact with it)")
        self.n_states, self.n_actions = n_states, n_actions
        self.max_cycles_per_update = max_cycles_per_update
        self.rows, self.cols = rows, cols
        self._lib = load_library(f"tabular_rtl_s{rows}_a{cols}", "tabular_core", [RTL_DIR / "tabular_core.sv"],
                                 RTL_DIR / "harness.cpp", {"N_STATES": rows, "N_ACTIONS": cols},
                                 declare=_declare, what=f"the tabular RTL ({rows} x {cols} build)",
                                 verilator_args=["-CFLAGS", "-O1"])
        self._h = self._lib.tabular_rtl_create()
        self.last_cycles: int | None = None

    def configure(self, alpha_word: int, gamma_word: int, sarsa: bool) -> None:
        self._lib.tabular_rtl_configure(self._h, int(alpha_word), int(gamma_word), int(bool(sarsa)), self.n_actions)

    def update(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, a2: np.ndarray,
               done: np.ndarray) -> None:
        n = len(s)
        cols = [np.ascontiguousarray(x, dtype=np.uint32) for x in (s, a)]
        rr = np.ascontiguousarray(r, dtype=np.int32)
        cols2 = [np.ascontiguousarray(x, dtype=np.uint32) for x in (s2, a2)]
        dd = np.ascontiguousarray(done, dtype=np.uint8)
        cycles = ctypes.c_uint64(0)
        status = self._lib.tabular_rtl_run(
            self._h, cols[0].ctypes.data_as(_u32p), cols[1].ctypes.data_as(_u32p), rr.ctypes.data_as(_i32p),
            cols2[0].ctypes.data_as(_u32p), cols2[1].ctypes.data_as(_u32p), dd.ctypes.data_as(_u8p), n,
            self.max_cycles_per_update * n + PIPELINE_DEPTH + 16, ctypes.byref(cycles))
        self.last_cycles = int(cycles.value)
        if status:
            raise KernelTimeout(f"the tabular RTL did not write its {n} transitions within {cycles.value} clocks "
                                "(a hang in the RTL); the table may be partly updated")

    def table(self) -> np.ndarray:
        out = np.empty(self.rows * self.cols, dtype=np.int32)
        self._lib.tabular_rtl_read(self._h, out.ctypes.data_as(_i32p), out.size)
        return out.reshape(self.rows, self.cols)[: self.n_states, : self.n_actions].copy()

    def load(self, table: np.ndarray) -> None:
        words = np.zeros((self.rows, self.cols), dtype=np.int32)
        words[: self.n_states, : self.n_actions] = table
        self._lib.tabular_rtl_write(self._h, words.ctypes.data_as(_i32p), words.size)

    def clear(self) -> None:
        self._lib.tabular_rtl_clear(self._h)

    def __del__(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            self._lib.tabular_rtl_destroy(h)
