"""The FPGA targets' model ("fpga-emu", "fpga"), not measured here: kernel cycles and clock of the
design that ships, the HLS C++ tops (a Vitis csynth report when one exists, see
pearl_fpga.planner.csynth; else the stated model of their schedule, pearl_fpga.planner.hls_schedule,
at the catalog clock), plus the host <-> kernel transfers of the catalog's link model, plus the
host-side work measured here. The reference RTL's counts (its SPEC.md bound, or the cycle-accurate
"rtl" backend's counts with cycles="rtl") are reported beside them in the notes; cycles="rtl" or
"spec" times the kernels by the RTL instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.planner import hls_schedule
from pearl_fpga.planner.model import Fit, act_fraction
from pearl_fpga.planner.profile import REPLAY_TASKS, fit_line
from pearl_fpga.runtime.emulation import misfits
from pearl_fpga.spec.kernels import commands_ii
from pearl_fpga.spec.mlp import infer_cycle_bound
from pearl_fpga.spec.replay import batch_cycle_bound, tree_depth

# ----------------------------------------------------------------------------------- FPGA cycle models
@dataclass(frozen=True)
class CycleFit:
    """Kernel cycles of one call as c0 + c1 * batch, and where the figures come from."""

    c0: float
    c1: float
    source: str  # "hls model", "csynth", "rtl", "spec bound"

    def __call__(self, batch: float) -> float:
        return self.c0 + self.c1 * batch


def mlp_layers(obs_dim: int, net_arch: Sequence[int], out_dim: int) -> list[tuple[int, int]]:
    """(n_in, m_out) of each linear layer of the policy network."""
    widths = [obs_dim, *net_arch, out_dim]
    return list(zip(widths[:-1], widths[1:]))


def mlp_cycles_spec(layers: Sequence[tuple[int, int]], lanes: int) -> CycleFit:
    """hls/mlp/SPEC.md's bound: per inference MACs / LANES + 8 L + 16 cycles (steady state)."""
    return CycleFit(0.0, infer_cycle_bound(layers, lanes), "spec bound")


def mlp_cycles_hls(layers: Sequence[tuple[int, int]], lanes: int, discrete: bool) -> CycleFit:
    """mlp_top's schedule as pearl_fpga.planner.hls_schedule models it, per inference."""
    return CycleFit(0.0, float(hls_schedule.mlp_infer_cycles(layers, lanes, raw_head=discrete)), "hls model")


def replay_cycles_hls(depth: int, fanout: int, clock_mhz: float, leaf_memory: str = "bram") -> CycleFit:
    """replay_top's COMMANDS loop as pearl_fpga.planner.hls_schedule models it: (B - 1) * II + PipelineDepth
    (II and the leaf words' read latency as the board's clock and replay_leaf_memory make them)."""
    ii = float(commands_ii("replay", clock_mhz))
    fill = hls_schedule.replay_pipeline_depth(depth, fanout, clock_mhz, hls_schedule.replay_leaf_latency(leaf_memory))
    return CycleFit(fill - ii, ii, "hls model")


def replay_cycles_spec(depth: int) -> CycleFit:
    """hls/replay/SPEC.md's bound: B samples (or updates) in B + 8 * DEPTH + 16 cycles."""
    return CycleFit(batch_cycle_bound(0, depth), 1.0, "spec bound")


def replay_cycles_rtl(capacity: int, fanout: int, batches: Sequence[int] = (8, 64)) -> dict[str, CycleFit]:
    """Cycle counts of the reference RTL (the "rtl" backend), fitted per operation."""
    from pearl_fpga.kernels import ReplaySampler

    s = ReplaySampler(capacity, fanout=fanout, backend="rtl")
    rng = np.random.default_rng(0)
    upd, smp = [], []
    for n in batches:
        s.update(rng.integers(0, capacity, size=n), rng.random(n) + 0.1)
        upd.append(float(s.last_cycles))
        s.sample(n, rng)
        smp.append(float(s.last_cycles))
    out = {}
    for op, ys in (("update", upd), ("sample", smp)):
        f = fit_line(list(batches), ys)
        out[op] = CycleFit(f.a, f.b, "rtl")
    return out


