"""The Vitis HLS configuration file of one C synthesis, generated from the kernel's descriptor and the catalog.

Vitis 2025.1 requires the HLS options in the configuration file, under [hls] (UG1702 2025.1, "HLS
General Options": "the following options must appear in the HLS configuration file"), and 2025.2 takes
no `--hls.*` option on the command line; `part=`/`platform=` are general options written before
[hls] (UG1399 2025.2, "HLS Config File Commands"), and a file with `platform=` sets the kernel clock
with `freqhz=`, not `clock=` (UG1702 2025.1, "clock"). So hls/build.mk runs

    python -m pearl_fpga.board.vitis_cfg --board BOARD --unit KERNEL --work-dir DIR
    v++ -c --mode hls --config DIR/hls_config.cfg --work_dir DIR        (cosim: vitis-run --mode hls --cosim ...)

and nothing about the design is on the command line. One file per flow, written for the board:
- a Zynq board (Vivado IP): `part=` and `clock=` of the catalog, flow_target=vivado, an ip_catalog
  package under the VLNV the block design instantiates (pearl_fpga.board.zynq_design.ip_vlnv);
- an Alveo card (Vitis kernel): `platform=` and `freqhz=`, flow_target=vitis, a .xo package; the data
  movers (hls/datamover, unit "datamover" with --top) likewise.
The same keys exist in 2024.1 and 2024.2 (UG1702 2024.2, "v++ Mode HLS"), so one file serves 2024.1 .. 2025.2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pearl_fpga.board.catalog import BoardSpec, CatalogError, get_board, hls_defines, print_or_fail
from pearl_fpga.board.zynq_design import IP_LIBRARY, IP_VENDOR, IP_VERSION
from pearl_fpga.data import data_path
from pearl_fpga.spec.descriptor import descriptor
from pearl_fpga.spec.kernels import KERNELS

FLOW_TARGETS = {"zynq": "vivado", "alveo": "vitis"}
CLOCK_UNCERTAINTY = "12%"
# The Alveo data movers of hls/datamover/datamover.cpp: one reader and one writer per kernel.
DATAMOVER_TOPS = tuple(f"{direction}_{kernel}" for kernel in KERNELS for direction in ("mm2s", "s2mm"))
FILE_NAME = "hls_config.cfg"


@dataclass(frozen=True)
class HlsConfig:
    """A v++ HLS configuration: general options (before any section), then the [hls] options in order."""

    general: list[tuple[str, str]]
    hls: list[tuple[str, str]] = field(default_factory=list)

    def get(self, key: str) -> list[str]:
        """Every value of `key` (general or [hls]), in order."""
        return [v for k, v in self.general + self.hls if k == key]

    def text(self, comment: str) -> str:
        lines = [f"# {line}" for line in comment.splitlines()]
        lines += [f"{k}={v}" for k, v in self.general] + ["", "[hls]"] + [f"{k}={v}" for k, v in self.hls]
        return "\n".join(lines) + "\n"


def _cflags(spec: BoardSpec, unit: str, hls: Path) -> str:
    # C++14: the Vitis HLS front end's default, pinned; tests/test_board_make.py compiles every kernel with it.
    flags = f"-std=c++14 -DPEARL_VENDOR_HLS -I{hls} -I{hls / unit}"
    if spec.kind == "alveo":  # the Vitis kernel flow: no s_axilite offsets (hls/common/hls_compat.h)
        flags += " -DPEARL_VITIS_FLOW"
    return f"{flags} {hls_defines(spec, unit)}" if unit in KERNELS else flags


def hls_config(spec: BoardSpec, unit: str, work_dir: Path, top: str | None = None, hls: Path | None = None) -> HlsConfig:
    """The configuration of `unit` (a kernel of pearl_fpga.spec.kernels, or "datamover" with `top` one of
    DATAMOVER_TOPS) on `spec`'s board; its .xo (Alveo) goes to work_dir/<top>.xo."""
    if spec.kind not in FLOW_TARGETS:
        raise CatalogError(f"{spec.name} is an {spec.kind} board, built by the open flow from the reference RTL: "
                           "no Vitis HLS configuration (docs/hardware.md)")
    hls = (hls or data_path("hls")).resolve()
    work_dir = work_dir.resolve()
    if unit in KERNELS:
        if top not in (None, KERNELS[unit].top):
            raise CatalogError(f"kernel {unit}'s top is {KERNELS[unit].top}, not {top}")
        top = KERNELS[unit].top
    elif unit == "datamover":
        if spec.kind != "alveo":
            raise CatalogError(f"the data movers are Alveo kernels; {spec.name} is a {spec.kind} board")
        if top not in DATAMOVER_TOPS:
            raise CatalogError(f"unit datamover needs --top, one of {', '.join(DATAMOVER_TOPS)}; got {top!r}")
    else:
        raise CatalogError(f"unknown unit {unit!r}; choose a kernel ({', '.join(KERNELS)}) or datamover")
    flow = FLOW_TARGETS[spec.kind]
    if flow == "vitis":
        general = [("platform", str(spec.platform)), ("freqhz", f"{round(spec.clock_mhz * 1e6)}")]
        clock: list[tuple[str, str]] = []
    else:
        general = [("part", spec.part)]
        clock = [("clock", f"{1000.0 / spec.clock_mhz:g}ns")]
    cflags = _cflags(spec, unit, hls)
    out = [("flow_target", flow), *clock, ("clock_uncertainty", CLOCK_UNCERTAINTY), ("syn.top", top),
           ("syn.file", str(hls / unit / f"{unit}.cpp")), ("syn.cflags", cflags)]
    testbench = hls / unit / f"{unit}_tb.cpp"
    if unit in KERNELS:  # the kernel's testbench is its C/RTL co-simulation (make cosim)
        out += [("tb.file", str(testbench)), ("tb.cflags", cflags), ("cosim.trace_level", "none")]
    if flow == "vitis":
        out += [("package.output.format", "xo"), ("package.output.file", str(work_dir / f"{top}.xo"))]
    else:
        title = descriptor(unit).title
        out += [("package.output.format", "ip_catalog"), ("package.ip.vendor", IP_VENDOR),
                ("package.ip.library", IP_LIBRARY), ("package.ip.version", IP_VERSION),
                ("package.ip.display_name", top), ("package.ip.description", f"pearl_fpga {title}")]
    return HlsConfig(general, out)


