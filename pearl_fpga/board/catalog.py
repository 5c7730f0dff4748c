"""The board and platform catalog (bitstreams/catalog.json): what each FPGA target offers.

Read by the build (part, clock and kernel sizes for `make bitstream` / `make xclbin`) and by the
planner (clock, link bandwidth/latency, nominal power). Every figure is nominal, from public data
sheets (each board's "notes" names the source); none is measured here.

    >>> spec = load_catalog()["pynq-z2"]
    >>> spec.transfer_seconds(4096)      # host <-> kernel transfer model: latency + bytes / bandwidth
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.board.ecp5 import Ecp5Error, Ecp5Spec, parse_ecp5
from pearl_fpga.board.zynq_design import (  # noqa: F401 - the Zynq block design, re-exported
    AXI_DMA_MIN_MM_WIDTH, AXI_DMA_MM_WIDTHS, ZynqBlock, axi_dma_config, zynq_design, zynq_design_tcl)
from pearl_fpga.data import data_path
from pearl_fpga.errors import CatalogError  # noqa: F401 - re-exported
from pearl_fpga.safe_io import read_json
from pearl_fpga.spec.descriptor import descriptor
from pearl_fpga.spec.kernels import KERNELS, commands_ii

SCHEMA_VERSION = 1
DEFAULT_CATALOG = data_path("bitstreams", "catalog.json")

KINDS = ("zynq", "alveo", "ecp5")
LINK_KINDS = {"zynq": "axi-hp", "alveo": "pcie", "ecp5": "uart"}
RESOURCE_KEYS = ("lut", "ff", "bram36", "uram", "dsp")
RESOURCE_MAX = {"lut": 10_000_000, "ff": 20_000_000, "bram36": 20_000, "uram": 5_000, "dsp": 50_000}
"""Bound of each resource count a catalog or manifest may state: about twice the largest AMD parts (Virtex
UltraScale+ VU19P, Versal Premium); a larger count is a typo or a corrupt file, and would let the planner
price an impossible board."""
# Kernel sizes a board may ask for: the limits of each kernel's descriptor (pearl_fpga.spec.kernels).
KERNEL_LIMITS: dict[str, dict[str, tuple[int, int]]] = {k: dict(ip.limits) for k, ip in KERNELS.items()}
LEAF_MEMORIES = ("bram", "uram")


@dataclass(frozen=True)
class BoardSpec:
    """One FPGA board or Alveo platform, as the catalog describes it (nominal figures)."""

    name: str  # catalog key, e.g. "pynq-z2"
    kind: str  # "zynq" (PYNQ overlay: .bit + .hwh), "alveo" (XRT: .xclbin) or "ecp5" (open flow: .bit, UART bridge)
    part: str  # FPGA part number, e.g. "xc7z020clg400-1"
    board_part: str | None  # Vivado board part (zynq only)
    platform: str | None  # Vitis platform (alveo only)
    clock_mhz: float  # kernel clock the build targets
    resources: dict[str, int]  # lut, ff, bram36, uram, dsp available on the part
    memory: dict[str, Any]  # type, size_gb, bandwidth_gbps (GB/s) of the board memory
    link_bandwidth_gbps: float  # host <-> kernel bandwidth in GB/s (1e9 bytes per second)
    link_latency_us: float  # fixed cost of one host <-> kernel transfer, microseconds
    power_idle_w: float  # board power when idle, watts
    power_active_w: float  # board power with the kernels busy, watts
    power_source: str  # "nominal" (data sheet / estimate) or "measured"
    kernels: dict[str, dict[str, int]]  # synthesis sizes of each kernel on this board
    notes: str  # where the figures come from (sources only: kernel sizes are stated by describe())
    replay_leaf_memory: str = "bram"  # "uram": the replay's leaf words in UltraRAM (hls/replay/replay.h)
    slr_count: int = 1  # super logic regions of the part (stacked-silicon Alveo cards: 3 or 4)
    slr_of: dict[str, int] | None = None  # kernel -> the SLR its compute units (and data movers) are placed in
    ecp5: Ecp5Spec | None = None  # an ecp5 board's device, oscillator, UART, top, constraints and pins

    def slr_resources(self) -> dict[str, int]:
        """One SLR's share of the part's resources: an even split (the data sheets give the totals; the
        shell's static region, which takes part of one SLR, is left to the budget's margin)."""
        return {key: value // self.slr_count for key, value in self.resources.items()}

    @property
    def link_kind(self) -> str:
        """"axi-hp" (Zynq PS <-> PL) or "pcie" (host <-> Alveo card)."""
        return LINK_KINDS[self.kind]

    def commands_ii(self, kernel: str) -> int:
        """The initiation interval of `kernel`'s HLS command loop at this board's clock (pearl_fpga.spec.kernels)."""
        return commands_ii(kernel, self.clock_mhz)

    @property
    def clock_hz(self) -> float:
        return self.clock_mhz * 1e6

    def transfer_seconds(self, nbytes: int | float) -> float:
        """Modelled time of one host <-> kernel transfer of `nbytes`: latency + bytes / bandwidth."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        return self.link_latency_us * 1e-6 + float(nbytes) / (self.link_bandwidth_gbps * 1e9)

    def kernel_seconds(self, cycles: int | float) -> float:
        """Time of `cycles` kernel clock cycles at the catalog clock."""
        return float(cycles) / self.clock_hz

    def describe(self) -> str:
        """The board's notes (sources of its figures) and its kernel sizes, the latter written from the
        parameters themselves so that no prose can contradict them."""
        k = self.kernels
        r, m, t = k["replay"], k["mlp"], k["tabular"]
        copies = f"{t['instances']} instance{'s' if t['instances'] > 1 else ''}"
        table = ("in the reference RTL behind the UART bridge (hls/bridge)" if self.kind == "ecp5" else
                 "kept twice (row copy and update copy, hls/tabular/tabular.h)")
        sizes = (f"replay: {r['capacity']} leaves, fan-out {r['fanout']}, batches of up to {r['max_batch']}; "
                 f"mlp: {m['lanes']} MAC lanes, up to {m['max_layers']} layers of width {m['max_width']}, batches of up to "
                 f"{m['max_batch']}; tabular: {copies}, each a {t['states']} x {t['actions']} Q table {table}, batches of "
                 f"up to {t['max_batch']}, one command per {self.commands_ii('tabular')} clock(s) at {self.clock_mhz:g} MHz "
                 f"(II = {self.commands_ii('tabular')}) except while a write to a row it reads is in flight; replay: one "
                 f"command per {self.commands_ii('replay')} clock(s) (II = {self.commands_ii('replay')})")
        return f"{self.notes} Kernels: {sizes}."


