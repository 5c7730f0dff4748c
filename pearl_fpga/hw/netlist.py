"""Gate-level simulation: each kernel's synthesized, technology-mapped ECP5 netlist under the same
cocotb testbenches as its RTL, in Verilator, with the cell models Yosys ships (share/ecp5/cells_sim.v).

This catches a design that simulates but synthesizes to something else: inferred latches,
blocking/non-blocking mix-ups, memory initialisation, constructs Yosys reads differently from
Verilator. The netlist is Yosys `synth_ecp5` at the test's sizes, as `make implement` runs it, with
one difference: `-nodsp`, because MULT18X18D has only a black box in Yosys's ECP5 library (cells_bb.v),
no simulation model; multipliers become LUT logic here. Everything else (LUT4, CCU2C carry chains,
PFUMX/L6MUX21, TRELLIS_FF, TRELLIS_DPR16X4 LUT RAM, DP16KD block RAM) is the implementation's mapping.

Signals a testbench reads besides the ports (`/* verilator public... */` on a top-module signal,
e.g. replay_top's `busy`) are kept by name through synthesis. Any kernel whose core file
(hls/<kernel>/<kernel>.core) lists synthesizable RTL works here with no other change.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pearl_fpga.hw import ecp5
from pearl_fpga.hw.cores import read_core, stage
from pearl_fpga.hw.tools import find_tool, share_dir, tool_version

SIM_SYNTH_OPTIONS = "-nodsp"
_PUBLIC = re.compile(r"\b(\w+)\s*(?:\[[^\]]*\]\s*)*/\*\s*verilator\s+public\w*\s*\*/")


def public_signals(files: Sequence[Path], top: str) -> list[str]:
    """Names of the top module's signals marked `/* verilator public... */` (read by testbenches)."""
    names: list[str] = []
    for path in files:
        text = path.read_text()
        m = re.search(rf"\bmodule\s+{re.escape(top)}\b(.*?)\bendmodule\b", text, re.S)
        if m:
            names += [n for n in _PUBLIC.findall(m.group(1)) if n not in names]
    return names


def cell_models() -> tuple[Path, Path]:
    """Yosys's ECP5 simulation models (cells_sim.v) and the folder its `include`s live in."""
    folder = share_dir() / "ecp5"
    models = folder / "cells_sim.v"
    if not models.is_file():
        raise ecp5.ImplementationError(f"Yosys ships no ECP5 cell models at {models}")
    return models, folder


def synthesize_netlist(kernel: str, parameters: Mapping[str, int], out_dir: Path, top: str | None = None) -> Path:
    """The technology-mapped netlist of `kernel` at `parameters` (Verilog, flattened), cached in
    `out_dir` by the hash of the sources, parameters and Yosys version. `top`: a module of the core
    other than its toplevel (a testbench of one block)."""
    out_dir = Path(out_dir)
    core = read_core(kernel)
    top = top or core.top
    key = hashlib.sha256()
    for src in core.files:
        key.update(src.name.encode() + b"\0" + src.read_bytes())
    key.update(top.encode() + repr(sorted(parameters.items())).encode() + tool_version("yosys").encode() + SIM_SYNTH_OPTIONS.encode())
    netlist = out_dir / f"{top}_netlist.v"
    stamp = out_dir / "netlist.sha256"
    if netlist.is_file() and stamp.is_file() and stamp.read_text() == key.hexdigest():
        return netlist
    _, files, strings = stage(kernel, out_dir)
    keep = public_signals(list(core.files), top)
    strings = {k: v for k, v in strings.items() if top == core.top}  # only the toplevel takes them
    script = ecp5.synth_script(files, top, {**parameters, **strings}, json_out=None, verilog_out=netlist.name,
                               extra=SIM_SYNTH_OPTIONS)
    if keep:  # before synthesis: keep the testbench's probes by name
        head, rest = script.split("; synth_ecp5", 1)
        script = f"{head}; hierarchy -top {top}; " + "; ".join(
            f"setattr -set keep 1 {top}/w:{n}" for n in keep) + f"; synth_ecp5{rest}"
    log = out_dir / "yosys.log"
    with log.open("w") as out:
        proc = subprocess.run([find_tool("yosys"), "-q", "-p", script], cwd=out_dir, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        errors = [ln for ln in log.read_text(errors="replace").splitlines() if "ERROR" in ln] or ["see the log"]
        raise ecp5.ImplementationError(f"Yosys could not synthesize {top} for the netlist simulation: "
                                       f"{errors[0]}; full log: {log}")
    stamp.write_text(key.hexdigest())
    return netlist


# ------------------------------------------------------------------------------------ mutants
_LUT = re.compile(r"LUT4\s*#\(\s*\.INIT\(16'h([0-9a-fA-F]{4})\)\s*\)\s*(\S+)\s*\((.*?)\);", re.S)


def flip_lut_reading(netlist_text: str, net: str) -> tuple[str, str]:
    """A mutant: the first LUT4 that reads `net` (e.g. "s_axis_cmd_tdata[64]") with its INIT
    complemented, so its output is inverted. Returns (mutated text, the instance name)."""
    pattern = re.compile(rf"\.\w\(\s*{re.escape(net)}\s*\)")
    for m in _LUT.finditer(netlist_text):
        if pattern.search(m.group(3)):
            flipped = f"{(~int(m.group(1), 16)) & 0xFFFF:04x}"
            start, end = m.span(1)
            return netlist_text[:start] + flipped + netlist_text[end:], m.group(2)
    raise ecp5.ImplementationError(f"no LUT4 of the netlist reads {net}")


def write_mutant(netlist: Path, net: str, out: Path) -> str:
    """Write the flip_lut_reading mutant of `netlist` to `out`; return the flipped instance's name."""
    text, name = flip_lut_reading(netlist.read_text(), net)
    out.write_text(text)
    return name


# ------------------------------------------------------------------------------ the simulation
def run_cocotb_netlist(kernel: str, parameters: Mapping[str, int], *, test_module: str, test_dir: Path,
                       build_dir: Path, extra_env: Mapping[str, str] | None = None,
                       testcase: str | Sequence[str] | None = None, netlist: Path | None = None,
                       top: str | None = None) -> tuple[int, int]:
    """Run the cocotb tests of `test_module` on the kernel's netlist (synthesized into build_dir/netlist
    unless `netlist` is given, e.g. a mutant). Same contract as pearl_fpga.sim.cocotb_runner.run_cocotb."""
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    build_dir = Path(build_dir)
    top = top or read_core(kernel).top
    netlist = netlist or synthesize_netlist(kernel, parameters, build_dir / "netlist", top)
    models, include = cell_models()
    return run_cocotb(
        top=top,
        sources=[models, netlist],
        test_module=test_module,
        test_dir=test_dir,
        build_dir=build_dir / ("sim" if netlist.parent == build_dir / "netlist" else f"sim-{netlist.stem}"),
        parameters={},  # fixed at synthesis
        extra_env=extra_env,
        testcase=testcase,
        # the cell models: timing checks and unused ports are not errors; -O0: compile time dominates
        build_args=[f"-I{include}", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--timescale", "1ns/1ps",
                    "-CFLAGS", "-O0"],
    )
