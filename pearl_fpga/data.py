"""Files the package needs at run time that live outside its Python tree in a checkout: the kernels'
sources under hls/ (the rtl backends build the reference RTL) and the board catalog
(bitstreams/catalog.json).

A non-editable install carries copies in pearl_fpga/_data/, which setup.py makes at build time; an
editable checkout uses the files in place. Every module finds them through `data_path`, so both work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_PACKAGED = Path(__file__).resolve().parent / "_data"
_CHECKOUT = Path(__file__).resolve().parents[1]
SHIPPED = ("hls", "bitstreams/catalog.json", "bitstreams/README.md")
"""What setup.py copies into pearl_fpga/_data (relative to the checkout)."""


def data_root() -> Path:
    """pearl_fpga/_data in an installed package, else the checkout."""
    return _PACKAGED if _PACKAGED.is_dir() else _CHECKOUT


def data_path(*parts: str) -> Path:
    """A shipped file or folder, e.g. data_path("hls", "replay", "rtl")."""
    return data_root().joinpath(*parts)


def checkout_root() -> Path | None:
    """The source checkout this package runs from (git revision, build outputs, reports), or None
    for an installed package."""
    return _CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "hls").is_dir() else None


def work_root() -> Path:
    """Where build outputs and reports go: the checkout, else the current directory."""
    return checkout_root() or Path.cwd()


def cache_root() -> Path:
    """Where pearl_fpga keeps what it can rebuild (built RTL libraries in rtl/, planner profiles in
    profiles/): $PEARL_FPGA_CACHE, else $XDG_CACHE_HOME/pearl_fpga, else ~/.cache/pearl_fpga."""
    base = os.environ.get("PEARL_FPGA_CACHE")
    if base:
        return Path(base)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pearl_fpga"


def load_json(path: Path, error: type[Exception], what: str, missing_fix: str = "", invalid_fix: str = "") -> Any:
    """The parsed JSON of a shipped file (the catalog, a kernel descriptor); `error` naming `what`, the
    path and the fix when the file is missing or not JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{what} {path} not found{missing_fix}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{what} {path} is not valid JSON ({exc}){invalid_fix}") from None


def read_probe_cache(path: Path) -> dict[str, Any]:
    """The entries of a JSON file of cached probe results ({} when it is missing or unreadable)."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def write_probe_cache(path: Path, entries: dict[str, Any]) -> None:
    """Replace the file at once (readers never see half of it); a read-only cache costs a probe per run,
    nothing else."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(entries, indent=1))
        tmp.replace(path)
    except OSError:
        pass
