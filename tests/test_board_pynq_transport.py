"""PynqTransport's DMA handling without a board: a stand-in for the pynq API checks the re-arm at tlast.

The AXI DMA (simple mode) ends an S2MM transfer at every tlast and records the bytes it wrote in
S2MM_LENGTH; the MLP kernel sets tlast after every observation, so the transport must re-arm until
all words are in, each transfer at an address aligned to the DMA's memory-map width (no realignment
engine). The stand-in below models only that documented behaviour (PG021), not a kernel; tests/pynq_stack
runs the transport on the real pynq package.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from pearl_fpga.board.pynq_transport import S2MM_LENGTH, PynqTransport
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
    def __init__(self):
        self.sent, self.idle = [], True

    def transfer(self, buf, start=0, nbytes=0):
        self.sent.append(bytes(buf[start : start + nbytes]))

    def wait(self):
        pass


def make_transport(monkeypatch, frames: list[bytes]) -> tuple[PynqTransport, types.SimpleNamespace]:
    fake = types.ModuleType("pynq")
    fake.allocate = lambda shape, dtype: np.zeros(shape, dtype).view(Buffer)
    monkeypatch.setitem(sys.modules, "pynq", fake)
    regs: dict[int, int] = {}
    recv = RecvChannel(frames)
    dma = types.SimpleNamespace(sendchannel=SendChannel(), recvchannel=recv,
                                mmio=types.SimpleNamespace(read=lambda off: recv.length if off == S2MM_LENGTH else 0))
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
