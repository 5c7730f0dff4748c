"""Transport over a cocotb simulation of the reference RTL: the board drivers, unchanged, against the RTL.

Inside a cocotb test, the synchronous driver code runs in a thread started by cocotb's `bridge`;
each transport call hands a coroutine back to the simulator with `resume` and blocks until it is
done, so the simulation only advances while the driver waits (exactly as a board would):

    @cocotb.test()
    async def replay_on_rtl(dut):
        transport = await SimTransport.start(dut, "replay")
        backend = await bridge(ReplayBoardBackend)(64, 4, transport=transport)
        await bridge(backend.update)(indices, words)

AXI4-Lite goes through cocotbext-axi's AxiLiteMaster, the streams through AxiStreamSource/Sink
(with optional random backpressure on both). Time is simulated: `sleep` waits clock cycles, `now`
is the simulation time, so driver timeouts are in simulated seconds (one second is 1e8 cycles at
100 MHz: tests of the timeout path pass a short timeout).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from pearl_fpga.board.transport import Transport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.spec.kernels import KERNELS

try:  # cocotb >= 2.0 names (1.x called them external / function)
    import cocotb
    from cocotb.task import bridge, resume
except ImportError as exc:  # pragma: no cover - depends on the installed cocotb
    raise BackendUnavailable(
        "the simulation transport needs cocotb >= 2.0 (cocotb.task.bridge/resume): pip install 'pearl_fpga[sim]'"
    ) from exc

from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.simtime import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

T = TypeVar("T")

# kernel -> (input stream prefix, output stream prefix, bytes per input word, bytes per output word)
STREAMS: dict[str, tuple[str, str, int, int]] = {
    k: (ip.in_stream, ip.out_stream, ip.in_word_bytes, ip.out_word_bytes) for k, ip in KERNELS.items()}

__all__ = ["SimTransport", "bridge", "resume"]


def _random_pauses(rng: random.Random, busy: float) -> Iterator[bool]:
    while True:
        yield rng.random() < busy


class SimTransport(Transport):
    """One reference-RTL kernel in a cocotb simulation, behind the Transport interface."""

    poll_interval_s = 0.0  # poll the control register back to back (each AXI-Lite read takes a few cycles)

    def __init__(self, dut: Any, kernel: str, clock_period_ns: float = 10.0):
        if kernel not in STREAMS:
            raise ValueError(f"unknown kernel {kernel!r}; known: {sorted(STREAMS)}")
        in_prefix, out_prefix, self.in_word_bytes, self.out_word_bytes = STREAMS[kernel]
        self.dut = dut
        self.kernel = kernel
        self.clock = dut.ap_clk
        self.period_ns = clock_period_ns
        self.description = f"cocotb simulation of {dut._name}"
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk, dut.ap_rst_n, reset_active_level=False)
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, in_prefix), dut.ap_clk, dut.ap_rst_n, reset_active_level=False)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, out_prefix), dut.ap_clk, dut.ap_rst_n, reset_active_level=False)
        for prefix in ("s_axi_control", in_prefix, out_prefix):  # cocotbext-axi logs every beat at INFO
            logging.getLogger(f"cocotb.{dut._name}.{prefix}").setLevel(logging.WARNING)
        self._expected = 0
        self._pending = bytearray()  # words received beyond what a call collected (never expected)

    @classmethod
    async def start(cls, dut: Any, kernel: str, clock_period_ns: float = 10.0, reset_cycles: int = 8) -> SimTransport:
        """Start the clock, reset the design and return a transport on it (call from a cocotb test)."""
        cocotb.start_soon(Clock(dut.ap_clk, clock_period_ns, unit="ns").start())  # type: ignore[arg-type]  # cocotb's stubs
        transport = cls(dut, kernel, clock_period_ns)
        await transport.reset(reset_cycles)
        return transport

    async def reset(self, cycles: int = 8) -> None:
        """Hold ap_rst_n low for `cycles` clocks (the RTL clears its memories afterwards)."""
        self.dut.ap_rst_n.value = 0
        await ClockCycles(self.clock, cycles)
        self.dut.ap_rst_n.value = 1
        await ClockCycles(self.clock, 2)
        self._pending.clear()

    def set_backpressure(self, seed: int | None, busy: float = 0.3) -> None:
        """Random gaps on the input stream and random tready low on the output stream (None: off)."""
        if seed is None:
            self.source.clear_pause_generator()
            self.sink.clear_pause_generator()
        else:
            self.source.set_pause_generator(_random_pauses(random.Random(seed), busy))
            self.sink.set_pause_generator(_random_pauses(random.Random(seed + 1), busy))

    # -- Transport -------------------------------------------------------------------------

    def read(self, offset: int) -> int:
        return int(resume(self.axil.read_dword)(offset))

    def write(self, offset: int, value: int) -> None:
        resume(self.axil.write_dword)(offset, int(value) & 0xFFFFFFFF)

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8).tobytes()
        if len(data) % self.in_word_bytes:
            raise ValueError(f"{len(data)} bytes is not a whole number of {self.in_word_bytes}-byte words")
        if data:
            resume(self.source.send)(AxiStreamFrame(data))

    def arm_receive(self, n_words: int) -> None:
        self._expected = int(n_words)

    def receive(self, timeout_s: float) -> np.ndarray:
        return resume(self._receive)(self._expected * self.out_word_bytes, timeout_s)

    async def _receive(self, nbytes: int, timeout_s: float) -> np.ndarray:
        deadline = self.now() + timeout_s
        data = self._pending
        while len(data) < nbytes:
            if not self.sink.empty():
                data += bytes(self.sink.recv_nowait().tdata)
            elif self.now() >= deadline:
                raise KernelTimeout(f"{len(data) // self.out_word_bytes} of {nbytes // self.out_word_bytes} words arrived")
            else:
                await RisingEdge(self.clock)
        self._pending = bytearray(data[nbytes:])
        return np.frombuffer(bytes(data[:nbytes]), dtype=np.uint8).copy()

    def sleep(self, seconds: float) -> None:
        resume(self._cycles)(max(1, round(seconds * 1e9 / self.period_ns)))

    async def _cycles(self, n: int) -> None:
        await ClockCycles(self.clock, n)

    def now(self) -> float:
        return float(get_sim_time("ns")) * 1e-9

    def cycles(self) -> int:
        return round(get_sim_time("ns") / self.period_ns)


async def in_thread(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run the blocking `func` (driver code) from a cocotb coroutine through `bridge`."""
    return await bridge(func)(*args, **kwargs)


