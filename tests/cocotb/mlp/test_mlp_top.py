"""cocotb testbench of mlp_top (hls/mlp/rtl/), checked against the numpy reference of the MLP kernel.

Run through tests/test_mlp_rtl.py (one Verilator build per parameter set). The TB plays the host of
hls/mlp/SPEC.md: AXI4-Lite registers, the LOAD stream, INFER batches, with and without random
backpressure on both streams, a reset in the middle of a stream, rejected LOADs, and the cycles per
inference (written to mlp_cycles.json in the build folder, MLP_TB_RESULTS, and to the log).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.axi import (
    AxiLiteBus,
    AxiLiteMaster,
    AxiStreamBus,
    AxiStreamFrame,
    AxiStreamSink,
    AxiStreamSource,
)

from pearl_fpga.spec.mlp import (
    HEAD_RAW,
    HEAD_TANH,
    MODE_IDENTITY,
    MODE_INFER,
    MODE_LOAD,
    REG_BATCH,
    REG_CTRL,
    REG_ERROR,
    REG_LANES,
    REG_MAX_LAYERS,
    REG_MAX_WIDTH,
    REG_MODE,
    STATUS_LOAD_REJECTED,
    STATUS_LOADED,
    QuantizedLayer,
    encode_load_stream,
    infer_cycle_bound,
)
from mlp_rtl_cases import random_network, reference

LANES = int(os.environ.get("MLP_LANES", "16"))
MAX_WIDTH = int(os.environ.get("MLP_MAX_WIDTH", "256"))
MAX_LAYERS = int(os.environ.get("MLP_MAX_LAYERS", "4"))
SEED = int(os.environ.get("MLP_SEED", "1"))
RESULTS = Path(os.environ.get("MLP_TB_RESULTS", "mlp_cycles.json"))
CLOCK_NS = 10
AP_START, AP_DONE, AP_IDLE = 0x1, 0x2, 0x4


def pauses(seed: int, probability: float) -> Iterator[bool]:
    """Random pause pattern for cocotbext-axi's pause generators."""
    rng = random.Random(seed)
    while True:
        yield rng.random() < probability


class TB:
    """Clock, reset and the three bus drivers of mlp_top."""

    def __init__(self, dut) -> None:
        self.dut = dut
        cocotb.start_soon(Clock(dut.ap_clk, CLOCK_NS, unit="ns").start())
        self.source = AxiStreamSource(
            AxiStreamBus.from_prefix(dut, "s_axis_in"), dut.ap_clk, dut.ap_rst_n, reset_active_level=False, byte_size=16
        )
        self.sink = AxiStreamSink(
            AxiStreamBus.from_prefix(dut, "m_axis_out"), dut.ap_clk, dut.ap_rst_n, reset_active_level=False, byte_size=16
        )
        self.axil = AxiLiteMaster(
            AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk, dut.ap_rst_n, reset_active_level=False
        )

    def backpressure(self, on: bool, seed: int = 0) -> None:
        if on:
            self.source.set_pause_generator(pauses(seed, 0.3))
            self.sink.set_pause_generator(pauses(seed + 1, 0.4))
        else:
            self.source.clear_pause_generator()
            self.sink.clear_pause_generator()
            self.source.pause = False  # clearing the generator keeps its last value
            self.sink.pause = False

    async def reset(self) -> None:
        """Hold ap_rst_n low for 5 cycles; words still queued in the drivers are dropped."""
        self.dut.ap_rst_n.value = 0
        await ClockCycles(self.dut.ap_clk, 5)
        self.source.clear()
        self.sink.clear()
        self.dut.ap_rst_n.value = 1
        await ClockCycles(self.dut.ap_clk, 2)

    def cycle(self) -> int:
        return int(get_sim_time("ns")) // CLOCK_NS

    async def start(self, mode: int, batch: int = 0) -> None:
        await self.axil.write_dword(REG_MODE, mode)
        await self.axil.write_dword(REG_BATCH, batch)
        await self.axil.write_dword(REG_CTRL, AP_START)

    async def wait_done(self, timeout_cycles: int = 100_000) -> None:
        start = self.cycle()
        while True:
            ctrl = await self.axil.read_dword(REG_CTRL)
            if ctrl & AP_DONE:
                assert ctrl & AP_IDLE, f"ap_done without ap_idle: control=0x{ctrl:x}"
                return
            assert self.cycle() - start < timeout_cycles, f"no ap_done after {timeout_cycles} cycles"
            await ClockCycles(self.dut.ap_clk, 8)

    async def load(self, layers: Sequence[QuantizedLayer], head: str) -> int:
        """Run one LOAD; returns the error register."""
        await self.start(MODE_LOAD)
        words = [int(w) for w in encode_load_stream(layers, head)]
        await self.source.send(AxiStreamFrame(words))
        await self.wait_done()
        return await self.axil.read_dword(REG_ERROR)

    async def _stamp_observations(self, out_words: int, stamps: list[int]) -> None:
        """The cycle at which each observation's last output word is taken from m_axis_out."""
        beats = 0
        while True:
            await RisingEdge(self.dut.ap_clk)
            if self.dut.m_axis_out_tvalid.value and self.dut.m_axis_out_tready.value:
                beats += 1
                if beats % out_words == 0:
                    stamps.append(self.cycle())

    async def infer(self, x: np.ndarray, out_words: int) -> tuple[np.ndarray, list[int]]:
        """Run one INFER; returns the output words (B, out_words) and the cycle each observation's last
        word left. The outputs are one frame: tlast once, on the batch's last word (SPEC.md)."""
        batch = x.shape[0]
        stamps: list[int] = []
        watch = cocotb.start_soon(self._stamp_observations(out_words, stamps))
        await self.start(MODE_INFER, batch)
        for row in x:
            await self.source.send(AxiStreamFrame([int(v) & 0xFFFF for v in row]))
        frame = await with_timeout(self.sink.recv(), 200_000 * CLOCK_NS, "ns")
        assert len(frame.tdata) == batch * out_words, f"{len(frame.tdata)} words in the frame, expected {batch * out_words}"
        out = np.array(list(frame.tdata), dtype=np.int64).reshape(batch, out_words)
        await self.wait_done()
        watch.cancel()
        assert self.sink.empty(), "words after the last observation"
        assert await self.axil.read_dword(REG_ERROR) == 0
        return out.astype(np.uint16).view(np.int16), stamps


