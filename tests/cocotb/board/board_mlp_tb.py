"""cocotb: the MLP board driver (pearl_fpga.board.mlp_driver), unchanged, against mlp_top.sv.

As on a board: load weights through the LOAD stream, run INFER batches (split to max_batch), read
the outputs, and compare them with the numpy reference backend; with and without backpressure;
networks that do not fit are refused before anything is sent; a kernel that never finishes times
out naming the kernel and its registers. RTL parameters come from tests/test_board_sim.py.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
from mlp_cases import random_inputs, random_layers

from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend
from pearl_fpga.board.mlp_driver import MLPBoardBackend
from pearl_fpga.board.sim_transport import SimTransport, in_thread
from pearl_fpga.errors import KernelTimeout
from pearl_fpga.spec import mlp as fmt

LANES = int(os.environ.get("BOARD_TB_LANES", "4"))
MAX_WIDTH = int(os.environ.get("BOARD_TB_MAX_WIDTH", "16"))
MAX_LAYERS = int(os.environ.get("BOARD_TB_MAX_LAYERS", "4"))


def exercise(transport: SimTransport, seed: int) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    board = MLPBoardBackend(transport=transport, max_batch=5)
    assert (board.lanes, board.max_width, board.max_layers) == (LANES, MAX_WIDTH, MAX_LAYERS)
    cycles = {}
    cases = [
        ([3, MAX_WIDTH, 5, 2], fmt.HEAD_RAW, {}),  # a full-width hidden layer, DQN head
        ([MAX_WIDTH, 7, 3], fmt.HEAD_TANH, {}),  # DDPG-style actor head
        ([4, 6, 6, 6, 3], fmt.HEAD_RAW, {"shifts": (0, 3)}),  # MAX_LAYERS deep, small shifts: saturation
    ]
    for widths, head, kw in cases:
        layers = random_layers(rng, widths[: MAX_LAYERS + 1], head, **kw)
        board.load(layers, head)
        cycles[f"load {widths}"] = board.last_cycles or 0
        ref = NumpyMLPBackend()
        ref.load(layers, head)
        for batch in (1, 7, 12):
            x = random_inputs(rng, batch, widths[0])
            out, argmax = board.infer(x)
            want_out, want_argmax = ref.infer(x)
            assert np.array_equal(out, want_out), f"{widths} {head} batch {batch}: outputs differ"
            if head == fmt.HEAD_RAW:
                assert np.array_equal(argmax, want_argmax), f"{widths}: argmax differs"
            else:
                assert argmax is None
            cycles[f"infer {widths} x{batch}"] = board.last_cycles or 0
    return cycles


def refuse_and_keep(transport: SimTransport) -> None:
    """Too wide / too deep networks are refused naming the limit, and the loaded weights stay in use."""
    rng = np.random.default_rng(5)
    board = MLPBoardBackend(transport=transport)
    layers = random_layers(rng, [3, 4, 2], fmt.HEAD_RAW)
    board.load(layers, fmt.HEAD_RAW)
    x = random_inputs(rng, 3, 3)
    before = board.infer(x)
    for bad, limit in (([3, MAX_WIDTH + 1, 2], "max_width"), ([2] * (MAX_LAYERS + 2), "max_layers")):
        try:
            board.load(random_layers(rng, bad, fmt.HEAD_RAW), fmt.HEAD_RAW)
        except ValueError as exc:
            assert limit in str(exc), exc
        else:
            raise AssertionError(f"a network over {limit} was accepted")
    after = board.infer(x)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])
    try:
        board.infer(np.zeros((2, 4), np.int16))
    except ValueError as exc:
        assert "(batch, 3)" in str(exc)
    else:
        raise AssertionError("observations of the wrong width were accepted")


def hang(transport: SimTransport) -> str:
    """INFER with batch=4 but observations for 1: the kernel waits for input that never comes."""
    rng = np.random.default_rng(9)
    board = MLPBoardBackend(transport=transport, timeout_s=30e-6)
    board.load(random_layers(rng, [3, 4, 2], fmt.HEAD_RAW), fmt.HEAD_RAW)
    try:
        board.driver.call(fmt.MODE_INFER, 4, random_inputs(rng, 1, 3).view(np.uint16).ravel(), 4 * 3)
    except KernelTimeout as exc:
        return str(exc)
    raise AssertionError("a kernel waiting for 3 more observations finished")


@cocotb.test()
async def driver_matches_reference(dut):
    transport = await SimTransport.start(dut, "mlp")
    cycles = await in_thread(exercise, transport, 1)
    dut._log.info("cycles per call: %s", cycles)


@cocotb.test()
async def driver_with_backpressure(dut):
    transport = await SimTransport.start(dut, "mlp")
    transport.set_backpressure(seed=11)
    await in_thread(exercise, transport, 2)


@cocotb.test()
async def oversized_networks_are_refused(dut):
    transport = await SimTransport.start(dut, "mlp")
    await in_thread(refuse_and_keep, transport)


@cocotb.test()
async def timeout_names_kernel_and_registers(dut):
    transport = await SimTransport.start(dut, "mlp")
    message = await in_thread(hang, transport)
    dut._log.info("timeout message: %s", message)
    assert "mlp kernel" in message, message
    assert "batch@0x18=0x00000004" in message and "mode@0x10=0x00000001" in message, message
    assert f"max_width@0x28=0x{MAX_WIDTH:08x}" in message, message
    await transport.reset()
    await in_thread(exercise, transport, 3)
