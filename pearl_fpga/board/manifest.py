"""Bitstream manifests: bitstreams/<board>/manifest.json, written by the build, checked before loading.

A manifest says what a bitstream (Zynq: .bit + .hwh) or xclbin (Alveo) holds: which kernels, at
which interface version, with which synthesis parameters, built by which tools from which git
revision, and the resource and timing summaries parsed from the Vivado reports. The runtime refuses
a bitstream whose manifest does not match the drivers (ManifestError), so a stale bitstream never
silently speaks an old register map.

INTERFACE_VERSIONS is the one place the interface version of each kernel lives: bump it whenever
hls/<kernel>/SPEC.md changes the ports, stream words or register map.

Command line (used by hls/build.mk):
    python -m pearl_fpga.board.manifest write --board pynq-z2 --out bitstreams/pynq-z2/manifest.json \
        --bitstream pearl_fpga.bit --hwh pearl_fpga.hwh --utilization util.rpt --timing timing.rpt \
        --tool vivado=2024.2 --tool vitis_hls=2024.2
    python -m pearl_fpga.board.manifest check bitstreams/pynq-z2/manifest.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pearl_fpga.board.vivado_reports import parse_timing_summary, parse_utilization
from pearl_fpga.board.xclbin_info import kernel_clock_mhz
from pearl_fpga.data import work_root
from pearl_fpga.errors import ManifestError
from pearl_fpga.board.catalog import RESOURCE_MAX
from pearl_fpga.safe_io import read_json
from pearl_fpga.spec.kernels import KERNELS

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 1 << 20  # a manifest is a few kilobytes; a link to /dev/zero must not be read to the end

# Derived from the one kernel table (pearl_fpga.spec.kernels):
# the interface version of each kernel's SPEC.md (ports, stream words, register map); drivers check it.
INTERFACE_VERSIONS: dict[str, int] = {k: ip.interface_version for k, ip in KERNELS.items()}
# the synthesis parameters each kernel records (the same names as the catalog's "kernels" entries);
KERNEL_PARAMETERS: dict[str, tuple[str, ...]] = {k: ip.parameters for k, ip in KERNELS.items()}
# the name of each kernel's (first) HLS IP instance in the block design (Zynq) or compute unit (Alveo),
# KernelEntry.instance_names giving those of further instances (a kernel with an "instances" parameter);
IP_NAMES: dict[str, str] = {k: ip.ip_name for k, ip in KERNELS.items()}
# the AXI DMA carrying each kernel's streams in the Zynq block design.
DMA_NAMES: dict[str, str] = {k: ip.dma_name for k, ip in KERNELS.items()}
RESOURCE_KEYS = ("lut", "ff", "bram36", "uram", "dsp")


@dataclass(frozen=True)
class KernelEntry:
    """One kernel inside a bitstream."""

    name: str  # "replay" or "mlp"
    interface_version: int  # INTERFACE_VERSIONS at build time
    ip_name: str  # IP instance / compute unit name
    dma_name: str | None  # AXI DMA of its streams (Zynq); None on Alveo (data movers)
    parameters: dict[str, int]  # synthesis parameters (capacity, fanout, lanes, ...)

    @property
    def instances(self) -> int:
        """How many copies of the kernel the bitstream holds (1 unless the kernel has the parameter)."""
        return self.parameters.get("instances", 1)

    def instance_names(self, instance: int) -> tuple[str, str | None]:
        """(IP or compute-unit base name, DMA name) of copy `instance` (0-based), as hls/scripts/zynq_bd.tcl
        names them: <kernel>_top_<i>, and dma_<kernel> for copy 0, dma_<kernel>_<i> for the others."""
        if not 0 <= instance < self.instances:
            raise ManifestError(
                f"the bitstream holds {self.instances} {self.name} kernel instance(s) (0..{self.instances - 1}), "
                f"not instance {instance}; use one of those, or a bitstream built with more "
                f"(bitstreams/catalog.json, kernels.{self.name}.instances)"
            )
        ip = self.ip_name.removesuffix("_0") + f"_{instance}"
        dma = self.dma_name if self.dma_name is None or instance == 0 else f"{self.dma_name}_{instance}"
        return ip, dma


@dataclass(frozen=True)
class Manifest:
    """What a bitstream holds; see the module docstring for the JSON layout."""

    board: str  # catalog name of the board or platform
    kind: str  # "zynq", "alveo" or "ecp5"
    part: str
    platform: str | None
    clock_mhz: float
    files: dict[str, str]  # "bit" and "hwh" (zynq) or "xclbin" (alveo): names relative to the manifest
    kernels: dict[str, KernelEntry]
    tools: dict[str, str]  # tool -> version
    git_revision: str
    built_at: str  # ISO 8601 UTC
    resources: dict[str, int] = field(default_factory=dict)  # used, from the utilization report
    timing: dict[str, Any] = field(default_factory=dict)  # wns_ns, tns_ns, met, achieved_mhz
    path: Path | None = None  # where it was loaded from

    def file(self, role: str) -> Path:
        """Absolute path of one of the bitstream files ("bit", "hwh", "xclbin")."""
        if role not in self.files:
            raise ManifestError(f"manifest of {self.board} lists no {role!r} file (it has {sorted(self.files)})")
        base = self.path.parent if self.path is not None else Path.cwd()
        return base / self.files[role]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "board": self.board,
            "kind": self.kind,
            "part": self.part,
            "platform": self.platform,
            "clock_mhz": self.clock_mhz,
            "files": dict(self.files),
            "kernels": {
                k.name: {
                    "interface_version": k.interface_version,
                    "ip_name": k.ip_name,
                    "dma_name": k.dma_name,
                    "parameters": dict(k.parameters),
                }
                for k in self.kernels.values()
            },
            "tools": dict(self.tools),
            "git_revision": self.git_revision,
            "built_at": self.built_at,
            "resources": dict(self.resources),
            "timing": dict(self.timing),
        }

    def check_kernel(self, kernel: str) -> KernelEntry:
        """The entry of `kernel`, after checking its interface version against this driver's."""
        if kernel not in self.kernels:
            raise ManifestError(
                f"bitstream for {self.board} ({self.path}) has no {kernel!r} kernel (it holds "
                f"{sorted(self.kernels)}); rebuild it with `make bitstream BOARD={self.board}`"
            )
        entry = self.kernels[kernel]
        expected = INTERFACE_VERSIONS[kernel]
        if entry.interface_version != expected:
            raise ManifestError(
                f"bitstream for {self.board} has {kernel} interface version {entry.interface_version}, "
                f"this pearl_fpga speaks version {expected}; rebuild the bitstream with this release "
                f"(`make bitstream BOARD={self.board}`) or install the pearl_fpga release it was built with"
            )
        return entry


