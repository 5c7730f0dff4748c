"""The speed figures the throughput targets (issue 33) are judged on, read from benchmark records, and
their rendering per CPU vendor for docs/render.py.

Each figure is higher-is-better: a training run's median env steps/s against SBX or Stable-Baselines3,
the learner step's best share of the GEMM peak of its precision, the tabular kernel's partitioned
speed-up of 2 threads over 1, and the share of the planner's predictions within 15% of the measurement.
A figure on one CPU vendor is compared with the last record of the same figure on another vendor
(pearl_fpga.bench.records keeps one per vendor): issue 33 asks that none be lower there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pearl_fpga.bench.records import vendor_of



def _train_records() -> dict[str, tuple[str, str, float]]:
    """Each training record -> (short name, what it runs, its SBX target): every deep algorithm of the
    registry on its default env (issue 33: 2x SBX for a discrete-action one, DQN; 1.5x for the continuous
    ones), then each one's bfloat16 learner, where a record of it exists (issue 33's target as in float32;
    on a CPU with AMX, DDPG's is issue 22's: AMX_SBX_TARGETS)."""
    from pearl_fpga.presets import algorithms

    out = {f"train-{name}": (name.upper(), f"{name.upper()} {spec.default_env}",
                             2.0 if spec.action_space == "discrete" else 1.5)
           for name, spec in sorted(algorithms().items(), key=lambda item: item[1].order) if spec.family == "deep"}
    low = {f"{record}-bf16": (f"{short} bf16", f"{runs}, bfloat16 learner", target)
           for record, (short, runs, target) in out.items()}
    return {**out, **low}


_TRAIN = _train_records()
# training record -> what it runs
TRAIN_NAMES = {name: runs for name, (_, runs, _) in _TRAIN.items()}
# median env steps/s ratio against SBX (float32 on both sides but the bfloat16 record)
SBX_TARGETS = {name: target for name, (_, _, target) in _TRAIN.items()}
# where the record's CPU has AMX, the bfloat16 learner's target of issue 22 instead
AMX_SBX_TARGETS = {"train-ddpg-bf16": 2.5}
# median env steps/s ratio against SB3 at each of its thread settings (earlier rounds)
SPEED_TARGETS = {"train-dqn": {"default": 3.0, "1": 3.5}, "train-ddpg": {"default": 2.0}}
LEARNER_PEAK_SHARE = 0.60  # of the GEMM peak of the step's precision, on the cores it keeps busy
TABULAR_SPEEDUP = 1.7  # partitioned mode on 2 threads against the cpu backend on 1
PLAN_ERROR = 0.15  # every prediction within this of the measurement
# where the reason a target is missed is written down, relative to the repository root
WHY = {"train": "docs/training.md#throughput-targets", "learner": "docs/training.md#throughput-targets",
       "tabular": "docs/tabular.md#partitioned-mode-swiftrl", "plan": "docs/planner.md#accuracy"}
RECORDS = (*TRAIN_NAMES, "learner", "tabular", "plan")  # the records that hold these figures, in docs order
SHORT_NAMES = {**{name: short for name, (short, _, _) in _TRAIN.items()},
               "learner": "learner", "tabular": "tabular", "plan": "planner"}


VERDICTS = {True: "met", False: "not met", None: "-"}


@dataclass(frozen=True)
class Figure:
    record: str  # the record's name (docs/figures/<record>.json)
    key: str  # the figure within the record, the same on every host
    label: str
    value: float  # higher is better
    text: str
    target: float | None = None
    target_text: str = ""

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.value >= self.target

    def verdict(self) -> str:
        """' (target 1.5x: met)', or '' for a figure without a target."""
        if self.target is None:
            return ""
        return f" (target {self.target_text}: {'met' if self.met else 'not met'})"


def _train(name: str, results: dict[str, Any]) -> list[Figure]:
    if results.get("keep_best"):  # a learning-quality record, not a speed one
        return []
    figures = []
    sbx = results.get("median_speedup_sbx")
    if isinstance(sbx, (int, float)):
        amx = "amx_bf16" in results.get("cpu_features", ())
        target = AMX_SBX_TARGETS.get(name) if amx and name in AMX_SBX_TARGETS else SBX_TARGETS.get(name)
        figures.append(Figure(name, "sbx", "SBX", float(sbx), f"{sbx:.2f}x", target,
                              f"{target:g}x" if target is not None else ""))
    for threads, ratio in (results.get("median_speedup") or {}).items():
        goal = SPEED_TARGETS.get(name, {}).get(threads)
        where = "1 torch thread" if threads == "1" else f"its {threads} torch threads"
        figures.append(Figure(name, f"sb3 {threads}", f"SB3 at {where}", float(ratio), f"{ratio:.2f}x", goal,
                              f"{goal:g}x" if goal is not None else ""))
    return figures


def learner_shares(results: dict[str, Any]) -> dict[tuple[str, str], float]:
    """The best share of the GEMM peak of each (algorithm, learner) of a `bench learner` record, over its
    thread counts; a learner is its precision, and 'compiled' for torch.compile's step."""
    from pearl_fpga.bench.learner import learner_rows

    shares: dict[tuple[str, str], float] = {}
    for algo, label, _, _, gflops, peak, _ in learner_rows(results):
        shares[algo, label] = max(shares.get((algo, label), 0.0), gflops / peak)
    return shares


