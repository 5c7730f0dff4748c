"""The `pearl-fpga` command line. Each command lives in pearl_fpga/commands/<name>.py; the benchmarks
behind `pearl-fpga bench` in pearl_fpga/bench/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Any

# command -> module in pearl_fpga.commands ("bench" parses the options of the benchmarks in pearl_fpga.bench)
COMMANDS = {"train": "train", "eval": "eval", "export": "export", "plan": "plan", "devices": "devices",
            "bench": "bench"}
GONE = {"train-tabular": "pearl-fpga train --algo qlearning|sarsa (the same options as every algorithm's; see "
                         "docs/tabular.md)"}
"""Commands that were removed -> what to type instead."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pearl-fpga", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"pearl_fpga.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(command)
        command.set_defaults(handler=module.run)
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


def _terminate_as_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM before a command installs its own handler (start-up) ends it like Ctrl-C."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    args = None
    try:  # an interrupt while the commands' modules load ends with the same line
        blocking_std_streams()
        argv = list(sys.argv[1:] if argv is None else argv)
        if argv and argv[0] in GONE:
            print(f"error: pearl-fpga {argv[0]} was removed; use {GONE[argv[0]]}", file=sys.stderr)
            return 2
        args = build_parser().parse_args(argv)
        args.argv = argv  # for the records benchmarks write
        return int(args.handler(args) or 0)
    except ImportError as exc:
        from pearl_fpga.errors import MissingDependency, missing_dependency

        command = f"pearl-fpga {getattr(args, 'command', '')}".rstrip()
        missing = exc if isinstance(exc, MissingDependency) else missing_dependency(exc, command)
        if missing is None:
            raise
        print(f"error: {missing}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        name = str(exc) or "SIGINT"
        note = getattr(args, "interrupt_note", None)  # a command that saves says what it saved, and where
        print(f"interrupted ({name}): {note() if note else 'nothing was saved'}", file=sys.stderr)
        return 128 + int(getattr(signal, name, signal.SIGINT))


if __name__ == "__main__":
    sys.exit(main())
