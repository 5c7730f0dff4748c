"""The "rtl" MLP backend: the reference RTL (hls/mlp/rtl/) run cycle by cycle under Verilator.

`mlp_top` is built once per (LANES, MAX_WIDTH, MAX_LAYERS) into a shared library (cached on disk by
`pearl_fpga.sim.verilator.build_library`, and per process here) together with the `extern "C"`
harness hls/mlp/rtl/harness.cpp, which plays the host: AXI4-Lite registers, the LOAD stream and
INFER batches. `last_cycles` holds the clock cycles of the last call (ap_start to ap_done), the figure
the planner's FPGA model uses.

The tanh table of the RTL is read with $readmemh from a file this module writes from
`pearl_fpga.spec.mlp.tanh_table()` (see `write_tanh_memh`), so every implementation uses
the table of the one formula in hls/mlp/SPEC.md.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pearl_fpga.data import data_path
from pearl_fpga.spec.mlp import check_layers, check_observations
from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.spec.mlp import (
    HEAD_RAW,
    MAX_BATCH,
    MAX_LAYERS,
    MAX_WIDTH,
    REG_BATCH,
    REG_CTRL,
    REG_ERROR,
    REG_LANES,
    REG_MAX_LAYERS,
    REG_MAX_WIDTH,
    REG_MODE,
    QuantizedLayer,
    encode_load_stream,
    tanh_table,
)
from pearl_fpga.sim.verilator import cache_dir, kernel_rtl, load_library

RTL_DIR = data_path("hls", "mlp", "rtl")
TANH_MEMH_NAME = "mlp_tanh.memh"

_OK, _TIMEOUT, _PROTOCOL = 0, -1, -2
_u64p = ctypes.POINTER(ctypes.c_uint64)
_u32p = ctypes.POINTER(ctypes.c_uint32)


def tanh_memh_text() -> str:
    """The tanh table T[0..1024] of SPEC.md as $readmemh text: one 16-bit two's-complement word a line."""
    return "".join(f"{int(v) & 0xFFFF:04x}\n" for v in tanh_table())


def write_tanh_memh(directory: Path) -> Path:
    """Write the tanh table for $readmemh into `directory` (atomically; unchanged files are kept)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TANH_MEMH_NAME
    text = tanh_memh_text()
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def tanh_parameter(path: Path) -> str:
    """The Verilator option that points mlp_top's TANH_MEMH parameter at `path`."""
    return f'-GTANH_MEMH="{Path(path).resolve()}"'


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.mlp_rtl_new.restype = ctypes.c_void_p
    lib.mlp_rtl_new.argtypes = []
    lib.mlp_rtl_free.restype = None
    lib.mlp_rtl_free.argtypes = [ctypes.c_void_p]
    lib.mlp_rtl_reset.restype = None
    lib.mlp_rtl_reset.argtypes = [ctypes.c_void_p]
    lib.mlp_rtl_read.restype = ctypes.c_int
    lib.mlp_rtl_read.argtypes = [ctypes.c_void_p, ctypes.c_uint32, _u32p]
    lib.mlp_rtl_load.restype = ctypes.c_int
    lib.mlp_rtl_load.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, _u64p]
    lib.mlp_rtl_infer.restype = ctypes.c_int
    lib.mlp_rtl_infer.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
        ctypes.c_uint64, _u64p,
    ]
    lib.mlp_rtl_cycles.restype = ctypes.c_uint64
    lib.mlp_rtl_cycles.argtypes = [ctypes.c_void_p]
    return lib


def rtl_library(lanes: int, max_width: int, max_layers: int) -> ctypes.CDLL:
    """The Verilated mlp_top for these parameters, built on first use (about a minute) and cached."""
    # The tanh table must outlive the build: the model reads it each time it is constructed, so it
    # is (re)written on every call, in case someone cleaned the cache after the build.
    memh = write_tanh_memh(cache_dir())
    return load_library(
        f"mlp_rtl_p{lanes}_w{max_width}_l{max_layers}",
        "mlp_top",
        kernel_rtl("mlp"),
        RTL_DIR / "harness.cpp",
        parameters={"LANES": lanes, "MAX_WIDTH": max_width, "MAX_LAYERS": max_layers, "MAX_BATCH": MAX_BATCH},
        declare=_declare,
        what=f"the MLP RTL (LANES={lanes}, MAX_WIDTH={max_width})",
        verilator_args=[tanh_parameter(memh)],
    )


