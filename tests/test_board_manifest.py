"""Bitstream manifests and overlay loading: written by the build, validated before a device is touched."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pearl_fpga.board import manifest as mf
from pearl_fpga.board import vivado_reports
from pearl_fpga.board import overlay
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.errors import BackendUnavailable, ManifestError

UTIL_7SERIES = """\
1. Slice Logic
--------------
+----------------------------+-------+-------+------------+-----------+-------+
|          Site Type         |  Used | Fixed | Prohibited | Available | Util% |
+----------------------------+-------+-------+------------+-----------+-------+
| Slice LUTs                 | 12345 |     0 |          0 |     53200 | 23.20 |
|   LUT as Logic             | 11000 |     0 |          0 |     53200 | 20.68 |
| Slice Registers            | 20001 |     0 |          0 |    106400 | 18.80 |
+----------------------------+-------+-------+------------+-----------+-------+
3. Memory
+-------------------+------+-------+------------+-----------+-------+
| Block RAM Tile    | 73.5 |     0 |          0 |       140 | 52.50 |
|   RAMB36/FIFO*    |   73 |     0 |          0 |       140 | 52.14 |
+-------------------+------+-------+------------+-----------+-------+
4. DSP
| DSPs           |   12 |     0 |          0 |       220 |  5.45 |
"""

UTIL_ULTRASCALE = """\
| CLB LUTs*               | 40321 |     0 |          0 |    230400 | 17.50 |
| CLB Registers           | 50210 |     0 |          0 |    460800 | 10.90 |
| Block RAM Tile | 100 |     0 |          0 |       312 | 32.05 |
| URAM           |  32 |     0 |          0 |        96 | 33.33 |
| DSPs           |  64 |     0 |          0 |      1728 |  3.70 |
"""

TIMING = """\
------------------------------------------------------------------------------------------------
| Design Timing Summary
| ---------------------
------------------------------------------------------------------------------------------------

    WNS(ns)      TNS(ns)  TNS Failing Endpoints  TNS Total Endpoints      WHS(ns)      THS(ns)
    -------      -------  ---------------------  -------------------      -------      -------
      1.250        0.000                      0                45678        0.021        0.000
