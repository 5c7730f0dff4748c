"""What an ECP5 board needs beyond the common catalog fields, and what the open flow reports about it.

- `Ecp5Spec`: the catalog's "ecp5" entry of a board of kind "ecp5" (the ULX3S): the oscillator, the
  UART's line rate, the board top and its LPF, the pins (nextpnr's device, package and speed grade come
  from the board's part name: pearl_fpga.hw.ecp5.parse_part).
- `pll_config`: the EHXPLLL dividers that make the kernel clock from the oscillator (the limits of
  Lattice FPGA-TN-02200, "ECP5 and ECP5-5G sysCLOCK PLL/DLL Design and User Guide": PFD 3.125 .. 400
  MHz, VCO 400 .. 800 MHz; Project Trellis's ecppll searches the same space).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.data import data_path
from pearl_fpga.errors import PearlError

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
        raise Ecp5Error(f"{where}: a board of kind 'ecp5' needs an 'ecp5' object (oscillator_mhz, baud, top, "
                        "constraints, pins)")
    missing = [k for k in ("oscillator_mhz", "baud", "top", "constraints", "pins") if k not in entry]
    if missing:
        raise Ecp5Error(f"{where}: missing field(s) {missing}")
    osc, baud = entry["oscillator_mhz"], entry["baud"]
    if isinstance(osc, bool) or not isinstance(osc, (int, float)) or not math.isfinite(osc) or osc <= 0:
        raise Ecp5Error(f"{where}.oscillator_mhz must be a positive number, got {osc!r}")
    if isinstance(baud, bool) or not isinstance(baud, int) or not 9600 <= baud <= MAX_FTDI_BAUD:
        raise Ecp5Error(f"{where}.baud must be an integer in [9600, {MAX_FTDI_BAUD}] (the FT231X's range), got {baud!r}")
    if link_bandwidth_gbps * 1e9 > baud / 10:
        raise Ecp5Error(f"{where}: link.bandwidth_gbps {link_bandwidth_gbps:g} is more than the line carries "
                        f"({baud} baud, 10 bits a byte: {baud / 10 / 1e9:g} GB/s)")
    if clock_mhz * 1e6 < 8 * baud:
        raise Ecp5Error(f"{where}: clock_mhz {clock_mhz:g} is under 8 clocks a bit at {baud} baud")
    for key in ("top", "constraints"):
        if not isinstance(entry[key], str) or not entry[key]:
            raise Ecp5Error(f"{where}.{key} must be a non-empty string, got {entry[key]!r}")
    pins = entry["pins"]
    if not isinstance(pins, dict) or set(pins) != set(PIN_ROLES):
        raise Ecp5Error(f"{where}.pins must name the sites of {list(PIN_ROLES)}, got {pins!r}")
    for role, site in pins.items():
        sites = site if role == "led" else [site]
        if not isinstance(sites, list) or not sites or not all(isinstance(s, str) and s for s in sites):
            raise Ecp5Error(f"{where}.pins.{role} must be a site name{' list' if role == 'led' else ''}, got {site!r}")
    spec = Ecp5Spec(float(osc), baud, entry["top"], entry["constraints"], dict(pins))
    try:
        spec.pll(clock_mhz)
    except Ecp5Error as exc:
        raise Ecp5Error(f"{where}: {exc}") from None
    return spec
