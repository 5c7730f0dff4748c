"""Runs hls/scripts/zynq_bd.tcl in a real Tcl interpreter (Python's tkinter) against a small model of
Vivado's block-design commands, so that what the script asks of Vivado is checked here, without the tool.

The model keeps cells, their interface pins and the nets between them, and applies the rules the
script relies on, each from Vivado's or the IP's documentation:
- `connect_bd_intf_net` and `apply_bd_automation` (rule axi4) connect only interface pins that are not
  connected yet; automation is offered on an unconnected pin (UG994, "Designer Assistance"), so a target
  pin that is already connected is an error, as it is in Vivado;
- `intc_ip` names a new interconnect ("New AXI Interconnect", "New AXI SmartConnect", "Auto" when the
  slave is still free) or an existing one, which must then already reach the slave;
- `validate_bd_design` checks every AXI DMA against PG021 (AXI DMA v7.1, "Memory Map Data Width",
  "Stream Data Width"): memory-map widths 32..1024, each channel's stream width at most its memory-map
  width (unset parameters take the IP's defaults, 32 bits), and every pin connected;
- the routed design's slack (`get_timing_paths` / `get_property SLACK`) is what the test says it is;
- `get_board_parts` knows the board parts the test installs (`board_parts`), and those of the board
  files under the folders `set_param board.repoPaths` names (pearl_fpga.board.board_files reads them);
- `create_bd_cell` of a kernel finds the IP only under the VLNV its HLS configuration exports
  (pearl_fpga.board.vitis_cfg: package.ip.vendor/library/version), as Vivado's IP catalog would.
Everything the script runs is recorded in `calls`; `exit_code` is what it passed to `exit`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "hls" / "scripts" / "zynq_bd.tcl"

# PG021: the parameters' defaults and legal memory-map widths
DMA_DEFAULTS = {"c_m_axi_mm2s_data_width": 32, "c_m_axi_s2mm_data_width": 32, "c_m_axis_mm2s_tdata_width": 32,
                "c_s_axis_s2mm_tdata_width": 32, "c_include_sg": 1}
MM_WIDTHS = (32, 64, 128, 256, 512, 1024)
NEW_INTERCONNECT = ("New AXI Interconnect", "New AXI SmartConnect")


class ScriptError(Exception):
    """The script asked for something Vivado would refuse."""


class ScriptExit(Exception):
    """The script called exit."""


@dataclass
class Cell:
    name: str
    vlnv: str
    props: dict[str, str] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)  # pin -> "Master" | "Slave"


class VivadoStub:
    """One run of zynq_bd.tcl; `run(...)` returns the stub, errors are in `errors`."""

    def __init__(self, wns: float = 0.25, whs: float = 0.02, board_parts: tuple[str, ...] | None = None):
        import tkinter

        from pearl_fpga.board.catalog import load_catalog

        self.wns, self.whs = wns, whs
        # by default, every catalog board's files are installed
        self.board_parts = set(board_parts if board_parts is not None else
                               (s.board_part for s in load_catalog().values() if s.board_part))
        self.repo_paths: list[str] = []
        self.tcl = tkinter.Tcl()
        self.cells: dict[str, Cell] = {}
        self.nets: dict[str, set[str]] = {}  # net -> pins "/cell/PIN"
        self.calls: list[tuple[str, ...]] = []
        self.automations: list[dict[str, str]] = []  # config + "target" of each axi4 automation
        self.errors: list[str] = []
        self.exit_code: int | None = None
        self._ids = itertools.count()
        self.build_dir: Path | None = None
        for name in ("create_project", "set_property", "current_project", "update_ip_catalog", "create_bd_design",
                     "create_bd_cell", "apply_bd_automation", "get_bd_intf_pins", "get_bd_intf_nets", "get_bd_cells",
                     "connect_bd_intf_net", "assign_bd_address", "validate_bd_design", "save_bd_design", "get_files",
                     "make_wrapper", "add_files", "current_fileset", "generate_target", "launch_runs", "wait_on_run",
                     "get_property", "get_runs", "open_run", "report_utilization", "report_timing_summary",
                     "get_timing_paths", "exit", "set_param", "get_board_parts"):
            self.tcl.createcommand(name, self._wrap(name))

    # -- running -----------------------------------------------------------------------------
    def run(self, *args: str) -> VivadoStub:
        import tkinter

        self.build_dir = Path(args[4])
        argv = " ".join("{" + a + "}" for a in args)
        self.tcl.eval(f"set argv [list {argv}]; set argc {len(args)}")
        try:
            self.tcl.eval(f"source {{{SCRIPT}}}")
        except tkinter.TclError as exc:
            if self.exit_code is None and not self.errors:
                self.errors.append(f"Tcl error: {exc}")
        return self

    def _wrap(self, name: str):
        def command(*args: str) -> str:
            self.calls.append((name, *args))
            try:
                return getattr(self, "_" + name)(*args) or ""
            except ScriptExit:
                raise
            except Exception as exc:  # the message is lost in Tcl: keep it here
                self.errors.append(f"{name} {' '.join(args)}: {exc}")
                raise
        return command

    # -- design model --------------------------------------------------------------------------
    @staticmethod
    def _path(obj: str) -> str:
        return obj if obj.startswith("/") else "/" + obj

    def _pin(self, path: str) -> tuple[Cell, str]:
        cell, _, pin = self._path(path)[1:].partition("/")
        if cell not in self.cells or pin not in self.cells[cell].pins:
            raise ScriptError(f"no interface pin {path}")
        return self.cells[cell], pin

    def _net_of(self, pin: str) -> str | None:
        return next((n for n, pins in self.nets.items() if pin in pins), None)

    def _connect(self, a: str, b: str) -> None:
        for p in (a, b):
            self._pin(p)
            if self._net_of(p):
                raise ScriptError(f"{p} is already connected")
        self.nets[f"net{next(self._ids)}"] = {a, b}

    def _new_cell(self, name: str, vlnv: str) -> Cell:
        if name in self.cells:
            raise ScriptError(f"a cell named {name} exists")
        cell = Cell(name, vlnv)
        if "processing_system7" in vlnv:
            cell.pins = {"M_AXI_GP0": "Master", "S_AXI_HP0": "Slave"}
        elif "zynq_ultra_ps_e" in vlnv:
            cell.pins = {"M_AXI_HPM0_FPD": "Master", "S_AXI_HP0_FPD": "Slave"}
        elif "axi_dma" in vlnv:
            cell.pins = {"S_AXI_LITE": "Slave", "M_AXIS_MM2S": "Master", "S_AXIS_S2MM": "Slave",
                         "M_AXI_MM2S": "Master", "M_AXI_S2MM": "Master"}
        elif ":" in vlnv and vlnv.split(":")[2].endswith("_top"):
            from pearl_fpga.board.catalog import load_catalog
            from pearl_fpga.board.vitis_cfg import hls_config
            from pearl_fpga.spec.kernels import KERNELS

            top = vlnv.split(":")[2]
            ip = next(ip for ip in KERNELS.values() if ip.top == top)
            kernel = next(k for k, i in KERNELS.items() if i is ip)
            cfg = hls_config(load_catalog()["pynq-z2"], kernel, Path("/tmp"))
            exported = ":".join(cfg.get(key)[0] for key in ("package.ip.vendor", "package.ip.library")) + f":{top}:" + \
                cfg.get("package.ip.version")[0]
            if vlnv != exported:
                raise ScriptError(f"no IP {vlnv} in the IP catalog (the HLS configuration exports {exported})")
            cell.pins = {"s_axi_control": "Slave", ip.in_stream: "Slave", ip.out_stream: "Master"}
        self.cells[name] = cell
        return cell

    def _interconnect(self, name: str) -> Cell:
        cell = self._new_cell(name, "xilinx.com:ip:axi_interconnect:2.1")
        cell.pins = {"M00_AXI": "Master"}
        return cell

    def _add_slave_port(self, intc: Cell) -> str:
        n = sum(1 for p in intc.pins if p.startswith("S"))
        pin = f"S{n:02d}_AXI"
        intc.pins[pin] = "Slave"
        return f"/{intc.name}/{pin}"

    # -- the Vivado commands the script uses ------------------------------------------------------
    def _create_bd_cell(self, *args: str) -> str:
        vlnv, name = args[args.index("-vlnv") + 1], args[-1]
        self._new_cell(name, vlnv)
        return "/" + name

    def _set_property(self, *args: str) -> None:
        if args[0] == "-dict":
            items, obj = self.tcl.splitlist(args[1]), args[2]
        else:
            items, obj = args[:2], args[2]
        name = self._path(obj)[1:]
        if name in self.cells:
            for key, value in zip(items[::2], items[1::2], strict=True):
                self.cells[name].props[key.removeprefix("CONFIG.").lower()] = value

    def _get_bd_intf_pins(self, *args: str) -> str:
        if args[0] == "-of_objects":
            pins = sorted(self.nets.get(args[1], ()))
            if "-filter" in args:
                mode = args[args.index("-filter") + 1].split("==")[1].strip()
                pins = [p for p in pins if self._pin(p)[0].pins[self._pin(p)[1]] == mode]
            return " ".join(pins)
        self._pin(args[0])
        return self._path(args[0])

    def _get_bd_intf_nets(self, *args: str) -> str:
        return self._net_of(self._path(args[args.index("-of_objects") + 1])) or ""

    def _get_bd_cells(self, *args: str) -> str:
        pins = self.tcl.splitlist(args[args.index("-of_objects") + 1])
        return " ".join(sorted({"/" + self._pin(p)[0].name for p in pins}))

    def _connect_bd_intf_net(self, a: str, b: str) -> None:
        self._connect(self._path(a), self._path(b))

    def _apply_bd_automation(self, *args: str) -> None:
        rule, target = args[args.index("-rule") + 1], self._path(args[-1])
        if not rule.endswith(":axi4"):
            return  # the PS's board preset
        cfg = dict(zip(*[iter(self.tcl.splitlist(args[args.index("-config") + 1]))] * 2, strict=True))
        self.automations.append({**cfg, "target": target})
        self._pin(target)
        if self._net_of(target):
            raise ScriptError(f"automation target {target} is already connected: no automation is offered on it")
        master = self._path(cfg["Master"])
        if "Slave" not in cfg:  # a control slave on the PS's general-purpose master, through its interconnect
            periph = self.cells.get("ps_axi_periph")
            if periph is None:
                periph = self._interconnect("ps_axi_periph")
                self._connect(master, self._add_slave_port(periph))
            port = f"M{sum(1 for p in periph.pins if p.startswith('M') and self._net_of(f'/ps_axi_periph/{p}')):02d}_AXI"
            periph.pins[port] = "Master"
            self._connect(f"/ps_axi_periph/{port}", target)
            return
        slave = self._path(cfg["Slave"])
        if target not in (master, slave):
            raise ScriptError(f"automation target {target} is neither its Master {master} nor its Slave {slave}")
        intc_ip = cfg.get("intc_ip", "Auto")
        if intc_ip in NEW_INTERCONNECT or (intc_ip == "Auto" and not self._net_of(slave)):
            intc = self._interconnect(f"axi_mem_intercon{'' if 'axi_mem_intercon' not in self.cells else next(self._ids)}")
            self._connect(master, self._add_slave_port(intc))
            self._connect(f"/{intc.name}/M00_AXI", slave)
            return
        name = self._path(intc_ip)[1:]
        if name not in self.cells:
            raise ScriptError(f"intc_ip {intc_ip} does not exist")
        if self._net_of(f"/{name}/M00_AXI") != self._net_of(slave) or self._net_of(slave) is None:
            raise ScriptError(f"intc_ip {intc_ip} does not reach {slave}")
        self._connect(master, self._add_slave_port(self.cells[name]))

    def _validate_bd_design(self, *args: str) -> None:
        problems = []
        for cell in self.cells.values():
            for pin in cell.pins:
                if not self._net_of(f"/{cell.name}/{pin}"):
                    problems.append(f"/{cell.name}/{pin} is not connected")
            if "axi_dma" not in cell.vlnv:
                continue
            p = {**DMA_DEFAULTS, **cell.props}
            for ch, stream in (("mm2s", "c_m_axis_mm2s_tdata_width"), ("s2mm", "c_s_axis_s2mm_tdata_width")):
                mm = int(p[f"c_m_axi_{ch}_data_width"])
                if mm not in MM_WIDTHS:
                    problems.append(f"{cell.name}: {ch} memory-map width {mm} is not one of {MM_WIDTHS} (PG021)")
                if int(p[stream]) > mm:
                    problems.append(f"{cell.name}: {ch} stream width {p[stream]} is wider than its memory-map width {mm} (PG021)")
        if problems:
            raise ScriptError("; ".join(problems))

    def _get_property(self, name: str, obj: str) -> str:
        if name == "PROGRESS":
            return "100%"
        if name == "SLACK":
            return str(self.wns if obj == "setup_path" else self.whs)
        return ""

    def _get_timing_paths(self, *args: str) -> str:
        return "hold_path" if "-hold" in args else "setup_path"

    def _launch_runs(self, *args: str) -> None:
        assert self.build_dir is not None
        impl = self.build_dir / "vivado" / "pearl_fpga.runs" / "impl_1"
        impl.mkdir(parents=True, exist_ok=True)
        (impl / "pearl_fpga_wrapper.bit").write_bytes(b"bit")
        hwh = self.build_dir / "vivado" / "pearl_fpga.gen" / "sources_1" / "bd" / "pearl_fpga" / "hw_handoff"
        hwh.mkdir(parents=True, exist_ok=True)
        (hwh / "pearl_fpga.hwh").write_text("<hwh/>")

    def _report_timing_summary(self, *args: str) -> None:
        Path(args[args.index("-file") + 1]).write_text(f"WNS(ns) {self.wns}\n")

    def _report_utilization(self, *args: str) -> None:
        Path(args[args.index("-file") + 1]).write_text("utilization\n")

    def _get_files(self, *args: str) -> str:
        return "pearl_fpga.bd"

    def _get_runs(self, *args: str) -> str:
        return args[0]

    def _current_fileset(self, *args: str) -> str:
        return "sources_1"

    def _set_param(self, name: str, value: str) -> None:
        if name != "board.repoPaths":
            raise ScriptError(f"unexpected parameter {name}")
        self.repo_paths = list(self.tcl.splitlist(value))

    def _get_board_parts(self, *args: str) -> str:
        from pearl_fpga.board.board_files import BoardPart, find_board_files

        pattern = args[-1]
        known = pattern in self.board_parts or find_board_files(BoardPart.parse(pattern), map(Path, self.repo_paths))
        return pattern if known else ""

    def _exit(self, *args: str) -> None:
        self.exit_code = int(args[0]) if args else 0
        raise ScriptExit(self.exit_code)

    def __getattr__(self, name: str):
        if name.startswith("_") and name[1:] in ("create_project", "current_project", "update_ip_catalog",
                                                 "create_bd_design", "assign_bd_address", "save_bd_design",
                                                 "make_wrapper", "add_files", "generate_target", "wait_on_run",
                                                 "open_run"):
            return lambda *args: ""
        raise AttributeError(name)
