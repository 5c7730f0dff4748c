"""Transport on a Zynq board with PYNQ: the kernel's registers through MMIO, its streams through an AXI DMA.

The block design of hls/scripts/zynq_bd.tcl gives each kernel its own AXI DMA (simple mode,
no scatter-gather) whose MM2S channel feeds the kernel's input stream and whose S2MM channel takes
its output stream. The AXI DMA ends an S2MM transfer at every tlast. Every kernel sets tlast once
per call, on its last output word (the MLP kernel's interface 1 set one after every observation),
so a call's output is one transfer; where a tlast comes earlier, `receive` re-arms the channel until
all the words are in (the S2MM_LENGTH register, PG021, tells how many bytes each transfer took).
Without its realignment engine the DMA writes only to addresses aligned to its memory-map width (8
bytes in hls/scripts/zynq_bd.tcl), so each such transfer lands at the next aligned offset of the
buffer and the pieces are put together after the last one.

Every wait has the driver's deadline: both channels are polled through their `idle` bit (pynq's
`wait()` spins without one, so a kernel that stops taking its input would hang the call), the DMA's
status registers (DMASR, PG021) are read while waiting, and a timeout or a DMA error raises with them
decoded. Before it raises, the transport resets the DMA (DMACR's soft-reset bit, PG021: it resets
both channels and clears their error bits) and rebuilds pynq's driver of it, whose channels start
running again, so the next call does not meet pynq's bare "DMA channel not idle"; where the kernel
itself is still inside its call (ap_idle 0), no reset of the DMA can end that, and the KernelTimeout
says to reload the overlay.

`pynq` is imported only when a transport is opened; without it, BackendUnavailable says what to do.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pearl_fpga.board.transport import Transport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout

S2MM_LENGTH = 0x58  # AXI DMA register (PG021): bytes written by the last S2MM transfer
MM2S_DMACR = 0x00  # AXI DMA control register (PG021); bit 2 of either channel's resets the whole DMA
DMACR_RESET = 0x4  # the soft-reset bit; it reads 1 until the reset is done
RESET_TIMEOUT_S = 0.1
MM2S_DMASR, S2MM_DMASR = 0x04, 0x34  # AXI DMA status registers (PG021, simple mode)
AP_IDLE = 0x4  # the kernel's control register: ap_idle (the HLS ap_ctrl_hs block)
# DMASR bits (PG021, "MM2S_DMASR" / "S2MM_DMASR"); the error bits stop the channel until a reset
DMASR_BITS = {0: "Halted", 1: "Idle", 4: "DMAIntErr", 5: "DMASlvErr", 6: "DMADecErr", 12: "IOC_Irq", 14: "Err_Irq"}
DMASR_ERRORS = 0x70  # DMAIntErr | DMASlvErr | DMADecErr
DMASR_ERROR_HINTS = {4: "internal error: a transfer length of 0, or a stream word count that disagrees with it",
                     5: "slave error: the memory interface refused the access",
                     6: "decode error: the buffer address is outside the HP port's address map"}


def decode_dmasr(value: int) -> str:
    """'0x00000002 (Idle)': a DMASR value with the names of its set bits."""
    names = [name for bit, name in DMASR_BITS.items() if value >> bit & 1]
    return f"0x{value:08x} ({', '.join(names) or 'running'})"


def s2mm_alignment(dma: Any) -> int:
    """Bytes an S2MM transfer's start must be aligned to, from the DMA's parameters in the .hwh."""
    params = getattr(dma, "description", {}).get("parameters", {})
    if int(params.get("c_include_s2mm_dre", 0)):
        return 1
    return max(int(params.get("c_m_axi_s2mm_data_width", 64)) // 8, 1)


def import_pynq() -> Any:
    """The pynq package, or BackendUnavailable naming how to get it."""
    try:
        import pynq
    except ImportError as exc:
        raise BackendUnavailable(
            "backend 'pynq' needs the pynq package, which runs on a Zynq board's PYNQ image (>= 3.0): "
            "run pearl_fpga on the board (pip install 'pearl_fpga[pynq]' there), or use backend='cpu' / 'rtl' here"
        ) from exc
    return pynq


class PynqTransport(Transport):
    """One kernel IP of a loaded PYNQ Overlay, with the AXI DMA of its streams."""

    poll_interval_s = 1e-5

    def __init__(self, overlay: Any, ip_name: str, dma_name: str, in_word_bytes: int, out_word_bytes: int):
        self._pynq = import_pynq()
        try:
            self.ip = getattr(overlay, ip_name)
            self.dma = getattr(overlay, dma_name)
        except AttributeError as exc:
            raise BackendUnavailable(
                f"the loaded overlay has no {exc.name!r} block (expected IP {ip_name!r} and DMA {dma_name!r}, "
                "as hls/scripts/zynq_bd.tcl names them): the .hwh does not match the manifest; rebuild the bitstream"
            ) from None
        self.in_word_bytes = in_word_bytes
        self.out_word_bytes = out_word_bytes
        self.s2mm_align = s2mm_alignment(self.dma)
        self.description = f"PYNQ {ip_name} (DMA {dma_name})"
        self._in_buf: Any = None
        self._out_buf: Any = None
        self._expected = 0
        self._sending = False
        self._sent_bytes = 0

    def _buffer(self, current: Any, nbytes: int) -> Any:
        """A DMA-able buffer of at least `nbytes`, reused between calls (allocation is slow)."""
        if current is not None and current.nbytes >= nbytes:
            return current
        if current is not None:
            current.freebuffer()
        return self._pynq.allocate(shape=(max(nbytes, 64),), dtype=np.uint8)

    def read(self, offset: int) -> int:
        return int(self.ip.read(offset))

    def write(self, offset: int, value: int) -> None:
        self.ip.write(offset, int(value) & 0xFFFFFFFF)

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8)
        if not data.size:
            return
        self._in_buf = self._buffer(self._in_buf, data.size)
        self._in_buf[: data.size] = data
        self._in_buf.flush()
        self.dma.sendchannel.transfer(self._in_buf, start=0, nbytes=data.size)
        self._sending = True
        self._sent_bytes = data.size

    def arm_receive(self, n_words: int) -> None:
        self._expected = n_words * self.out_word_bytes
        if self._expected:
            # room for a transfer per word, each at an aligned offset (the worst case: a tlast on every word)
            self._out_buf = self._buffer(self._out_buf, self._expected + n_words * (self.s2mm_align - 1))
            self.dma.recvchannel.transfer(self._out_buf, start=0, nbytes=self._expected)

    def dma_status(self) -> str:
        """Both channels' DMASR, decoded (for error messages)."""
        try:
            return (f"MM2S_DMASR={decode_dmasr(int(self.dma.mmio.read(MM2S_DMASR)))}, "
                    f"S2MM_DMASR={decode_dmasr(int(self.dma.mmio.read(S2MM_DMASR)))}")
        except Exception as exc:  # noqa: BLE001 - the status must not hide the original problem
            return f"DMASR unreadable: {exc}"

    def _check_dma_errors(self) -> None:
        """Raise at once when either channel reports an error (PG021: the channel halts and stays so
        until a reset, which the raise does first)."""
        for name, offset in (("MM2S", MM2S_DMASR), ("S2MM", S2MM_DMASR)):
            status = int(self.dma.mmio.read(offset))
            if status & DMASR_ERRORS:
                hints = "; ".join(h for bit, h in DMASR_ERROR_HINTS.items() if status >> bit & 1)
                raise self._failed(f"the AXI DMA's {name} channel stopped with an error ({hints}): {self.dma_status()}")

    def reset_dma(self) -> str:
        """Reset the AXI DMA (PG021 soft reset: both channels halted, errors and open transfers dropped)
        and rebuild pynq's driver of it, which starts both channels; returns what the next call can expect."""
        self.dma.mmio.write(MM2S_DMACR, DMACR_RESET)
        deadline = self.now() + RESET_TIMEOUT_S
        while int(self.dma.mmio.read(MM2S_DMACR)) & DMACR_RESET:
            if self.now() >= deadline:
                return "the AXI DMA did not leave its reset: reload the overlay (pynq.Overlay(...).download())"
            time.sleep(self.poll_interval_s)
        self.dma = type(self.dma)(self.dma.description)
        self._sending, self._expected = False, 0
        if not int(self.ip.read(0x00)) & AP_IDLE:
            return ("the AXI DMA was reset, but the kernel is still inside its call (ap_idle 0), waiting for stream "
                    "words it will not get: reload the overlay (pynq.Overlay(...).download()) to reset it")
        return "the AXI DMA was reset and both channels restarted: the next call can run"

    def _failed(self, what: str) -> KernelTimeout:
        """The KernelTimeout of a failed transfer, after the DMA's reset (what it says is appended)."""
        try:
            after = self.reset_dma()
        except Exception as exc:  # noqa: BLE001 - the reset must not hide the original problem
            after = f"resetting the AXI DMA failed ({exc}): reload the overlay"
        return KernelTimeout(f"{what}; {after}")

    def receive(self, timeout_s: float) -> np.ndarray:
        deadline = self.now() + timeout_s
        got, at = 0, 0
        pieces: list[tuple[int, int]] = []  # (offset in the buffer, bytes) of each finished transfer
        while got < self._expected:
            if self.dma.recvchannel.idle:
                n = int(self.dma.mmio.read(S2MM_LENGTH))
                pieces.append((at, n))
                got += n
                if got < self._expected:  # stopped at a tlast: take the rest in a new transfer
                    at = -(-(at + n) // self.s2mm_align) * self.s2mm_align
                    self.dma.recvchannel.transfer(self._out_buf, start=at, nbytes=self._expected - got)
                continue
            self._check_dma_errors()
            if self.now() >= deadline:
                raise self._failed(f"{got // self.out_word_bytes} of {self._expected // self.out_word_bytes} words "
                                   f"arrived; {self.dma_status()}")
            time.sleep(self.poll_interval_s)
        if self._sending:
            self._wait_sent(deadline)
        if self._expected:
            self._out_buf.invalidate()
            return np.concatenate([np.array(self._out_buf[at:at + n], dtype=np.uint8) for at, n in pieces])
        return np.zeros(0, dtype=np.uint8)

    def _wait_sent(self, deadline: float) -> None:
        """Wait, up to `deadline`, for the MM2S channel to have handed every input byte to the kernel.
        (Calls that answer nothing, such as UPDATE, CLEAR or LOAD, wait only here.)"""
        channel = self.dma.sendchannel
        while not channel.idle:
            self._check_dma_errors()
            if self.now() >= deadline:
                raise self._failed(f"the kernel did not take all {self._sent_bytes} bytes of its input stream "
                                   f"(the AXI DMA's MM2S transfer is still open); {self.dma_status()}")
            time.sleep(self.poll_interval_s)
        channel.wait()  # idle now, so it returns at once: pynq's own error checks and bookkeeping
        self._sending = False

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()

    def close(self) -> None:
        for buf in (self._in_buf, self._out_buf):
            if buf is not None:
                buf.freebuffer()
        self._in_buf = self._out_buf = None
