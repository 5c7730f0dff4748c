"""Vitis HLS C-synthesis reports (`<top>_csynth.xml`) as a cycle source for the FPGA model.

`make hls KERNEL=k BOARD=b` (hls/build.mk) synthesizes a kernel into build/hw/<board>/hls/<kernel>/:
v++ --mode hls writes the report to `<work_dir>/hls/syn/report/<kernel>_top_csynth.xml`, the classic
vitis_hls flow (hls/scripts/run_hls.tcl) to `<work_dir>/proj/sol/syn/report/<kernel>_top_csynth.xml`.
The parts of the report used here (Vitis writes them under a `<profile>` root):

    UserAssignments/{TopModelName, TargetClockPeriod, unit}
    PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod
    PerformanceEstimates/SummaryOfOverallLatency/{Best,Average,Worst}-caseLatency   (cycles or "undef")
    PerformanceEstimates/SummaryOfLoopLatency/<LOOP>/{TripCount, Latency, PipelineII, PipelineDepth}

Loops nest as child elements (or, in some versions, as elements with a <Name> child). A figure that
depends on data without a LOOP_TRIPCOUNT is "undef" and read as None.

How the report becomes cycles per call (CycleFit c0 + c1 * batch):
- replay: its COMMANDS loop is pipelined, one command per PipelineII cycles after PipelineDepth
  cycles of fill: B commands take (B - 1) * II + depth cycles (the top's latency is "undef": the
  command count is a run-time argument).
- mlp: per inference, the INFER_BATCH loop's worst-case latency per iteration (the largest network
  the kernel holds: MAX_LAYERS x MAX_WIDTH x MAX_WIDTH, from its LOOP_TRIPCOUNTs), scaled to the
  planned network by its share of the MAC chunks (LANES products per clock), which dominate; so it
  is a csynth-derived estimate, not a cycle count of that network.
The clock is the report's target clock, or the estimated one when synthesis did not meet the target.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pearl_fpga.data import work_root
from pearl_fpga.errors import PearlError
from pearl_fpga.planner.hls_schedule import round_up, row_align


class CsynthError(PearlError, ValueError):
    """A csynth report that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class LoopLatency:
    """One loop of the report (None: "undef" or absent)."""

    name: str  # nested loops joined by "/", e.g. "SEGMENTS/COMMANDS"
    # figures given as a range (a LOOP_TRIPCOUNT min..max) are read as their max: the worst case
    trip_count: int | None
    latency: int | None
    pipeline_ii: int | None
    pipeline_depth: int | None


@dataclass(frozen=True)
class CsynthReport:
    """The figures of one csynth.xml the planner uses."""

    path: Path
    top: str
    part: str  # FPGA part the report was synthesized for ("" when the report omits it)
    target_period_ns: float
    estimated_period_ns: float | None
    best: int | None  # cycles of one call of the top, over the LOOP_TRIPCOUNT ranges
    average: int | None
    worst: int | None
    loops: dict[str, LoopLatency] = field(default_factory=dict)

    @property
    def period_ns(self) -> float:
        """The clock the design runs at: the target, or the estimate when it misses the target."""
        return max(self.target_period_ns, self.estimated_period_ns or 0.0)

    @property
    def clock_mhz(self) -> float:
        return 1000.0 / self.period_ns

    @property
    def timing_met(self) -> bool:
        return self.estimated_period_ns is None or self.estimated_period_ns <= self.target_period_ns

    def loop(self, label: str) -> LoopLatency | None:
        """The loop whose innermost name is `label` (e.g. "COMMANDS"), wherever it nests."""
        hits = [lp for name, lp in self.loops.items() if name.rsplit("/", 1)[-1] == label]
        return hits[0] if hits else None


def _int_or_none(text: str | None, what: str, path: Path) -> int | None:
    if text is None or text.strip() in ("", "undef", "-"):
        return None
    try:
        value = float(text.strip())
    except ValueError:
        raise CsynthError(f"{path}: {what} is {text.strip()!r}, not a number or 'undef'") from None
    if not math.isfinite(value) or value < 0:
        raise CsynthError(f"{path}: {what} is {text.strip()!r}; expected a cycle count >= 0")
    return int(value)