def load_catalog(path: str | Path | None = None) -> dict[str, BoardSpec]:
    """Load and validate the catalog (default: bitstreams/catalog.json); returns name -> BoardSpec.

    Raises CatalogError naming the file, the board and the field when anything is missing or wrong.
    """
    path = Path(path) if path is not None else DEFAULT_CATALOG
    data = _read(path)
    return parse_catalog(data, source=str(path))


def get_board(name: str | None = None, path: str | Path | None = None) -> BoardSpec:
    """One board of the catalog (None: its default board); an unknown name raises CatalogError listing
    the known ones."""
    path = Path(path) if path is not None else DEFAULT_CATALOG
    data = _read(path)
    boards = parse_catalog(data, source=str(path))
    name = str(data.get("default_board") or next(iter(boards))) if name is None else name
    if name not in boards:
        raise CatalogError(f"unknown board {name!r}; the catalog has: {', '.join(sorted(boards))}")
    return boards[name]


def default_board(path: str | Path | None = None) -> str:
    """The board `fpga-emu` and the planner mean when none is named: the catalog's "default_board"
    (its first board when the field is absent)."""
    return get_board(None, path).name


def _read(path: Path) -> Any:
    """The catalog's JSON (safe_io.read_json: a regular file, bounded, UTF-8, nesting limited)."""
    try:
        return read_json(path, "board catalog", max_bytes=4 << 20, error=CatalogError, top=dict)
    except FileNotFoundError:
        raise CatalogError(f"board catalog {path} not found (it ships in the repository at bitstreams/catalog.json); "
                           "restore it from git or pass the path of a catalog") from None


def parse_catalog(data: Any, source: str = "catalog") -> dict[str, BoardSpec]:
    """Validate an already-parsed catalog document (see load_catalog)."""
    if not isinstance(data, dict):
        raise CatalogError(f"{source}: the top level must be a JSON object with 'schema' and 'boards'")
    if data.get("schema") != SCHEMA_VERSION:
        raise CatalogError(
            f"{source}: schema is {data.get('schema')!r}, this pearl_fpga reads schema {SCHEMA_VERSION}; "
            "upgrade pearl_fpga or use the catalog of its release"
        )
    boards = data.get("boards")
    if not isinstance(boards, dict) or not boards:
        raise CatalogError(f"{source}: 'boards' must be a non-empty object of board name -> description")
    default = data.get("default_board")
    if default is not None and default not in boards:
        raise CatalogError(f"{source}: default_board {default!r} is not one of its boards ({', '.join(sorted(boards))})")
    return {name: _parse_board(name, entry, source) for name, entry in boards.items()}


