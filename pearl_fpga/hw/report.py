"""The implementation records (docs/figures/implement-<kernel>.json) as docs/hardware.md's table.

docs/render.py calls `implementation_section` and writes its text between the markers below;
nothing here measures anything.
"""

from __future__ import annotations

from typing import Any

START, END = "<!-- implementation:start -->", "<!-- implementation:end -->"
ORDER = ("replay", "mlp", "tabular")


def _digest(kernel: str) -> str | None:
    from pearl_fpga.hw.cores import CoreError, rtl_digest

    try:
        return rtl_digest(kernel)
    except CoreError:
        return None


def _sizes(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in params.items())


def _use(util: dict[str, Any], key: str) -> str:
    u = util[key]
    share = 100.0 * u["used"] / u["available"] if u["available"] else 0.0
    return f"{u['used']:,} / {u['available']:,} ({share:.0f}%)"


def implementation_section(records: dict[str, dict[str, Any]]) -> str:
    """The table of every implement record, then each one's command, machine, tools and critical path."""
    found = [r for r in records.values() if r.get("benchmark") == "implement"]
    if not found:
        return "No implementation record yet: run `make implement` (writes docs/figures/implement-<kernel>.json)."
    found.sort(key=lambda r: (ORDER.index(r["results"]["kernel"]) if r["results"]["kernel"] in ORDER else 99,
                              r["results"]["kernel"]))
    head = ("| kernel | sizes | part | clock | Fmax | timing | LUT4 (TRELLIS_COMB) | FF | block RAM (DP16KD) "
            "| DSP (MULT18X18D) | synthesis | place and route |")
    lines = [head, "| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    notes = []
    for record in found:
        r = record["results"]
        t, util = r["timing"], r["utilization"]
        if not t.get("routed", True):  # placement only: nextpnr's estimate, not a timing result
            verdict = "**not routed** (post-placement estimate)"
        elif t["met"]:
            verdict = f"met ({t['slack_ns']:+.2f} ns)"
        else:
            verdict = f"**missed** by {t['target_mhz'] - t['fmax_mhz']:.1f} MHz"
        if r.get("rtl_sha256") != _digest(r["kernel"]):
            verdict += " (of other RTL than the tree's: rerun)"
        lines.append(f"| {r['kernel']} | {_sizes(r['parameters'])} | {r['part']} | {t['target_mhz']:g} MHz "
                     f"| {t['fmax_mhz']:.1f} MHz{'' if t.get('routed', True) else ' (estimate)'} | {verdict} | {_use(util, 'lut')} | {_use(util, 'ff')} "
                     f"| {_use(util, 'bram')} | {_use(util, 'dsp')} | {r['seconds']['synthesis']:.0f} s "
                     f"| {r['seconds']['place_and_route']:.0f} s |")
        path = t.get("critical_path")
        crit = (f"critical path `{path['start']}` -> `{path['end']}`, {path['delay_ns']:.2f} ns "
                f"({path['logic_ns']:.2f} ns in cells)" if path else "no critical path reported")
        load = f"load average {record['load_average_before'][0]:.1f} before, {record['load_average_after'][0]:.1f} after"
        notes.append(f"- **{r['kernel']}**: `{record['command']}` · commit `{record['commit']}` · {record['date']} · "
                     f"{load} (times are wall times on a shared machine). {r['tools']['yosys']}; "
                     f"{r['tools']['nextpnr-ecp5']}. Sizes from {r.get('sizes_from', 'the command line')}; "
                     f"out of context, clock {r.get('clock_network', 'ideal').split(':')[0]}, "
                     f"{r.get('router', 'router1')}, seed {r['seed']}; {crit}.")
    return "\n".join(lines) + "\n\n" + "\n".join(notes)
