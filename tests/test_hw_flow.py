"""The open ECP5 implementation flow (pearl_fpga/hw, `make implement`): the CAPI2 core files, part
names, nextpnr's report, the timing gate, the records and their rendering, and one real small run of
Yosys and nextpnr-ecp5 per kernel (the catalog sizes are `make implement`, minutes to tens of minutes).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import hw_prefetch
import pytest

from pearl_fpga.hw import ecp5
from pearl_fpga.hw.cores import CATALOG_SIZES, read_core, rtl_digest
from pearl_fpga.hw.implement import implement_kernel, main
from pearl_fpga.hw.report import implementation_section
from pearl_fpga.sim.verilator import kernel_rtl

REPO = Path(__file__).resolve().parents[1]
PART = ecp5.parse_part("LFE5U-85F-6BG381C")
# kernel -> small RTL parameters for the real run in make test
# (replay: the leaf level in block RAM, 50 words; tabular: 512 x 2, so that each of its four column memories
# is one DP16KD; mlp: two lanes, so the multipliers and the tanh table are all its hard blocks)
SMALL = {"replay": {"CAPACITY": 200, "FANOUT": 4}, "tabular": {"N_STATES": 512, "N_ACTIONS": 2},
         "mlp": {"LANES": 2, "MAX_WIDTH": 8, "MAX_LAYERS": 2}}


@pytest.mark.parametrize("kernel", sorted(CATALOG_SIZES))
def test_core_files_list_the_rtl(kernel: str) -> None:
    """The core is the one list of a kernel's RTL: it names exactly the files of hls/<kernel>/rtl/
    and hls/common/rtl/, and the top and catalog parameters exist."""
    core = read_core(kernel)
    assert sorted(core.files) == sorted(kernel_rtl(kernel)), f"hls/{kernel}/{kernel}.core lists other files than rtl/"
    assert core.files[0].name == "axil_ap_ctrl.sv", "dependencies come first"
    assert set(CATALOG_SIZES[kernel]) <= set(core.parameters)
    assert any(f"module {core.top}" in f.read_text() for f in core.files)


@pytest.mark.parametrize("kernel", sorted(CATALOG_SIZES))
def test_no_index_starts_with_an_inversion(kernel: str) -> None:
    """No RTL index is a `~` expression (`a[~b[0]]`): Yosys 0.70 widens the inversion to 32 bits, out of
    range (X) in synthesis while Verilator selects a[0] or a[1] (issue 30: the MLP's netlist hung on every
    network of two or more layers). Index by a 1-bit wire instead."""
    for path in read_core(kernel).files:  # comments blanked, their line breaks kept
        code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), path.read_text(), flags=re.S)
        for n, line in enumerate(code.splitlines(), 1):
            assert not re.search(r"\[\s*~", line), f"{path.name}:{n}: an index starts with ~: {line.strip()}"


def test_fusesoc_sets_up_the_impl_target(tmp_path: Path) -> None:
    """`fusesoc run --setup --target impl` reads the core and writes edalize's trellis Makefile."""
    fusesoc = Path(sys.executable).parent / "fusesoc"
    if not fusesoc.exists():
        fusesoc = Path(shutil.which("fusesoc") or "fusesoc")
    out = subprocess.run([str(fusesoc), "--cores-root", str(REPO / "hls"), "run", "--setup", "--target", "impl",
                          "--build-root", str(tmp_path), "pearl_fpga:kernels:replay", "--CAPACITY=300"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    makefile = next(tmp_path.glob("*/impl/Makefile")).read_text()
    assert "nextpnr-ecp5" in makefile and "--85k --package CABGA381 --speed 6 --out-of-context" in makefile
    assert "replay_top.sv" in makefile and "axil_ap_ctrl.sv" in makefile


def test_part_names() -> None:
    assert PART.nextpnr_args() == ["--85k", "--package", "CABGA381", "--speed", "6"]
    assert ecp5.parse_part("lfe5um5g-45f-8mg285c").nextpnr_args() == ["--um5g-45k", "--package", "CSFBGA285", "--speed", "8"]
    with pytest.raises(ecp5.ImplementationError, match="not an ECP5 part name"):
        ecp5.parse_part("xc7z020clg400-1")


def test_nextpnr_command_router() -> None:
    cmd = ecp5.nextpnr_command(PART, 100.0, "top.json", "report.json", 1, "nextpnr.log")
    assert "--out-of-context" in cmd and cmd[cmd.index("--router") + 1] == "router1"  # nextpnr-ecp5's default
    cmd = ecp5.nextpnr_command(PART, 100.0, "top.json", "report.json", 1, "nextpnr.log", router="router2")
    assert cmd[cmd.index("--router") + 1] == "router2"
    with pytest.raises(ecp5.ImplementationError, match="unknown nextpnr router"):
        ecp5.nextpnr_command(PART, 100.0, "top.json", "report.json", 1, "nextpnr.log", router="router3")


def test_record_names_and_unrouted_verdicts() -> None:
    """A run at other sizes, or only placed, never overwrites the catalog-size record; an estimate never meets."""
    from pearl_fpga.hw.implement import record_name

    assert record_name("replay", {}, False) == "implement-replay.json"
    assert record_name("replay", {"fanout": 4, "capacity": 1024}, False) == "implement-replay-capacity1024-fanout4.json"
    assert record_name("replay", {}, True) == "implement-replay-placed.json"
    cmd = ecp5.nextpnr_command(PART, 100.0, "top.json", "report.json", 1, "nextpnr.log", place_only=True)
    assert cmd[-1] == "--no-route"
    timing = {"fmax": {"ap_clk": {"achieved_mhz": 150.0, "constraint_mhz": 100.0}}, "critical_paths": []}
    verdict = ecp5.timing_verdict(timing, 100.0, routed=False)
    assert not verdict["met"] and "NOT ROUTED" in ecp5.gate_message("replay", PART.name, verdict)


def test_placement_only_takes_the_estimate_from_the_log(tmp_path: Path) -> None:
    """With --no-route nextpnr's report has no Fmax; the log's last estimate per clock stands in."""
    report, log = tmp_path / "report.json", tmp_path / "nextpnr.log"
    report.write_text(json.dumps({**_report(1.0), "fmax": {}, "critical_paths": []}))
    log.write_text("Info: Max frequency for clock 'ap_clk': 61.20 MHz (FAIL at 100.00 MHz)\n"
                   "Info: SA placement time 39.21s\n\n"
                   "Info: Max frequency for clock 'ap_clk': 90.34 MHz (FAIL at 100.00 MHz)\n")
    timing = ecp5.read_report(report, 100.0, log)
    assert timing["fmax"] == {"ap_clk": {"achieved_mhz": 90.34, "constraint_mhz": 100.0}}
    verdict = ecp5.timing_verdict(timing, 100.0, routed=False)
    assert verdict["fmax_mhz"] == 90.34 and not verdict["met"] and verdict["critical_path"] is None
    with pytest.raises(ecp5.ImplementationError, match="nextpnr wrote no readable log"):
        ecp5.read_report(report, 100.0, tmp_path / "missing.log")
    log.write_text("Info: Routing globals...\n")  # no estimate either: the gate still says so
    with pytest.raises(ecp5.ImplementationError, match="no clock"):
        ecp5.timing_verdict(ecp5.read_report(report, 100.0, log), 100.0, routed=False)


def _report(achieved: float) -> dict[str, Any]:
    step = {"from": {"cell": "a_reg", "port": "Q"}, "to": {"cell": "b_reg", "port": "DI"}}
    return {
        "utilization": {"TRELLIS_COMB": {"used": 100, "available": 83640}, "DP16KD": {"used": 2, "available": 208}},
        "fmax": {"$glbnet$ap_clk": {"achieved": achieved, "constraint": 100.0}},
        "critical_paths": [{"from": "posedge $glbnet$ap_clk", "to": "posedge $glbnet$ap_clk", "path": [
            {**step, "type": "clk-to-q", "delay": 0.5}, {**step, "type": "routing", "delay": 3.0},
            {"from": {"cell": "b_reg", "port": "A"}, "to": {"cell": "c_reg", "port": "DI"}, "type": "setup", "delay": 1.0}]}],
    }


def test_report_and_gate(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report(80.0)))
    timing = ecp5.read_report(path, 100.0)
    assert timing["utilization"]["lut"] == {"used": 100, "available": 83640, "bel": "TRELLIS_COMB"}
    assert timing["utilization"]["dsp"]["available"] == 0  # not in the report: none used or available
    verdict = ecp5.timing_verdict(timing, 100.0)
    assert not verdict["met"] and verdict["slack_ns"] == pytest.approx(-2.5)
    msg = ecp5.gate_message("replay", PART.name, verdict)
    assert "MISSES the clock by 20.0 MHz (2.500 ns)" in msg and "a_reg.Q -> c_reg.DI, 4.50 ns (1.50 ns logic" in msg
    path.write_text(json.dumps(_report(123.4)))
    verdict = ecp5.timing_verdict(ecp5.read_report(path, 100.0), 100.0)
    assert verdict["met"] and "timing met" in ecp5.gate_message("replay", PART.name, verdict)
    assert timing["clock_network"].startswith("ideal")
    path.write_text(json.dumps({**_report(80.0), "utilization": {"DCCA": {"used": 1, "available": 56}}}))
    assert ecp5.read_report(path, 100.0)["clock_network"].startswith("global: 1 DCCA")
    path.write_text(json.dumps({**_report(1.0), "fmax": {}}))
    with pytest.raises(ecp5.ImplementationError, match="no clock"):
        ecp5.timing_verdict(ecp5.read_report(path, 100.0), 100.0)


def _small_run(kernel: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"pearl-implement-{kernel}-") as workdir:
        return implement_kernel(kernel, SMALL[kernel], PART, 100.0, Path(workdir))


def prefetch() -> dict[str, Future[dict[str, Any]]]:
    """One real run per kernel at its SMALL sizes on the LFE5U-85F-6 at 100 MHz, in the background from
    the session's start (tests/hw_prefetch.py)."""
    return {kernel: hw_prefetch.submit(f"implement:{kernel}", functools.partial(_small_run, kernel)) for kernel in SMALL}


@pytest.fixture(scope="module")
def small_runs() -> dict[str, Future[dict[str, Any]]]:
    return prefetch()


PREFETCH_FIXTURES = ("small_runs", "small_replay")


@pytest.fixture(scope="module")
def small_replay(small_runs: dict[str, Future[dict[str, Any]]]) -> dict[str, Any]:
    """The replay run: 200 leaves, fan-out 4."""
    return small_runs["replay"].result()


@pytest.mark.sim
@pytest.mark.timeout(3600)  # Yosys and nextpnr slow down many times on a loaded machine
def test_small_replay_implements(small_replay: dict[str, Any]) -> None:
    """The replay RTL synthesizes, places and routes with its leaves in block RAM, and the record is whole.
    The clock is judged at the catalog size by `make implement`'s gate (docs/figures/implement-replay.json)."""
    r = small_replay
    assert r["timing"]["fmax_mhz"] > 0 and r["timing"]["clock"], r["timing"]
    util = r["utilization"]
    assert util["lut"]["available"] > 80000 and util["bram"]["available"] == 208  # the 85F's, from the report
    assert 0 < util["lut"]["used"] < util["lut"]["available"] and util["ff"]["used"] > 0
    assert util["bram"]["used"] > 0, "the leaf level's memory should be block RAM"
    assert r["synth_cells"].get("DP16KD", 0) == util["bram"]["used"]
    assert "Yosys" in r["tools"]["yosys"] and "nextpnr" in r["tools"]["nextpnr-ecp5"].lower()
    assert r["rtl_sha256"] == rtl_digest("replay")
    path = r["timing"]["critical_path"]
    assert path and path["start"] and path["end"] and path["delay_ns"] > 0
    # out of context the clock is a driverless port: nextpnr neither buffers (DCCA) nor routes it
    assert r["clock_network"].startswith("ideal") and "0 DCCA" in r["clock_network"]


@pytest.mark.sim
@pytest.mark.timeout(3600)
def test_small_tabular_closes_timing(small_runs: dict[str, Future[dict[str, Any]]]) -> None:
    """The tabular RTL at 512 x 2: the table in block RAM (two copies, one DP16KD per column), the two
    products on MULT18X18D each, and 100 MHz met."""
    r = small_runs["tabular"].result()
    assert r["timing"]["met"], ecp5.gate_message("tabular", PART.name, r["timing"])
    assert r["utilization"]["bram"]["used"] == 4 == r["synth_cells"].get("DP16KD", 0)
    assert r["utilization"]["dsp"]["used"] == 4


@pytest.mark.sim
@pytest.mark.timeout(3600)
def test_gate_fails_a_missed_clock(small_replay: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The same routed design judged against 1 GHz: the record is written, the exit status is 1 and the
    message names the clock, the miss and the critical path."""
    import pearl_fpga.hw.implement as impl
    from pearl_fpga.bench.meta import LoadProbe

    missed = dict(small_replay, timing={**small_replay["timing"], "met": False, "target_mhz": 1000.0})
    with LoadProbe() as probe:
        pass
    monkeypatch.setattr(impl, "_measured", lambda *a, **k: (dict(missed), probe))
    status = main(["--kernels", "replay", "--set", "replay.capacity=200", "--set", "replay.fanout=4",
                   "--json-dir", str(tmp_path)])
    out = capsys.readouterr()
    assert status == 1 and "MISSES the clock" in out.out and "critical path" in out.out
    assert "replay failed or missed the clock" in out.err
    record = json.loads((tmp_path / "implement-replay-capacity200-fanout4.json").read_text())
    assert record["benchmark"] == "implement" and record["results"]["parameters"]["CAPACITY"] == 200
    assert record["command"].startswith("python -m pearl_fpga.hw.implement --kernels replay")
    section = implementation_section({"implement-replay": record})
    assert "| replay | CAPACITY=200, FANOUT=4 | LFE5U-85F-6BG381C | 1000 MHz" in section and "**missed**" in section
    assert "other RTL" not in section
    record["results"]["rtl_sha256"] = "0" * 64  # a record of other sources than the tree's says so
    assert "(of other RTL than the tree's: rerun)" in implementation_section({"implement-replay": record})


@pytest.mark.sim
@pytest.mark.timeout(3600)
def test_small_mlp_closes_timing(small_runs: dict[str, Future[dict[str, Any]]]) -> None:
    """One real run of the MLP at 2 lanes, width 8, 2 layers: 100 MHz met, the multipliers on
    MULT18X18D and the tanh table in block RAM (the mapping the catalog sizes rely on)."""
    r = small_runs["mlp"].result()
    assert r["timing"]["met"], ecp5.gate_message("mlp", PART.name, r["timing"])
    util = r["utilization"]
    assert util["dsp"]["used"] >= SMALL["mlp"]["LANES"], "one hard multiplier per lane"
    assert r["synth_cells"].get("DP16KD", 0) == util["bram"]["used"] >= 2, "the tanh table in block RAM"
    assert r["synth_cells"].get("L6MUX21", 0) < 100, "a memory became logic"


def test_bad_sizes_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--kernels", "replay", "--set", "replay.capacity"]) == 2
    assert "expected KERNEL.SIZE=N" in capsys.readouterr().err
    assert main(["--kernels", "replay", "--part", "LFE5U-99F-6BG381C"]) == 2
    assert "not an ECP5 part name" in capsys.readouterr().err
