"""hls/scripts/zynq_bd.tcl as Vivado would run it: the script itself runs in Tcl (tkinter) against a model
of the block-design commands it uses (tests/vivado_stub.py), with the arguments hls/build.mk gives it."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pearl_fpga.board import manifest as mf
from pearl_fpga.board.catalog import AXI_DMA_MM_WIDTHS, axi_dma_config, load_catalog, zynq_design, zynq_design_tcl
from pearl_fpga.spec.kernels import KERNELS

pytest.importorskip("tkinter", reason="the block-design checks run zynq_bd.tcl in Python's Tcl (tkinter)")
from vivado_stub import VivadoStub  # noqa: E402

ZYNQ_BOARDS = [name for name, spec in load_catalog().items() if spec.kind == "zynq"]


def run_script(tmp_path: Path, board: str, **slack: float) -> tuple[VivadoStub, Path]:
    spec = load_catalog()[board]
    out = tmp_path / "out" / "pearl_fpga"
    stub = VivadoStub(**slack).run(board, spec.part, spec.board_part, f"{spec.clock_mhz:g}", str(tmp_path / "build"),
                                   str(out), zynq_design_tcl(spec))
    return stub, out


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_dma_memory_map_width_is_at_least_the_stream_width(kernel):
    """PG021 (AXI DMA v7.1), "Memory Map Data Width" and "Stream Data Width": the memory-map width is one
    of 32..1024 bits and a channel's stream may not be wider, or the IP's validation fails; the design uses
    max(64, stream width), 64 bits being the PS's HP port."""
    cfg = axi_dma_config(kernel)
    for ch, stream in (("mm2s", "c_m_axis_mm2s_tdata_width"), ("s2mm", "c_s_axis_s2mm_tdata_width")):
        mm = cfg[f"c_m_axi_{ch}_data_width"]
        assert mm in AXI_DMA_MM_WIDTHS and mm >= cfg[stream]
        assert mm == max(64, cfg[stream])
    assert cfg["c_m_axis_mm2s_tdata_width"] == 8 * KERNELS[kernel].in_word_bytes
    assert cfg["c_s_axis_s2mm_tdata_width"] == 8 * KERNELS[kernel].out_word_bytes


@pytest.mark.parametrize("board", ZYNQ_BOARDS)
def test_block_design_validates_and_writes_the_bitstream(tmp_path, board):
    """The whole script: every cell and pin connected, every DMA valid under PG021 with exactly the table's
    parameters, and the .bit/.hwh copied to the output prefix."""
    stub, out = run_script(tmp_path, board)
    assert stub.errors == [] and stub.exit_code == 0
    spec = load_catalog()[board]
    dmas = {name: cell for name, cell in stub.cells.items() if "axi_dma" in cell.vlnv}
    expected = {}
    for block in zynq_design(spec):
        for i in range(block.copies):
            expected[f"dma_{block.kernel}" if i == 0 else f"dma_{block.kernel}_{i}"] = block.dma
    assert sorted(dmas) == sorted(expected)
    for name, cell in dmas.items():
        assert cell.props == {k: str(v) for k, v in expected[name].items()}, name
    assert out.with_suffix(".bit").is_file() and out.with_suffix(".hwh").is_file()


@pytest.mark.parametrize("board", ZYNQ_BOARDS)
def test_every_dma_master_joins_the_interconnect_of_the_hp_port(tmp_path, board):
    """The HP port takes one connection: the first DMA master's automation targets it and makes the
    interconnect; each later one targets its own unconnected master pin with intc_ip naming that
    interconnect (as Vivado's journal and hls4ml's pynq-z2 design do), never the HP port again."""
    stub, _ = run_script(tmp_path, board)
    assert stub.errors == []
    hp_rules = [a for a in stub.automations if "Slave" in a]
    first, rest = hp_rules[0], hp_rules[1:]
    assert first["target"] == "/" + first["Slave"].lstrip("/")
    intc = [name for name, cell in stub.cells.items() if "axi_interconnect" in cell.vlnv and name != "ps_axi_periph"]
    assert len(intc) == 1
    for a in rest:
        assert a["target"] == a["Master"] and a["intc_ip"] == "/" + intc[0]
    masters = [f"/{n}/{p}" for n, c in stub.cells.items() if "axi_dma" in c.vlnv for p in ("M_AXI_MM2S", "M_AXI_S2MM")]
    assert sorted(a["Master"] for a in hp_rules) == sorted(masters)


@pytest.mark.parametrize("slack", [{"wns": -0.05}, {"whs": -0.01}])
def test_a_timing_failure_fails_the_build(tmp_path, slack):
    """A routed design with negative setup (WNS) or hold (WHS) slack ends the script with exit 1 before
    the .bit is copied, so `make bitstream` stops and no manifest is written."""
    stub, out = run_script(tmp_path, "pynq-z2", **slack)
    assert stub.exit_code == 1
    assert not out.with_suffix(".bit").exists()
    assert (tmp_path / "build" / "reports" / "timing_summary.rpt").is_file()  # the report is kept to read


def test_timing_met_at_zero_slack(tmp_path):
    stub, out = run_script(tmp_path, "pynq-z2", wns=0.0, whs=0.0)
    assert stub.exit_code == 0 and out.with_suffix(".bit").is_file()


@pytest.mark.parametrize("board", ZYNQ_BOARDS)
def test_the_test_hwh_has_the_dma_parameters_the_script_sets(tmp_path, board):
    """tests/pynq_stack/zynq_hwh.py (the .hwh the pynq tests load) and the Tcl take the DMA parameters
    from the same table, so the mock board cannot disagree with the build."""
    sys.path.insert(0, str(Path(__file__).parent / "pynq_stack"))
    try:
        from zynq_hwh import write_hwh
    finally:
        sys.path.pop(0)
    stub, _ = run_script(tmp_path, board)
    manifest = mf.build_manifest(board, {"bit": "pearl_fpga.bit", "hwh": "pearl_fpga.hwh"}, {"vivado": "2024.2"})
    write_hwh(manifest, tmp_path / "pearl_fpga.hwh")
    root = ET.parse(tmp_path / "pearl_fpga.hwh").getroot()
    for module in root.iter("MODULE"):
        if module.get("MODTYPE") != "axi_dma":
            continue
        params = {p.get("NAME"): p.get("VALUE") for p in module.iter("PARAMETER")}
        props = stub.cells[module.get("INSTANCE")].props
        assert props and all(params[name] == value for name, value in props.items()), module.get("INSTANCE")
