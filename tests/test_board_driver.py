"""The drivers' shared part (pearl_fpga/board/driver.py) over a scripted in-memory transport: stream
width and identity checks, the order of one call, and the timeout message. The drivers run against
the real RTL in tests/test_board_sim.py."""

from __future__ import annotations

import numpy as np
import pytest

from pearl_fpga.board.mlp_driver import MLPDriver
from pearl_fpga.board.replay_driver import ReplayDriver
from pearl_fpga.board.tabular_driver import TabularDriver
from pearl_fpga.board.transport import CTRL_DONE, CTRL_START, Transport
from pearl_fpga.errors import KernelTimeout, PearlError
from pearl_fpga.spec import mlp as mfmt
from pearl_fpga.spec import replay as rfmt
from pearl_fpga.spec import tabular as tfmt


class ScriptedTransport(Transport):
    """Registers in a dict; `receive` returns `reply` (or times out when it is None); logs every access."""

    description = "scripted transport"

    def __init__(self, word_bytes: int, registers: dict[int, int], reply: bytes | None) -> None:
        self.in_word_bytes = self.out_word_bytes = word_bytes
        self.regs = dict(registers)
        self.reply = reply
        self.log: list[tuple] = []
        self.t = 0.0
        self.armed = 0

    def read(self, offset: int) -> int:
        self.log.append(("read", offset))
        return self.regs.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        self.log.append(("write", offset, value))
        if offset == 0x00 and value & CTRL_START:
            self.regs[0x00] = CTRL_DONE  # the scripted kernel finishes at once

    def send(self, words: np.ndarray) -> None:
        self.log.append(("send", len(words)))

    def arm_receive(self, n_words: int) -> None:
        self.log.append(("arm", n_words))
        self.armed = n_words

    def receive(self, timeout_s: float) -> np.ndarray:
        if self.armed == 0:
            return np.zeros(0, dtype=np.uint8)
        if self.reply is None:
            raise KernelTimeout("nothing came")
        return np.frombuffer(self.reply, dtype=np.uint8)

    def sleep(self, seconds: float) -> None:
        self.t += seconds

    def now(self) -> float:
        return self.t


class HlsOutputsTransport(ScriptedTransport):
    """As an HLS top behaves: its output registers (the identity among them) read 0 until a call ends."""

    def __init__(self, word_bytes: int, outputs: dict[int, int]) -> None:
        super().__init__(word_bytes, {}, b"")
        self.outputs = outputs

    def write(self, offset: int, value: int) -> None:
        super().write(offset, value)
        if offset == 0x00 and value & CTRL_START:
            self.regs.update(self.outputs)


REPLAY_ID = {rfmt.REG_CAPACITY: 64, rfmt.REG_FANOUT: 4}
MLP_ID = {mfmt.REG_LANES: 8, mfmt.REG_MAX_WIDTH: 128, mfmt.REG_MAX_LAYERS: 4}
TABULAR_ID = {tfmt.REG_MAX_STATES: 1024, tfmt.REG_MAX_ACTIONS: 8}


def test_stream_width_mismatch_names_the_kernel_and_the_width():
    with pytest.raises(PearlError, match=r"2/2-byte stream words; the replay kernel needs 16-byte \(128-bit\)"):
        ReplayDriver(ScriptedTransport(2, REPLAY_ID, b""))
    with pytest.raises(PearlError, match=r"the mlp kernel needs 2-byte \(16-bit\) words: is it wired to the mlp IP"):
        MLPDriver(ScriptedTransport(16, MLP_ID, b""))


@pytest.mark.parametrize("driver,word,ids,shown", [
    (ReplayDriver, 16, {rfmt.REG_CAPACITY: 64, rfmt.REG_FANOUT: 3}, "capacity 64, fanout 3"),
    (ReplayDriver, 16, {}, "capacity 0, fanout 0"),
    (MLPDriver, 2, {mfmt.REG_LANES: 8, mfmt.REG_MAX_WIDTH: 0, mfmt.REG_MAX_LAYERS: 4},
     "lanes 8, max_width 0, max_layers 4"),
])
def test_identity_registers_that_no_kernel_has_are_refused(driver, word, ids, shown):
    with pytest.raises(PearlError, match=f"reports {shown}, which no .* kernel has: the overlay does not hold"):
        driver(ScriptedTransport(word, ids, b""))


