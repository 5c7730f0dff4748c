"""The `pearl-fpga` command line. Each command lives in pearl_fpga/commands/<name>.py, each benchmark in
pearl_fpga/bench/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# command -> module in pearl_fpga.commands; "bench" has its own sub-commands, in pearl_fpga.bench.
COMMANDS = {"train": "train", "eval": "eval", "plan": "plan", "devices": "devices"}
BENCHES = {"replay": "replay", "mlp": "mlp", "train": "train", "plan": "plan", "learner": "learner",
           "tabular": "tabular", "tabular-policies": "tabular_policies", "ray": "ray"}


def _add(sub: argparse._SubParsersAction, name: str, module_name: str) -> None:
    module = importlib.import_module(module_name)
    parser = sub.add_parser(name, help=module.HELP, description=module.HELP)
    module.configure(parser)
    parser.set_defaults(handler=module.run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pearl-fpga", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        _add(sub, name, f"pearl_fpga.commands.{module_name}")
    bench = sub.add_parser("bench", help="benchmarks: figures side by side with the baselines, in one run")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    for name, module_name in BENCHES.items():
        _add(bench_sub, name, f"pearl_fpga.bench.{module_name}")
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
    args = build_parser().parse_args(argv)
    args.argv = argv  # for the records benchmarks write
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
