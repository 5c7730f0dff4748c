"""Lattice ECP5 parts, the Yosys and nextpnr-ecp5 steps, and what nextpnr's `--report` JSON says.

Resources are counted by nextpnr's placer bels: TRELLIS_COMB (a LUT4, or half a CCU2C carry cell),
TRELLIS_FF, DP16KD (18 Kbit block RAM), MULT18X18D (18x18 multiplier), TRELLIS_RAMW (LUT RAM write
port); used and available both come from the report, so nothing about a device is repeated here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from pearl_fpga.errors import PearlError

# LFE5U-85F-6BG381C: family, size (k LUT), speed grade, package, temperature grade
PART_RE = re.compile(r"^LFE5(U|UM|UM5G)-(12|25|45|85)F-([678])(BG|MG)(\d+)([CI])$")
PACKAGES = {"BG": "CABGA", "MG": "CSFBGA"}
# the report's bel types -> the record's resource names
RESOURCES = {"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "DP16KD": "bram", "MULT18X18D": "dsp", "TRELLIS_RAMW": "lutram"}


class ImplementationError(PearlError):
    """Synthesis or place-and-route failed, or their reports are not what this flow reads."""


@dataclasses.dataclass(frozen=True)
class Part:
    name: str        # LFE5U-85F-6BG381C
    device: str      # nextpnr's device flag without dashes: 85k, um-85k, um5g-85k
    package: str     # CABGA381
    speed: int       # 6 (the slowest), 7, 8

    def nextpnr_args(self) -> list[str]:
        return [f"--{self.device}", "--package", self.package, "--speed", str(self.speed)]


def parse_part(name: str) -> Part:
    m = PART_RE.match(name.strip().upper())
    if not m:
        raise ImplementationError(f"{name!r} is not an ECP5 part name such as LFE5U-85F-6BG381C "
                                  "(LFE5U/LFE5UM/LFE5UM5G, size 12/25/45/85, speed 6/7/8, package BGnnn/MGnnn)")
    family, size, speed, pkg, pins, _ = m.groups()
    prefix = {"U": "", "UM": "um-", "UM5G": "um5g-"}[family]
    if size == "12" and family != "U":
        raise ImplementationError(f"{name}: the 12k device exists only as LFE5U")
    return Part(name=name.strip().upper(), device=f"{prefix}{size}k", package=f"{PACKAGES[pkg]}{pins}", speed=int(speed))


def _tcl_free(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.\-/]+", value):
        raise ImplementationError(f"parameter value {value!r} has characters the Yosys command line cannot carry")
    return value


def synth_script(files: list[str], top: str, parameters: dict[str, int | str], json_out: str | None,
                 verilog_out: str | None = None, extra: str = "") -> str:
    """The Yosys commands: read the RTL, set the parameters, synth_ecp5, flatten, write the netlist(s)
    and the cell statistics (stat.json). `extra` goes to synth_ecp5 (e.g. -nodsp)."""
    sets = " ".join(f'-set {k} "{_tcl_free(v)}"' if isinstance(v, str) else f"-set {k} {int(v)}"
                    for k, v in parameters.items())
    steps = [f"read_verilog -sv -DSYNTHESIS {' '.join(files)}"]
    if sets:
        steps.append(f"chparam {sets} {top}")
    steps.append(f"synth_ecp5 -top {top} {extra}".strip())
    # keep_reg's copies survived synthesis as kept submodules (hls/common/rtl/keep_reg.sv); flattening
    # them now, after every opt_merge, gives nextpnr, the netlist simulation and `stat` one flat top.
    steps.append("setattr -mod -unset keep_hierarchy *; flatten -noscopeinfo")
    if json_out:
        steps.append(f"write_json {json_out}")
    if verilog_out:
        steps.append(f"write_verilog -noattr {verilog_out}")
    steps.append("tee -q -o stat.json stat -json")
    return "; ".join(steps)


def cell_counts(stat_json: Path, top: str) -> dict[str, int]:
    """Cells by type of the flattened top from Yosys's `stat -json`."""
    stat = json.loads(stat_json.read_text())
    modules = stat.get("modules", {})
    entry = modules.get(top) or modules.get(f"\\{top}") or next(iter(modules.values()), None)
    if entry is None:
        raise ImplementationError(f"Yosys stat reported no module ({stat_json})")
    cells = entry.get("num_cells_by_type", {})
    return {str(k).lstrip("\\$"): int(v) for k, v in sorted(cells.items()) if not str(k).startswith("$scopeinfo")}


ROUTERS = ("router1", "router2")  # nextpnr's: router1 (A*, ECP5's default) and router2 (negotiated congestion)


def nextpnr_command(part: Part, clock_mhz: float, json_in: str, report: str, seed: int, log: str,
                    router: str = "router1", place_only: bool = False) -> list[str]:
    """Out of context (no I/O buffers: the kernel is a block inside a board design), every clock
    constrained to `clock_mhz`. Out of context the clock is an input port with no driver cell, so
    nextpnr neither promotes it to a global (DCCA) nor routes it: timing takes it as ideal (no
    insertion delay, no skew) and the fabric carries only the data nets. A missed clock still
    finishes routing and writes the report (--timing-allow-fail): the gate here judges it and says by
    how much. `place_only` stops after placement (--no-route): the report's timing is then nextpnr's
    estimate of the routing delays, which no route has confirmed."""
    if router not in ROUTERS:
        raise ImplementationError(f"unknown nextpnr router {router!r}: use one of {', '.join(ROUTERS)}")
    return [*part.nextpnr_args(), "--out-of-context", "--freq", f"{clock_mhz:g}", "--timing-allow-fail",
            "--router", router, "--json", json_in, "--report", report, "--detailed-timing-report",
            "--seed", str(seed), "-l", log, *(["--no-route"] if place_only else [])]


