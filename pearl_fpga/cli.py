"""The `pearl-fpga` command line. Each (sub)command lives in pearl_fpga/commands/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# command -> module in pearl_fpga.commands; "bench" has its own sub-commands.
COMMANDS = {"train": "train", "eval": "eval", "plan": "plan", "devices": "devices"}
GONE = {"train-tabular": "pearl-fpga train --algo qlearning|sarsa (the same options as every algorithm's; see "
                         "docs/tabular.md)"}
"""Commands that were removed -> what to type instead."""
BENCHES = {"replay": "bench_replay", "mlp": "bench_mlp", "train": "bench_train", "plan": "bench_plan",
           "learner": "bench_learner", "tabular": "bench_tabular", "tabular-policies": "bench_tabular_policies",
           "ray": "bench_ray"}


def _add(sub: argparse._SubParsersAction, name: str, module_name: str) -> None:
    module = importlib.import_module(f"pearl_fpga.commands.{module_name}")
    parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
    module.configure(parser)
    parser.set_defaults(handler=module.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pearl-fpga", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        _add(sub, name, module_name)
    bench = sub.add_parser("bench", help="benchmarks: figures side by side with the baselines, in one run")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, module_name in BENCHES.items():
        _add(bench_sub, name, module_name)
    return parser


def _version() -> str:
    from pearl_fpga import __version__

    return __version__


def blocking_std_streams() -> None:
    """Make stdout and stderr blocking. Another process sharing our terminal or pipe may have set
    O_NONBLOCK on it (the flag belongs to the shared file description); then a write that finds the
    reader behind fails with BlockingIOError (EAGAIN) in the middle of a progress bar."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            if not os.get_blocking(fd):
                os.set_blocking(fd, True)
        except (AttributeError, OSError, ValueError):
            continue  # a replaced or captured stream without a file descriptor


def main(argv: list[str] | None = None) -> int:
    blocking_std_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in GONE:
        print(f"error: pearl-fpga {argv[0]} was removed; use {GONE[argv[0]]}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    args.argv = argv  # for the records benchmarks write
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
