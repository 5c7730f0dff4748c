"""`pearl-fpga export RUN`: the policy of a trained run as files a board loads without torch (the quantized
kernel policy, kernel/), the float ONNX and the quantized QONNX (pearl_fpga.export)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = ("write a trained run's policy for deployment: the torch-free quantized policy that MLPInfer.load reads on a "
        "board (kernel/), the float ONNX and the quantized QONNX")


def configure(parser: argparse.ArgumentParser) -> None:
    from pearl_fpga.export.policy import KINDS

    parser.add_argument("run", type=Path, metavar="RUN_OR_CHECKPOINT",
                        help="a run's log directory (its checkpoint/) or a checkpoint directory")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: RUN/export)")
    parser.add_argument("--formats", nargs="+", choices=KINDS, default=None, metavar="KIND",
                        help=f"what to write, among {', '.join(KINDS)} (default: all; onnx and qonnx need the export "
                             "extra: pip install 'pearl_fpga[export]')")
    parser.add_argument("--policy", choices=("best", "last"), default="best",
                        help="best: what `pearl-fpga eval` scores (the best kept by periodic evaluation, else the "
                             "last); last: the final weights (default best)")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from pearl_fpga.commands.common import report_error
    from pearl_fpga.errors import PearlError
    from pearl_fpga.export.policy import KINDS, export_run

    console = Console(stderr=args.json)
    out = args.out if args.out is not None else args.run / "export"
    try:
        result = export_run(args.run, out, tuple(args.formats or KINDS), args.policy)
    except (PearlError, ValueError) as exc:
        return report_error(console, exc)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0
    info = result.info
    console.print(escape(f"{info['algo'].upper()} on {info['env_id']}: the {info['policy']} policy (env step "
                         f"{info['policy_step']:,}), max error of the kernel against float {info['max_error']:.3g}"))
    for kind, path in result.files.items():
        console.print(escape(f"  {kind:8s} {path}"))
    console.print(escape(f"on the board: MLPInfer.load('{result.files.get('kernel', out / 'kernel')}', "
                         "backend='pynq').act(obs)  (docs/hardware.md)"))
    return 0