_LOG_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz \((?:PASS|FAIL) at ([0-9.]+) MHz\)")


def placement_fmax(log: Path) -> dict[str, dict[str, float]]:
    """Fmax per clock from nextpnr's log, the last estimate of each clock. After placement only
    (--no-route) the report JSON holds no timing; the log holds the placer's estimate of the routing."""
    try:
        text = log.read_text(errors="replace")
    except OSError as exc:
        raise ImplementationError(f"nextpnr wrote no readable log at {log}: {exc}") from exc
    return {clk: {"achieved_mhz": round(float(mhz), 2), "constraint_mhz": round(float(target), 2)}
            for clk, mhz, target in _LOG_FMAX.findall(text)}  # later lines overwrite earlier ones


def read_report(path: Path, clock_mhz: float, log: Path | None = None) -> dict[str, Any]:
    """Utilization, Fmax per clock and the critical path of each clock from nextpnr's report JSON (with
    `log`, nextpnr's log: where the report has no Fmax, as after placement only, the log's estimate)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ImplementationError(f"nextpnr wrote no readable report at {path}: {exc}") from exc
    util = report.get("utilization", {})
    utilization = {}
    for bel, name in RESOURCES.items():
        entry = util.get(bel, {"used": 0, "available": 0})
        utilization[name] = {"used": int(entry["used"]), "available": int(entry["available"]), "bel": bel}
    fmax = {str(clk): {"achieved_mhz": round(float(v["achieved"]), 2), "constraint_mhz": round(float(v["constraint"]), 2)}
            for clk, v in report.get("fmax", {}).items()}
    if not fmax and log is not None:  # --no-route: the report has no timing, the log has the placer's estimate
        fmax = placement_fmax(log)
    paths = []
    for cp in report.get("critical_paths", []):
        steps = cp.get("path", [])
        if not steps:
            continue
        delay = sum(float(s.get("delay", 0.0)) for s in steps)
        logic = sum(float(s.get("delay", 0.0)) for s in steps if s.get("type") not in ("routing",))
        paths.append({
            "from_clock": cp.get("from"), "to_clock": cp.get("to"),
            "start": f"{steps[0]['from']['cell']}.{steps[0]['from']['port']}",
            "end": f"{steps[-1]['to']['cell']}.{steps[-1]['to']['port']}",
            "delay_ns": round(delay, 3), "logic_ns": round(logic, 3), "steps": len(steps),
        })
    return {"utilization": utilization, "fmax": fmax, "critical_paths": paths,
            "clock_network": clock_network(int(util.get("DCCA", {}).get("used", 0)))}


def clock_network(dcca_used: int) -> str:
    """How the placed design's clock reaches its flip-flops, from the global buffers (DCCA) it uses."""
    if dcca_used:
        return f"global: {dcca_used} DCCA global buffer(s), the clock routed on the global network"
    # nextpnr promotes only nets driven by a cell; an out-of-context clock is a port with no driver
    return "ideal: out of context the clock port has no driver cell, so it is neither a global (0 DCCA) nor routed"


def timing_verdict(timing: dict[str, Any], clock_mhz: float, routed: bool = True) -> dict[str, Any]:
    """Whether every clock meets `clock_mhz`; the worst clock, by how much it misses, its critical path.
    An unrouted design (placement only: estimated delays) never meets the clock."""
    if not timing["fmax"]:
        # a design with no clocked path has nothing to time; a kernel always has its ap_clk
        raise ImplementationError("nextpnr reported no clock: the design lost its registers (check the synthesis log)")
    clk, worst = min(timing["fmax"].items(), key=lambda kv: kv[1]["achieved_mhz"])
    achieved = worst["achieved_mhz"]
    period, needed = 1000.0 / clock_mhz, 1000.0 / achieved
    # a path's clocks are events ("posedge ap_clk"); the path that ends at this clock limits it
    path = next((p for p in timing["critical_paths"] if str(p["to_clock"]).split(" ")[-1] == clk), None)
    return {"met": routed and achieved >= clock_mhz, "routed": routed, "clock": clk, "target_mhz": clock_mhz, "fmax_mhz": achieved,
            "slack_ns": round(period - needed, 3), "critical_path": path}


def gate_message(kernel: str, part: str, verdict: dict[str, Any]) -> str:
    """One line: met, or missed by how much and along which path."""
    head = (f"{kernel} on {part}: {verdict['clock']} reaches {verdict['fmax_mhz']:.1f} MHz "
            f"(target {verdict['target_mhz']:g} MHz, slack {verdict['slack_ns']:+.3f} ns)")
    if not verdict.get("routed", True):
        head += " by nextpnr's post-placement estimate, NOT ROUTED: no timing verdict"
    if verdict["met"]:
        return head + ": timing met"
    missed = max(verdict["target_mhz"] - verdict["fmax_mhz"], 0.0)
    path = verdict["critical_path"]
    where = (f"; critical path {path['start']} -> {path['end']}, {path['delay_ns']:.2f} ns "
             f"({path['logic_ns']:.2f} ns logic, {path['steps']} steps)" if path else "")
    return head + f": MISSES the clock by {missed:.1f} MHz ({-verdict['slack_ns']:.3f} ns){where}"