async def setup(dut) -> TB:
    tb = TB(dut)
    await tb.reset()
    return tb


def expected_words(layers: Sequence[QuantizedLayer], head: str, x: np.ndarray) -> np.ndarray:
    values, argmax = reference(layers, head, x)
    if argmax is None:
        return values.astype(np.int16)
    return np.concatenate([values, argmax[:, None]], axis=1).astype(np.int16)


def random_input(rng: np.random.Generator, batch: int, n0: int) -> np.ndarray:
    x = rng.integers(-32768, 32768, (batch, n0))
    x[rng.random((batch, n0)) < 0.1] = 32767
    x[rng.random((batch, n0)) < 0.1] = -32768
    return x.astype(np.int16)


async def check_network(tb: TB, rng: np.random.Generator, layers: list[QuantizedLayer], head: str, batch: int) -> None:
    assert await tb.load(layers, head) == 0
    x = random_input(rng, batch, layers[0].n_in)
    want = expected_words(layers, head, x)
    got, _ = await tb.infer(x, want.shape[1])
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{len(bad)} words differ, first at {tuple(bad[0])}: got {got[tuple(bad[0])]}, want {want[tuple(bad[0])]}"


@cocotb.test()
async def test_registers(dut) -> None:
    tb = await setup(dut)
    assert await tb.axil.read_dword(REG_LANES) == LANES
    assert await tb.axil.read_dword(REG_MAX_WIDTH) == MAX_WIDTH
    assert await tb.axil.read_dword(REG_MAX_LAYERS) == MAX_LAYERS
    ctrl = await tb.axil.read_dword(REG_CTRL)
    assert ctrl & AP_IDLE and not ctrl & AP_DONE
    await tb.axil.write_dword(REG_BATCH, 123)
    assert await tb.axil.read_dword(REG_BATCH) == 123
    # INFER before any LOAD: done at once with the error bit, no word taken
    await tb.start(MODE_INFER, 1)
    await tb.wait_done()
    assert await tb.axil.read_dword(REG_ERROR) == 1
    assert not int(dut.s_axis_in_tready.value)


@cocotb.test()
@cocotb.parametrize(backpressure=[False, True])
async def test_random_networks(dut, backpressure: bool) -> None:
    tb = await setup(dut)
    tb.backpressure(backpressure, SEED)
    rng = np.random.default_rng(SEED + backpressure)
    for trial in range(6):
        layers = random_network(rng, MAX_WIDTH, MAX_LAYERS, small=trial < 2)
        head = HEAD_TANH if trial % 2 else HEAD_RAW
        await check_network(tb, rng, layers, head, batch=int(rng.integers(1, 6)))