def mlp_cycles_rtl(obs_dim: int, net_arch: Sequence[int], out_dim: int, discrete: bool, lanes: int, max_width: int,
                   batches: Sequence[int] = (1, 8)) -> CycleFit:
    """Cycle counts of the MLP kernel's reference RTL (the "rtl" backend, built with the board's
    lanes and width) on a network of the workload's shape, fitted per call."""
    import torch

    from pearl_fpga.algos.common import mlp
    from pearl_fpga.board.mlp_driver import MLPRTLBackend
    from pearl_fpga.kernels import MLPInfer

    torch.manual_seed(0)
    module = mlp(obs_dim, list(net_arch), out_dim, tanh_head=not discrete)
    obs = np.random.default_rng(0).normal(size=(max(batches), obs_dim)).astype(np.float32)
    kernel = MLPInfer.from_torch(module, backend=MLPRTLBackend(lanes=lanes, max_width=max_width), calibration=obs)
    cycles = []
    for n in batches:
        kernel(obs[:n])
        cycles.append(float(kernel.last_cycles))
    f = fit_line(list(batches), cycles)
    return CycleFit(f.a, f.b, "rtl")


def _csynth_report(board: Any, kernel: str, dirs: Sequence[str | Path], notes: list[str]) -> Any:
    """The board's csynth report of `kernel` when one exists and reads cleanly, else None (a
    malformed one warns, naming the file, and the caller keeps its other cycle source)."""
    from pearl_fpga.planner.csynth import CsynthError, find_report, parse_csynth, same_part

    path = find_report(board.name, kernel, dirs)
    if path is None:
        return None
    try:
        report = parse_csynth(path)
    except CsynthError as exc:
        warnings.warn(f"ignoring csynth report: {exc}", stacklevel=3)
        notes.append(f"{kernel}: csynth report unusable ({exc})")
        return None
    if report.part and not same_part(report.part, board.part):
        warnings.warn(f"ignoring csynth report {path}: synthesized for part {report.part}, "
                      f"but {board.name} has {board.part}", stacklevel=3)
        notes.append(f"{kernel}: csynth report {path} is for part {report.part}, not {board.part}: not used")
        return None
    if not report.timing_met:
        notes.append(f"{kernel}: {path} misses the {report.target_period_ns:g} ns target "
                     f"(estimated {report.estimated_period_ns:g} ns): timed at the estimated clock")
    if abs(report.clock_mhz - board.clock_mhz) > 0.01 * board.clock_mhz:
        notes.append(f"{kernel}: {path} was synthesized for {report.clock_mhz:.1f} MHz, the catalog says "
                     f"{board.clock_mhz:g} MHz: using the report's clock")
    return report


def _rtl_beside(kind: str, hls: CycleFit, rtl: CycleFit, batch: int) -> str:
    """One note comparing the shipped design's figure with the reference RTL's at `batch`."""
    return (f"{kind}: at {batch} per call the HLS design takes {hls(batch):,.0f} cycles ({hls.source}), "
            f"the reference RTL {rtl(batch):,.0f} ({rtl.source})")


def built_clock_mhz(board: Any) -> float:
    """The kernel clock of `board`'s build where one exists with a manifest for this board (an xclbin's
    clock may be below the catalog's: pearl_fpga.board.xclbin_info), else the catalog's clock."""
    from pearl_fpga.board.manifest import load_manifest
    from pearl_fpga.board.overlay import bitstreams_root
    from pearl_fpga.errors import ManifestError

    folder = bitstreams_root() / board.name
    if not (folder / "manifest.json").is_file():
        return float(board.clock_mhz)
    try:
        manifest = load_manifest(folder)
    except (ManifestError, OSError):
        return float(board.clock_mhz)
    return float(manifest.clock_mhz) if manifest.board == board.name else float(board.clock_mhz)