def _learner(results: dict[str, Any]) -> list[Figure]:
    best: dict[tuple[str, str], tuple[float, str]] = {}  # (algo, precision) -> its best learner's share
    for (algo, label), share in learner_shares(results).items():
        precision = label.split()[0]
        if precision not in ("float32", "bfloat16"):  # a baseline's row (SBX), shown beside ours, not judged
            continue
        if share > best.get((algo, precision), (-1.0, ""))[0]:
            best[algo, precision] = (share, label)
    return [Figure("learner", f"{algo} {precision}", f"{algo.upper()} {precision}", share,
                   f"{100 * share:.0f}%" + (f" ({label.split(' ', 1)[1]})" if " " in label else ""),
                   LEARNER_PEAK_SHARE, f"{100 * LEARNER_PEAK_SHARE:.0f}%")
            for (algo, precision), (share, label) in best.items()]


def _tabular(results: dict[str, Any]) -> list[Figure]:
    rows = results.get("rows", {})
    if "cpu partitioned x2" not in rows or "cpu backend" not in rows:
        return []
    speedup = rows["cpu partitioned x2"]["updates_per_s"] / rows["cpu backend"]["updates_per_s"]
    return [Figure("tabular", "partitioned x2", "partitioned mode on 2 threads against 1", speedup, f"{speedup:.2f}x",
                   TABULAR_SPEEDUP, f"{TABULAR_SPEEDUP:g}x")]


def _plan(results: dict[str, Any]) -> list[Figure]:
    errors = [abs(row["error"]) for row in results.get("rows", [])]
    if not errors:
        return []
    within = sum(e <= PLAN_ERROR for e in errors)
    return [Figure("plan", "within", f"predictions within {PLAN_ERROR:.0%} of the measurement", within / len(errors),
                   f"{within} of {len(errors)} (worst {max(errors):.0%})", 1.0, "all")]


def figures_of(name: str, record: dict[str, Any]) -> list[Figure]:
    """The target figures of the record `name` (none for a record without any)."""
    results = record["results"]
    if name in TRAIN_NAMES:
        return _train(name, results)
    reader = {"learner": _learner, "tabular": _tabular, "plan": _plan}.get(name)
    return reader(results) if reader else []


def vendor_title(vendor: str) -> str:
    return {"intel": "Intel", "amd": "AMD"}.get(vendor, vendor)


def host(record: dict[str, Any]) -> str:
    """The host a record was taken on, for a sentence: its CPU model and cores."""
    m = record["machine"]
    return f"{m['cpu']}, {m.get('cores', '?')} cores"


def _when(record: dict[str, Any]) -> str:
    return f"`{record['commit']}`, {record['date'][:10]}"


