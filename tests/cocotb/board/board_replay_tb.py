"""cocotb: the replay board driver (pearl_fpga.board.replay_driver), unchanged, against replay_top.sv.

Each test starts the clock, resets the RTL, wraps it in the simulation transport and runs the same
synchronous driver code a PYNQ/XRT board runs, in a cocotb `bridge` thread. Results are compared
with the numpy reference backend. RTL parameters come from the pytest wrapper (tests/test_board_sim.py).
"""

from __future__ import annotations

import os

import cocotb
import numpy as np

from pearl_fpga.backends.replay_numpy import ReplayNumpyBackend
from pearl_fpga.board.replay_driver import REGISTERS, ReplayBoardBackend
from pearl_fpga.board.sim_transport import SimTransport, in_thread
from pearl_fpga.errors import KernelTimeout
from pearl_fpga.spec import replay as fmt

HW_CAPACITY = int(os.environ.get("BOARD_TB_CAPACITY", "64"))
HW_FANOUT = int(os.environ.get("BOARD_TB_FANOUT", "4"))


def exercise(transport: SimTransport, capacity: int, fanout: int, seed: int, max_batch: int) -> dict[str, int]:
    """Random update/sample rounds through the board backend, checked against the numpy reference."""
    rng = np.random.default_rng(seed)
    board = ReplayBoardBackend(capacity, fanout, transport=transport, max_batch=max_batch)
    ref = ReplayNumpyBackend(capacity, fanout)
    assert board.total() == 0
    cycles: dict[str, int] = {}
    for round_ in range(4):
        n = int(rng.integers(1, 3 * max_batch))
        idx = rng.integers(0, capacity, n).astype(np.uint32)
        idx[: n // 4] = idx[0]  # repeated indices inside one batch: the last one wins
        prio = rng.exponential(1.0, n) * (rng.random(n) > 0.2)  # about 20 % zero priorities
        if round_ == 3:
            prio[::3] = 1e9  # saturating values
        words, _ = fmt.priorities_to_fixed(prio)
        board.update(idx, words)
        ref.update(idx, words)
        cycles["update"] = board.last_cycles or 0
        assert board.total() == ref.total(), f"total {board.total()} != reference {ref.total()}"
        assert np.array_equal(board.leaves(), ref.leaves())
        targets = fmt.stratified_targets(ref.total(), int(rng.integers(1, 2 * max_batch)), rng)
        got_i, got_w = board.sample(targets)
        want_i, want_w = ref.sample(targets)
        assert np.array_equal(got_i, want_i), f"indices differ at {np.flatnonzero(got_i != want_i)[:5]}"
        assert np.array_equal(got_w, want_w)
        assert np.all(got_w > 0), "a zero-priority leaf was sampled"
        cycles["sample"] = board.last_cycles or 0
    board.clear()
    assert board.total() == 0 and not board.leaves().any()
    return cycles


@cocotb.test()
async def driver_matches_reference(dut):
    """Update/sample/total/clear through the driver, in batches split to max_batch, no backpressure."""
    transport = await SimTransport.start(dut, "replay")
    cycles = await in_thread(exercise, transport, HW_CAPACITY, HW_FANOUT, seed=1, max_batch=16)
    dut._log.info("cycles per call: %s", cycles)


@cocotb.test()
async def driver_with_backpressure_and_smaller_tree(dut):
    """Random gaps on both streams; a tree smaller than synthesized and another fan-out (same samples)."""
    transport = await SimTransport.start(dut, "replay")
    transport.set_backpressure(seed=7)
    other_fanout = 2 if HW_FANOUT != 2 else 4
    await in_thread(exercise, transport, HW_CAPACITY - 5, other_fanout, seed=2, max_batch=32)


class Recorder:
    """Wraps a transport and records every register access and stream transfer, in order."""

    def __init__(self, inner: SimTransport):
        self.inner, self.log = inner, []
        self.in_word_bytes, self.out_word_bytes = inner.in_word_bytes, inner.out_word_bytes
        self.description = inner.description

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def read(self, offset):
        value = self.inner.read(offset)
        self.log.append(("read", offset, value))
        return value

    def write(self, offset, value):
        self.log.append(("write", offset, value))
        self.inner.write(offset, value)

    def send(self, words):
        self.log.append(("send", bytes(words)))
        self.inner.send(words)

    def wait_done(self, kernel, timeout_s, registers):
        return SimTransport.wait_done(self, kernel, timeout_s, registers)


def register_transactions(transport: SimTransport) -> list:
    """The exact register and stream traffic of one update call."""
    rec = Recorder(transport)
    board = ReplayBoardBackend(HW_CAPACITY, HW_FANOUT, transport=rec)
    rec.log.clear()
    idx, words = np.array([3, 1, 3], np.uint32), np.array([5, 7, 9], np.uint32)
    board.update(idx, words)
    expected_cmds = fmt.encode_commands(np.full(3, fmt.OP_UPDATE), idx.astype(np.uint64), words.astype(np.uint64))
    writes = [e for e in rec.log if e[0] == "write"]
    assert writes == [("write", fmt.REG_N_CMDS, 3), ("write", fmt.REG_CTRL, 1)], writes
    sends = [e for e in rec.log if e[0] == "send"]
    assert sends == [("send", expected_cmds.tobytes())]
    ctrl_reads = [e[2] for e in rec.log if e[0] == "read" and e[1] == fmt.REG_CTRL]
    assert ctrl_reads and ctrl_reads[-1] & 0x2 and not any(v & 0x2 for v in ctrl_reads[:-1])
    assert rec.log.index(writes[1]) < rec.log.index(sends[0]), "ap_start must precede the stream"
    assert board.total() == 9 + 7
    return rec.log


def hang(transport: SimTransport) -> str:
    """Tell the kernel to expect 6 commands and send 2: the driver must time out, naming the state."""
    board = ReplayBoardBackend(HW_CAPACITY, HW_FANOUT, transport=transport, timeout_s=20e-6)
    cmds = fmt.encode_commands(np.full(2, fmt.OP_UPDATE), np.arange(2, dtype=np.uint64), np.ones(2, np.uint64))
    try:
        board.driver.run(cmds, 0, n_cmds=6)
    except KernelTimeout as exc:
        return str(exc)
    raise AssertionError("a kernel waiting for 4 more commands signalled ap_done")


@cocotb.test()
async def exact_register_transactions(dut):
    transport = await SimTransport.start(dut, "replay")
    log = await in_thread(register_transactions, transport)
    dut._log.info("transactions of one update: %s", [e[:2] for e in log])


@cocotb.test()
async def timeout_names_kernel_and_registers(dut):
    transport = await SimTransport.start(dut, "replay")
    message = await in_thread(hang, transport)
    dut._log.info("timeout message: %s", message)
    assert "replay kernel" in message, message
    assert "n_cmds@0x10=0x00000006" in message, message
    assert f"capacity@0x18=0x{HW_CAPACITY:08x}" in message, message
    ctrl = int(message.split("ctrl@0x00=")[1][:10], 16)
    assert not ctrl & 0x2 and not ctrl & 0x4, f"hung kernel shows done/idle: ctrl=0x{ctrl:x}"
    assert set(REGISTERS) <= {part.split("@")[0] for part in message.split("register state: ")[1].split(", ")}
    # After a reset the same driver works again.
    await transport.reset()
    await in_thread(exercise, transport, HW_CAPACITY, HW_FANOUT, seed=3, max_batch=8)