def fpga_fits(board: Any, config: TrainConfig, obs_dim: int, out_dim: int, discrete: bool, host: Mapping[tuple[str, str], Fit],
              target: str = "fpga-emu", cycles: str = "hls", csynth_dirs: Sequence[str | Path] = ()
              ) -> tuple[dict[tuple[str, str], Fit], dict[str, str], list[str]]:
    """Modelled fits of every task `target` (a board from the catalog) can run.

    Each time = kernel cycles / clock + host <-> kernel transfers (catalog link model) + the host
    work that stays on the CPU (measured on this machine: the driver call, transition storage).
    Cycles and clock come from the board's Vitis csynth report of the kernel when one exists
    (pearl_fpga.planner.csynth; searched where `make hls` puts it and in `csynth_dirs`), else from
    `cycles` at the catalog clock: "hls" the stated model of the HLS schedule (the design that
    ships), "rtl" the rtl backend's counts, "spec" the bound the kernel's SPEC.md guarantees of the
    RTL. The notes put the reference RTL's figure beside the one used.
    Returns (fits, unavailable "role@target" -> reason, notes on the cycle sources).
    """
    if cycles not in ("hls", "rtl", "spec"):
        raise ValueError(f"cycles must be 'hls', 'rtl' or 'spec', not {cycles!r}")
    from pearl_fpga.planner.csynth import CsynthError, mlp_cycles, replay_cycles

    fits: dict[tuple[str, str], Fit] = {}
    unavailable: dict[str, str] = {}
    notes: list[str] = []
    clock_mhz = built_clock_mhz(board)
    if clock_mhz != board.clock_mhz:
        notes.append(f"{board.name}: its build runs the kernels at {clock_mhz:g} MHz (bitstreams/{board.name}/manifest.json; "
                     f"v++ scaled the clock), not the catalog's {board.clock_mhz:g} MHz: timed at the built clock")
    f_hz = clock_mhz * 1e6
    src = f"cycle model ({{}}) @ {board.name}"

    # ---- act: the MLP kernel
    layers = mlp_layers(obs_dim, config.net_arch, out_dim)
    mk = board.kernels["mlp"]
    host_act = host.get(("act", "cpu-kernel")) or host.get(("act", "cpu"))
    host_sync = host.get(("weight_sync", "cpu-kernel")) or host.get(("weight_sync", "cpu"))
    too_big = misfits(board, config, obs_dim, out_dim, act=True, replay=False)
    if too_big:
        unavailable[f"act@{target}"] = "; ".join(too_big)
    elif host_act is None or host_sync is None:
        unavailable[f"act@{target}"] = "no host measurement of act to base the driver overhead on"
    else:
        rtl_cyc = mlp_cycles_spec(layers, mk["lanes"])
        if cycles == "rtl":
            try:
                rtl_cyc = mlp_cycles_rtl(obs_dim, config.net_arch, out_dim, discrete, mk["lanes"], mk["max_width"])
            except Exception as exc:  # noqa: BLE001 - no Verilator / backend: say so, keep the spec bound
                notes.append(f"act: rtl cycle counts unavailable ({exc}); using the spec bound")
        hls_cyc = mlp_cycles_hls(layers, mk["lanes"], discrete)
        cyc = hls_cyc if cycles == "hls" else rtl_cyc
        f_act = f_hz
        report = _csynth_report(board, "mlp", csynth_dirs, notes)
        if report is not None:
            try:
                cyc, f_act = CycleFit(0.0, mlp_cycles(report, layers, mk), "csynth"), report.clock_mhz * 1e6
            except CsynthError as exc:
                warnings.warn(f"ignoring csynth report: {exc}", stacklevel=2)
                notes.append(f"act: csynth report unusable ({exc})")
                report = None
        notes.append(_rtl_beside("act", cyc if report is not None else hls_cyc, rtl_cyc, 1))
        notes.append(f"act: {cyc.c0:.0f} + {cyc.c1:.0f} cycles per inference ({cyc.source}"
                     f"{', ' + str(report.path) if report is not None else ''}, {mk['lanes']} lanes) "
                     f"at {f_act / 1e6:g} MHz")
        in_bytes, out_bytes = 2 * obs_dim, 2 * (out_dim + (1 if discrete else 0))
        # per call: driver overhead (the host fit's constant) + two DMA latencies; per observation:
        # kernel cycles + bytes over the link
        a = host_act.a + 2 * board.transfer_seconds(0) + cyc.c0 / f_act
        b = cyc.c1 / f_act + (in_bytes + out_bytes) / (board.link_bandwidth_gbps * 1e9)
        fits[("act", target)] = Fit(a, b, src.format(cyc.source))
        weight_words = sum(n * m + 2 * m + 4 for n, m in layers) + 1
        fits[("weight_sync", target)] = Fit(host_sync.a + board.transfer_seconds(2 * weight_words) + weight_words / f_act,
                                            0.0, src.format("load stream, 1 word/cycle"))

    # ---- replay: the sum tree (only with PER; a uniform buffer is host memory wherever "replay" is placed)
    rk = board.kernels["replay"]
    if not config.per:
        for task in REPLAY_TASKS:
            if (task, "cpu") in host:
                fits[(task, target)] = host[(task, "cpu")]
    elif misfits(board, config, obs_dim, out_dim, act=False, replay=True):
        unavailable[f"replay@{target}"] = "; ".join(misfits(board, config, obs_dim, out_dim, act=False, replay=True))
    elif ("host_store", "cpu") not in host or ("host_gather", "cpu") not in host:
        unavailable[f"replay@{target}"] = "no host measurement of transition storage"
    else:
        depth = tree_depth(config.buffer_size, rk["fanout"])
        rtl_ops = {"update": replay_cycles_spec(depth), "sample": replay_cycles_spec(depth)}
        if cycles == "rtl":
            try:
                rtl_ops = replay_cycles_rtl(config.buffer_size, rk["fanout"])
            except Exception as exc:  # noqa: BLE001 - no Verilator / backend: say so, keep the spec bound
                notes.append(f"replay: rtl cycle counts unavailable ({exc}); using the spec bound")
        # the synthesized tree holds the board's capacity, so its pipeline is that deep whatever the run uses
        hls = replay_cycles_hls(tree_depth(rk["capacity"], rk["fanout"]), rk["fanout"], clock_mhz,
                                board.replay_leaf_memory)
        ops = {"update": hls, "sample": hls} if cycles == "hls" else rtl_ops
        report = _csynth_report(board, "replay", csynth_dirs, notes)
        if report is not None:
            try:
                c0, c1 = replay_cycles(report)
                # the synthesized tree holds the board's capacity; the run's buffer only uses part of it
                ops = {"update": CycleFit(c0, c1, "csynth"), "sample": CycleFit(c0, c1, "csynth")}
                f_hz = report.clock_mhz * 1e6
            except CsynthError as exc:
                warnings.warn(f"ignoring csynth report: {exc}", stacklevel=2)
                notes.append(f"replay: csynth report unusable ({exc})")
                report = None
        shipped = ops["sample"] if report is not None else hls
        notes.append(_rtl_beside("replay sample", shipped, rtl_ops["sample"], config.batch_size))
        notes.append(f"replay: depth {depth}, sample {ops['sample'].c0:.0f} + {ops['sample'].c1:.2f}/item cycles "
                     f"({ops['sample'].source}{', ' + str(report.path) if report is not None else ''}) "
                     f"at {f_hz / 1e6:g} MHz")
        word = 16 / (board.link_bandwidth_gbps * 1e9)  # one 128-bit command or response
        lat = board.transfer_seconds(0)
        store, gather = host[("host_store", "cpu")], host[("host_gather", "cpu")]
        up, sm = ops["update"], ops["sample"]
        fits[("replay_insert", target)] = Fit(store.a + lat + up.c0 / f_hz, store.b + up.c1 / f_hz + word, src.format(up.source))
        fits[("replay_update", target)] = Fit(lat + up.c0 / f_hz, up.c1 / f_hz + word, src.format(up.source))
        fits[("replay_sample", target)] = Fit(gather.a + 2 * lat + sm.c0 / f_hz, gather.b + sm.c1 / f_hz + 2 * word,
                                              src.format(sm.source))
        notes += _link_bound(board, "replay sample", fits[("replay_sample", target)], config.batch_size,
                             2 * lat + 2 * word * config.batch_size)
    if ("act", target) in fits:
        act_link = 2 * board.transfer_seconds(0) + 2 * (obs_dim + out_dim + 1) / (board.link_bandwidth_gbps * 1e9)
        notes += _link_bound(board, "act", fits[("act", target)], 1, act_link)
    return fits, unavailable, notes