class MLPRTLBackend:
    """The MLP kernel on the cycle-accurate reference RTL (`lanes` MAC lanes), an MLPBackend
    (pearl_fpga.spec.mlp).

    `load(layers, head)` streams the network in (SPEC.md LOAD), `infer(x_q)` runs one INFER call and
    returns (outputs int16 (B, m), argmax int64 (B,) for a RAW head else None). `last_cycles` is the
    clock cycles of the last call. A call that exceeds `cycle_limit` (default: four times the expected
    cycles plus slack) raises KernelTimeout naming the register state; the model is then reset and
    the network reloaded, so the backend stays usable.
    """

    name = "rtl"
    max_batch = MAX_BATCH

    def __init__(
        self,
        lanes: int = 16,
        max_width: int = MAX_WIDTH,
        max_layers: int = MAX_LAYERS,
        cycle_limit: int | None = None,
    ) -> None:
        if lanes < 2 or lanes > 64 or lanes & (lanes - 1):
            raise ValueError(f"lanes={lanes} is not supported: use a power of two from 2 to 64")
        if not 1 <= max_width <= 4096:
            raise ValueError(f"max_width={max_width} is out of range: use 1 .. 4096")
        if not 1 <= max_layers <= 16:
            raise ValueError(f"max_layers={max_layers} is out of range: use 1 .. 16")
        if cycle_limit is not None and cycle_limit < 1:
            raise ValueError(f"cycle_limit={cycle_limit} must be a positive number of cycles (or None)")
        self.lanes = int(lanes)
        self.max_width = int(max_width)
        self.max_layers = int(max_layers)
        self.cycle_limit = cycle_limit
        self.last_cycles: int | None = None
        self._layers: tuple[QuantizedLayer, ...] = ()
        self._head = HEAD_RAW
        self._lib = rtl_library(self.lanes, self.max_width, self.max_layers)
        self._sim = self._lib.mlp_rtl_new()
        if not self._sim:
            raise MemoryError("could not allocate the Verilated mlp_top model")
        self._lib.mlp_rtl_reset(self._sim)
        got = (self._read(REG_LANES), self._read(REG_MAX_WIDTH), self._read(REG_MAX_LAYERS))
        if got != (self.lanes, self.max_width, self.max_layers):
            raise BackendUnavailable(
                f"the built mlp_top reports (lanes, max_width, max_layers) = {got}, expected "
                f"{(self.lanes, self.max_width, self.max_layers)}: delete the RTL cache ({cache_dir()}) and retry"
            )

    def __del__(self) -> None:
        sim, self._sim = getattr(self, "_sim", None), None
        if sim:
            self._lib.mlp_rtl_free(sim)

    # ------------------------------------------------------------------ helpers
    def _read(self, addr: int) -> int:
        value = ctypes.c_uint32(0)
        if self._lib.mlp_rtl_read(self._sim, addr, ctypes.byref(value)) != _OK:
            raise KernelTimeout(f"MLP kernel (rtl): AXI4-Lite read of register 0x{addr:02x} got no answer")
        return int(value.value)

    def _registers(self) -> str:
        names = {"control": REG_CTRL, "mode": REG_MODE, "batch": REG_BATCH, "error": REG_ERROR}
        return ", ".join(f"{name}=0x{self._read(addr):x}" for name, addr in names.items())

    def _recover(self) -> None:
        """Reset the model after a timeout and reload the last good network."""
        self._lib.mlp_rtl_reset(self._sim)
        if self._layers:
            words = encode_load_stream(self._layers, self._head)
            cycles = ctypes.c_uint64(0)
            self._lib.mlp_rtl_load(self._sim, words.ctypes.data, len(words), 8 * len(words) + 10_000, ctypes.byref(cycles))

    # ------------------------------------------------------------------ the protocol
    def load(self, layers: Sequence[QuantizedLayer], head: str) -> None:
        """Stream `layers` (with a RAW or TANH head) into the kernel's weight memory."""
        layers = tuple(layers)
        check_layers(layers, head, self.max_layers, self.max_width)  # the same rules as every backend
        words = np.ascontiguousarray(encode_load_stream(layers, head), dtype=np.uint16)
        limit = self.cycle_limit if self.cycle_limit is not None else 4 * len(words) + 10_000
        cycles = ctypes.c_uint64(0)
        rc = self._lib.mlp_rtl_load(self._sim, words.ctypes.data, len(words), limit, ctypes.byref(cycles))
        self.last_cycles = int(cycles.value)
        if rc == _TIMEOUT:
            state = self._registers()
            self._recover()
            raise KernelTimeout(
                f"MLP kernel (rtl) did not finish LOAD of {len(words)} words within {limit} cycles ({state}); "
                "the model was reset and the previous network reloaded: raise cycle_limit"
            )
        error = self._read(REG_ERROR)
        if rc != _OK or error & 1:
            state = self._registers()
            self._recover()
            raise ValueError(f"the MLP kernel (rtl) rejected the LOAD stream ({state}); the previous network is kept")
        self._layers, self._head = layers, head

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Run one INFER call on int16 observations (B, n0); returns (int16 (B, m), argmax or None)."""
        if not self._layers:
            raise ValueError("no weights loaded: call load() first")
        x = check_observations(x_q, self._layers[0].n_in, MAX_BATCH)
        n0, m, batch = self._layers[0].n_in, self._layers[-1].m_out, x.shape[0]
        raw = self._head == HEAD_RAW
        words = m + (1 if raw else 0)
        out = np.zeros((batch, words), dtype=np.int16)
        if self.cycle_limit is not None:
            limit = self.cycle_limit
        else:
            per_obs = sum(layer.n_in * layer.m_out for layer in self._layers) + 64 * len(self._layers) + n0 + words
            limit = 4 * per_obs * batch + 10_000
        cycles = ctypes.c_uint64(0)
        rc = self._lib.mlp_rtl_infer(
            self._sim, x.ctypes.data, batch, n0, out.ctypes.data, words, limit, ctypes.byref(cycles)
        )
        self.last_cycles = int(cycles.value)
        if rc != _OK:
            state = self._registers()
            self._recover()
            if rc == _TIMEOUT:
                raise KernelTimeout(
                    f"MLP kernel (rtl) did not finish INFER of {batch} observations within {limit} cycles "
                    f"({state}); the model was reset and the network reloaded: raise cycle_limit"
                )
            raise BackendUnavailable(f"MLP kernel (rtl) broke the INFER protocol ({state}); the model was reset")
        values = out[:, :m].copy()
        argmax = out[:, m].astype(np.int64) if raw else None
        return values, argmax
