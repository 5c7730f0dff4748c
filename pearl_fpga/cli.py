"""The `pearl-fpga` command line. Each command lives in pearl_fpga/commands/<name>.py; the benchmarks
behind `pearl-fpga bench` in pearl_fpga/bench/<name>.py."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
import threading
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


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def load_torch_with_signals_held() -> None:
    """Import torch, where it is installed, with SIGINT and SIGTERM held until it has loaded. torch's
    import runs pybind11 code that aborts the process ("terminate called after throwing an instance of
    'pybind11::error_already_set'", SIGABRT) when a KeyboardInterrupt is raised inside it. Meanwhile a
    handler only notes the signal (masking it would not do: numpy's BLAS threads would take it), and once
    torch has loaded the signal is raised again for the command's own handler. A board install has no
    torch, and a broken torch is left for the command that needs it to report."""
    if "torch" in sys.modules or threading.current_thread() is not threading.main_thread():
        return  # loaded already, or a caller's thread, which may not set signal handlers
    try:
        if importlib.util.find_spec("torch") is None:
            return
    except ImportError:  # a finder that refuses torch outright (an install that must not have it)
        return
    noted: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum)) for sig in HELD_SIGNALS}
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    if noted:
        signal.raise_signal(noted[0])


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
        load_torch_with_signals_held()
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