def load_manifest(path: str | Path) -> Manifest:
    """Load and validate a manifest file (or the manifest.json inside a folder).

    Raises ManifestError naming the file and the problem: missing, not JSON, wrong schema,
    missing or mistyped fields, unknown kernels.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        data = read_json(path, "manifest", max_bytes=MAX_MANIFEST_BYTES, error=ManifestError)
    except FileNotFoundError:
        raise ManifestError(
            f"no bitstream manifest at {path}: build one with `make bitstream BOARD=<board>` "
            "(or `make xclbin PLATFORM=<platform>`), or copy the whole bitstreams/<board>/ folder"
        ) from None
    except ValueError as exc:  # not a regular file, too large, not UTF-8, not JSON, nested too deeply
        raise ManifestError(f"{exc}; rebuild the bitstream or restore the file") from None
    return parse_manifest(data, path=path)


def _req(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str, nullable: bool = False) -> Any:
    if not isinstance(obj, Mapping):
        raise ManifestError(f"{where} must be a JSON object")
    if key not in obj:
        raise ManifestError(f"{where}: missing field '{key}'")
    value = obj[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ManifestError(f"{where}.{key} has the wrong type (bool)")
    if not isinstance(value, types):
        names = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise ManifestError(f"{where}.{key} must be {names}, got {value!r}")
    return value


def parse_manifest(data: Any, path: Path | None = None) -> Manifest:
    """Validate an already-parsed manifest document."""
    where = f"manifest {path}" if path else "manifest"
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: the top level must be a JSON object")
    schema = data.get("schema")
    if schema != SCHEMA_VERSION:
        raise ManifestError(f"{where}: schema {schema!r} is not the supported {SCHEMA_VERSION}; rebuild the bitstream with this release")
    kind = _req(data, "kind", str, where)
    if kind not in ("zynq", "alveo", "ecp5"):
        raise ManifestError(f"{where}.kind must be 'zynq', 'alveo' or 'ecp5', got {kind!r}")
    files = _req(data, "files", dict, where)
    needed = {"zynq": ("bit", "hwh"), "alveo": ("xclbin",), "ecp5": ("bit",)}[kind]
    for role in needed:
        name = _req(files, role, str, f"{where}.files")
        if "/" in name or "\\" in name or name.startswith("."):
            raise ManifestError(f"{where}.files.{role} must be a plain file name next to the manifest, got {name!r}")
    clock = _req(data, "clock_mhz", (int, float), where)
    if not math.isfinite(clock) or clock <= 0:
        raise ManifestError(f"{where}.clock_mhz must be > 0, got {clock!r}")

    kernels_raw = _req(data, "kernels", dict, where)
    if not kernels_raw:
        raise ManifestError(f"{where}.kernels is empty: the bitstream holds no pearl_fpga kernel")
    kernels: dict[str, KernelEntry] = {}
    for name, entry in kernels_raw.items():
        kw = f"{where}.kernels.{name}"
        if name not in INTERFACE_VERSIONS:
            raise ManifestError(f"{kw}: unknown kernel {name!r}; known: {sorted(INTERFACE_VERSIONS)}")
        params = _req(entry, "parameters", dict, kw)
        for p in KERNEL_PARAMETERS[name]:
            value = _req(params, p, int, f"{kw}.parameters")
            if value <= 0:
                raise ManifestError(f"{kw}.parameters.{p} must be > 0, got {value}")
        kernels[name] = KernelEntry(
            name=name,
            interface_version=_req(entry, "interface_version", int, kw),
            ip_name=_req(entry, "ip_name", str, kw),
            dma_name=_req(entry, "dma_name", str, kw, nullable=True),
            parameters={p: int(params[p]) for p in KERNEL_PARAMETERS[name]},
        )
    tools = _req(data, "tools", dict, where)
    if not all(isinstance(v, str) for v in tools.values()):
        raise ManifestError(f"{where}.tools must map tool names to version strings")
    resources = data.get("resources", {})
    if not isinstance(resources, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in resources.values()):
        raise ManifestError(f"{where}.resources must map resource names to integer counts")
    for name, count in resources.items():
        if not 0 <= count <= RESOURCE_MAX.get(name, max(RESOURCE_MAX.values())):
            raise ManifestError(f"{where}.resources.{name} = {count:,} is out of range: a count must be in [0, "
                                f"{RESOURCE_MAX.get(name, max(RESOURCE_MAX.values())):,}] (beyond the largest parts); "
                                "rebuild the bitstream or restore the file")
    timing = data.get("timing", {})
    if not isinstance(timing, dict):
        raise ManifestError(f"{where}.timing must be a JSON object")
    return Manifest(
        board=_req(data, "board", str, where),
        kind=kind,
        part=_req(data, "part", str, where),
        platform=_req(data, "platform", str, where, nullable=True),
        clock_mhz=float(clock),
        files={str(k): str(v) for k, v in files.items()},
        kernels=kernels,
        tools={str(k): str(v) for k, v in tools.items()},
        git_revision=_req(data, "git_revision", str, where),
        built_at=_req(data, "built_at", str, where),
        resources={str(k): int(v) for k, v in resources.items()},
        timing=dict(timing),
        path=path,
    )


def git_revision(repo: Path | None = None) -> str:
    """`git describe --always --dirty` of the repository, or "unknown" outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=repo or work_root(),
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def build_manifest(
    board: str,
    files: Mapping[str, str],
    tools: Mapping[str, str],
    kernels: Sequence[str] = tuple(KERNELS),
    utilization: str | None = None,
    timing: str | Sequence[str] | None = None,
    catalog: str | Path | None = None,
    kernel_clock_mhz: float | None = None,
) -> Manifest:
    """The manifest of a fresh build: parameters from the catalog, summaries from reports. `timing` is one
    report_timing_summary text or several (the worst WNS counts); `kernel_clock_mhz` is the clock the
    build really runs (an xclbin's, pearl_fpga.board.xclbin_info: v++ may have scaled it down), else the
    catalog's. Timing is judged at that clock."""
    from pearl_fpga.board.catalog import get_board

    spec = get_board(board, catalog)
    clock = spec.clock_mhz if kernel_clock_mhz is None else float(kernel_clock_mhz)
    entries = {}
    for k in kernels:
        if k not in INTERFACE_VERSIONS:
            raise ManifestError(f"unknown kernel {k!r}; known: {sorted(INTERFACE_VERSIONS)}")
        entries[k] = KernelEntry(
            name=k,
            interface_version=INTERFACE_VERSIONS[k],
            ip_name=IP_NAMES[k],
            dma_name=DMA_NAMES[k] if spec.kind == "zynq" else None,
            parameters={p: spec.kernels[k][p] for p in KERNEL_PARAMETERS[k]},
        )
    return Manifest(
        board=board,
        kind=spec.kind,
        part=spec.part,
        platform=spec.platform,
        clock_mhz=clock,
        files=dict(files),
        kernels=entries,
        tools=dict(tools),
        git_revision=git_revision(),
        built_at=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        resources=parse_utilization(utilization) if utilization else {},
        timing=_timing(timing, spec.clock_mhz, clock) if timing else {},
    )


