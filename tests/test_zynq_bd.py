"""hls/scripts/zynq_bd.tcl as Vivado would run it: the script itself runs in Tcl (tkinter) against a model
of the block-design commands it uses (tests/vivado_stub.py), with the arguments hls/build.mk gives it."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pearl_fpga.board import manifest as mf
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.board.zynq_design import AXI_DMA_MM_WIDTHS, axi_dma_config, zynq_design, zynq_design_tcl
from pearl_fpga.spec.kernels import KERNELS

pytest.importorskip("tkinter", reason="the block-design checks run zynq_bd.tcl in Python's Tcl (tkinter)")
from vivado_stub import VivadoStub  # noqa: E402

ZYNQ_BOARDS = [name for name, spec in load_catalog().items() if spec.kind == "zynq"]


def run_script(tmp_path: Path, board: str, board_repo: str = "", board_parts: tuple[str, ...] | None = None,
               **slack: float) -> tuple[VivadoStub, Path]:
    spec = load_catalog()[board]
    out = tmp_path / "out" / "pearl_fpga"
    stub = VivadoStub(board_parts=board_parts, **slack).run(board, spec.part, spec.board_part, f"{spec.clock_mhz:g}",
                                                            str(tmp_path / "build"), str(out), zynq_design_tcl(spec), board_repo)
    return stub, out


@pytest.mark.parametrize("board", ZYNQ_BOARDS)
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_dma_memory_map_width_is_at_least_the_stream_width(kernel, board):
    """PG021 (AXI DMA v7.1), "Memory Map Data Width" and "Stream Data Width": the memory-map width is one
    of 32..1024 bits and a channel's stream may not be wider, or the IP's validation fails; the design uses
    max(64, stream width), 64 bits being the PS's HP port."""
    cfg = axi_dma_config(kernel, load_catalog()[board].part)
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


@pytest.mark.parametrize("board", ZYNQ_BOARDS)
def test_kernels_are_instantiated_under_the_vlnv_their_hls_configuration_exports(tmp_path, board):
    """The block design instantiates each kernel as pearl_fpga:pearl_fpga:<top>:1.0, the IP the generated
    HLS configuration packages (the stub's IP catalog refuses any other), and the test .hwh says the same."""
    sys.path.insert(0, str(Path(__file__).parent / "pynq_stack"))
    try:
        from zynq_hwh import write_hwh
    finally:
        sys.path.pop(0)
    stub, _ = run_script(tmp_path, board)
    assert stub.errors == [] and stub.exit_code == 0
    kernels = {name: cell.vlnv for name, cell in stub.cells.items() if cell.vlnv.split(":")[2].endswith("_top")}
    assert kernels and all(v.startswith("pearl_fpga:pearl_fpga:") for v in kernels.values())
    manifest = mf.build_manifest(board, {"bit": "pearl_fpga.bit", "hwh": "pearl_fpga.hwh"}, {"vivado": "2024.2"})
    write_hwh(manifest, tmp_path / "pearl_fpga.hwh")
    hwh = {m.get("INSTANCE"): m.get("VLNV") for m in ET.parse(tmp_path / "pearl_fpga.hwh").getroot().iter("MODULE")}
    assert {name: hwh[name] for name in kernels} == kernels


def test_a_kernel_under_another_vlnv_is_not_in_the_ip_catalog(tmp_path):
    spec = load_catalog()["pynq-z2"]
    design = zynq_design_tcl(spec).replace("pearl_fpga:pearl_fpga:replay_top", "xilinx.com:hls:replay_top")
    stub = VivadoStub().run("pynq-z2", spec.part, spec.board_part, "100", str(tmp_path / "build"), str(tmp_path / "o"), design, "")
    assert any("no IP xilinx.com:hls:replay_top:1.0" in e for e in stub.errors)


def test_dma_address_width_follows_the_ps():
    """PG021 "Address Width": a Zynq-7000's PS has 32-bit addresses; a Zynq UltraScale+'s DDR reaches above
    4 GB, so its DMAs take 64-bit addresses (pynq writes the upper word, MM2S_SA_MSB, on every transfer)."""
    for board in ZYNQ_BOARDS:
        spec = load_catalog()[board]
        for block in zynq_design(spec):
            assert block.dma["c_addr_width"] == (32 if spec.part.startswith("xc7z") else 64), board


def test_missing_board_files_stop_the_script_before_the_project(tmp_path):
    """Without TUL's pynq-z2 board files Vivado cannot apply the board's presets: the script stops at once
    (exit 2) naming the board part; with them in the folder hls/build.mk passes, it sets board.repoPaths."""
    stub, _ = run_script(tmp_path, "pynq-z2", board_parts=())
    assert stub.exit_code == 2 and not any(c[0] == "create_project" for c in stub.calls)
    repo = tmp_path / "boards" / "TUL" / "pynq-z2" / "A.0"
    repo.mkdir(parents=True)
    (repo / "board.xml").write_text('<board vendor="tul.com.tw" name="pynq-z2"><file_version>1.0</file_version>'
                                    '<components><component name="part0"/></components></board>')
    stub, out = run_script(tmp_path, "pynq-z2", board_repo=str(tmp_path / "boards"), board_parts=())
    assert stub.errors == [] and stub.exit_code == 0 and stub.repo_paths == [str(tmp_path / "boards")]


def test_the_classic_vitis_hls_script_exports_under_the_same_vlnv():
    """Where only the classic vitis_hls is installed, hls/scripts/run_hls.tcl exports the IP: under the
    vendor, library and version the block design instantiates (pearl_fpga.board.zynq_design)."""
    import re

    from pearl_fpga.board.zynq_design import IP_LIBRARY, IP_VENDOR, IP_VERSION

    script = (Path(__file__).resolve().parents[1] / "hls" / "scripts" / "run_hls.tcl").read_text()
    m = re.search(r"export_design -format ip_catalog -vendor (\S+) -library (\S+) -version (\S+)", script)
    assert m and m.groups() == (IP_VENDOR, IP_LIBRARY, IP_VERSION)
