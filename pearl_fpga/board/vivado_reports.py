"""Vivado text reports parsed into a manifest's summaries: used resources (report_utilization) and
design timing (report_timing_summary)."""

from __future__ import annotations

import math
import re
from typing import Any

from pearl_fpga.errors import ManifestError

# Row labels of report_utilization, 7-series and UltraScale(+) spellings, per resource.
_UTIL_ROWS: dict[str, tuple[str, ...]] = {
    "lut": ("Slice LUTs", "CLB LUTs"),
    "ff": ("Slice Registers", "CLB Registers"),
    "bram36": ("Block RAM Tile",),
    "uram": ("URAM",),
    "dsp": ("DSPs",),
}


def parse_utilization(text: str) -> dict[str, int]:
    """Used resources from a Vivado `report_utilization` text report (first matching row wins).

    Block RAM is reported in 36 Kb tiles and may be fractional (x.5 for a lone 18 Kb half): rounded up.
    """
    used: dict[str, int] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        label = re.sub(r"\*+$", "", cells[0]).strip()
        for key, labels in _UTIL_ROWS.items():
            if key not in used and label in labels:
                try:
                    used[key] = math.ceil(float(cells[1]))
                except ValueError:
                    continue
    return used


def parse_timing_summary(text: str, clock_mhz: float | None = None) -> dict[str, Any]:
    """WNS/TNS from a Vivado `report_timing_summary` report; `met` and achievable clock when known."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "WNS(ns)" in line and "TNS(ns)" in line:
            for row in lines[i + 1 : i + 4]:
                nums = row.split()
                if nums and not set(row.strip()) <= set("- "):
                    try:
                        wns, tns = float(nums[0]), float(nums[1])
                    except (ValueError, IndexError):
                        break
                    out: dict[str, Any] = {"wns_ns": wns, "tns_ns": tns, "met": wns >= 0}
                    if clock_mhz:
                        period = 1000.0 / clock_mhz
                        out["achieved_mhz"] = round(1000.0 / (period - wns), 1) if period - wns > 0 else None
                    return out
            break
    raise ManifestError("no 'WNS(ns) TNS(ns)' design timing summary found in the timing report")
