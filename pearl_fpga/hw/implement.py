"""`make implement`: each kernel's reference RTL through the open ECP5 flow, out of context.

Yosys `synth_ecp5` -> nextpnr-ecp5 (placement, routing, static timing, `--report` JSON) -> one JSON
record per kernel (part, sizes, Fmax per clock, LUT/FF/DSP/BRAM used and available, tool versions,
wall time) in the figures system (docs/figures/implement-<kernel>.json, rendered into
docs/hardware.md by docs/render.py). The timing gate: a kernel whose clock misses the target exits 1
and says by how much, with its critical path's start and end.

    python -m pearl_fpga.hw.implement --kernels replay --board pynq-z2 --part LFE5U-85F-6BG381C \\
        --json-dir docs/figures
    python -m pearl_fpga.hw.implement --kernels replay --set replay.capacity=300   # a small run

Sizes are the catalog's for --board (bitstreams/catalog.json), overridden with --set KERNEL.SIZE=N.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pearl_fpga.errors import PearlError
from pearl_fpga.hw import ecp5
from pearl_fpga.hw.cores import CATALOG_SIZES, rtl_digest, stage
from pearl_fpga.hw.tools import find_tool, tool_version

DEFAULT_PART = "LFE5U-85F-6BG381C"  # the ULX3S's part, slowest speed grade
DEFAULT_BOARD = "pynq-z2"           # whose catalog sizes and clock are implemented
KERNELS = tuple(CATALOG_SIZES)


def _run(cmd: list[str], cwd: Path, what: str, log: Path, progress: Callable[[str], None] | None) -> float:
    """Run one tool in `cwd`, its output into `log`; return its wall time. Failure: the log's errors."""
    start = time.monotonic()
    if progress:
        progress(f"{what}: {shlex.join(Path(c).name if i == 0 else c for i, c in enumerate(cmd))[:160]}")
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        lines = log.read_text(errors="replace").splitlines()
        errors = [ln for ln in lines if "ERROR" in ln.upper()] or lines[-5:]
        raise ecp5.ImplementationError(f"{what} failed (exit {proc.returncode}): {' / '.join(errors[:3])}; full log: {log}")
    return time.monotonic() - start


def sizes_for(kernel: str, board: str, overrides: dict[str, int]) -> tuple[dict[str, int], float]:
    """The RTL parameters of `kernel` at `board`'s catalog sizes (then `overrides`, by catalog key), and the board's clock."""
    from pearl_fpga.board.catalog import get_board

    spec = get_board(board)
    catalog = dict(spec.kernels.get(kernel, {}))
    catalog.update(overrides)
    params = {}
    for param, key in CATALOG_SIZES[kernel].items():
        if key not in catalog:
            raise PearlError(f"{board}'s catalog entry has no {kernel}.{key}; pass --set {kernel}.{key}=N")
        params[param] = int(catalog[key])
    return params, float(spec.clock_mhz)


def implement_kernel(kernel: str, parameters: dict[str, int], part: ecp5.Part, clock_mhz: float, workdir: Path,
                     seed: int = 1, progress: Callable[[str], None] | None = None,
                     router: str = "router1", place_only: bool = False) -> dict[str, Any]:
    """Synthesize, place and route one kernel (only place with `place_only`); return the record's
    results (verdict included)."""
    digest = rtl_digest(kernel)  # of the sources as they are when the run starts
    core, files, strings = stage(kernel, workdir)
    unknown = sorted(set(parameters) - set(core.parameters))
    if unknown:
        raise PearlError(f"{core.top} has no parameter {', '.join(unknown)} (its core lists {', '.join(core.parameters)})")
    yosys, nextpnr = find_tool("yosys"), find_tool("nextpnr-ecp5")
    script = ecp5.synth_script(files, core.top, {**parameters, **strings}, json_out=f"{core.top}.json")
    synth_s = _run([yosys, "-q", "-p", script], workdir, f"{kernel}: Yosys synth_ecp5", workdir / "yosys.log", progress)
    cells = ecp5.cell_counts(workdir / "stat.json", core.top)
    pnr_cmd = [nextpnr, *ecp5.nextpnr_command(part, clock_mhz, f"{core.top}.json", "report.json", seed, "nextpnr.log",
                                                   router, place_only)]
    pnr_s = _run(pnr_cmd, workdir, f"{kernel}: nextpnr-ecp5", workdir / "nextpnr.stdout", progress)
    timing = ecp5.read_report(workdir / "report.json", clock_mhz, workdir / "nextpnr.log" if place_only else None)
    verdict = ecp5.timing_verdict(timing, clock_mhz, routed=not place_only)
    return {
        "kernel": kernel, "core": core.name, "top": core.top, "rtl_sha256": digest, "part": part.name,
        "nextpnr_device": part.nextpnr_args(), "out_of_context": True, "parameters": parameters,
        "clock_target_mhz": clock_mhz, "seed": seed, "router": router, "routed": not place_only,
        "fmax_mhz": {clk: v["achieved_mhz"] for clk, v in timing["fmax"].items()},
        "timing": verdict, "critical_paths": timing["critical_paths"], "clock_network": timing["clock_network"],
        "utilization": timing["utilization"], "synth_cells": cells,
        "tools": {"yosys": tool_version("yosys"), "nextpnr-ecp5": tool_version("nextpnr-ecp5")},
        "seconds": {"synthesis": round(synth_s, 1), "place_and_route": round(pnr_s, 1)},
        "commands": {"yosys": f"yosys -p {shlex.quote(script)}",
                     "nextpnr-ecp5": shlex.join(["nextpnr-ecp5", *pnr_cmd[1:]])},
    }