"""


def test_report_parsers():
    assert vivado_reports.parse_utilization(UTIL_7SERIES) == {"lut": 12345, "ff": 20001, "bram36": 74, "dsp": 12}
    assert vivado_reports.parse_utilization(UTIL_ULTRASCALE) == {"lut": 40321, "ff": 50210, "bram36": 100, "uram": 32, "dsp": 64}
    timing = vivado_reports.parse_timing_summary(TIMING, clock_mhz=100)
    assert timing["wns_ns"] == 1.25 and timing["met"] is True
    assert timing["achieved_mhz"] == pytest.approx(1000 / (10 - 1.25), abs=0.1)
    failing = vivado_reports.parse_timing_summary(TIMING.replace("      1.250  ", "     -0.400  "), clock_mhz=100)
    assert failing["met"] is False and failing["achieved_mhz"] < 100
    with pytest.raises(ManifestError, match="WNS"):
        vivado_reports.parse_timing_summary("no summary here")


def make_build(folder: Path, board: str = "pynq-z2", hwh: bool = True, **overrides) -> Path:
    """A bitstream folder as `make bitstream` leaves it (the .bit/.hwh are placeholders: never loaded here)."""
    spec = load_catalog()[board]
    files = {"bit": "pearl_fpga.bit", "hwh": "pearl_fpga.hwh"} if spec.kind == "zynq" else {"xclbin": "pearl_fpga.xclbin"}
    manifest = mf.build_manifest(board, files, {"vivado": "2024.2"}, utilization=UTIL_7SERIES, timing=TIMING)
    mf.write_manifest(manifest, folder / "manifest.json")
    for role, name in files.items():
        if role != "hwh" or hwh:
            (folder / name).write_bytes(b"placeholder")
    if overrides:
        doc = json.loads((folder / "manifest.json").read_text())
        for path, value in overrides.items():
            node = doc
            *parents, leaf = path.split(".")
            for p in parents:
                node = node[p]
            node[leaf] = value
        (folder / "manifest.json").write_text(json.dumps(doc))
    return folder


def test_manifest_round_trip_takes_parameters_from_the_catalog(tmp_path):
    make_build(tmp_path, "zcu104")
    m = mf.load_manifest(tmp_path)
    spec = load_catalog()["zcu104"]
    assert m.board == "zcu104" and m.part == spec.part and m.clock_mhz == spec.clock_mhz
    assert m.kernels["replay"].parameters == spec.kernels["replay"]
    assert m.kernels["mlp"].parameters == spec.kernels["mlp"]
    assert {k: e.interface_version for k, e in m.kernels.items()} == mf.INTERFACE_VERSIONS
    assert m.kernels["replay"].dma_name == "dma_replay" and m.resources["lut"] == 12345
    assert m.timing["met"] is True and m.git_revision and m.built_at.endswith("+00:00")
    assert m.file("bit") == tmp_path / "pearl_fpga.bit"


def test_manifest_cli(tmp_path, capsys):
    (tmp_path / "util.rpt").write_text(UTIL_7SERIES)
    (tmp_path / "timing.rpt").write_text(TIMING)
    out = tmp_path / "kv260" / "manifest.json"
    args = ["write", "--board", "kv260", "--out", str(out), "--bitstream", "p.bit", "--hwh", "p.hwh",
            "--utilization", str(tmp_path / "util.rpt"), "--timing", str(tmp_path / "timing.rpt"), "--tool", "vivado=2025.1"]
    assert mf.main(args) == 0
    assert mf.load_manifest(out).tools == {"vivado": "2025.1"}
    assert mf.main(["check", str(out)]) == 0
    assert "kv260" in capsys.readouterr().out
    out.write_text("{broken")
    assert mf.main(["check", str(out)]) == 1
    assert "not valid JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, message",
    [
        ({"schema": 7}, "schema 7"),
        ({"kind": "asic"}, "kind must be"),
        ({"files.bit": "../evil.bit"}, "plain file name"),
        ({"kernels.replay.parameters.capacity": "big"}, "capacity must be int"),
        ({"kernels.replay.parameters.fanout": 0}, "fanout must be > 0"),
        ({"kernels.fft": {}}, "unknown kernel 'fft'"),
        ({"clock_mhz": -5}, "clock_mhz must be > 0"),
        ({"tools": {"vivado": 2024}}, "version strings"),
    ],
)
def test_malformed_manifests_are_rejected(tmp_path, override, message):
    make_build(tmp_path, **override)
    with pytest.raises(ManifestError, match=message):
        mf.load_manifest(tmp_path)


def test_missing_and_corrupt_manifest(tmp_path):
    with pytest.raises(ManifestError, match="make bitstream BOARD="):
        mf.load_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text('{"schema": 1,')
    with pytest.raises(ManifestError, match="not valid JSON"):
        mf.load_manifest(tmp_path)


def test_interface_version_mismatch_is_refused(tmp_path):
    ours = mf.INTERFACE_VERSIONS["mlp"]
    make_build(tmp_path, **{"kernels.mlp.interface_version": ours + 1})
    with pytest.raises(ManifestError, match=rf"mlp interface version {ours + 1}, this pearl_fpga speaks version {ours}; rebuild"):
        overlay.check_bitstream(tmp_path, "pynq")


def test_missing_hwh_next_to_the_bit(tmp_path):
    make_build(tmp_path, hwh=False)
    with pytest.raises(ManifestError, match=r"pearl_fpga\.hwh is missing next to .*pearl_fpga\.bit"):
        overlay.check_bitstream(tmp_path, "pynq")


def test_missing_bit_and_kind_mismatch(tmp_path):
    make_build(tmp_path)
    (tmp_path / "pearl_fpga.bit").unlink()
    with pytest.raises(ManifestError, match="bitstream .* is missing"):
        overlay.check_bitstream(tmp_path, "pynq")
    (tmp_path / "u250").mkdir()
    alveo = make_build(tmp_path / "u250", "alveo-u250")
    with pytest.raises(ManifestError, match="backend 'pynq' loads zynq builds"):
        overlay.check_bitstream(alveo, "pynq")
    assert overlay.check_bitstream(alveo, "xrt").platform == load_catalog()["alveo-u250"].platform


@pytest.mark.parametrize("board, backend", [("pynq-z2", "pynq"), ("alveo-u250", "xrt")])
def test_a_build_that_missed_timing_is_refused(tmp_path, monkeypatch, board, backend):
    """A bitstream whose manifest says routed timing was not met computes wrong results silently: loading
    refuses it, naming the figures, the rebuild and the explicit override; the override loads it."""
    make_build(tmp_path, board, **{"timing.met": False, "timing.wns_ns": -0.4, "timing.achieved_mhz": 96.2})
    with pytest.raises(ManifestError, match=r"missed timing .*WNS -0\.4 ns.*allow_timing_failure=True"):
        overlay.check_bitstream(tmp_path, backend)
    with pytest.raises(ManifestError, match="allow_timing_failure=True"):
        overlay.open_kernel("replay", backend, directory=tmp_path)
    with pytest.raises(ManifestError, match="allow_timing_failure=True"):
        overlay.open_board(backend, directory=tmp_path)
    assert overlay.check_bitstream(tmp_path, backend, allow_timing_failure=True).timing["met"] is False
    # with the override, loading goes on to the device (absent here: the missing package is the error)
    monkeypatch.setitem(sys.modules, "pynq" if backend == "pynq" else "pyxrt", None)
    with pytest.raises(BackendUnavailable):
        overlay.open_kernel("replay", backend, directory=tmp_path, allow_timing_failure=True)


def test_a_build_that_met_timing_or_has_no_summary_loads(tmp_path):
    make_build(tmp_path)
    assert overlay.check_bitstream(tmp_path, "pynq").timing["met"] is True
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["timing"] = {}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    assert overlay.check_bitstream(tmp_path, "pynq").timing == {}


def test_board_absent_pynq(tmp_path, monkeypatch):
    """A valid bitstream on a machine without PYNQ: BackendUnavailable naming pynq and the way out."""
    make_build(tmp_path)
    monkeypatch.setitem(sys.modules, "pynq", None)  # import pynq raises ImportError, as on this machine
    with pytest.raises(BackendUnavailable, match=r"needs the pynq package.*backend='cpu'"):
        overlay.open_kernel("replay", "pynq", directory=tmp_path)
    monkeypatch.setenv("PEARL_FPGA_BITSTREAMS", str(tmp_path.parent))
    monkeypatch.setenv("PEARL_FPGA_BOARD", tmp_path.name)
    from pearl_fpga.board.mlp_driver import MLPBoardBackend
    from pearl_fpga.board.replay_driver import ReplayBoardBackend

    with pytest.raises(BackendUnavailable, match="pynq"):
        ReplayBoardBackend(1024, 16, transport="pynq")
    with pytest.raises(BackendUnavailable, match="pynq"):
        MLPBoardBackend(transport="pynq")


def test_board_absent_xrt(tmp_path, monkeypatch):
    make_build(tmp_path, "alveo-u55c")
    monkeypatch.setitem(sys.modules, "pyxrt", None)
    with pytest.raises(BackendUnavailable, match=r"pyxrt.*XRT"):
        overlay.open_kernel("mlp", "xrt", directory=tmp_path)


def test_no_bitstream_anywhere(tmp_path, monkeypatch):
    monkeypatch.setenv("PEARL_FPGA_BITSTREAMS", str(tmp_path))
    monkeypatch.delenv("PEARL_FPGA_BOARD", raising=False)
    monkeypatch.delenv("BOARD", raising=False)
    with pytest.raises(BackendUnavailable, match=r"no zynq bitstream .*make bitstream BOARD="):
        overlay.find_bitstream_dir("pynq")
    with pytest.raises(BackendUnavailable, match=r"no alveo bitstream .*make xclbin PLATFORM="):
        overlay.find_bitstream_dir("xrt")
    for board in ("pynq-z2", "kv260"):
        (tmp_path / board).mkdir()
        make_build(tmp_path / board, board)
    with pytest.raises(BackendUnavailable, match="several zynq bitstreams"):
        overlay.find_bitstream_dir("pynq")
    monkeypatch.setenv("BOARD", "KV260")  # what the PYNQ image reports
    assert overlay.find_bitstream_dir("pynq") == tmp_path / "kv260"


def test_user_api_refuses_a_stale_bitstream(tmp_path, monkeypatch):
    """ReplaySampler / MLPInfer with backend="pynq" check the manifest before touching a board."""
    import numpy as np
    import torch

    from pearl_fpga.kernels import MLPInfer, ReplaySampler

    board = tmp_path / "pynq-z2"
    board.mkdir()
    make_build(board, **{"kernels.replay.interface_version": 99, "kernels.mlp.interface_version": 99})
    monkeypatch.setenv("PEARL_FPGA_BITSTREAMS", str(tmp_path))
    monkeypatch.setenv("PEARL_FPGA_BOARD", "pynq-z2")
    with pytest.raises(ManifestError, match="interface version 99"):
        ReplaySampler(1024, 16, backend="pynq")
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    with pytest.raises(ManifestError, match="interface version 99"):
        MLPInfer.from_torch(net, backend="pynq", calibration=np.zeros((4, 4), np.float32))


def xclbin_with_clocks(path: Path, clocks: list[tuple[int, int, str]]) -> Path:
    """An xclbin holding only a CLOCK_FREQ_TOPOLOGY section (XRT's xclbin.h layout: the axlf header,
    m_numSections at 448, section headers from 456; clock_freq entries of 136 bytes after an int16 count)."""
    import struct

    from pearl_fpga.board import xclbin_info as xi

    topology = struct.pack("<h", len(clocks)) + b"".join(
        xi.CLOCK_FREQ.pack(freq, ctype, name.encode()) for freq, ctype, name in clocks)
    offset = 512
    blob = bytearray(offset)
    blob[:8] = xi.MAGIC
    struct.pack_into("<I", blob, xi.NUM_SECTIONS_OFFSET, 1)
    xi.SECTION_HEADER.pack_into(blob, xi.SECTIONS_OFFSET, xi.CLOCK_FREQ_TOPOLOGY, b"clocks", offset, len(topology))
    path.write_bytes(bytes(blob) + topology)
    return path


TIMING_300_FAIL = TIMING.replace("      1.250  ", "     -0.600  ")  # routed against 300 MHz: 3.333 ns + 0.6 ns needed


def test_the_kernel_clock_is_read_from_the_xclbin(tmp_path):
    """UG1315 ("Kernel Clock Minimum Frequency"): v++ may scale the kernel clock down; the xclbin's
    CLOCK_FREQ_TOPOLOGY says which clock the HLS kernels (DATA, ap_clk) really get."""
    from pearl_fpga.board.xclbin_info import kernel_clock_mhz

    path = xclbin_with_clocks(tmp_path / "a.xclbin", [(250, 1, "DATA_CLK"), (500, 2, "KERNEL_CLK")])
    assert kernel_clock_mhz(path) == 250.0
    (tmp_path / "b.xclbin").write_bytes(b"not an xclbin")
    with pytest.raises(ManifestError, match="not an xclbin"):
        kernel_clock_mhz(tmp_path / "b.xclbin")


@pytest.mark.parametrize("data_mhz, passes", [(300, False), (280, False), (250, True)])
def test_the_alveo_timing_gate_uses_the_clock_the_xclbin_has(tmp_path, capsys, data_mhz, passes):
    """make xclbin's gate: the worst of every routed timing summary, judged at the xclbin's own clock; the
    manifest records that clock. WNS -0.6 ns at 300 MHz closes at 1 / 3.933 ns = 254 MHz: a clock scaled to
    250 MHz passes, 280 MHz or an unscaled 300 MHz does not (and no manifest is written)."""
    out = tmp_path / "alveo-u55c" / "manifest.json"
    out.parent.mkdir()
    xclbin_with_clocks(out.parent / "pearl_fpga.xclbin", [(data_mhz, 1, "DATA_CLK"), (500, 2, "KERNEL_CLK")])
    (tmp_path / "a.rpt").write_text(TIMING)
    (tmp_path / "b.rpt").write_text(TIMING_300_FAIL)
    args = ["write", "--gate", "--board", "alveo-u55c", "--out", str(out), "--xclbin", "pearl_fpga.xclbin",
            "--timing", str(tmp_path / "a.rpt"), "--timing", str(tmp_path / "b.rpt"), "--tool", "v++=2025.1"]
    assert (mf.main(args) == 0) is passes
    err = capsys.readouterr().err
    if not passes:
        assert not out.exists() and f"timing is not met at {data_mhz:g} MHz" in err
        return
    m = mf.load_manifest(out)
    assert m.clock_mhz == 250 and m.timing["requested_mhz"] == 300 and m.timing["wns_ns"] == -0.6 and m.timing["met"]
    assert "scaled the kernel clock to 250 MHz" in err


def test_the_gate_refuses_a_build_without_timing(tmp_path, capsys):
    out = tmp_path / "alveo-u55c" / "manifest.json"
    assert mf.main(["write", "--gate", "--board", "alveo-u55c", "--out", str(out), "--xclbin", "x.xclbin"]) == 1
    assert "no routed timing summary" in capsys.readouterr().err


def test_the_planner_times_a_build_at_its_own_clock(tmp_path, monkeypatch):
    """A build whose manifest records a scaled clock is what the planner times, not the catalog's clock."""
    from pearl_fpga.planner.fpga_model import built_clock_mhz

    spec = load_catalog()["alveo-u55c"]
    monkeypatch.setenv("PEARL_FPGA_BITSTREAMS", str(tmp_path))
    assert built_clock_mhz(spec) == spec.clock_mhz
    manifest = mf.build_manifest("alveo-u55c", {"xclbin": "pearl_fpga.xclbin"}, {"v++": "2025.1"},
                                 timing=[TIMING_300_FAIL], kernel_clock_mhz=250)
    mf.write_manifest(manifest, tmp_path / "alveo-u55c" / "manifest.json")
    assert built_clock_mhz(spec) == 250.0
