"""`pearl-fpga devices`: what the dispatcher can place tasks on here, and why a kind is absent."""

from __future__ import annotations

import argparse
import json

HELP = "list the CPU, CUDA GPUs, FPGA boards and emulated (fpga-emu) boards, with the reason for any absent kind"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--board", help="list only this catalog board as fpga-emu (default: every catalog board)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from pearl_fpga.planner.devices import discover
    from pearl_fpga.planner.power import _rapl_files

    found = discover(args.board)
    rapl = bool(_rapl_files())
    if args.json:
        print(json.dumps({"devices": [d.as_dict() for d in found], "cpu_power": "measured (RAPL)" if rapl else "nominal"},
                         indent=2))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Devices", title_justify="left")
    for col in ("device", "kind", "status", "detail / reason"):
        table.add_column(col)
    for d in found:
        status = "[green]available[/green]" if d.available else "[yellow]absent[/yellow]"
        table.add_row(d.name, d.kind, status, escape(d.detail if d.available else d.reason))
    console = Console()
    console.print(table)
    console.print(f"CPU power: {'RAPL is readable (measured)' if rapl else 'no readable RAPL: nominal figures'}; "
                  "fpga-emu times are modelled from cycle counts and the board catalog.", markup=False)
    return 0
