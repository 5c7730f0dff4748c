"""The board path through the real pynq package, as a PYNQ-Z2 image runs it (pynq 3.1).

pynq.Overlay parses the build's .hwh (tests/pynq_stack/zynq_hwh.py writes what Vivado would), binds
DefaultIP to the kernels and pynq's AXI DMA driver to their DMAs, sets the PL clock through the PS's
registers, and pearl_fpga's drivers (PynqTransport and the kernel drivers, unchanged) run on top.
Below pynq, a mock Zynq device (tests/pynq_stack/zynq_mock.py) forwards MMIO to the HLS C++ tops compiled by
g++ and models the AXI DMAs, S2MM transfers ending at tlast.

pynq pins numpy<2, so these tests run in their own environment: `make test-pynq` (called by `make
test`) builds .venv-pynq and runs them; the main suite does not collect this folder.
"""

from __future__ import annotations

import numpy as np
import pynq
import pytest
from mlp_cases import random_inputs, random_layers
from zynq_hwh import REGISTERS, write_hwh
from zynq_mock import MockZynq

from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend
from pearl_fpga.board import manifest as mf
from pearl_fpga.board import overlay
from pearl_fpga.board.mlp_driver import MLPBoardBackend
from pearl_fpga.board.pynq_transport import PynqTransport
from pearl_fpga.board.replay_driver import ReplayBoardBackend
from pearl_fpga.errors import KernelTimeout
from pearl_fpga.kernels import ReplaySampler, TabularQ
from pearl_fpga.spec import mlp as mfmt
from pearl_fpga.spec import replay as rfmt

@pytest.fixture(scope="module", params=["pynq-z2", "zcu104"])
def board(request, tmp_path_factory):
    """A build folder at the catalog's sizes, found as a user's would be, on the mock board: a Zynq-7000
    (one tabular instance) and a Zynq UltraScale+ (two)."""
    name = request.param
    root = tmp_path_factory.mktemp("bitstreams")
    folder = root / name
    folder.mkdir()
    files = {"bit": "pearl_fpga.bit", "hwh": "pearl_fpga.hwh"}
    mf.write_manifest(mf.build_manifest(name, files, {"vivado": "2024.2"}), folder / "manifest.json")
    (folder / "pearl_fpga.bit").write_bytes(b"placeholder: the mock board never programs it")
    write_hwh(mf.load_manifest(folder / "manifest.json"), folder / "pearl_fpga.hwh")
    device = MockZynq(folder)
    saved = pynq.Device.__dict__.get("_active_device")
    pynq.Device.active_device = device
    mp = pytest.MonkeyPatch()
    # pynq keeps its clock driver for the first device it saw (one board per process on a real one)
    mp.delattr(pynq.ps.Clocks, "_real_instance", raising=False)
    mp.setattr(pynq.ps.Clocks, "device", device)
    mp.setenv("PEARL_FPGA_BITSTREAMS", str(root))
    mp.setenv("PEARL_FPGA_BOARD", name)
    overlay._loaded.clear()
    yield device
    mp.undo()
    overlay._loaded.clear()
    if saved is not None:
        pynq.Device.active_device = saved


def test_the_overlay_parses_the_build(board):
    """pynq's parser finds every kernel and DMA of the manifest, with the register map of its SPEC.md,
    binds its AXI DMA driver, and sets FCLK0 to the kernel clock through the PS's registers."""
    ol = pynq.Overlay(str(board.manifest.file("bit")))
    assert board.downloads[-1].endswith("pearl_fpga.bit")
    for kernel, entry in board.manifest.kernels.items():
        ip_name, dma_name = entry.instance_names(0)
        regs = getattr(ol, ip_name).register_map
        assert regs.CTRL.address == 0x00
        for name, offset, _ in REGISTERS[kernel]:
            assert getattr(regs, name).address == offset, f"{kernel}.{name}"
        assert isinstance(getattr(ol, dma_name), pynq.lib.dma.DMA)
    assert board.clocks.fclk0_mhz() == pytest.approx(board.manifest.clock_mhz, rel=1e-4)  # 33.333 MHz reference on ZU+


def test_output_registers_read_zero_until_a_call_ends(board):
    """Read through DefaultIP's register map: the HLS top's identity registers are outputs, 0 on a board
    just programmed, and the synthesized sizes once the driver's empty call has ended."""
    fresh = MockZynq(board.manifest.path.parent)
    pynq.Device.active_device = fresh  # where pynq.allocate puts the DMA buffers
    try:
        ol = pynq.Overlay(str(board.manifest.file("bit")))
        regs = ol.replay_top_0.register_map
        assert (regs.capacity.capacity, regs.fanout.fanout) == (0, 0)
        sampler = ReplayBoardBackend(100, 16, transport=PynqTransport(ol, "replay_top_0", "dma_replay", 16, 16))
    finally:
        pynq.Device.active_device = board
    synthesized = board.manifest.kernels["replay"].parameters
    assert (sampler.driver.capacity, sampler.driver.fanout) == (synthesized["capacity"], synthesized["fanout"])
    assert (regs.capacity.capacity, regs.fanout.fanout) == (synthesized["capacity"], synthesized["fanout"])


