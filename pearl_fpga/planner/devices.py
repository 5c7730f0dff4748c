"""Device discovery: the CPU, CUDA GPUs (torch), FPGA boards (pynq on Zynq, pyxrt on Alveo) and
"fpga-emu" (a catalog board whose kernels are emulated by the C++ build and timed by cycle models).

Vendor packages are imported lazily: a kind that is absent is listed with the reason.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DeviceInfo:
    """One device (or an absent kind of device, with `available` False and the reason)."""

    name: str  # "cpu", "cuda:0", "fpga:0", "fpga-emu:pynq-z2"; the kind alone when absent
    kind: str  # cpu | cuda | fpga | fpga-emu
    available: bool
    detail: str  # model, cores, board, ...
    reason: str = ""  # why it is absent

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_cores() -> int:
    """Cores this process may run on (the affinity mask, not the host's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def discover_cpu() -> DeviceInfo:
    return DeviceInfo("cpu", "cpu", True, f"{cpu_model()}, {cpu_cores()} cores")


def discover_cuda() -> list[DeviceInfo]:
    try:
        import torch
    except ImportError:
        return [DeviceInfo("cuda", "cuda", False, "", "torch is not installed")]
    if not torch.cuda.is_available():
        why = ("this torch build has no CUDA (a CPU wheel)" if torch.version.cuda is None
               else "torch has CUDA but sees no GPU (driver missing or CUDA_VISIBLE_DEVICES empty)")
        return [DeviceInfo("cuda", "cuda", False, "", f"{why}; torch {torch.__version__}")]
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(DeviceInfo(f"cuda:{i}", "cuda", True, f"{p.name}, {p.total_memory / 2**30:.1f} GiB"))
    return out


def discover_zynq() -> list[DeviceInfo]:
    """PYNQ boards: the pynq package runs on the board itself."""
    if importlib.util.find_spec("pynq") is None:
        return [DeviceInfo("fpga", "fpga", False, "", "Zynq: the pynq package is not installed (it runs on the "
                           "board's own image; pip install 'pearl_fpga[pynq]' there)")]
    try:
        import pynq

        devices = list(pynq.Device.devices)
    except Exception as exc:  # noqa: BLE001 - pynq raises many kinds when no board is present
        return [DeviceInfo("fpga", "fpga", False, "", f"Zynq: pynq is installed but finds no device ({exc})")]
    if not devices:
        return [DeviceInfo("fpga", "fpga", False, "", "Zynq: pynq is installed but lists no device")]
    return [DeviceInfo(f"fpga:{i}", "fpga", True, f"pynq {getattr(d, 'name', type(d).__name__)}") for i, d in enumerate(devices)]


def discover_alveo() -> list[DeviceInfo]:
    """Alveo cards through XRT's Python binding."""
    if importlib.util.find_spec("pyxrt") is None:
        return [DeviceInfo("fpga", "fpga", False, "", "Alveo: pyxrt is not importable (install XRT and source "
                           "/opt/xilinx/xrt/setup.sh)")]
    import pyxrt

    out = []
    for i in range(16):
        try:
            dev = pyxrt.device(i)
        except Exception:  # noqa: BLE001 - pyxrt raises RuntimeError past the last card
            break
        try:
            name = dev.get_info(pyxrt.xrt_info_device.name)
        except Exception:  # noqa: BLE001
            name = "Alveo card"
        out.append(DeviceInfo(f"fpga:{i}", "fpga", True, f"xrt {name}"))
    return out or [DeviceInfo("fpga", "fpga", False, "", "Alveo: pyxrt is installed but finds no card")]


def discover_fpga_emu(board: str | None = None) -> list[DeviceInfo]:
    """Catalog boards emulated on this machine (needs the C++ build of the kernels)."""
    try:
        from pearl_fpga.board.catalog import load_catalog

        boards = load_catalog()
    except Exception as exc:  # noqa: BLE001 - the catalog error message is already user-facing
        return [DeviceInfo("fpga-emu", "fpga-emu", False, "", f"board catalog unusable: {exc}")]
    missing = [k for k in ("replay", "mlp") if importlib.util.find_spec(f"pearl_fpga._{k}_native") is None]
    if missing:
        why = f"C++ build of the {', '.join(missing)} kernel missing (run `make native`)"
        return [DeviceInfo("fpga-emu", "fpga-emu", False, "", why)]
    names = [board] if board else sorted(boards)
    out = []
    for name in names:
        if name not in boards:
            out.append(DeviceInfo(f"fpga-emu:{name}", "fpga-emu", False, "", f"unknown board; the catalog has {', '.join(sorted(boards))}"))
            continue
        b = boards[name]
        out.append(DeviceInfo(f"fpga-emu:{name}", "fpga-emu", True,
                              f"{b.part} at {b.clock_mhz:g} MHz, {b.link_kind} {b.link_bandwidth_gbps:g} GB/s (modelled)"))
    return out


def discover(board: str | None = None) -> list[DeviceInfo]:
    """Everything this machine offers, plus an entry with the reason for each absent kind."""
    fpga = [d for d in discover_zynq() + discover_alveo()]
    found = [d for d in fpga if d.available]
    return [discover_cpu(), *discover_cuda(), *(found or fpga), *discover_fpga_emu(board)]
