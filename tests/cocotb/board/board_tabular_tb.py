"""cocotb: the tabular board driver (pearl_fpga.board.tabular_driver), unchanged, against tabular_top.sv.

Each test starts the clock, resets the RTL, wraps it in the simulation transport and runs the same
synchronous driver code a PYNQ/XRT board runs, in a cocotb `bridge` thread. Every table is compared
with the numpy reference backend. RTL parameters come from the pytest wrapper (tests/test_board_sim.py).
"""

from __future__ import annotations

import os

import cocotb
import numpy as np

from pearl_fpga.backends.tabular_numpy import TabularNumpyBackend
from pearl_fpga.board.sim_transport import SimTransport, in_thread
from pearl_fpga.board.tabular_driver import REGISTERS, TabularBoardBackend
from pearl_fpga.errors import KernelTimeout
from pearl_fpga.spec import tabular as fmt

HW_STATES = int(os.environ.get("BOARD_TB_STATES", "32"))
HW_ACTIONS = int(os.environ.get("BOARD_TB_ACTIONS", "4"))


def transitions(rng: np.random.Generator, n: int, n_states: int, n_actions: int, adversarial: bool) -> tuple:
    """A random-walk stream (s2 is the next s), or the same (s, a) over and over with s2 == s."""
    if adversarial:
        s = np.zeros(n, np.uint32)
        a = np.zeros(n, np.uint32)
        s2 = np.where(np.arange(n) % 3 == 0, rng.integers(0, n_states, n), 0).astype(np.uint32)
    else:
        walk = rng.integers(0, n_states, n + 1).astype(np.uint32)
        s, s2 = walk[:-1], walk[1:]
        a = rng.integers(0, n_actions, n).astype(np.uint32)
    a2 = rng.integers(0, n_actions, n).astype(np.uint32)
    pick = rng.integers(0, 4, n)
    r = np.where(pick == 0, fmt.INT32_MAX, np.where(pick == 1, fmt.INT32_MIN, rng.integers(-(1 << 20), 1 << 20, n)))
    done = (rng.random(n) < 0.2).astype(np.uint8)
    return s, a, r.astype(np.int32), s2, a2, done


def exercise(transport: SimTransport, n_states: int, n_actions: int, seed: int, max_batch: int) -> dict[str, int]:
    """Q-learning and SARSA rounds through the board backend, checked against the numpy reference."""
    rng = np.random.default_rng(seed)
    board = TabularBoardBackend(n_states, n_actions, transport=transport, max_batch=max_batch)
    ref = TabularNumpyBackend(n_states, n_actions)
    assert not board.table().any(), "the table is not zero after clear"
    cycles: dict[str, int] = {}
    for round_, (alpha, gamma, sarsa) in enumerate([(19661, 62259, False), (65536, 65536, True), (1, 0, False),
                                                    (6554, 58982, True)]):
        board.configure(alpha, gamma, sarsa)
        ref.configure(alpha, gamma, sarsa)
        if round_ == 2:  # a host-loaded table, saturating values included
            start = rng.integers(fmt.INT32_MIN, fmt.INT32_MAX, (n_states, n_actions), dtype=np.int64).astype(np.int32)
            start[0, 0], start[-1, -1] = fmt.INT32_MAX, fmt.INT32_MIN
            board.load(start)
            ref.load(start)
        n = int(rng.integers(1, 3 * max_batch))
        batch = transitions(rng, n, n_states, n_actions, adversarial=round_ % 2 == 1)
        board.update(*batch)
        ref.update(*batch)
        cycles[f"update {n}"] = board.last_cycles or 0
        got, want = board.table(), ref.table()
        assert np.array_equal(got, want), f"round {round_}: tables differ at {np.argwhere(got != want)[:5].tolist()}"
    board.clear()
    assert not board.table().any()
    return cycles


