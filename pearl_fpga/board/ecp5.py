"""What an ECP5 board needs beyond the common catalog fields, and what the open flow reports about it.

- `Ecp5Spec`: the catalog's "ecp5" entry of a board of kind "ecp5" (the ULX3S): nextpnr's device,
  package and speed grade, the oscillator, the UART's line rate, the board top and its LPF, the pins.
- `pll_config`: the EHXPLLL dividers that make the kernel clock from the oscillator (the limits of
  Lattice FPGA-TN-02200, "ECP5 and ECP5-5G sysCLOCK PLL/DLL Design and User Guide": PFD 3.125 .. 400
  MHz, VCO 400 .. 800 MHz; Project Trellis's ecppll searches the same space).
- `parse_nextpnr_report`: nextpnr-ecp5's `--report` JSON as a manifest's resources and timing, with
  the critical path's start and end for the timing gate's message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.data import data_path
from pearl_fpga.errors import PearlError

DEVICES = {"25k", "45k", "85k", "um-25k", "um-45k", "um-85k", "um5g-25k", "um5g-45k", "um5g-85k"}
PFD_MHZ = (3.125, 400.0)
VCO_MHZ = (400.0, 800.0)
MAX_FTDI_BAUD = 3_000_000  # FT231X: 3 Mbaud at most (FTDI DS_FT231X)
PIN_ROLES = ("clock", "uart_rx", "uart_tx", "led")


class Ecp5Error(PearlError, ValueError):
    """An ECP5 board's catalog entry, clock or build report is wrong."""


@dataclass(frozen=True)
class PllConfig:
    """EHXPLLL dividers: f_out = f_in / clki_div * clkfb_div (feedback from CLKOP), VCO = f_out * clkop_div."""

    clki_div: int
    clkfb_div: int
    clkop_div: int
    clkop_cphase: int  # (clkop_div - 1) // 2: the output without a phase shift
    out_mhz: float