def test_replay_sampler_on_pynq(board):
    """ReplaySampler(backend="pynq") as a user calls it: updates, stratified samples, totals and clear
    equal to the numpy reference, batches split to the kernel's max_batch."""
    rng = np.random.default_rng(0)
    capacity = 1000
    s = ReplaySampler(capacity, 16, backend="pynq")
    ref = ReplaySampler(capacity, 16, backend="numpy")
    log = board.dmas["dma_replay"].log
    log.clear()
    for n in (1, 300, 600):
        idx = rng.integers(0, capacity, n)
        words, _ = rfmt.priorities_to_fixed(rng.exponential(1.0, n))
        s.update(idx, words=words)
        ref.update(idx, words=words)
        assert s.total_fixed == ref.total_fixed
        targets = rfmt.stratified_targets(ref.total_fixed, 300, rng)
        got, want = s.sample_targets(targets), ref.sample_targets(targets)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    max_batch = board.manifest.kernels["replay"].parameters["max_batch"]
    assert ("s2mm", 16 * min(300, max_batch)) in log  # one call's responses in one transfer (tlast at its end)
    s.clear()
    assert s.total_fixed == 0


def test_mlp_on_pynq_takes_a_batch_in_one_transfer(board):
    """The MLP's output has one tlast per batch, so one S2MM transfer takes a whole call's outputs
    (PynqTransport would re-arm the channel at an earlier tlast): outputs equal the numpy reference."""
    entry = board.manifest.kernels["mlp"]
    transport, _ = overlay.open_kernel("mlp", "pynq")
    assert isinstance(transport, PynqTransport)
    backend = MLPBoardBackend(transport=transport, max_batch=entry.parameters["max_batch"])
    rng = np.random.default_rng(1)
    for widths, head in (([4, 64, 64, 2], mfmt.HEAD_RAW), ([3, 32, 1], mfmt.HEAD_TANH)):
        layers = random_layers(rng, widths, head)
        backend.load(layers, head)
        ref = NumpyMLPBackend()
        ref.load(layers, head)
        log = board.dmas["dma_mlp"].log
        log.clear()
        x = random_inputs(rng, 9, widths[0])
        (out, argmax), (want, want_argmax) = backend.infer(x), ref.infer(x)
        assert np.array_equal(out, want)
        assert (argmax is None and want_argmax is None) or np.array_equal(argmax, want_argmax)
        per_observation = 2 * (widths[-1] + (1 if head == mfmt.HEAD_RAW else 0))
        assert [n for ch, n in log if ch == "s2mm"] == [per_observation * 9]


@pytest.mark.parametrize("algo", ["q", "sarsa"])
def test_tabular_q_on_pynq(board, algo):
    """TabularQ(backend="pynq") as a user calls it: a host load, updates and read-back, equal to numpy."""
    rng = np.random.default_rng(len(algo))
    n_states, n_actions = 40, 5
    q = TabularQ(n_states, n_actions, alpha=0.3, gamma=0.9, algo=algo, backend="pynq")
    ref = TabularQ(n_states, n_actions, alpha=0.3, gamma=0.9, algo=algo, backend="numpy")
    start = rng.integers(-5 << 16, 5 << 16, (n_states, n_actions)).astype(np.int32)  # Q16.16
    q.load(start)
    ref.load(start)
    n = 500
    batch = (rng.integers(0, n_states, n), rng.integers(0, n_actions, n), rng.normal(0, 3, n),
             rng.integers(0, n_states, n), rng.random(n) < 0.1, rng.integers(0, n_actions, n))
    q.update(*batch)
    ref.update(*batch)
    assert np.array_equal(q.table, ref.table)
    assert not np.array_equal(q.table, start)


def _replay_round_trip(transport: PynqTransport) -> None:
    """One update and one sample through `transport`, equal to the numpy reference."""
    sampler = ReplayBoardBackend(64, 16, transport=transport)
    ref = ReplaySampler(64, 16, backend="numpy")
    idx = np.arange(0, 64, 3)
    words, _ = rfmt.priorities_to_fixed(np.linspace(0.5, 2.0, idx.size))
    sampler.update(idx.astype(np.uint32), words)
    ref.update(idx, words=words)
    assert sampler.total() == ref.total_fixed
    targets = rfmt.stratified_targets(ref.total_fixed, 16, np.random.default_rng(3))
    got, want = sampler.sample(targets), ref.sample_targets(targets)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_a_kernel_that_never_answers_times_out_and_the_transport_recovers(board):
    """A DMA that never gets its words: KernelTimeout, not a hang; the transport resets the DMA (PG021's
    soft reset) and re-arms, so the next call runs instead of meeting pynq's "DMA channel not idle"."""
    transport, _ = overlay.open_kernel("replay", "pynq")
    dma = board.dmas["dma_replay"]
    before = dma.resets
    transport.arm_receive(4)
    with pytest.raises(KernelTimeout, match="0 of 4 words arrived.*DMA was reset and both channels restarted"):
        transport.receive(0.05)
    assert dma.resets == before + 1
    _replay_round_trip(transport)


