"""A UART board in simulation: the kernels behind the UART bridge (hls/bridge/rtl/pearl_uart_top.sv,
the design of the ULX3S bitstream without its PLL and pins) compiled by Verilator, on a pseudo-terminal.

    with SimulatedUartBoard() as board:                   # small kernels, built once and cached
        transport = SerialTransport(board.port, "replay")  # the serial transport, as on a board

The harness (hls/bridge/verilator_uart_board.cpp) holds the pty's master side and plays the FTDI chip:
each byte the host writes to `port` is shifted bit by bit onto the bridge's receive line, and the
bridge's transmit line is decoded back into bytes, on a clock thread of its own. So everything the
host does (pyserial, the serial transport, the drivers) is what it does with a real board; only the
line rate is simulated, at CYCLES_PER_BIT clocks a bit (the real board runs 100 MHz / 3 Mbaud = 33).
"""

from __future__ import annotations

import ctypes
import os
import tty
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pearl_fpga.data import data_path
from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.sim.verilator import HLS_DIR, cache_dir, load_library, write_tanh_memh

HARNESS = data_path("hls", "bridge", "verilator_uart_board.cpp")
TOP = "pearl_uart_top"
BAUD = 3_000_000
CYCLES_PER_BIT = 8  # the simulated line: 8 clocks a bit, the fewest the bridge's receiver takes with margin
# Small kernels, so that the model builds in about a minute and runs fast (the test sizes).
SMALL_SIZES: dict[str, int] = {
    "REPLAY_CAPACITY": 100, "REPLAY_FANOUT": 4,
    "MLP_LANES": 4, "MLP_MAX_WIDTH": 32, "MLP_MAX_LAYERS": 4, "MLP_MAX_BATCH": 64,
    "TABULAR_STATES": 32, "TABULAR_ACTIONS": 4,
}


def board_rtl() -> list[Path]:
    """The RTL of the UART board's design: the shared blocks, the three kernels, the bridge."""
    files = sorted((HLS_DIR / "common" / "rtl").glob("*.sv"))
    for kernel in ("replay", "mlp", "tabular"):
        files += sorted((HLS_DIR / kernel / "rtl").glob("*.sv"))
    return files + sorted((HLS_DIR / "bridge" / "rtl").glob("*.sv"))


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.pearl_ub_start.restype, lib.pearl_ub_start.argtypes = ctypes.c_void_p, [ctypes.c_int]
    lib.pearl_ub_stop.restype, lib.pearl_ub_stop.argtypes = None, [ctypes.c_void_p]
    lib.pearl_ub_cycles.restype, lib.pearl_ub_cycles.argtypes = ctypes.c_uint64, [ctypes.c_void_p]
    return lib


def board_library(sizes: Mapping[str, int], cycles_per_bit: int = CYCLES_PER_BIT) -> ctypes.CDLL:
    """The Verilated board at these kernel sizes (pearl_uart_top's parameters), built on first use and
    cached."""
    params = {**sizes, "CLK_HZ": BAUD * cycles_per_bit, "BAUD": BAUD}
    memh = write_tanh_memh(cache_dir())
    shape = "_".join(f"{k.lower()}{int(v)}" for k, v in sorted(params.items()))
    return load_library(
        f"uart_board_{shape}", TOP, board_rtl(), HARNESS, params, declare=_declare,
        what="the UART board (bridge and kernels)", prefix="Vpearl_uart_board",
        verilator_args=[f'-GMLP_TANH_MEMH="{memh.resolve()}"', "-CFLAGS", f"-DPEARL_CYCLES_PER_BIT={cycles_per_bit}",
                        "-CFLAGS", "-O1"],
    )


class SimulatedUartBoard:
    """The UART board's design under Verilator behind a pseudo-terminal; `port` is the serial port
    to open (its slave side). Close it (or use `with`) to stop the clock thread."""

    def __init__(self, sizes: Mapping[str, int] | None = None, cycles_per_bit: int = CYCLES_PER_BIT) -> None:
        if cycles_per_bit < 4:
            raise ValueError(f"cycles_per_bit must be >= 4 (the bridge samples mid-bit), got {cycles_per_bit}")
        self.sizes = dict(SMALL_SIZES if sizes is None else sizes)
        unknown = set(self.sizes) - set(SMALL_SIZES) - {"HAS_REPLAY", "HAS_MLP", "HAS_TABULAR", "SLOT_BYTES"}
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)}; pearl_uart_top takes {sorted(SMALL_SIZES)}")
        self._lib = board_library(self.sizes, cycles_per_bit)
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no line editing, 8-bit clean, before anything is written
        self.port = os.ttyname(self._slave)
        self._board: Any = self._lib.pearl_ub_start(self._master)
        if not self._board:
            self._close_fds()
            raise BackendUnavailable("could not allocate the Verilated UART board")

    def cycles(self) -> int:
        """Clock cycles the board has run."""
        return int(self._lib.pearl_ub_cycles(self._board)) if self._board else 0

    def _close_fds(self) -> None:
        for fd in (self._master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self) -> None:
        board, self._board = getattr(self, "_board", None), None
        if board:
            self._lib.pearl_ub_stop(board)
            self._close_fds()

    def __enter__(self) -> SimulatedUartBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()
