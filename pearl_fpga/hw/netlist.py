"""Gate-level simulation: each kernel's synthesized, technology-mapped ECP5 netlist under the same
cocotb testbenches as its RTL, in Verilator, with the cell models Yosys ships (share/ecp5/cells_sim.v).

This catches a design that simulates but synthesizes to something else: inferred latches,
blocking/non-blocking mix-ups, memory initialisation, constructs Yosys reads differently from
Verilator. The netlist is Yosys `synth_ecp5` at the test's sizes, as `make implement` runs it, with
one difference: `-nodsp`, because MULT18X18D has only a black box in Yosys's ECP5 library (cells_bb.v),
no simulation model; multipliers become LUT logic here. Everything else (LUT4, CCU2C carry chains,
PFUMX/L6MUX21, TRELLIS_FF, TRELLIS_DPR16X4 LUT RAM, DP16KD block RAM) is the implementation's mapping.

The mapped netlist (`<top>_netlist.v`, the file a mutant edits) is then flattened together with the
cell models by Yosys (`<top>_sim.v`: the models' logic in place of each cell, one module, nothing
optimized); the cell-per-module netlist with cocotb's `--public-flat-rw` made Verilator generate
over 170 MB of C++ for a 13-leaf tree. Yosys ships DP16KD only as a black box (parameters, no
behaviour: a netlist simulated with it reads zeros from every block RAM), so block RAMs stay cells
and Verilator takes our model, hls/common/sim/DP16KD.sv; a view with any other cell left (a black box
Yosys has no model for) is refused.

Signals a testbench reads besides the ports (`/* verilator public... */` on a top-module signal,
e.g. replay_top's `busy`) are kept by name through synthesis. Any kernel whose core file
(hls/<kernel>/<kernel>.core) lists synthesizable RTL works here with no other change.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from pearl_fpga.hw import ecp5
from pearl_fpga.hw.cores import HLS_DIR, read_core, stage
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


# The cells a simulation view may keep: block RAM, simulated by our model (Yosys's is a black box)
BLOCK_RAM_MODELS = {"DP16KD": HLS_DIR / "common" / "sim" / "DP16KD.sv"}


def _seen_from(cwd: Path, path: Path) -> str:
    """`path` as a tool run in `cwd` sees it: relative. YoWASP's tools mount a /tmp of their own, so an
    absolute path into the host's /tmp (a clone or a pytest folder there) does not reach the host's file;
    a relative one does, through the working directory."""
    return os.path.relpath(Path(path).resolve(), Path(cwd).resolve())


def _yosys(script: str, cwd: Path, what: str) -> None:
    log = cwd / "yosys.log"
    with log.open("w") as out:
        proc = subprocess.run([find_tool("yosys"), "-q", "-p", script], cwd=cwd, stdout=out,
                              stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        errors = [ln for ln in log.read_text(errors="replace").splitlines() if "ERROR" in ln] or ["see the log"]
        raise ecp5.ImplementationError(f"Yosys could not {what}: {errors[0]}; full log: {log}")


def simulation_view(netlist: Path, top: str, out: Path) -> Path:
    """`netlist` (mapped ECP5 cells) with Yosys's cell models in place of each cell, flattened into one
    module (`proc; flatten`, no optimization), written to `out`."""
    models, include = cell_models()
    # NO_INCLUDES: common_sim.vh and cells_sim.v both include the FD*/IO wrappers (not in a synth_ecp5 netlist)
    kept = " ".join(f"t:{cell} %d" for cell in BLOCK_RAM_MODELS)
    cwd = netlist.parent
    _yosys(f"read_verilog {netlist.name}; read_verilog -DNO_INCLUDES -I{_seen_from(cwd, include)} {_seen_from(cwd, models)}; "
           f"hierarchy -top {top}; proc; flatten; opt_clean -purge; select -assert-none t:* t:$* %d {kept}; "
           f"write_verilog -noattr {_seen_from(cwd, out)}", cwd,
           f"flatten {netlist.name} with the ECP5 cell models (a cell other than {', '.join(BLOCK_RAM_MODELS)} "
           "left in the view has no simulation model)")
    return out


def synthesize_netlist(kernel: str, parameters: Mapping[str, int], out_dir: Path, top: str | None = None) -> Path:
    """The technology-mapped netlist of `kernel` at `parameters` (Verilog, flattened), cached in
    `out_dir` by the hash of the sources, parameters and Yosys version, with its simulation view
    beside it (`simulation_view`, <top>_sim.v). `top`: a module of the core other than its toplevel
    (a testbench of one block)."""
    out_dir = Path(out_dir)
    core = read_core(kernel)
    top = top or core.top
    key = hashlib.sha256()
    for src in core.files:
        key.update(src.name.encode() + b"\0" + src.read_bytes())
    key.update(top.encode() + repr(sorted(parameters.items())).encode() + tool_version("yosys").encode() + SIM_SYNTH_OPTIONS.encode())
    netlist = out_dir / f"{top}_netlist.v"
    stamp = out_dir / "netlist.sha256"
    if (out_dir / f"{top}_sim.v").is_file() and stamp.is_file() and stamp.read_text() == key.hexdigest():
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
    _yosys(script, out_dir, f"synthesize {top} for the netlist simulation")
    simulation_view(netlist, top, out_dir / f"{top}_sim.v")
    stamp.write_text(key.hexdigest())
    return netlist


# ------------------------------------------------------------------------------------ mutants
def invert_input(netlist_text: str, net: str) -> tuple[str, int]:
    """A mutant: the top-level input bit `net` (e.g. "s_axis_cmd_tdata[64]") inverted at every cell
    pin that reads it. Returns (mutated text, pins changed)."""
    port = net.split("[", 1)[0]
    if not re.search(rf"^\s*input\b[^;]*\b{re.escape(port)}\s*;", netlist_text, re.M):
        raise ecp5.ImplementationError(f"{port} is not an input of the netlist")
    pin = re.compile(rf"(\.\w+\()\s*{re.escape(net)}\s*\)")
    text, count = pin.subn(lambda m: f"{m.group(1)}~{net})", netlist_text)
    if count == 0:
        raise ecp5.ImplementationError(f"no cell of the netlist reads {net}")
    return text, count


def write_mutant(netlist: Path, net: str, out: Path, top: str) -> tuple[Path, int]:
    """Write the invert_input mutant of `netlist` to `out` and its simulation view beside it; return
    the view and the number of pins changed."""
    text, count = invert_input(netlist.read_text(), net)
    out.write_text(text)
    return simulation_view(out, top, out.with_name(f"{out.stem}_sim.v")), count


# ------------------------------------------------------------------------------ the simulation
def run_cocotb_netlist(kernel: str, parameters: Mapping[str, int], *, test_module: str, test_dir: Path,
                       build_dir: Path, extra_env: Mapping[str, str] | None = None,
                       testcase: str | Sequence[str] | None = None, netlist: Path | None = None,
                       top: str | None = None) -> tuple[int, int]:
    """Run the cocotb tests of `test_module` on the kernel's netlist (synthesized into build_dir/netlist
    unless `netlist`, a simulation view, is given: a mutant's). Same contract as
    pearl_fpga.sim.cocotb_runner.run_cocotb."""
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    build_dir = Path(build_dir)
    top = top or read_core(kernel).top
    if netlist is None:
        netlist = synthesize_netlist(kernel, parameters, build_dir / "netlist", top).with_name(f"{top}_sim.v")
    return run_cocotb(
        top=top,
        sources=[netlist, *BLOCK_RAM_MODELS.values()],  # the other cells are flattened into the view
        test_module=test_module,
        test_dir=test_dir,
        build_dir=build_dir / ("sim" if netlist.parent == build_dir / "netlist" else f"sim-{netlist.stem}"),
        parameters={},  # fixed at synthesis
        extra_env=extra_env,
        testcase=testcase,
        # a generated netlist: lint and style warnings say nothing; -O0: compile time dominates
        build_args=["-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-O0"],
    )
