"""The planner's tables: which targets exist here (real and modelled devices), the host profile (cached,
or measured now) and the FPGA models turned into one (task, target) -> seconds table, and the
device list a command line names."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any


from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.assign import PlanError
from pearl_fpga.planner.model import OVERHEADS, Device, Fit, Tables
from pearl_fpga.runtime.placement import canonical_target
from pearl_fpga.runtime.vocabulary import ROLE_TASKS, STAGES, TASKS

def capabilities() -> str:
    """Which optional pieces exist here (the compiled kernels, a CUDA device): a profile made without
    them is stale once they exist. The package's own modules and torch are always there."""
    bits = "".join("1" if importlib.util.find_spec(m) is not None
                   else "0" for m in ("pearl_fpga._mlp_native", "pearl_fpga._replay_native", "pearl_fpga._tabular_native"))
    import torch

    return bits + ("c" if torch.cuda.is_available() else "")

# Targets are the runtime's placement tokens (pearl_fpga.runtime.placement): the CPU with torch
# ("cpu") or with the kernels' C++ build ("cpu-kernel"), the CPU's learner in bfloat16 ("cpu-bf16", learn
# only), the GPU, a board, an emulated board.
TARGET_ORDER = ("cpu", "cpu-kernel", "cpu-bf16", "cuda", "fpga", "fpga-emu")
HOST_DEVICE = {"cpu": "cpu", "cpu-kernel": "cpu", "cpu-bf16": "cpu", "cuda": "cuda"}