class _Fields:
    """Typed access to one JSON object with errors that name the field's full path."""

    def __init__(self, obj: Any, where: str):
        if not isinstance(obj, dict):
            raise CatalogError(f"{where} must be a JSON object, got {type(obj).__name__}")
        self.obj, self.where = obj, where

    def _get(self, key: str) -> Any:
        if key not in self.obj:
            raise CatalogError(f"{self.where}: missing field '{key}'")
        return self.obj[key]

    def text(self, key: str, nullable: bool = False) -> str | None:
        value = self._get(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            raise CatalogError(f"{self.where}.{key} must be a non-empty string, got {value!r}")
        return value

    def number(self, key: str, minimum: float = 0.0, positive: bool = True) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise CatalogError(f"{self.where}.{key} must be a number, got {value!r}")
        if value < minimum or (positive and value <= 0):
            raise CatalogError(f"{self.where}.{key} must be {'> 0' if positive else f'>= {minimum}'}, got {value!r}")
        return float(value)

    def integer(self, key: str, lo: int, hi: int) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise CatalogError(f"{self.where}.{key} must be an integer in [{lo}, {hi}], got {value!r}")
        return value

    def sub(self, key: str) -> _Fields:
        return _Fields(self._get(key), f"{self.where}.{key}")


def _parse_board(name: str, entry: Any, source: str) -> BoardSpec:
    f = _Fields(entry, f"{source}: boards.{name}")
    kind = f.text("kind")
    if kind not in KINDS:
        raise CatalogError(f"{f.where}.kind must be one of {KINDS}, got {kind!r}")
    board_part = f.text("board_part", nullable=True)
    platform = f.text("platform", nullable=True)
    if kind == "zynq" and (board_part is None or platform is not None):
        raise CatalogError(f"{f.where}: a zynq board needs 'board_part' (Vivado board part) and 'platform': null")
    if kind == "alveo" and (platform is None or board_part is not None):
        raise CatalogError(f"{f.where}: an alveo card needs 'platform' (Vitis platform name) and 'board_part': null")
    if kind == "ecp5" and (platform is not None or board_part is not None):
        raise CatalogError(f"{f.where}: an ecp5 board has no Vivado board part or Vitis platform: set both to null")

    res = f.sub("resources")
    resources = {k: int(res.integer(k, 0, RESOURCE_MAX[k])) for k in RESOURCE_KEYS}
    mem = f.sub("memory")
    memory = {"type": mem.text("type"), "size_gb": mem.number("size_gb"), "bandwidth_gbps": mem.number("bandwidth_gbps")}
    link = f.sub("link")
    link_kind = link.text("kind")
    if link_kind != LINK_KINDS[kind]:
        raise CatalogError(f"{link.where}.kind must be {LINK_KINDS[kind]!r} for a {kind} board, got {link_kind!r}")
    power = f.sub("power_w")
    power_source = power.text("source")
    if power_source not in ("nominal", "measured"):
        raise CatalogError(f"{power.where}.source must be 'nominal' or 'measured', got {power_source!r}")
    idle, active = power.number("idle"), power.number("active")
    if active < idle:
        raise CatalogError(f"{power.where}: active power ({active} W) is below idle power ({idle} W)")

    kern = f.sub("kernels")
    kernels: dict[str, dict[str, int]] = {}
    for kernel, limits in KERNEL_LIMITS.items():
        k = kern.sub(kernel)
        kernels[kernel] = {key: k.integer(key, lo, hi) for key, (lo, hi) in limits.items()}
        for key, allowed in KERNELS[kernel].choices.items():
            if kernels[kernel][key] not in allowed:
                raise CatalogError(f"{k.where}.{key} must be one of {allowed}, got {kernels[kernel][key]}")
    tab, max_entries = kernels["tabular"], descriptor("tabular").constant("MAX_ENTRIES")
    if tab["states"] * tab["actions"] > max_entries:
        raise CatalogError(f"{f.where}.kernels.tabular: states x actions = {tab['states'] * tab['actions']} is over "
                           f"{max_entries} (hls/tabular/SPEC.md)")
    unknown = set(kern.obj) - set(KERNEL_LIMITS)
    if unknown:
        raise CatalogError(f"{f.where}.kernels: unknown kernel(s) {sorted(unknown)}; known: {sorted(KERNEL_LIMITS)}")
    leaf_memory = f.obj.get("replay_leaf_memory", "bram")
    if leaf_memory not in LEAF_MEMORIES:
        raise CatalogError(f"{f.where}.replay_leaf_memory must be one of {LEAF_MEMORIES}, got {leaf_memory!r}")
    if leaf_memory == "uram" and resources["uram"] == 0:
        raise CatalogError(f"{f.where}.replay_leaf_memory is 'uram', but the part has no UltraRAM (resources.uram 0); use 'bram'")
    slr_count, slr_of = _parse_slrs(f, kind)
    ecp5 = None
    if kind == "ecp5" or "ecp5" in f.obj:
        if kind != "ecp5":
            raise CatalogError(f"{f.where}: only a board of kind 'ecp5' has an 'ecp5' entry")
        try:
            ecp5 = parse_ecp5(f.obj.get("ecp5"), f"{f.where}.ecp5", f.number("clock_mhz"), link.number("bandwidth_gbps"))
        except Ecp5Error as exc:
            raise CatalogError(str(exc)) from None

    return BoardSpec(
        name=name,
        kind=kind,
        part=str(f.text("part")),
        board_part=board_part,
        platform=platform,
        clock_mhz=f.number("clock_mhz"),
        resources=resources,
        memory=memory,
        link_bandwidth_gbps=link.number("bandwidth_gbps"),
        link_latency_us=link.number("latency_us", positive=False),
        power_idle_w=idle,
        power_active_w=active,
        power_source=power_source,
        kernels=kernels,
        notes=str(f.text("notes")),
        replay_leaf_memory=leaf_memory,
        slr_count=slr_count,
        slr_of=slr_of,
        ecp5=ecp5,
    )


def _parse_slrs(f: _Fields, kind: str) -> tuple[int, dict[str, int] | None]:
    """The "slrs" entry: {"count": N, "kernels": {kernel: SLR index}}; required of an Alveo card (UG1393,
    "Assigning Compute Units to SLRs": v++ places a compute unit anywhere unless told), absent on a
    single-die Zynq part."""
    if "slrs" not in f.obj:
        if kind == "alveo":
            raise CatalogError(f"{f.where}: an alveo card needs 'slrs': {{\"count\": N, \"kernels\": {{kernel: SLR}}}} "
                               "(the SLR of each kernel's compute units)")
        return 1, None
    slrs = f.sub("slrs")
    count = slrs.integer("count", 1, 8)
    where = slrs.sub("kernels")
    slr_of = {kernel: where.integer(kernel, 0, count - 1) for kernel in KERNEL_LIMITS}
    unknown = set(where.obj) - set(KERNEL_LIMITS)
    if unknown:
        raise CatalogError(f"{where.where}: unknown kernel(s) {sorted(unknown)}; known: {sorted(KERNEL_LIMITS)}")
    return count, slr_of


# ---------------------------------------------------------------------------------------------
# Build helper: hls/build.mk reads the catalog through these commands, so no figure is kept twice.

# Kernel synthesis parameter -> the macro of hls/<kernel>/<kernel>_config.h that sets it for Vitis HLS
# (each kernel's descriptor, hls/<kernel>/kernel.json, names them).
HLS_MACROS: dict[str, dict[str, str]] = {k: dict(ip.hls_macros) for k, ip in KERNELS.items()}


def hls_defines(spec: BoardSpec, kernel: str) -> str:
    """-D flags giving the HLS C++ of `kernel` this board's synthesis parameters."""
    if kernel not in HLS_MACROS:
        raise CatalogError(f"unknown kernel {kernel!r}; known: {sorted(HLS_MACROS)}")
    flags = [f"-D{macro}={spec.kernels[kernel][key]}" for key, macro in HLS_MACROS[kernel].items()]
    if kernel == "replay" and spec.replay_leaf_memory == "uram":
        flags.append("-DREPLAY_LEAVES_URAM")
    ii = commands_ii(kernel, spec.clock_mhz)
    if ii > 1:  # the COMMANDS loop's II at this clock (hls/<kernel>/SPEC.md, "Initiation interval")
        flags.append(f"-D{kernel.upper()}_COMMANDS_II={ii}")
    return " ".join(flags)


def compute_units(spec: BoardSpec, kernel: str) -> list[str]:
    """The compute units of `kernel` in an Alveo build, its data movers included (the names of
    hls/scripts/alveo_connectivity.cfg and hls/build.mk's tabular copies)."""
    top = KERNELS[kernel].top
    short = top.removesuffix("_top")
    return [f"{name}_{i}" for i in range(1, spec.kernels[kernel].get("instances", 1) + 1)
            for name in (top, f"mm2s_{short}", f"s2mm_{short}")]


def slr_flags(spec: BoardSpec) -> str:
    """v++ link options placing every compute unit in its kernel's SLR (empty for a Zynq board)."""
    if spec.slr_of is None:
        return ""
    return " ".join(f"--connectivity.slr {cu}:SLR{spec.slr_of[kernel]}"
                    for kernel in KERNELS for cu in compute_units(spec, kernel))



def board_for_platform(platform: str, path: str | Path | None = None) -> BoardSpec:
    """The catalog entry of an Alveo platform name (e.g. xilinx_u250_gen3x16_xdma_4_1_202210_1)."""
    boards = load_catalog(path)
    for spec in boards.values():
        if spec.platform == platform:
            return spec
    known = sorted(s.platform for s in boards.values() if s.platform)
    raise CatalogError(f"platform {platform!r} is not in the catalog; known platforms: {', '.join(known)}")


def _query(spec: BoardSpec, field_name: str, kernel: str | None) -> str:
    values: dict[str, Any] = {
        "name": spec.name,
        "kind": spec.kind,
        "part": spec.part,
        "board_part": spec.board_part or "",
        "platform": spec.platform or "",
        "clock_mhz": f"{spec.clock_mhz:g}",
        "period_ns": f"{1000.0 / spec.clock_mhz:g}",
    }
    if field_name == "hls_defines":
        if kernel is None:
            raise CatalogError("hls_defines needs a kernel: ... get BOARD hls_defines KERNEL")
        return hls_defines(spec, kernel)
    if field_name.startswith("kernels."):
        _, k, key = (field_name.split(".") + ["", ""])[:3]
        if k not in spec.kernels or key not in spec.kernels[k]:
            raise CatalogError(f"no field {field_name!r}; kernels have {({k: sorted(v) for k, v in spec.kernels.items()})}")
        return str(spec.kernels[k][key])
    if field_name not in values:
        raise CatalogError(f"no field {field_name!r}; choose from {sorted(values)}, hls_defines KERNEL, kernels.<kernel>.<param>")
    return str(values[field_name])


def print_or_fail(produce: Callable[[], object]) -> int:
    """The build helpers' command-line ending: print what `produce` returns (exit 0), or its CatalogError
    as `error: ...` on stderr (exit 2), which stops hls/build.mk."""
    try:
        print(produce())
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m pearl_fpga.board.catalog get BOARD FIELD [KERNEL]` / `board-of PLATFORM` / `list`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.board.catalog", description="query bitstreams/catalog.json")
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("get", help="print one field of a board (part, board_part, platform, kind, clock_mhz, period_ns, hls_defines KERNEL, kernels.<k>.<p>)")
    g.add_argument("board")
    g.add_argument("field")
    g.add_argument("kernel", nargs="?")
    b = sub.add_parser("board-of", help="print the catalog name of an Alveo platform")
    b.add_argument("platform")
    v = sub.add_parser("make-vars", help="print: kind part board_part(- if none) clock_mhz period_ns (one call for hls/build.mk)")
    v.add_argument("board")
    z = sub.add_parser("zynq-design", help="print the block design's kernels and DMA parameters as a Tcl list (hls/scripts/zynq_bd.tcl)")
    z.add_argument("board")
    sl = sub.add_parser("slr-flags", help="print the v++ link options assigning each compute unit to its SLR (hls/build.mk)")
    sl.add_argument("board")
    sub.add_parser("list", help="print the board names")
    sub.add_parser("default", help="print the default board (what fpga-emu emulates when none is named)")
    sub.add_parser("kernels", help="print the kernels every bitstream holds (pearl_fpga.spec.kernels)")
    sub.add_parser("check", help="validate the catalog")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "get":
            print(_query(get_board(args.board), args.field, args.kernel))
        elif args.cmd == "make-vars":
            spec = get_board(args.board)
            print(" ".join([spec.kind, spec.part, spec.board_part or "-", _query(spec, "clock_mhz", None), _query(spec, "period_ns", None)]))
        elif args.cmd == "zynq-design":
            print(zynq_design_tcl(get_board(args.board)))
        elif args.cmd == "slr-flags":
            print(slr_flags(get_board(args.board)))
        elif args.cmd == "board-of":
            print(board_for_platform(args.platform).name)
        elif args.cmd == "list":
            print("\n".join(load_catalog()))
        elif args.cmd == "default":
            print(default_board())
        elif args.cmd == "kernels":
            print(" ".join(KERNELS))
        else:
            print(f"{DEFAULT_CATALOG}: {len(load_catalog())} boards, ok")
    except CatalogError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
