"""PynqTransport's DMA handling without a board: a stand-in for the pynq API checks the re-arm at tlast.

The AXI DMA (simple mode) ends an S2MM transfer at every tlast and records the bytes it wrote in
S2MM_LENGTH; a kernel whose output holds a tlast before its last word (the MLP's interface 1 set one
after every observation) makes the transport re-arm until all words are in, each transfer at an address aligned to the DMA's memory-map width (no realignment
engine). The stand-in below models only that documented behaviour (PG021), not a kernel; tests/pynq_stack
runs the transport on the real pynq package.
"""

from __future__ import annotations

import sys
import threading
import time
import types

import numpy as np
import pytest

from pearl_fpga.board.pynq_transport import MM2S_DMASR, S2MM_LENGTH, PynqTransport
from pearl_fpga.errors import KernelTimeout


class Buffer(np.ndarray):
    def flush(self) -> None: ...
    def invalidate(self) -> None: ...
    def freebuffer(self) -> None: ...


class RecvChannel:
    """S2MM: each transfer takes the next frame (up to its tlast), or stays busy if there is none."""

    def __init__(self, frames: list[bytes], align: int = 8):
        self.frames, self.length, self.idle, self.transfers, self.align = list(frames), 0, True, [], align

    def transfer(self, buf, start=0, nbytes=0):
        if start % self.align:  # as pynq's DMA driver refuses it
            raise RuntimeError(f"DMA does not support unaligned transfers; Starting address must be aligned to {self.align} bytes.")
        self.transfers.append((start, nbytes))
        if not self.frames:
            self.idle = False  # the kernel never sends: the transfer stays open
            return
        frame = self.frames.pop(0)
        assert len(frame) <= nbytes, "the kernel overran the armed buffer"
        buf[start : start + len(frame)] = np.frombuffer(frame, np.uint8)
        self.length, self.idle = len(frame), True


class SendChannel:
    """MM2S: a transfer ends at once, unless `stall` (a kernel that stops taking its input): then the
    channel stays busy. `wait` spins on `idle` with no deadline, as pynq's _SDMAChannel.wait does."""

    def __init__(self, stall: bool = False):
        self.sent, self.idle, self.stall = [], True, stall

    def transfer(self, buf, start=0, nbytes=0):
        self.sent.append(bytes(buf[start : start + nbytes]))
        self.idle = not self.stall

    def wait(self):
        while not self.idle:
            pass


def make_transport(monkeypatch, frames: list[bytes], stall: bool = False,
                   dmasr: dict[int, int] | None = None) -> tuple[PynqTransport, types.SimpleNamespace]:
    """The transport on the stand-in; `dmasr` gives the DMA's status registers (offset -> value)."""
    fake = types.ModuleType("pynq")
    fake.allocate = lambda shape, dtype: np.zeros(shape, dtype).view(Buffer)
    monkeypatch.setitem(sys.modules, "pynq", fake)
    regs: dict[int, int] = {}
    recv = RecvChannel(frames)
    status = dmasr or {}
    dma = types.SimpleNamespace(sendchannel=SendChannel(stall), recvchannel=recv,
                                mmio=types.SimpleNamespace(read=lambda off: recv.length if off == S2MM_LENGTH else status.get(off, 0)))
    ip = types.SimpleNamespace(read=lambda off: regs.get(off, 0), write=lambda off, v: regs.__setitem__(off, v))
    overlay = types.SimpleNamespace(mlp_top_0=ip, dma_mlp=dma)
    return PynqTransport(overlay, "mlp_top_0", "dma_mlp", 2, 2), types.SimpleNamespace(regs=regs, dma=dma)