def on_the_hls_schedule(transport: SimTransport, n: int, rows: int) -> tuple[int, int]:
    """Cycles of one call of n back-to-back updates over `rows` rows (control traffic included), and
    the HLS top's issue slots for them (spec.tabular.hls_issue_slots)."""
    board = TabularBoardBackend(HW_STATES, HW_ACTIONS, transport=transport, max_batch=n)
    board.configure(32768, 58982, False)
    rng = np.random.default_rng(5)
    s, a, r, s2, a2, done = transitions(rng, n, HW_STATES, HW_ACTIONS, adversarial=False)
    s, s2 = s % rows, s2 % rows
    board.update(s, a, r, s2, a2, done)
    return int(board.last_cycles), fmt.hls_issue_slots(s, s2)


@cocotb.test()
async def driver_matches_reference(dut):
    """The synthesized table, all columns in use, calls split to max_batch, no backpressure."""
    transport = await SimTransport.start(dut, "tabular")
    cycles = await in_thread(exercise, transport, HW_STATES, HW_ACTIONS, seed=1, max_batch=64)
    dut._log.info("cycles per call: %s", cycles)


@cocotb.test()
async def driver_with_backpressure_and_a_smaller_table(dut):
    """Random gaps on both streams; fewer rows and columns than synthesized (the max runs over n_actions)."""
    transport = await SimTransport.start(dut, "tabular")
    transport.set_backpressure(seed=7)
    await in_thread(exercise, transport, HW_STATES - 5, max(1, HW_ACTIONS - 1), seed=2, max_batch=48)


@cocotb.test()
async def driver_through_identity_commands(dut):
    """As on XRT, where output registers cannot be read: the shape and each call's UPDATE count come
    from IDENTITY commands on the response stream, and the tables still equal the reference's."""
    transport = await SimTransport.start(dut, "tabular")
    transport.registers_readable = False
    await in_thread(exercise, transport, HW_STATES, HW_ACTIONS, seed=3, max_batch=40)


@cocotb.test()
async def the_hls_schedule_through_the_ip(dut):
    """n back-to-back updates cost the HLS top's issue slots plus a fixed control overhead (the same for
    every n and every stream, to within the driver's ap_done poll, an AXI4-Lite read): one per clock
    on rows that no recent update wrote, waits on the others."""
    transport = await SimTransport.start(dut, "tabular")
    overheads = set()
    for n, rows in ((50, HW_STATES), (1050, HW_STATES), (300, 3)):
        cycles, slots = await in_thread(on_the_hls_schedule, transport, n, rows)
        dut._log.info("%d updates over %d rows: %d cycles, %d issue slots", n, rows, cycles, slots)
        overheads.add(cycles - slots)
    assert max(overheads) - min(overheads) <= 8, f"cycles minus the HLS top's issue slots differ: {overheads}"


def hang(transport: SimTransport) -> str:
    """Tell the kernel to expect 6 commands and send 2: the driver must time out, naming the state."""
    board = TabularBoardBackend(HW_STATES, HW_ACTIONS, transport=transport, timeout_s=20e-6)
    zero = np.zeros(2, np.int64)
    cmds = fmt.encode_commands(np.full(2, fmt.OP_UPDATE), zero, zero, zero, s2=zero, a2=zero, done=zero)
    try:
        board.driver.run(cmds, 0, n_cmds=6)
    except KernelTimeout as exc:
        return str(exc)
    raise AssertionError("a kernel waiting for 4 more commands signalled ap_done")


@cocotb.test()
async def timeout_names_kernel_and_registers(dut):
    transport = await SimTransport.start(dut, "tabular")
    message = await in_thread(hang, transport)
    assert "tabular kernel" in message and "n_cmds@0x10=0x00000006" in message, message
    assert f"max_states@0x38=0x{HW_STATES:08x}" in message, message
    assert set(REGISTERS) <= {part.split("@")[0] for part in message.split("register state: ")[1].split(", ")}
    await transport.reset()
    await in_thread(exercise, transport, HW_STATES, HW_ACTIONS, seed=3, max_batch=16)