@cocotb.test()
async def test_reset_mid_stream(dut) -> None:
    tb = await setup(dut)
    rng = np.random.default_rng(SEED + 10)
    layers = random_network(rng, MAX_WIDTH, MAX_LAYERS, small=True)
    # reset in the middle of a LOAD frame
    await tb.start(MODE_LOAD)
    words = [int(w) for w in encode_load_stream(layers, HEAD_RAW)]
    await tb.source.send(AxiStreamFrame(words))
    await ClockCycles(dut.ap_clk, min(len(words) // 2, 40) + 5)
    await tb.reset()
    assert (await tb.axil.read_dword(REG_CTRL)) & AP_IDLE
    await check_network(tb, rng, layers, HEAD_RAW, batch=3)
    # reset in the middle of an INFER, with results pending on both streams
    tb.backpressure(True, SEED)
    await tb.start(MODE_INFER, 4)
    for row in random_input(rng, 4, layers[0].n_in):
        await tb.source.send(AxiStreamFrame([int(v) & 0xFFFF for v in row]))
    await ClockCycles(dut.ap_clk, 30)
    await tb.reset()
    tb.backpressure(False)
    # the network must be loaded again after a reset; then inference carries on
    await tb.start(MODE_INFER, 1)
    await tb.wait_done()
    assert await tb.axil.read_dword(REG_ERROR) == 1, "INFER after reset without LOAD must be refused"
    layers2 = random_network(rng, MAX_WIDTH, MAX_LAYERS, small=True)
    await check_network(tb, rng, layers2, HEAD_TANH, batch=3)


def rejected_streams(good: list[QuantizedLayer]) -> dict[str, list[int]]:
    """LOAD streams whose header the kernel must refuse (keeping the old network): too wide, too
    deep, layers that disagree, shift out of range, and the flag rules of SPEC.md / the HLS C++."""
    rng = np.random.default_rng(5)

    def layer(n: int, m: int, relu: bool = True, shift: int = 8) -> QuantizedLayer:
        return QuantizedLayer(
            rng.integers(-100, 100, (m, n)).astype(np.int16), rng.integers(-100, 100, m).astype(np.int32), shift, relu
        )

    def words(layers: list[QuantizedLayer], head: str = HEAD_RAW) -> list[int]:
        return [int(w) for w in encode_load_stream(layers, head)]

    two = [layer(3, 5), layer(5, 2, relu=False)]
    flags0, flags1 = 4, 8  # header offsets of the flags words of layers 0 and 1

    def with_word(index: int, value: int) -> list[int]:
        w = words(two)
        w[index] = value
        return w

    return {
        "too wide": words([layer(3, MAX_WIDTH + 1), layer(MAX_WIDTH + 1, 2, relu=False)]),
        "too deep": words([layer(2, 2) for _ in range(MAX_LAYERS)] + [layer(2, 2, relu=False)]),
        "no layers": [0, 1, 2, 3],
        "inconsistent": words([layer(3, 5), layer(4, 2, relu=False)]),
        "shift over 40": words([layer(3, 4, shift=41), layer(4, 2, relu=False)]),
        "ReLU on the output layer": with_word(flags1, 1 | 4),
        "head on a hidden layer": with_word(flags0, 1 | 4),
        "no head": with_word(flags1, 0),
        "two heads": with_word(flags1, 2 | 4),
        "unknown flag": with_word(flags0, 1 | 8),
        "frame ends in the header": words(two)[:3],
    }


async def load_words(tb: TB, words: list[int]) -> int:
    await tb.start(MODE_LOAD)
    await tb.source.send(AxiStreamFrame(words))
    await tb.wait_done()
    return await tb.axil.read_dword(REG_ERROR)


@cocotb.test()
async def test_rejected_load_keeps_weights(dut) -> None:
    tb = await setup(dut)
    rng = np.random.default_rng(SEED + 20)
    layers = random_network(rng, MAX_WIDTH, MAX_LAYERS, small=True)
    x = random_input(rng, 3, layers[0].n_in)
    want = expected_words(layers, HEAD_RAW, x)
    assert await tb.load(layers, HEAD_RAW) == 0
    for name, words in rejected_streams(layers).items():
        error = await load_words(tb, words)
        assert error & 1, f"LOAD {name}: error register 0x{error:x}, expected bit0"
        got, _ = await tb.infer(x, want.shape[1])  # the error register clears at ap_start
        assert np.array_equal(got, want), f"LOAD {name} changed the network"
    # a batch over MAX_BATCH is refused without taking a word
    await tb.start(MODE_INFER, 4097)
    await tb.wait_done()
    assert await tb.axil.read_dword(REG_ERROR) == 1


async def identity(tb: TB) -> list[int]:
    """One IDENTITY call: its four words (lanes, max_width, max_layers, status), one frame."""
    await tb.start(MODE_IDENTITY)
    frame = await with_timeout(tb.sink.recv(), 10_000 * CLOCK_NS, "ns")
    await tb.wait_done()
    assert await tb.axil.read_dword(REG_ERROR) == 0
    return [int(w) for w in frame.tdata]


@cocotb.test()
async def test_identity_answers_the_sizes_and_the_load_status(dut) -> None:
    """IDENTITY (mode 2) answers lanes, max_width, max_layers and the status word on the stream, in one
    frame, past the tanh head; the status follows LOADs that complete, are rejected or are cut short."""
    tb = await setup(dut)
    rng = np.random.default_rng(SEED + 30)
    sizes = [LANES, MAX_WIDTH, MAX_LAYERS]
    assert await identity(tb) == sizes + [0]
    layers = random_network(rng, MAX_WIDTH, MAX_LAYERS, small=True)
    assert await tb.load(layers, HEAD_TANH) == 0
    assert await identity(tb) == sizes + [STATUS_LOADED]
    rejected = next(iter(rejected_streams(layers).values()))
    assert await load_words(tb, rejected) & 1
    assert await identity(tb) == sizes + [STATUS_LOADED | STATUS_LOAD_REJECTED]  # the old weights are kept
    good = [int(w) for w in encode_load_stream(layers, HEAD_RAW)]
    assert await load_words(tb, good[:-3]) & 1
    assert await identity(tb) == sizes + [STATUS_LOAD_REJECTED]  # cut short: no weights
    x = random_input(rng, 3, layers[0].n_in)
    want = expected_words(layers, HEAD_RAW, x)
    assert await tb.load(layers, HEAD_RAW) == 0
    got, _ = await tb.infer(x, want.shape[1])
    assert np.array_equal(got, want)


@cocotb.test()
async def test_broken_frame_leaves_no_network(dut) -> None:
    """A LOAD frame cut short inside the weights, or longer than its header says, leaves no network
    (as the HLS C++): INFER is refused until the next good LOAD."""
    tb = await setup(dut)
    rng = np.random.default_rng(SEED + 25)
    layers = random_network(rng, MAX_WIDTH, MAX_LAYERS, small=True)
    good = [int(w) for w in encode_load_stream(layers, HEAD_RAW)]
    x = random_input(rng, 2, layers[0].n_in)
    for name, words in {"truncated": good[:-3], "too long": good + good[:3]}.items():
        assert await tb.load(layers, HEAD_RAW) == 0
        assert await load_words(tb, words) & 1, name
        await tb.start(MODE_INFER, 2)
        await tb.wait_done()
        assert await tb.axil.read_dword(REG_ERROR) == 1, f"{name}: INFER ran on a broken network"
    assert int(dut.s_axis_in_tready.value) == 0
    want = expected_words(layers, HEAD_RAW, x)
    assert await tb.load(layers, HEAD_RAW) == 0
    got, _ = await tb.infer(x, want.shape[1])
    assert np.array_equal(got, want)


@cocotb.test()
async def test_cycles_per_inference(dut) -> None:
    """Steady-state cycles per inference (output to output) against SPEC.md's bound."""
    tb = await setup(dut)
    rng = np.random.default_rng(SEED + 30)
    nets = {"4-64-64-2": [4, 64, 64, 2], "3-32-32-1": [3, 32, 32, 1], "8-16-4": [8, 16, 4]}
    fit = {name: widths for name, widths in nets.items() if len(widths) - 1 <= MAX_LAYERS}  # small builds hold fewer layers
    assert fit, f"no network of {list(nets)} fits MAX_LAYERS={MAX_LAYERS}"
    figures: dict[str, dict[str, float]] = {}
    for name, widths in fit.items():
        widths = [min(w, MAX_WIDTH) for w in widths]
        layers = random_network(rng, MAX_WIDTH, MAX_LAYERS, widths=widths)
        assert await tb.load(layers, HEAD_RAW) == 0
        batch = 10
        x = random_input(rng, batch, widths[0])
        want = expected_words(layers, HEAD_RAW, x)
        got, stamps = await tb.infer(x, want.shape[1])
        assert np.array_equal(got, want)
        per_inference = (stamps[-1] - stamps[1]) / (batch - 2)  # skip the pipeline fill
        target = infer_cycle_bound([(layer.n_in, layer.m_out) for layer in layers], LANES)
        figures["-".join(map(str, widths))] = {"cycles_per_inference": per_inference, "target": target}
        dut._log.info("cycles per inference %s at LANES=%d: %.1f (target %.1f)", widths, LANES, per_inference, target)
        assert per_inference <= target, f"{widths}: {per_inference} cycles per inference > target {target}"
    RESULTS.write_text(json.dumps({"lanes": LANES, "max_width": MAX_WIDTH, "nets": figures}, indent=1))