def test_identity_is_read_into_attributes():
    replay = ReplayDriver(ScriptedTransport(16, REPLAY_ID, b""))
    assert (replay.capacity, replay.fanout, replay.last_cycles) == (64, 4, None)
    mlp = MLPDriver(ScriptedTransport(2, MLP_ID, b""))
    assert (mlp.lanes, mlp.max_width, mlp.max_layers) == (8, 128, 4)
    tabular = TabularDriver(ScriptedTransport(16, TABULAR_ID, b""))
    assert (tabular.max_states, tabular.max_actions) == (1024, 8)


@pytest.mark.parametrize("driver,word,ids,setup", [
    (ReplayDriver, 16, REPLAY_ID, [(rfmt.REG_N_CMDS, 0)]),
    (MLPDriver, 2, MLP_ID, [(mfmt.REG_MODE, mfmt.MODE_INFER), (mfmt.REG_BATCH, 0)]),
    (TabularDriver, 16, TABULAR_ID, [(tfmt.REG_N_CMDS, 0)]),
])
def test_identity_of_an_hls_top_is_read_after_an_empty_call(driver, word, ids, setup):
    """An HLS top writes its identity registers only during a call: the driver runs an empty one first
    (no command or observation, nothing sent or expected), then reads them."""
    t = HlsOutputsTransport(word, ids)
    d = driver(t)
    assert {name: getattr(d, name) for name in d.identity} == {name: ids[off] for name, off in d.identity.items()}
    start = t.log.index(("write", 0x00, CTRL_START))
    assert t.log[:start] == [("write", off, v) for off, v in setup] + [("arm", 0)]
    assert all(e[1] == 0 for e in t.log if e[0] == "send")  # nothing sent (transports skip empty sends)
    first_identity_read = min(t.log.index(("read", off)) for off in ids)
    assert first_identity_read > start


def test_a_call_writes_its_registers_then_arms_starts_and_sends():
    reply = np.arange(4, dtype=np.uint64).tobytes()
    t = ScriptedTransport(16, REPLAY_ID, reply)
    out = ReplayDriver(t).run(np.zeros((3, 2), dtype=np.uint64), n_responses=2)
    np.testing.assert_array_equal(out, np.arange(4, dtype=np.uint64).reshape(2, 2))
    call = [e for e in t.log[t.log.index(("write", rfmt.REG_N_CMDS, 3)):] if e[0] != "read"]
    assert call == [("write", rfmt.REG_N_CMDS, 3), ("arm", 2), ("write", 0x00, CTRL_START), ("send", 48)]
    t = ScriptedTransport(2, MLP_ID, np.arange(5, dtype=np.uint16).tobytes())
    words = MLPDriver(t).call(mfmt.MODE_INFER, 1, np.arange(4), n_out=5)
    np.testing.assert_array_equal(words, np.arange(5, dtype=np.uint16))
    assert [e for e in t.log if e[0] != "read"][-5:] == [("write", mfmt.REG_MODE, mfmt.MODE_INFER), ("write", mfmt.REG_BATCH, 1),
                                                         ("arm", 5), ("write", 0x00, CTRL_START), ("send", 8)]


def test_missing_outputs_raise_a_timeout_naming_kernel_count_and_registers():
    t = ScriptedTransport(16, REPLAY_ID, None)
    with pytest.raises(KernelTimeout, match=r"replay kernel on scripted transport sent fewer than 7 responses "
                                            r"within 0\.5 s; register state: ctrl@0x00=.*capacity@0x18=0x00000040"):
        ReplayDriver(t, timeout_s=0.5).run(np.zeros((1, 2), dtype=np.uint64), n_responses=7)


def test_a_call_without_outputs_that_stalls_names_the_transport_detail():
    """A call that answers nothing (UPDATE, CLEAR, LOAD) can only stall on its input: the timeout says
    so, with the transport's own detail (on a board, the DMA's status registers)."""

    class Stalled(ScriptedTransport):
        def receive(self, timeout_s: float) -> np.ndarray:
            raise KernelTimeout("the kernel did not take all 16 bytes of its input stream; MM2S_DMASR=0x00000000")

    t = Stalled(16, REPLAY_ID, None)
    with pytest.raises(KernelTimeout, match=r"replay kernel on scripted transport did not finish the call within 0\.5 s; "
                                            r"register state: .*; transport: the kernel did not take all 16 bytes.*MM2S_DMASR"):
        ReplayDriver(t, timeout_s=0.5).run(np.zeros((1, 2), dtype=np.uint64), n_responses=0)