def parse_devices(spec: str | Sequence[str] | None, board: str | None) -> tuple[list[str], str | None]:
    """--devices "cpu,cpu-kernel,fpga-emu:pynq-z2" -> (targets, board). None: the real devices only."""
    if spec is None:
        return [], board
    items = [canonical_target(s) for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    targets: list[str] = []
    for item in items:
        name, _, arg = item.partition(":")
        if name == "fpga-emu" and arg:
            if board and board != arg:
                raise PlanError(f"--devices names board {arg!r} but --board is {board!r}: give one board")
            board = arg
        elif name == "cuda" and arg and not arg.isdigit():
            raise PlanError(f"device {item!r}: use cuda or cuda:N")
        if name not in TARGET_ORDER:
            raise PlanError(f"unknown device {item!r}: use {', '.join(TARGET_ORDER)} (fpga-emu:<board>, cuda:N)")
        if name not in targets:
            targets.append(name)
    if not targets:
        raise PlanError("--devices is empty: name at least cpu")
    if "cpu" not in targets:
        targets.insert(0, "cpu")  # the envs always step on the CPU
    return targets, board


def build_tables(config: TrainConfig, profile: Any, targets: Sequence[str], board: Any | None, cycles: str = "hls",
                 cpu_watts: tuple[float, float] | None = None, csynth_dirs: Sequence[str] = ()
                 ) -> tuple[Tables, dict[str, str], list[str]]:
    """Tables for the model from a host profile plus the modelled FPGA target of `board` (cycle
    sources: a csynth report when present, see pearl_fpga.planner.csynth, else `cycles`)."""
    from pearl_fpga.planner.devices import cpu_cores
    from pearl_fpga.planner.power import board_power, cpu_power, gpu_power
    from pearl_fpga.planner.fpga_model import fpga_fits
    from pearl_fpga.runtime.envs import env_spec

    fits: dict[tuple[str, str], Fit] = {k: v for k, v in profile.fits.items()
                                        if (k[0] in TASKS or k[0] in OVERHEADS) and k[1] in targets}
    # The runtime's replay on "cpu-kernel" is the same C++ sum tree as on "cpu", and without PER
    # the buffer is host memory wherever "replay" is placed: offer such duplicates once, as "cpu".
    for task in ROLE_TASKS["replay"]:
        for target in ("cpu-kernel",) if config.per else ("cpu-kernel", "cuda", "fpga-emu", "fpga"):
            fits.pop((task, target), None)
    unavailable = {k: v for k, v in profile.unavailable.items() if k.partition("@")[2] in targets}
    notes: list[str] = []
    cores = cpu_cores()
    cp = cpu_power(cores, cpu_watts)
    devices = {"cpu": Device("cpu", "cpu", cores, cp.idle_w, cp.active_w, cp.source)}
    target_device = {t: HOST_DEVICE[t] for t in targets if t in HOST_DEVICE}
    notes.append(f"cpu power: {cp.idle_w:.0f}-{cp.active_w:.0f} W, {cp.source} ({cp.how})")
    if "cuda" in targets and any(k[1] == "cuda" for k in fits):
        gp = gpu_power(0)
        devices["cuda"] = Device("cuda", "cuda", 1, gp.idle_w, gp.active_w, gp.source)
        notes.append(f"cuda power: {gp.idle_w:.0f}-{gp.active_w:.0f} W, {gp.source} ({gp.how})")
    elif "cuda" in targets:
        target_device.pop("cuda", None)
    for fpga_target in ("fpga-emu", "fpga"):
        if fpga_target not in targets:
            continue
        if board is None:
            unavailable[f"act@{fpga_target}"] = unavailable[f"replay@{fpga_target}"] = "no board chosen: pass --board"
            continue
        spec = env_spec(config.env_id)
        ffits, unav, fnotes = fpga_fits(board, config, spec.obs_dim, spec.action_dim, spec.discrete, profile.fits,
                                        target=fpga_target, cycles=cycles, csynth_dirs=csynth_dirs)
        fits.update({k: v for k, v in ffits.items() if config.per or k[0] not in ROLE_TASKS["replay"]})
        unavailable.update(unav)
        notes += [f"{fpga_target}: {n}" for n in fnotes]
        dev = f"{fpga_target}:{board.name}"
        bp = board_power(board, on_board=fpga_target == "fpga")
        devices[dev] = Device(dev, fpga_target, 1, bp.idle_w, bp.active_w, bp.source)
        target_device[fpga_target] = dev
        # the host still runs the env; a board target has no env_step of its own
    parallel = {int(p): float(c) for p, c in profile.points.get(("cpu_parallel", "cpu"), [])}
    if parallel:
        notes.append("CPU our processes get together (relative to one): "
                     + ", ".join(f"{p}: {c:.2f}" for p, c in sorted(parallel.items())) + f" (of {cores} cores)")
    tables = Tables(fits=fits, target_device=target_device, devices=devices, stages=STAGES,
                    cpu_parallel=parallel)
    return tables, unavailable, notes


def scale_profile(profile: Any, factor: float) -> Any:
    """A copy of the host profile with every host task `factor` times slower (the load of a shared
    machine); FPGA targets built from it scale their host-side work (driver calls, storage) with it."""
    import copy

    out = copy.copy(profile)
    out.fits = {k: (Fit(f.a * factor, f.b * factor, f.source) if k[0] not in ("cpu_parallel",) and
                    not k[0].endswith("_corun") else f) for k, f in profile.fits.items()}
    return out


def get_profile(config: TrainConfig, targets: Sequence[str], sizes: Any = None, reprofile: bool = False,
                progress: bool = True) -> Any:
    """The cached host profile of this workload, or a fresh one (then cached)."""
    from pearl_fpga.planner import host_probe
    from pearl_fpga.planner import profile as prof

    machine = prof.machine_info()
    key = host_probe.workload_key(config) + "|" + capabilities() + ("|quick" if sizes is not None and sizes.repeats < 10 else "")
    host_targets = [t for t in targets if t in prof.HOST_TARGETS]
    cached = None if reprofile else prof.load_cached(machine, key)
    if cached is not None and all(any(k[1] == t for k in cached.fits) or any(u.endswith("@" + t) for u in cached.unavailable)
                                  for t in host_targets):
        return cached
    profile = _run_profile(prof, config, host_targets, sizes, progress)
    profile.workload = key
    prof.save_cached(profile)
    return profile


def _run_profile(prof: Any, config: TrainConfig, targets: Sequence[str], sizes: Any, progress: bool) -> Any:
    from pearl_fpga.planner import host_probe

    if not progress:
        return host_probe.profile_host(config, targets, sizes)
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("profiling", total=None)
        return host_probe.profile_host(config, targets, sizes, progress=lambda msg: bar.update(task, description=f"profiling {msg}"))
