"""Transport over the reference RTL of a kernel's board IP compiled by Verilator: the board drivers,
unchanged, against the RTL, at the speed of compiled C++ (the `rtl` backends, pearl_fpga/board/rtl.py).

`VerilatorTransport("replay", {"CAPACITY": 100, "FANOUT": 4})` verilates hls/<kernel>/rtl with the
kernel's top (spec/kernels.py: its stream ports and word sizes) and the one C++ harness of every
kernel, hls/common/rtl/verilator_transport.cpp, into a shared library cached by the hash of its sources
and parameters (pearl_fpga.sim.verilator.build_library), and loads it with ctypes. The harness is the
board around the IP: AXI4-Lite register accesses, a DMA that streams whole sends into the input
stream and one that collects the output stream, on the same clock. Each transport is a model of its
own (one kernel instance); the library is loaded once per process and shape.

Time is simulated at CLOCK_HZ: `now()` counts clocks, the drivers' timeouts become cycle limits, and
a kernel that never answers raises KernelTimeout after them instead of hanging. The transport enables
the IP's ap_done interrupt (GIE, IER) and waits on that pin, so `wait_done` costs one call, not a poll
loop; reading ap_done acknowledges it (ISR), as an interrupt handler does. `cycles()` counts the
clocks from each ap_start write to its ap_done, so a driver's `last_cycles` is the kernel's cycles of
the call without the register accesses around it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

import numpy as np

from pearl_fpga.board.transport import CTRL_DONE, Transport
from pearl_fpga.data import data_path
from pearl_fpga.errors import KernelTimeout, PearlError
from pearl_fpga.sim.verilator import cache_dir, kernel_rtl, load_library, tanh_parameter, write_tanh_memh
from pearl_fpga.spec.kernels import KERNELS

CLOCK_HZ = 100e6  # the simulated kernel clock: the drivers' timeouts in seconds become cycles at this rate
HARNESS = data_path("hls", "common", "rtl", "verilator_transport.cpp")
REG_CTRL, REG_GIE, REG_IER, REG_ISR = 0x00, 0x04, 0x08, 0x0C
REGISTER_ACCESS_CYCLES = 1000  # an AXI4-Lite access that takes longer: the IP's control block is broken
RESET_CYCLES = 8
_OK = 0


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    handle, u32, u64, ptr = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    signatures = {
        "pearl_vt_create": (handle, []),
        "pearl_vt_destroy": (None, [handle]),
        "pearl_vt_reset": (None, [handle, u32]),
        "pearl_vt_write": (ctypes.c_int, [handle, u32, u32, u64]),
        "pearl_vt_read": (ctypes.c_int, [handle, u32, ctypes.POINTER(u32), u64]),
        "pearl_vt_send": (None, [handle, ptr, u64]),
        "pearl_vt_receive": (ctypes.c_int, [handle, ptr, u64, u64, ctypes.POINTER(u64)]),
        "pearl_vt_wait_interrupt": (ctypes.c_int, [handle, u64]),
        "pearl_vt_ticks": (u64, [handle]),
        "pearl_vt_kernel_cycles": (u64, [handle]),
        "pearl_vt_pending_input": (u64, [handle]),
    }
    for name, (restype, argtypes) in signatures.items():
        func = getattr(lib, name)
        func.restype, func.argtypes = restype, argtypes
    return lib


def model_library(kernel: str, parameters: Mapping[str, int]) -> ctypes.CDLL:
    """The Verilated board IP of `kernel` at these top-level parameters with the harness, built on
    first use (seconds to a minute) and cached on disk and per process."""
    ip = KERNELS[kernel]
    args = [f"-DPEARL_IN={ip.in_stream}", f"-DPEARL_OUT={ip.out_stream}",
            f"-DPEARL_IN_BYTES={ip.in_word_bytes}", f"-DPEARL_OUT_BYTES={ip.out_word_bytes}"]
    if kernel == "mlp":  # mlp_top reads its tanh table with $readmemh (rewritten in case the cache was cleaned)
        extra = [tanh_parameter(write_tanh_memh(cache_dir()))]
    else:
        extra = ["-CFLAGS", "-O1"]  # a third less compile time than -O2, the same simulation speed
    shape = "_".join(f"{name.lower()}{int(value)}" for name, value in sorted(parameters.items()))
    return load_library(
        f"{kernel}_ip_{shape}", ip.top, kernel_rtl(kernel), HARNESS, dict(parameters), declare=_declare,
        what=f"the {kernel} RTL ({shape.replace('_', ', ')})",
        verilator_args=[*(a for flag in args for a in ("-CFLAGS", flag)), *extra], prefix="Vpearl_ip",
    )


class VerilatorTransport(Transport):
    """One kernel's board IP (reference RTL) under Verilator, behind the Transport interface."""

    poll_interval_s = 1e-3  # sleep() wakes at ap_done anyway

    def __init__(self, kernel: str, parameters: Mapping[str, int]):
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; known: {sorted(KERNELS)}")
        ip = KERNELS[kernel]
        self.in_word_bytes, self.out_word_bytes = ip.in_word_bytes, ip.out_word_bytes
        shown = ", ".join(f"{name}={value}" for name, value in parameters.items())
        self.description = f"Verilator simulation of {ip.top} ({shown})"
        self._lib = model_library(kernel, parameters)
        self._sim = self._lib.pearl_vt_create()
        if not self._sim:
            raise MemoryError(f"could not allocate the Verilated {ip.top} model")
        self._expected = 0
        self.reset()

    def reset(self) -> None:
        """ap_rst_n low, then the interrupt that `wait_done` waits on enabled: the IP as after power-up
        (the RTL clears its memories; the drivers' state must be rebuilt, e.g. weights reloaded)."""
        self._lib.pearl_vt_reset(self._handle(), RESET_CYCLES)
        self.write(REG_GIE, 1)
        self.write(REG_IER, 1)

    def _handle(self) -> int:
        if not self._sim:
            raise PearlError(f"{self.description} was closed: make a new backend")
        return self._sim

    def cycles_of(self, seconds: float) -> int:
        """Clock cycles in `seconds` of simulated time (at least one)."""
        return max(1, round(seconds * CLOCK_HZ))

    # -- Transport -------------------------------------------------------------------------

    def read(self, offset: int) -> int:
        value = ctypes.c_uint32()
        if self._lib.pearl_vt_read(self._handle(), offset, ctypes.byref(value), REGISTER_ACCESS_CYCLES) != _OK:
            raise KernelTimeout(f"{self.description}: the AXI4-Lite read of 0x{offset:02x} got no answer within "
                                f"{REGISTER_ACCESS_CYCLES} cycles")
        if offset == REG_CTRL and value.value & CTRL_DONE:
            self.write(REG_ISR, 1)  # acknowledge ap_done's interrupt (toggle on write), as a handler does
        return int(value.value)

    def write(self, offset: int, value: int) -> None:
        if self._lib.pearl_vt_write(self._handle(), offset, int(value) & 0xFFFFFFFF, REGISTER_ACCESS_CYCLES) != _OK:
            raise KernelTimeout(f"{self.description}: the AXI4-Lite write of 0x{offset:02x} got no answer within "
                                f"{REGISTER_ACCESS_CYCLES} cycles")

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8)
        if data.size % self.in_word_bytes:
            raise ValueError(f"{data.size} bytes is not a whole number of {self.in_word_bytes}-byte words")
        self._lib.pearl_vt_send(self._handle(), data.ctypes.data, data.size // self.in_word_bytes)

    def arm_receive(self, n_words: int) -> None:
        self._expected = int(n_words)

    def receive(self, timeout_s: float) -> np.ndarray:
        out = np.empty(self._expected * self.out_word_bytes, dtype=np.uint8)
        got = ctypes.c_uint64()
        limit = self.cycles_of(timeout_s)
        if self._lib.pearl_vt_receive(self._handle(), out.ctypes.data, self._expected, limit, ctypes.byref(got)) != _OK:
            pending = self._lib.pearl_vt_pending_input(self._sim)
            raise KernelTimeout(f"{got.value} of {self._expected} words arrived within {limit} clock cycles, "
                                f"{pending} input words not taken")
        return out

    def wait_done(self, kernel: str, timeout_s: float, registers: dict[str, int]) -> None:
        """Clock until ap_done's interrupt (one call), then read ap_done; KernelTimeout after the cycle limit."""
        if self._lib.pearl_vt_wait_interrupt(self._handle(), self.cycles_of(timeout_s)) == _OK:
            if self.read(REG_CTRL) & CTRL_DONE:
                return
        raise self.hang(kernel, timeout_s, registers)

    def describe_wait(self, timeout_s: float) -> str:
        return f"{self.cycles_of(timeout_s)} clock cycles ({timeout_s:g} s at {CLOCK_HZ / 1e6:g} MHz)"

    def sleep(self, seconds: float) -> None:
        self._lib.pearl_vt_wait_interrupt(self._handle(), self.cycles_of(seconds))  # wakes early at ap_done

    def now(self) -> float:
        return self._lib.pearl_vt_ticks(self._handle()) / CLOCK_HZ

    def cycles(self) -> int:
        return int(self._lib.pearl_vt_kernel_cycles(self._handle()))

    def close(self) -> None:
        sim, self._sim = getattr(self, "_sim", None), None
        if sim:
            self._lib.pearl_vt_destroy(sim)

    def __del__(self) -> None:
        self.close()