def write_config(spec: BoardSpec, unit: str, work_dir: Path, top: str | None = None) -> Path:
    """Write hls_config(...) to work_dir/hls_config.cfg; returns its path."""
    config = hls_config(spec, unit, work_dir, top)
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / FILE_NAME
    name = top or KERNELS[unit].top
    path.write_text(config.text(f"GENERATED by python -m pearl_fpga.board.vitis_cfg for {name} on {spec.name} "
                                f"({FLOW_TARGETS[spec.kind]} flow); do not edit:\nthe kernel's descriptor and "
                                "bitstreams/catalog.json hold its figures."))
    return path


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.board.vitis_cfg",
                                     description="write the Vitis HLS configuration of one kernel (or data mover) on one board")
    parser.add_argument("--board", required=True, help="a board of bitstreams/catalog.json")
    parser.add_argument("--unit", required=True, help=f"a kernel ({', '.join(KERNELS)}) or datamover")
    parser.add_argument("--top", default=None, help=f"the data mover: {', '.join(DATAMOVER_TOPS)}")
    parser.add_argument("--work-dir", required=True, type=Path, help="the v++ work directory; the file goes there")
    args = parser.parse_args(argv)
    return print_or_fail(lambda: write_config(get_board(args.board), args.unit, args.work_dir, args.top))


if __name__ == "__main__":
    raise SystemExit(main())