def record_name(kernel: str, overrides: dict[str, int], place_only: bool) -> str:
    """implement-<kernel>.json at the board's catalog sizes; a run at other sizes, or an unrouted one,
    gets its own file (implement-replay-capacity1024.json, implement-replay-placed.json), so that it
    never replaces the catalog-size routed record."""
    tags = [f"{key}{value}" for key, value in sorted(overrides.items())] + (["placed"] if place_only else [])
    return "-".join([f"implement-{kernel}", *tags]) + ".json"


def _overrides(items: Sequence[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for item in items:
        try:
            key, value = item.split("=", 1)
            kernel, size = key.split(".", 1)
            out.setdefault(kernel, {})[size] = int(value)
        except ValueError:
            raise PearlError(f"--set {item!r}: expected KERNEL.SIZE=N, e.g. replay.capacity=300") from None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.hw.implement", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--board", default=DEFAULT_BOARD, help="catalog entry whose kernel sizes and clock are implemented")
    parser.add_argument("--part", default=DEFAULT_PART, help="ECP5 part (default %(default)s)")
    parser.add_argument("--clock-mhz", type=float, default=None, help="target clock (default: the board's)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KERNEL.SIZE=N")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr placement seed")
    parser.add_argument("--router", default="router1", choices=ecp5.ROUTERS, help="nextpnr router (default %(default)s)")
    parser.add_argument("--place-only", action="store_true",
                        help="stop after placement: the record holds nextpnr's estimate, marked not routed (never met)")
    parser.add_argument("--build-dir", type=Path, default=Path("build/hw/implement"))
    parser.add_argument("--json-dir", type=Path, default=None, help="write implement-<kernel>.json records here")
    parser.add_argument("--no-gate", action="store_true", help="exit 0 even when a kernel misses its clock")
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    try:
        part = ecp5.parse_part(args.part)
        overrides = _overrides(args.sets)
        failed = []
        for kernel in args.kernels:
            params, board_clock = sizes_for(kernel, args.board, overrides.get(kernel, {}))
            clock = args.clock_mhz or board_clock
            tag = "-".join(f"{k.lower()}{v}" for k, v in params.items())
            try:
                results, probe = _measured(kernel, params, part, clock, args.build_dir / f"{kernel}-{tag}", args.seed,
                                           args.board, args.router, args.place_only)
            except ecp5.ImplementationError as exc:  # the next kernel still runs
                print(f"error: {kernel}: {exc}", file=sys.stderr, flush=True)
                failed.append(kernel)
                continue
            record = _record(results, probe, argv_list)
            verdict = results["timing"]
            print(ecp5.gate_message(kernel, part.name, verdict), flush=True)
            util = results["utilization"]
            print("  " + ", ".join(f"{r} {u['used']:,}/{u['available']:,}" for r, u in util.items()) +
                  f"; synthesis {results['seconds']['synthesis']:.0f} s, place and route "
                  f"{results['seconds']['place_and_route']:.0f} s", flush=True)
            if args.json_dir is not None:
                from pearl_fpga.bench.records import write_record

                # synthesis figures do not depend on the CPU that ran the tools: no per-vendor copy
                write_record(record, str(args.json_dir / record_name(kernel, overrides.get(kernel, {}), args.place_only)),
                             per_vendor=False)
            if not verdict["met"]:
                failed.append(kernel)
    except PearlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if failed and not args.no_gate:
        print(f"implementation gate: {', '.join(failed)} failed or missed the clock on {part.name}", file=sys.stderr)
        return 1
    return 0


def _measured(kernel: str, params: dict[str, int], part: ecp5.Part, clock: float, workdir: Path, seed: int,
              board: str, router: str = "router1", place_only: bool = False) -> tuple[dict[str, Any], Any]:
    """implement_kernel under a load probe (the machine's load goes into the record, as for benchmarks)."""
    from pearl_fpga.bench.meta import LoadProbe

    with LoadProbe() as probe:
        results = implement_kernel(kernel, params, part, clock, workdir, seed, progress=lambda m: print(m, flush=True),
                                   router=router, place_only=place_only)
    results["sizes_from"] = f"{board} (bitstreams/catalog.json)"
    return results, probe


def _record(results: dict[str, Any], probe: Any, argv: list[str]) -> dict[str, Any]:
    from pearl_fpga.bench.meta import with_metadata

    record = with_metadata("implement", results, None, probe)
    record["command"] = shlex.join(["python", "-m", "pearl_fpga.hw.implement", *argv])
    return record


if __name__ == "__main__":
    sys.exit(main())