def pll_config(in_mhz: float, out_mhz: float) -> PllConfig:
    """The EHXPLLL dividers that make exactly `out_mhz` from `in_mhz`, the VCO nearest the middle of its
    range; Ecp5Error naming the nearest clocks when no divider gives it."""
    best: tuple[float, PllConfig] | None = None
    nearest: set[float] = set()
    for clki in range(1, 129):
        if not PFD_MHZ[0] <= in_mhz / clki <= PFD_MHZ[1]:
            continue
        for clkfb in range(1, 81):
            f = in_mhz / clki * clkfb
            for clkop in range(1, 129):
                if not VCO_MHZ[0] <= f * clkop <= VCO_MHZ[1]:
                    continue
                if abs(f - out_mhz) > 1e-9 * out_mhz:
                    if abs(f - out_mhz) < 0.05 * out_mhz:
                        nearest.add(round(f, 4))
                    continue
                score = abs(f * clkop - sum(VCO_MHZ) / 2)
                if best is None or score < best[0]:
                    best = (score, PllConfig(clki, clkfb, clkop, (clkop - 1) // 2, f))
    if best is None:
        near = ", ".join(f"{f:g}" for f in sorted(nearest, key=lambda f: abs(f - out_mhz))[:4]) or "none within 5%"
        raise Ecp5Error(f"the ECP5 PLL cannot make {out_mhz:g} MHz from {in_mhz:g} MHz exactly (nearest: {near} MHz); "
                        "choose one of those for clock_mhz")
    return best[1]


@dataclass(frozen=True)
class Ecp5Spec:
    """The "ecp5" entry of a board of kind "ecp5"."""

    device: str  # nextpnr-ecp5's device option without the dashes ("85k")
    package: str  # nextpnr-ecp5 --package ("CABGA381")
    speed: int  # speed grade (6, 7 or 8)
    oscillator_mhz: float  # the board clock the PLL takes
    baud: int  # the UART's line rate
    top: str  # the board top module (hls/boards/<board>/<top>.sv)
    constraints: str  # the LPF, relative to the repository root
    pins: dict[str, Any]  # role -> site (led: a list of sites), the LPF's LOCATEs

    def constraints_path(self) -> Path:
        return data_path(*Path(self.constraints).parts)

    def pll(self, clock_mhz: float) -> PllConfig:
        return pll_config(self.oscillator_mhz, clock_mhz)


def parse_ecp5(entry: Any, where: str, clock_mhz: float, link_bandwidth_gbps: float) -> Ecp5Spec:
    """Validate a board's "ecp5" entry (where: the entry's path for messages)."""
    if not isinstance(entry, dict):
        raise Ecp5Error(f"{where}: a board of kind 'ecp5' needs an 'ecp5' object (device, package, speed, "
                        "oscillator_mhz, baud, top, constraints, pins)")
    missing = [k for k in ("device", "package", "speed", "oscillator_mhz", "baud", "top", "constraints", "pins")
               if k not in entry]
    if missing:
        raise Ecp5Error(f"{where}: missing field(s) {missing}")
    device, speed, osc, baud = entry["device"], entry["speed"], entry["oscillator_mhz"], entry["baud"]
    if device not in DEVICES:
        raise Ecp5Error(f"{where}.device must be one of {sorted(DEVICES)} (nextpnr-ecp5's), got {device!r}")
    if speed not in (6, 7, 8):
        raise Ecp5Error(f"{where}.speed must be 6, 7 or 8, got {speed!r}")
    if isinstance(osc, bool) or not isinstance(osc, (int, float)) or not math.isfinite(osc) or osc <= 0:
        raise Ecp5Error(f"{where}.oscillator_mhz must be a positive number, got {osc!r}")
    if isinstance(baud, bool) or not isinstance(baud, int) or not 9600 <= baud <= MAX_FTDI_BAUD:
        raise Ecp5Error(f"{where}.baud must be an integer in [9600, {MAX_FTDI_BAUD}] (the FT231X's range), got {baud!r}")
    if link_bandwidth_gbps * 1e9 > baud / 10:
        raise Ecp5Error(f"{where}: link.bandwidth_gbps {link_bandwidth_gbps:g} is more than the line carries "
                        f"({baud} baud, 10 bits a byte: {baud / 10 / 1e9:g} GB/s)")
    if clock_mhz * 1e6 < 8 * baud:
        raise Ecp5Error(f"{where}: clock_mhz {clock_mhz:g} is under 8 clocks a bit at {baud} baud")
    for key in ("package", "top", "constraints"):
        if not isinstance(entry[key], str) or not entry[key]:
            raise Ecp5Error(f"{where}.{key} must be a non-empty string, got {entry[key]!r}")
    pins = entry["pins"]
    if not isinstance(pins, dict) or set(pins) != set(PIN_ROLES):
        raise Ecp5Error(f"{where}.pins must name the sites of {list(PIN_ROLES)}, got {pins!r}")
    for role, site in pins.items():
        sites = site if role == "led" else [site]
        if not isinstance(sites, list) or not sites or not all(isinstance(s, str) and s for s in sites):
            raise Ecp5Error(f"{where}.pins.{role} must be a site name{' list' if role == 'led' else ''}, got {site!r}")
    spec = Ecp5Spec(device, entry["package"], speed, float(osc), baud, entry["top"], entry["constraints"], dict(pins))
    try:
        spec.pll(clock_mhz)
    except Ecp5Error as exc:
        raise Ecp5Error(f"{where}: {exc}") from None
    return spec


def parse_nextpnr_report(report: Any, clock_mhz: float) -> tuple[dict[str, int], dict[str, Any]]:
    """(resources, timing) of a nextpnr-ecp5 `--report` JSON: used LUT4s, flip-flops, DP16KD block RAMs
    and MULT18X18D multipliers with their availability; per clock the Fmax nextpnr achieved, and for
    the kernel clock (the one constrained nearest `clock_mhz`) wns_ns, met, achieved_mhz and the
    critical path's start and end."""
    if not isinstance(report, dict) or "utilization" not in report or "fmax" not in report:
        raise Ecp5Error("not a nextpnr --report JSON (it needs 'utilization' and 'fmax')")
    util = report["utilization"]
    resources: dict[str, int] = {}
    for key, cell in (("lut", "TRELLIS_COMB"), ("ff", "TRELLIS_FF"), ("dp16kd", "DP16KD"), ("dsp", "MULT18X18D")):
        entry = util.get(cell, {"used": 0, "available": 0})
        resources[key] = int(entry.get("used", 0))
        resources[f"{key}_available"] = int(entry.get("available", 0))
    clocks = {name: (float(v["achieved"]), float(v["constraint"])) for name, v in report["fmax"].items()}
    if not clocks:
        raise Ecp5Error("the nextpnr report has no clock: was the design's clock constrained?")
    kernel_clock = min(clocks, key=lambda n: abs(clocks[n][1] - clock_mhz))
    achieved, constraint = clocks[kernel_clock]
    timing: dict[str, Any] = {
        "clock": kernel_clock,
        "constraint_mhz": constraint,
        "achieved_mhz": round(achieved, 2),
        "wns_ns": round(1000.0 / constraint - 1000.0 / achieved, 3),
        "met": all(a >= c for a, c in clocks.values()),
        "fmax_mhz": {name: round(a, 2) for name, (a, _) in clocks.items()},
    }
    paths = [p for p in report.get("critical_paths", []) if p.get("path")]
    worst = next((p for p in paths if p.get("from") == kernel_clock or p.get("to") == kernel_clock), None)
    if worst is not None:
        steps = worst["path"]
        timing["critical_path"] = {"from": steps[0].get("from", {}).get("cell", "?"),
                                   "to": steps[-1].get("to", {}).get("cell", "?"),
                                   "delay_ns": round(sum(float(s.get("delay", 0.0)) for s in steps), 3)}
    return resources, timing