def _timing(reports: str | Sequence[str], requested_mhz: float, clock_mhz: float) -> dict[str, Any]:
    """The worst of the reports' summaries (each at the requested clock, the constraint they were routed
    against), judged at `clock_mhz`: met when the worst path fits its period (1000 / clock >= requested
    period - WNS)."""
    summaries = [parse_timing_summary(r, requested_mhz) for r in ([reports] if isinstance(reports, str) else reports)]
    worst = min(summaries, key=lambda t: t["wns_ns"])
    if clock_mhz != requested_mhz:
        worst = dict(worst, requested_mhz=requested_mhz,
                     met=1000.0 / clock_mhz >= 1000.0 / requested_mhz - worst["wns_ns"] - 1e-9)
    return worst


def write_manifest(manifest: Manifest, out: str | Path) -> Path:
    """Write `manifest` as JSON (validated by re-parsing first, so a bad one is never written)."""
    out = Path(out)
    doc = manifest.to_json()
    parse_manifest(json.loads(json.dumps(doc)), path=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)
    return out


def _gate(manifest: Manifest, gate: bool) -> None:
    """Say when the clock was scaled; with `gate`, refuse a build without a timing summary or whose timing
    is not met at the clock it runs."""
    requested = manifest.timing.get("requested_mhz")
    if requested is not None:
        print(f"note: v++ scaled the kernel clock to {manifest.clock_mhz:g} MHz (asked: {requested:g} MHz; UG1315, "
              "\"Kernel Clock Minimum Frequency\"): the manifest records it and the planner uses it", file=sys.stderr)
    if gate and not manifest.timing:
        raise ManifestError("no routed timing summary was found for the timing gate (--timing)")
    if gate and manifest.timing.get("met") is False:
        raise ManifestError(f"timing is not met at {manifest.clock_mhz:g} MHz (WNS {manifest.timing['wns_ns']:g} ns "
                            f"at {requested or manifest.clock_mhz:g} MHz); lower clock_mhz or the kernel sizes in "
                            "bitstreams/catalog.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.board.manifest", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write bitstreams/<board>/manifest.json after a build")
    w.add_argument("--board", required=True, help="catalog name (bitstreams/catalog.json)")
    w.add_argument("--out", required=True, type=Path)
    w.add_argument("--bitstream", help="name of the .bit file next to the manifest (Zynq)")
    w.add_argument("--hwh", help="name of the .hwh file next to the manifest (Zynq)")
    w.add_argument("--xclbin", help="name of the .xclbin file next to the manifest (Alveo)")
    w.add_argument("--kernels", default=",".join(KERNEL_PARAMETERS), help="comma-separated kernels in the build (default: all)")
    w.add_argument("--utilization", type=Path, help="Vivado report_utilization text report")
    w.add_argument("--timing", type=Path, action="append", default=[],
                   help="Vivado report_timing_summary text report (repeat: the worst WNS counts)")
    w.add_argument("--gate", action="store_true",
                   help="exit 1, writing nothing, unless a timing report shows timing met at the build's clock")
    w.add_argument("--tool", action="append", default=[], metavar="NAME=VERSION")
    c = sub.add_parser("check", help="validate a manifest against this release's interface versions")
    c.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "write":
            files = {role: getattr(args, attr) for role, attr in (("bit", "bitstream"), ("hwh", "hwh"), ("xclbin", "xclbin")) if getattr(args, attr)}
            tools = dict(t.split("=", 1) for t in args.tool if "=" in t)
            # an xclbin's own kernel clock (v++ may have scaled it below the catalog's)
            xclbin = args.out.parent / args.xclbin if args.xclbin else None
            manifest = build_manifest(
                args.board,
                files,
                tools,
                kernels=[k for k in args.kernels.split(",") if k],
                utilization=args.utilization.read_text() if args.utilization else None,
                timing=[t.read_text() for t in args.timing] or None,
                kernel_clock_mhz=kernel_clock_mhz(xclbin) if xclbin is not None and xclbin.is_file() else None,
            )
            _gate(manifest, args.gate)
            print(f"wrote {write_manifest(manifest, args.out)}")
        else:
            manifest = load_manifest(args.path)
            for k in manifest.kernels:
                manifest.check_kernel(k)
            print(f"{args.path}: {manifest.board}, kernels {', '.join(sorted(manifest.kernels))}: ok")
    except (ManifestError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
