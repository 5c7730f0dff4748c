"""Power figures of each device: measured where a sensor is readable, else nominal, always labelled.

- CPU: RAPL package energy (/sys/class/powercap/intel-rapl*/energy_uj, also on AMD) sampled over a
  short window gives the idle draw; the active draw is then idle + a nominal per-core figure.
  Without RAPL both are nominal (NOMINAL_CPU_* below, or --cpu-watts IDLE,ACTIVE).
- CUDA: NVML (pynvml) current draw as idle and the enforced power limit as active, else nominal.
- FPGA: the board's PMBus rails through pynq where readable, else the catalog's nominal figures.
"""

from __future__ import annotations

import glob
import time
from dataclasses import dataclass
from pathlib import Path

# Nominal CPU figures when nothing is readable: a server core draws about 10 W under load and the
# package about 2 W per core idle (typical of current x86 server parts' TDP / core count).
NOMINAL_CPU_IDLE_W_PER_CORE = 2.0
NOMINAL_CPU_ACTIVE_W_PER_CORE = 10.0
NOMINAL_GPU_IDLE_W = 30.0
NOMINAL_GPU_ACTIVE_W = 250.0


@dataclass(frozen=True)
class PowerFigure:
    """Idle and fully-busy watts of one device and where they come from."""

    idle_w: float
    active_w: float
    source: str  # "measured" or "nominal"
    how: str  # e.g. "RAPL package, 0.2 s window" or "catalog pynq-z2"


def _rapl_files() -> list[Path]:
    return [Path(p) for p in sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]*/energy_uj"))]


def rapl_watts(window_s: float = 0.2) -> float | None:
    """Average package power over `window_s`, or None when RAPL is absent or unreadable."""
    files = _rapl_files()
    if not files:
        return None
    try:
        e0 = [int(f.read_text()) for f in files]
        t0 = time.perf_counter()
        time.sleep(window_s)
        e1 = [int(f.read_text()) for f in files]
        dt = time.perf_counter() - t0
    except (OSError, ValueError):
        return None
    joules = sum((b - a) for a, b in zip(e0, e1) if b >= a) * 1e-6  # a wrapped counter drops out
    return joules / dt if dt > 0 else None


def cpu_power(cores: int, override: tuple[float, float] | None = None) -> PowerFigure:
    """The CPU's figure: user override, RAPL-measured idle, or nominal."""
    if override is not None:
        return PowerFigure(override[0], override[1], "nominal", "given with --cpu-watts")
    idle = rapl_watts()
    if idle is not None:
        return PowerFigure(idle, idle + cores * (NOMINAL_CPU_ACTIVE_W_PER_CORE - NOMINAL_CPU_IDLE_W_PER_CORE),
                           "measured", "RAPL package idle + nominal per-core load")
    return PowerFigure(cores * NOMINAL_CPU_IDLE_W_PER_CORE, cores * NOMINAL_CPU_ACTIVE_W_PER_CORE, "nominal",
                       f"no readable RAPL: {NOMINAL_CPU_IDLE_W_PER_CORE:g}/{NOMINAL_CPU_ACTIVE_W_PER_CORE:g} W per core")


def gpu_power(index: int = 0) -> PowerFigure:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        now = pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0
        limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
        return PowerFigure(now, max(limit, now), "measured", "NVML draw now (idle) and enforced limit (active)")
    except Exception:  # noqa: BLE001 - pynvml missing, no driver, or no such GPU
        return PowerFigure(NOMINAL_GPU_IDLE_W, NOMINAL_GPU_ACTIVE_W, "nominal", "no NVML: nominal GPU figures")


def board_power(board: object, on_board: bool = False) -> PowerFigure:
    """An FPGA board's figure: PMBus rails via pynq on a real board, else the catalog's nominal one."""
    if on_board:
        try:
            import pynq

            rails = pynq.get_rails()
            watts = sum(r.power.value for r in rails.values() if getattr(r, "power", None) is not None)
            if watts > 0:
                active = max(watts, getattr(board, "power_active_w"))
                return PowerFigure(watts, active, "measured", "pynq PMBus rails (idle now); active from catalog")
        except Exception:  # noqa: BLE001 - no PMBus on this board/image
            pass
    return PowerFigure(getattr(board, "power_idle_w"), getattr(board, "power_active_w"), getattr(board, "power_source"),
                       f"catalog {getattr(board, 'name')}")