def _worst(node: ET.Element, tag: str, what: str, path: Path) -> int | None:
    """A figure written as a number, "undef", or a <range><min/><max/></range> (then its max)."""
    el = node.find(tag)
    if el is None:
        return None
    rng = el.find("range")
    if rng is not None:
        return _int_or_none(rng.findtext("max"), f"{what} max", path)
    return _int_or_none(el.text, what, path)


def _loops(node: ET.Element, prefix: str, path: Path, out: dict[str, LoopLatency]) -> None:
    fields = {"TripCount", "Latency", "PipelineII", "PipelineDepth", "IterationLatency", "AbsoluteTimeLatency",
              "PipelineType", "InstanceList", "Slack", "Name", "unit", "range"}
    for child in node:
        if child.tag in fields:
            continue
        name = (child.findtext("Name") or child.tag).strip()
        full = f"{prefix}/{name}" if prefix else name
        out[full] = LoopLatency(
            full,
            _worst(child, "TripCount", f"loop {full} TripCount", path),
            _worst(child, "Latency", f"loop {full} Latency", path),
            _worst(child, "PipelineII", f"loop {full} PipelineII", path),
            _worst(child, "PipelineDepth", f"loop {full} PipelineDepth", path),
        )
        _loops(child, full, path, out)


def parse_csynth(path: str | Path) -> CsynthReport:
    """Read a Vitis HLS csynth.xml; raises CsynthError naming the file and the problem."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise CsynthError(f"{path}: not a readable csynth XML report ({exc})") from None
    if root.find("PerformanceEstimates") is None:
        raise CsynthError(f"{path}: no PerformanceEstimates element: not a Vitis HLS csynth report")
    top = (root.findtext("UserAssignments/TopModelName") or "").strip()  # absent in some versions
    unit = (root.findtext("UserAssignments/unit") or "ns").strip()
    if unit != "ns":
        raise CsynthError(f"{path}: clock periods are in {unit!r}; only ns reports are understood")
    target_text = root.findtext("UserAssignments/TargetClockPeriod")
    try:
        target = float(target_text) if target_text is not None else float("nan")
    except ValueError:
        target = float("nan")
    if not math.isfinite(target) or target <= 0:
        raise CsynthError(f"{path}: UserAssignments/TargetClockPeriod is {target_text!r}; need a period in ns > 0")
    est_text = root.findtext("PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod")
    estimated = None
    if est_text is not None and est_text.strip() not in ("", "undef"):
        try:
            estimated = float(est_text)
        except ValueError:
            raise CsynthError(f"{path}: EstimatedClockPeriod is {est_text!r}, not a number") from None
        if not math.isfinite(estimated) or estimated <= 0:
            raise CsynthError(f"{path}: EstimatedClockPeriod is {est_text!r}; need a period in ns > 0")
    lat = "PerformanceEstimates/SummaryOfOverallLatency/"
    loops: dict[str, LoopLatency] = {}
    summary = root.find("PerformanceEstimates/SummaryOfLoopLatency")
    if summary is not None:
        _loops(summary, "", path, loops)
    return CsynthReport(
        path=path, top=top, part=(root.findtext("UserAssignments/Part") or "").strip(), target_period_ns=target, estimated_period_ns=estimated,
        best=_int_or_none(root.findtext(lat + "Best-caseLatency"), "Best-caseLatency", path),
        average=_int_or_none(root.findtext(lat + "Average-caseLatency"), "Average-caseLatency", path),
        worst=_int_or_none(root.findtext(lat + "Worst-caseLatency"), "Worst-caseLatency", path),
        loops=loops,
    )


def repo_root() -> Path:
    return work_root()


def search_dirs(board: str, kernel: str, extra: Iterable[str | Path] = ()) -> list[Path]:
    """Where to look for the report of `kernel` for `board`: each of `extra` (a report file, or a
    folder: its <board>/ subfolder when there is one, so that one folder can hold several boards),
    then where `make hls` leaves it (hls/build.mk: build/hw/<board>/hls/<kernel>/)."""
    root = repo_root()
    dirs = []
    for d in map(Path, extra):
        dirs.append(d / board if (d / board).is_dir() else d)
    return dirs + [root / "build" / "hw" / board / "hls" / kernel, root / "hls" / "build" / board / kernel,
                   root / "hls" / "build" / kernel]


def _top_of(path: Path) -> str | None:
    try:
        return (ET.parse(path).getroot().findtext("UserAssignments/TopModelName") or "").strip() or None
    except (OSError, ET.ParseError):
        return None  # unreadable: picked anyway, so that parse_csynth reports what is wrong with it


def find_report(board: str, kernel: str, extra: Iterable[str | Path] = ()) -> Path | None:
    """The newest csynth report of `kernel` for `board`, or None: a file named <kernel>_top_csynth.xml,
    or another name (csynth.xml, or a file given in `extra`) whose TopModelName is the kernel's top
    (or that cannot be read: then parse_csynth says what is wrong with it)."""
    top = f"{kernel}_top"

    def ours(p: Path) -> bool:
        return p.name == f"{top}_csynth.xml" or _top_of(p) in (top, None)

    found: list[Path] = []
    for d in search_dirs(board, kernel, extra):
        if d.is_file():
            found += [d] if ours(d) else []
        elif d.is_dir():
            found += list(d.glob(f"**/{top}_csynth.xml")) + [p for p in d.glob("**/csynth.xml") if ours(p)]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def same_part(a: str, b: str) -> bool:
    """Part names as Vitis writes them (xc7z020-clg400-1) and as the catalog does (xc7z020clg400-1)."""
    def norm(p: str) -> str:
        return p.lower().replace("-", "")
    return norm(a) == norm(b)


def _check_top(report: CsynthReport, kernel: str) -> None:
    if report.top and report.top != f"{kernel}_top":
        raise CsynthError(f"{report.path}: the report is of top {report.top!r}, not {kernel}_top")


def replay_cycles(report: CsynthReport) -> tuple[float, float]:
    """(c0, c1): cycles of a batch of B commands = c0 + c1 * B, from the pipelined COMMANDS loop."""
    _check_top(report, "replay")
    loop = report.loop("COMMANDS")
    if loop is None:
        raise CsynthError(f"{report.path}: no COMMANDS loop in SummaryOfLoopLatency (hls/replay/replay.cpp labels it)")
    if loop.pipeline_ii is None or loop.pipeline_depth is None or loop.pipeline_ii < 1:
        raise CsynthError(f"{report.path}: loop {loop.name} has no PipelineII/PipelineDepth: it was not pipelined")
    return float(loop.pipeline_depth - loop.pipeline_ii), float(loop.pipeline_ii)


def mac_chunks(layers: Sequence[tuple[int, int]], lanes: int) -> int:
    """LANES-wide MAC chunks of one inference: each output row reads its input row zero-padded to
    ROW_ALIGN = max(LANES, 32) words (hls/mlp/mlp.h)."""
    return sum(m * round_up(n, row_align(lanes)) // lanes for n, m in layers)


def mlp_cycles(report: CsynthReport, layers: Sequence[tuple[int, int]], kernel: dict[str, Any]) -> float:
    """Cycles per inference of the network `layers` (n_in, m_out per layer): the report's worst case
    per INFER_BATCH iteration (the largest network), scaled by the network's share of MAC chunks."""
    _check_top(report, "mlp")
    loop = report.loop("INFER_BATCH")
    if loop is not None and loop.latency is not None and loop.trip_count:
        per_inference = loop.latency / loop.trip_count
    elif report.worst is not None:
        per_inference = report.worst / kernel["max_batch"]
    else:
        raise CsynthError(f"{report.path}: neither an INFER_BATCH loop latency nor a Worst-caseLatency to read "
                          "(are the LOOP_TRIPCOUNT pragmas of hls/mlp/mlp.cpp in place?)")
    w, lanes = kernel["max_width"], kernel["lanes"]
    largest = mac_chunks([(w, w)] * kernel["max_layers"], lanes)
    return per_inference * mac_chunks(layers, lanes) / largest
