"""Each kernel's RTL as its FuseSoC CAPI2 core file says: files, top module, parameters.

The core files (hls/common/common.core, hls/<kernel>/<kernel>.core) are the one list of a kernel's RTL
sources: `fusesoc run --target lint|impl` reads them, and so do `make implement` and the netlist
simulation here. They are YAML data (read with yaml.safe_load, never executed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path
from typing import Any

from pearl_fpga.errors import PearlError

HLS_DIR = Path(__file__).resolve().parents[2] / "hls"
# kernel -> RTL parameter -> the catalog's kernel size it takes (bitstreams/catalog.json "kernels")
CATALOG_SIZES: dict[str, dict[str, str]] = {
    "replay": {"CAPACITY": "capacity", "FANOUT": "fanout"},
    "mlp": {"LANES": "lanes", "MAX_WIDTH": "max_width", "MAX_LAYERS": "max_layers"},
    "tabular": {"N_STATES": "states", "N_ACTIONS": "actions"},
}


class CoreError(PearlError):
    """A CAPI2 core file is missing or does not describe a kernel the flow can run."""


@dataclasses.dataclass(frozen=True)
class Core:
    name: str                  # the VLNV, e.g. pearl_fpga:kernels:replay:0.1.0
    top: str                   # the default target's toplevel
    files: tuple[Path, ...]    # every RTL file, dependencies first, in the core's order
    parameters: tuple[str, ...]


def _load(path: Path) -> dict[str, Any]:
    import yaml  # PyYAML: installed with fusesoc (the synth extra)

    text = path.read_text()
    if not text.startswith("CAPI=2:"):
        raise CoreError(f"{path}: not a CAPI2 core file (its first line must be 'CAPI=2:')")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "name" not in data:
        raise CoreError(f"{path}: a CAPI2 core needs a 'name'")
    return data


def _unversioned(name: str) -> str:
    """pearl_fpga:kernels:replay:0.1.0 -> pearl_fpga:kernels:replay (a VLNV without its version)."""
    return name.rsplit(":", 1)[0] if name.count(":") == 3 else name


def _core_files() -> dict[str, Path]:
    """Every core under hls/ by its unversioned name."""
    return {_unversioned(str(_load(path)["name"])): path for path in sorted(HLS_DIR.glob("*/*.core"))}


def core_path(kernel: str) -> Path:
    path = HLS_DIR / kernel / f"{kernel}.core"
    if not path.is_file():
        raise CoreError(f"{kernel}: no FuseSoC core file {path.relative_to(HLS_DIR.parent)}; "
                        "write one (docs/hardware.md, 'Adding a kernel to the flow')")
    return path


def read_core(kernel: str) -> Core:
    """The kernel's core: its files (those of its dependencies first), top and parameters."""
    path = core_path(kernel)
    data = _load(path)
    known = _core_files()
    files: list[Path] = []

    def add_filesets(core_file: Path, core: dict[str, Any], seen: set[str]) -> None:
        target = (core.get("targets") or {}).get("default") or {}
        for fs_name in target.get("filesets", []):
            fileset = core["filesets"][fs_name]
            for dep in fileset.get("depend", []):
                dep_name = _unversioned(str(dep).lstrip("^~<>=").split(" ")[0])
                if dep_name in seen:
                    continue
                if dep_name not in known:
                    raise CoreError(f"{core_file}: depends on {dep}, which no core under hls/ provides")
                seen.add(dep_name)
                add_filesets(known[dep_name], _load(known[dep_name]), seen)
            for entry in fileset.get("files", []):
                name = entry if isinstance(entry, str) else next(iter(entry))
                full = (core_file.parent / str(name)).resolve()
                if not full.is_file():
                    raise CoreError(f"{core_file}: lists {name}, which does not exist")
                if full not in files:
                    files.append(full)

    add_filesets(path, data, {_unversioned(str(data["name"]))})
    default = (data.get("targets") or {}).get("default") or {}
    if "toplevel" not in default:
        raise CoreError(f"{path}: the default target names no toplevel")
    params = tuple(str(p).split("=")[0] for p in default.get("parameters", []))
    return Core(name=str(data["name"]), top=str(default["toplevel"]), files=tuple(files), parameters=params)


def stage(kernel: str, workdir: Path) -> tuple[Core, list[str], dict[str, str]]:
    """Copy the kernel's RTL into `workdir` with the files it reads at elaboration; return its core,
    the staged file names and the string parameters that name those files."""
    core = read_core(kernel)
    workdir.mkdir(parents=True, exist_ok=True)
    for src in core.files:
        shutil.copyfile(src, workdir / src.name)
    strings: dict[str, str] = {}
    if "TANH_MEMH" in core.parameters:  # the MLP's tanh table (generated, never committed)
        from pearl_fpga.sim.verilator import write_tanh_memh

        strings["TANH_MEMH"] = write_tanh_memh(workdir).name
    return core, [src.name for src in core.files], strings


def rtl_digest(kernel: str) -> str:
    """SHA-256 over the kernel's RTL files (names and contents, in the core's order): a record made
    from other sources than the tree's says so (pearl_fpga/hw/report.py)."""
    digest = hashlib.sha256()
    for src in read_core(kernel).files:
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    return digest.hexdigest()