# ----------------------------------------------------------------------------------- benchmarks.md
def vendor_section(by_vendor: dict[str, dict[str, dict[str, Any]]]) -> str:
    """benchmarks.md's 'By CPU vendor' section: each vendor's latest records and their target figures."""
    parts = ["## By CPU vendor\n",
             "The latest record of each speed benchmark on each CPU vendor ([figures/hosts/](figures/hosts/), kept "
             "by `pearl-fpga bench ... --json`), against the throughput targets (issue 33); the sections above "
             "show the latest record from any host. `*`: taken under load, not a headline figure.\n"]
    for vendor, records in by_vendor.items():
        rows = []
        for name in RECORDS:
            record = records.get(name)
            if record is None:
                continue
            mark = " *" if record["under_load"] else ""
            rows += [[name, f.label, f.text + mark, f.target_text or "-", VERDICTS[f.met],
                      _when(record)] for f in figures_of(name, record)]
        if not rows:
            continue
        machines = sorted({host(r) for r in records.values()})
        parts.append(f"### {vendor_title(vendor)}\n\nMachine: {'; '.join(machines)}\n\n"
                     + markdown_table(["record", "figure", "value", "target", "verdict", "commit, date"], rows) + "\n")
    return "\n".join(parts)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table: the first column left-aligned, the others right-aligned."""
    align = ["---:" if i else "---" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


# ----------------------------------------------------------------------------------- README headline
def step_bound(train: dict[str, Any], learner: dict[str, Any] | None, precision: str, target: float) -> str:
    """What the SBX target asks of the learner step, from the training record's own split of each run's time
    (the learn timer against the rest) and SBX's time in the same run: the step time that would give `target`
    times SBX's env steps/s, as GFLOP/s and a share of the GEMM peak of `learner` (a `bench learner` record of
    the same host, same networks and batch). '' where a figure it needs is missing."""
    results = train["results"]
    algo, steps = results.get("algo"), results.get("steps")
    runs = [r for r in results.get("runs", []) if "sbx" in r and "us_per_env_step" in r.get("pearl_fpga", {})]
    if not runs or not steps or learner is None:
        return ""
    entry = learner["results"].get("algos", {}).get(algo, {})
    config = results.get("config", {})
    if not entry.get("flops_per_step") or any(entry.get("config", {}).get(k) != config.get(k)
                                              for k in ("net_arch", "batch_size")):
        return ""
    peaks = learner["results"].get("peak_gflops" if precision == "float32" else f"peak_gflops_{precision}") or {}
    if not peaks:
        return ""
    cores = max(peaks, key=int)
    now, needed = [], []
    for run in runs:
        ours = run["pearl_fpga"]
        grad_steps = ours.get("grad_steps") or 0
        if grad_steps <= 0:
            return ""
        learn_s = ours["us_per_env_step"].get("learn", 0.0) * steps / 1e6
        rest_s = ours["seconds"] - learn_s
        now.append(learn_s / grad_steps)
        needed.append((run["sbx"]["seconds"] / target - rest_s) / grad_steps)
    now_s, needed_s = sorted(now)[len(now) // 2], sorted(needed)[len(needed) // 2]
    peak, flops = peaks[cores], entry["flops_per_step"]

    def rate(step_s: float) -> str:
        gflops = flops / step_s / 1e9
        return f"{gflops:.0f} GFLOP/s, {100 * gflops / peak:.0f}% of the {cores}-core {precision} GEMM peak"

    took = f"its learner steps took {1e3 * now_s:.1f} ms ({rate(now_s)})"
    if needed_s <= 0:
        return (f"{took}; {target:g}x SBX would need less time for the whole run than its work outside the "
                "learner takes; ")
    return f"{took}; {target:g}x SBX needs {1e3 * needed_s:.1f} ms ({rate(needed_s)}); "


def _missed(records: dict[str, dict[str, Any]], by_vendor: dict[str, dict[str, dict[str, Any]]], name: str,
            figures: list[Figure]) -> str:
    """The indented line that says why a target is missed, or '' when none is."""
    if not any(f.met is False for f in figures):
        return ""
    kind = "train" if name in TRAIN_NAMES else name
    share = ""
    if kind == "train":  # the learner step against the GEMM peak, from a learner record of the same vendor
        vendor = vendor_of(records[name]["machine"])
        learner = next((r for r in (by_vendor.get(vendor, {}).get("learner"), records.get("learner"))
                        if r is not None and vendor_of(r["machine"]) == vendor), None)
        precision = "bfloat16" if name.endswith("-bf16") else "float32"
        algo = name.split("-")[1]
        sbx_target = next((f.target for f in figures if f.key == "sbx" and f.met is False), None)
        share = step_bound(records[name], learner, precision, sbx_target) if sbx_target is not None else ""
        if not share:  # the record lacks what the bound needs: the learner record's share of the peak
            shares = learner_shares(learner["results"]) if learner else {}  # the plain learner training runs
            if (algo, precision) in shares:
                share = (f"its learner step reaches {100 * shares[algo, precision]:.0f}% of the {precision} GEMM "
                         "peak (bench learner); ")
    return f"\n  (why a target is missed: {share}[{WHY[kind].split('#')[0]}]({WHY[kind]}))"


def _seeds(record: dict[str, Any]) -> str:
    n = len(record["results"]["runs"])
    return f"median of {n} seeds" if n > 1 else "one seed"


def target_lines(records: dict[str, dict[str, Any]], by_vendor: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """The headline's lines for each speed target: the current record's figures, met or not, on its host."""
    lines = []
    for name in RECORDS:
        if name not in records:
            continue
        record = records[name]
        figures = figures_of(name, record)
        if not figures:
            continue
        where = f"on {host(record)}" + (", taken under load" if record["under_load"] else "")
        if name in TRAIN_NAMES:
            line = (f"- {TRAIN_NAMES[name]} training, env steps/s at equal settings ({_seeds(record)}, {where}): "
                    + ", ".join(f"{f.text} {f.label}{f.verdict()}" for f in figures))
        elif name == "learner":
            met = [f.label for f in figures if f.met]
            verdict = ("met" if len(met) == len(figures) else f"met by {', '.join(met)} only" if met else "not met")
            line = (f"- Learner step, best share of the GEMM peak of its precision ({where}): "
                    + ", ".join(f"{f.label} {f.text}" for f in figures)
                    + f" (target {figures[0].target_text}: {verdict})")
        else:
            f = figures[0]
            what = "Tabular kernel" if name == "tabular" else "Dispatcher"
            line = f"- {what}, {f.label}: {f.text}{f.verdict()} ({where})"
        lines.append(line + _missed(records, by_vendor, name, figures))
    return lines


def vendor_lines(records: dict[str, dict[str, Any]], by_vendor: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One headline line per CPU vendor with records the current ones are not from: its last figures and
    whether any current figure is lower than its last record of the same figure."""
    lines = []
    for vendor, last in by_vendor.items():
        parts, lower = [], []
        for name in RECORDS:
            then, now = last.get(name), records.get(name)
            if then is None or now is None or vendor_of(now["machine"]) == vendor:
                continue
            figures = figures_of(name, then)
            if not figures:
                continue
            title = SHORT_NAMES[name]
            load = ", under load" if then["under_load"] else ""
            parts.append(f"{title} ({_when(then)}{load}): " + ", ".join(f"{f.text} {f.label}" for f in figures))
            current = {f.key: f for f in figures_of(name, now)}
            lower += [f"{title} {current[f.key].label} {current[f.key].text} < {f.text}" for f in figures
                      if f.key in current and current[f.key].value < f.value]
        if parts:
            verdict = (f"current figures lower than these: {'; '.join(lower)}" if lower
                       else "no current figure is lower than these")
            lines.append(f"- Last on {vendor_title(vendor)} ({'; '.join(sorted({host(r) for r in last.values()}))}): "
                         + "; ".join(parts) + f". {verdict[0].upper()}{verdict[1:]}.")
    return lines