def _link_bound(board: Any, task: str, fit: Fit, n: int, link_s: float) -> list[str]:
    """A note when the host <-> board link is most of a task's modelled time on `board` (a UART board:
    the reason the planner keeps the task on the CPU), else nothing."""
    total = fit.a + fit.b * n
    if total <= 0 or link_s < 0.5 * total:
        return []
    return [f"{task} on {board.name}: the {board.link_kind} link ({board.link_bandwidth_gbps * 1e3:g} MB/s, "
            f"{board.link_latency_us:g} us a transfer) is {link_s / total:.0%} of its modelled {total * 1e6:,.0f} us per "
            f"call of {n}: the link, not the kernel, decides where it runs"]


# ------------------------------------------------------------------- an emulated board's run (fpga-emu)
def board_fits(board: Any, config: TrainConfig, obs_dim: int, out_dim: int, discrete: bool,
               csynth_dirs: Sequence[str | Path] = ()) -> tuple[dict[str, Fit], list[str]]:
    """The board's own time of one call of each kernel task (kernel cycles at its clock, the link's
    latency and DMA bytes), without host work: fpga_fits with the host's part at zero."""
    zero = Fit(0.0, 0.0, "none")
    host = {("act", "cpu-kernel"): zero, ("weight_sync", "cpu-kernel"): zero, ("host_store", "cpu"): zero,
            ("host_gather", "cpu"): zero}
    fits, _, notes = fpga_fits(board, config, obs_dim, out_dim, discrete, host, csynth_dirs=csynth_dirs)
    return {task: fit for (task, _), fit in fits.items() if config.per or task not in REPLAY_TASKS}, notes