@pytest.mark.parametrize("bits, name", [(0x40, "DMADecErr"), (0x20, "DMASlvErr"), (0x10, "DMAIntErr")])
def test_a_dma_error_is_reported_and_cleared(board, bits, name):
    """An S2MM transfer that ends in a DMASR error bit (PG021) halts its channel: the driver raises at once
    with the bits decoded, resets the DMA, and the next call runs."""
    transport, _ = overlay.open_kernel("replay", "pynq")
    board.dmas["dma_replay"].fail("s2mm", bits)
    with pytest.raises(KernelTimeout, match=f"S2MM channel stopped with an error.*{name}.*both channels restarted"):
        _replay_round_trip(transport)
    _replay_round_trip(transport)


def test_a_kernel_left_inside_its_call_says_to_reload_the_overlay(board, tmp_path):
    """An MM2S error leaves the kernel waiting for input it will never get (ap_idle 0): a DMA reset cannot
    end that, and the KernelTimeout says to reload the overlay; a fresh board (the reload) runs again."""
    transport, _ = overlay.open_kernel("replay", "pynq")
    board.dmas["dma_replay"].fail("mm2s", 0x20)
    with pytest.raises(KernelTimeout, match="DMASlvErr.*still inside its call.*reload the overlay"):
        _replay_round_trip(transport)
    pynq.Overlay(str(board.manifest.file("bit")))  # the reload the message asks for
    overlay._loaded.clear()
    _replay_round_trip(overlay.open_kernel("replay", "pynq")[0])


def test_the_kernels_under_back_pressure(board):
    """Transfers that take several status reads to complete (the streams' back-pressure): every kernel's
    results are still the numpy reference's."""
    for dma in board.dmas.values():
        dma.polls = 3
    try:
        transport, _ = overlay.open_kernel("replay", "pynq")
        _replay_round_trip(transport)
        test_tabular_q_on_pynq(board, "q")
        log = board.dmas["dma_mlp"].log
        log.clear()
        test_mlp_on_pynq_takes_a_batch_in_one_transfer(board)
    finally:
        for dma in board.dmas.values():
            dma.polls = 0


def test_dma_addresses_reach_the_whole_ddr(board):
    """The .hwh's c_addr_width is the Tcl's (pearl_fpga.board.zynq_design); on a Zynq UltraScale+ the
    buffers lie above 4 GB, as on a ZCU104's upper DDR, and the 64-bit DMA reaches them."""
    ol = pynq.Overlay(str(board.manifest.file("bit")))  # programs the board: the drivers' cached overlay is stale
    overlay._loaded.clear()
    width = int(ol.dma_replay.description["parameters"]["c_addr_width"])
    assert width == board.addr_width == (32 if board.manifest.part.startswith("xc7z") else 64)
    buf = pynq.allocate(shape=(64,), dtype=np.uint8)
    assert (buf.physical_address >= 1 << 32) == (width == 64)
    _replay_round_trip(overlay.open_kernel("replay", "pynq")[0])


def test_partitioned_tabular_runs_on_every_instance(board):
    """update_partitioned with backend="pynq": slice i on instance i mod instances, through each
    instance's own IP and DMA, merged as SPEC.md says; equal to the numpy backend's partitioned mode."""
    rng = np.random.default_rng(7)
    n_states, n_actions, n = 30, 4, 400
    q = TabularQ(n_states, n_actions, alpha=0.5, gamma=0.95, backend="pynq")
    ref = TabularQ(n_states, n_actions, alpha=0.5, gamma=0.95, backend="numpy")
    batch = (rng.integers(0, n_states, n), rng.integers(0, n_actions, n), rng.normal(0, 3, n),
             rng.integers(0, n_states, n), rng.random(n) < 0.1)
    instances = board.manifest.kernels["tabular"].instances
    for dma in board.dmas.values():
        dma.log.clear()
    q.update_partitioned(*batch, parts=4)
    ref.update_partitioned(*batch, parts=4)
    assert np.array_equal(q.table, ref.table) and q.table.any()
    used = {name for name, dma in board.dmas.items() if name.startswith("dma_tabular") and dma.log}
    assert used == {board.manifest.kernels["tabular"].instance_names(i)[1] for i in range(instances)}