def test_receive_rearms_at_every_tlast(monkeypatch):
    obs = [np.arange(3, dtype=np.int16) + 10 * i for i in range(4)]  # 4 observations of 3 words, tlast on each
    t, hw = make_transport(monkeypatch, [o.tobytes() for o in obs])
    t.write(0x18, 4)
    assert hw.regs[0x18] == 4 and t.read(0x18) == 4
    t.arm_receive(12)
    t.send(np.arange(8, dtype=np.uint16).view(np.uint8))
    out = t.receive(timeout_s=1.0).view(np.int16)
    assert np.array_equal(out, np.concatenate(obs))
    assert hw.dma.recvchannel.transfers == [(0, 24), (8, 18), (16, 12), (24, 6)]  # 6-byte frames, 8-byte aligned
    assert hw.dma.sendchannel.sent == [np.arange(8, dtype=np.uint16).tobytes()]


def test_receive_times_out_when_words_are_missing(monkeypatch):
    t, _ = make_transport(monkeypatch, [np.arange(3, dtype=np.int16).tobytes()])
    t.arm_receive(6)
    with pytest.raises(KernelTimeout, match="3 of 6 words arrived"):
        t.receive(timeout_s=0.01)


def test_missing_block_in_the_overlay(monkeypatch):
    from pearl_fpga.errors import BackendUnavailable

    t, _ = make_transport(monkeypatch, [])
    with pytest.raises(BackendUnavailable, match=r"no 'dma_replay' block"):
        PynqTransport(types.SimpleNamespace(replay_top_0=t.ip), "replay_top_0", "dma_replay", 16, 16)


def receive_within(t: PynqTransport, timeout_s: float, limit_s: float = 5.0) -> BaseException | None:
    """t.receive(timeout_s) in a thread; the exception it raised, or fail if it is still running after
    limit_s (a hang: pynq's wait() without a deadline)."""
    outcome: list[BaseException | None] = []

    def call():
        try:
            t.receive(timeout_s)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"receive() still waiting {limit_s} s after a {timeout_s} s timeout: it has no deadline"
    assert time.monotonic() - start < limit_s
    return outcome[0]


@pytest.mark.parametrize("n_out", [0, 2])
def test_a_kernel_that_stops_taking_its_input_times_out(monkeypatch, n_out):
    """UPDATE, CLEAR and LOAD answer nothing, so the call waits only for the MM2S transfer: a stalled
    kernel must raise KernelTimeout at the driver's deadline, naming the DMA's status (DMASR, PG021)."""
    t, _ = make_transport(monkeypatch, [np.arange(2, dtype=np.int16).tobytes()], stall=True)
    t.arm_receive(n_out)
    t.send(np.arange(32, dtype=np.uint8))
    exc = receive_within(t, timeout_s=0.05)
    assert isinstance(exc, KernelTimeout)
    assert "did not take all 32 bytes of its input stream" in str(exc)
    assert "MM2S_DMASR=0x00000000 (running)" in str(exc) and "S2MM_DMASR=" in str(exc)


def test_a_dma_error_is_reported_at_once_with_its_bits(monkeypatch):
    """PG021: DMADecErr (bit 6) halts the channel; the transport reports the decoded DMASR without
    waiting for the deadline."""
    t, _ = make_transport(monkeypatch, [], stall=True, dmasr={MM2S_DMASR: 0x4041})
    t.arm_receive(0)
    t.send(np.arange(16, dtype=np.uint8))
    start = time.monotonic()
    exc = receive_within(t, timeout_s=30.0)
    assert time.monotonic() - start < 5.0
    assert isinstance(exc, KernelTimeout)
    assert "MM2S channel stopped with an error (decode error" in str(exc)
    assert "MM2S_DMASR=0x00004041 (Halted, DMADecErr, Err_Irq)" in str(exc)


def test_missing_words_name_the_dma_status(monkeypatch):
    t, _ = make_transport(monkeypatch, [])
    t.arm_receive(2)
    exc = receive_within(t, timeout_s=0.02)
    assert isinstance(exc, KernelTimeout) and "0 of 2 words arrived; MM2S_DMASR=" in str(exc)
