"""One registry of every kernel's backends.

Each kernel names its backends here, with the class that implements them and what its constructor
takes; `create(kernel, name, *args, **options)` imports the class lazily and builds it, and "auto"
tries AUTO_ORDER (the compiled kernel, else the golden reference; the rtl simulator and boards only
when asked for). A backend whose module or tools are missing raises BackendUnavailable naming what
to install or use instead, and only when it is asked for.

The backends of the shipped kernels are one literal table (`_REGISTRY`), so that a search for a
class finds its entry; `register` adds one at run time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pearl_fpga.errors import BackendUnavailable

AUTO_ORDER = ("cpu", "numpy")

T = TypeVar("T")


@dataclass(frozen=True)
class BackendEntry:
    """Where a backend's class lives and how to build it."""

    target: str  # "module:Class"
    missing: str  # the fix to name when the module cannot be imported
    takes_options: bool = False  # whether keyword options (cycle limits, board handles) are accepted
    fixed: dict[str, Any] = field(default_factory=dict)  # keyword arguments always passed (e.g. transport)


_SIM = "install the sim extra (pip install -e '.[sim]') or use backend='cpu'"
_NATIVE = "rebuild the package (make native, or pip install .) or use backend='numpy'"
_BOARD = "it runs on a board with the kernel's bitstream (docs/hardware.md); use backend='cpu' here"
_PACKAGED = "it is part of the package"


def _boards(target: str) -> dict[str, BackendEntry]:
    """The pynq, xrt and serial (a UART board: the ULX3S) backends of a kernel: its board backend on the
    transport of that name."""
    return {board: BackendEntry(target, _BOARD, takes_options=True, fixed={"transport": board})
            for board in ("pynq", "xrt", "serial")}


# kernel -> backend name -> where its class lives (the rtl backends: the board drivers over Verilator)
_REGISTRY: dict[str, dict[str, BackendEntry]] = {
    "replay": {
        "numpy": BackendEntry("pearl_fpga.backends.replay_numpy:ReplayNumpyBackend", _PACKAGED),
        "cpu": BackendEntry("pearl_fpga.backends.replay_cpu:ReplayCPUBackend", _NATIVE),
        "rtl": BackendEntry("pearl_fpga.board.replay_driver:ReplayRTLBackend", _SIM, takes_options=True),
        **_boards("pearl_fpga.board.replay_driver:ReplayBoardBackend"),
    },
    "mlp": {
        "numpy": BackendEntry("pearl_fpga.backends.mlp_numpy:NumpyMLPBackend", _PACKAGED),
        "cpu": BackendEntry("pearl_fpga.backends.mlp_cpu:CpuMLPBackend", _NATIVE, takes_options=True),
        "rtl": BackendEntry("pearl_fpga.board.mlp_driver:MLPRTLBackend", _SIM, takes_options=True),
        **_boards("pearl_fpga.board.mlp_driver:MLPBoardBackend"),
    },
    "tabular": {
        "numpy": BackendEntry("pearl_fpga.backends.tabular_numpy:TabularNumpyBackend", _PACKAGED),
        "cpu": BackendEntry("pearl_fpga.backends.tabular_cpu:TabularCPUBackend", _NATIVE),
        "rtl": BackendEntry("pearl_fpga.board.tabular_driver:TabularRTLBackend", _SIM, takes_options=True),
        **_boards("pearl_fpga.board.tabular_driver:TabularBoardBackend"),
    },
}


def register(kernel: str, name: str, target: str, missing: str, takes_options: bool = False,
             **fixed: Any) -> None:
    """Add (or replace) backend `name` of `kernel`."""
    _REGISTRY.setdefault(kernel, {})[name] = BackendEntry(target, missing, takes_options, dict(fixed))


def names(kernel: str) -> tuple[str, ...]:
    """The backend names `kernel` accepts, "auto" included."""
    return (*_REGISTRY[kernel], "auto")


def create(kernel: str, name: str, *args: Any, **options: Any) -> tuple[str, Any]:
    """(resolved name, instance) of backend `name` of `kernel`, built with `args` and `options`."""
    known = _REGISTRY.get(kernel)
    if known is None:
        raise ValueError(f"unknown kernel {kernel!r}; kernels with backends: {', '.join(sorted(_REGISTRY))}")
    if name == "auto":
        reasons = []
        for candidate in AUTO_ORDER:
            if candidate in known:
                try:
                    return create(kernel, candidate, *args, **options)
                except BackendUnavailable as exc:
                    reasons.append(f"{candidate}: {exc}")
        raise BackendUnavailable(f"no {kernel} backend for 'auto' here ({'; '.join(reasons)})")
    entry = known.get(name)
    if entry is None:
        raise ValueError(f"unknown {kernel} backend {name!r}; choose one of {', '.join(names(kernel))}")
    if options and not entry.takes_options:
        raise TypeError(f"backend {name!r} takes no options (got {sorted(options)}); they are for the "
                        f"{', '.join(n for n, e in known.items() if e.takes_options)} backends")
    module_name, _, cls_name = entry.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        parents = {module_name.rsplit(".", n)[0] for n in range(module_name.count(".") + 1)}
        if isinstance(exc, ModuleNotFoundError) and missing is not None and missing not in parents \
                and not missing.startswith("pearl_fpga"):
            raise BackendUnavailable(f"the {name} backend of the {kernel} kernel needs the module {missing!r}, "
                                     f"which is not installed: {entry.missing}") from exc
        raise BackendUnavailable(f"the {name} backend of the {kernel} kernel cannot be imported "
                                 f"({module_name}: {exc}): {entry.missing}") from exc
    return name, getattr(module, cls_name)(*args, **entry.fixed, **options)


def first_available(make: Callable[[str], T], backends: tuple[str, ...], what: str) -> T:
    """make(backend) for the first of `backends` that is available (a placement's list, e.g. the boards
    in turn); BackendUnavailable listing why none is."""
    reasons = []
    for backend in backends:
        try:
            return make(backend)
        except BackendUnavailable as exc:
            reasons.append(f"{backend}: {exc}")
    raise BackendUnavailable(f"{what}: no backend available ({'; '.join(reasons)}); "
                             "use placement fpga-emu or cpu-kernel on a machine without a board")