def board_run(board: Any, config: TrainConfig, obs_dim: int, out_dim: int, discrete: bool, placement: Any,
              seconds: Mapping[str, float], calls: Mapping[str, int], env_steps: int, elapsed: float,
              inline: bool) -> dict[str, Any]:
    """What a run's kernel tasks would have taken on the emulated `board` (modelled).

    seconds, calls: the run's measured totals per task; env_steps, elapsed: its env steps and wall time.
    Each act call is one inference of n_envs observations (at the share of steps that run the policy,
    as the planner counts), each sample or priority update one batch of batch_size, each insert the
    run's transitions. The env steps/s the board would sustain (inline runs, whose tasks run one after
    another) is the measured run with each kernel task's time replaced by the board's; weight sync
    keeps its measured host work (re-quantization, which stays on the host) and adds the board's load.
    """

    fits, notes = board_fits(board, config, obs_dim, out_dim, discrete)
    kernel_tasks = [t for t in fits if (placement.act if t in ("act", "weight_sync") else placement.replay) == "fpga-emu"]
    board_s: dict[str, float] = {}
    for task in kernel_tasks:
        n = calls.get(task, 0)
        items = {"act": n * config.n_envs * act_fraction(config), "replay_insert": env_steps,
                 "replay_sample": n * config.batch_size, "replay_update": n * config.batch_size}.get(task, 0.0)
        kernel_calls = n * act_fraction(config) if task == "act" else n
        board_s[task] = fits[task].a * kernel_calls + fits[task].b * items
    steps_per_s = None
    if inline and elapsed > 0 and env_steps > 0:
        saved = sum(seconds.get(t, 0.0) - board_s[t] for t in board_s if t != "weight_sync")
        steps_per_s = env_steps / max(elapsed - saved + board_s.get("weight_sync", 0.0), 1e-12)
    return {"board": board.name, "clock_mhz": board.clock_mhz,
            "seconds_per_env_step": {t: s / max(env_steps, 1) for t, s in board_s.items()},
            "sources": {t: fits[t].source for t in board_s}, "env_steps_per_s": steps_per_s, "notes": notes}
