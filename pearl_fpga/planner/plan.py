"""`choose_placement`: profile (or load the cached profile), model, search, and return a `Plan`.

The plan carries the placement string the runtime parses, the actor worker count, the predicted
time of every task on every target, and after training `plan.report(measured)` prints predicted
versus measured per task and overall.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.assign import PlanError, search
from pearl_fpga.planner.model import Prediction, Tables, Workload, act_fraction
from pearl_fpga.planner.tables import TARGET_ORDER, build_tables, get_profile, parse_devices, scale_profile
from pearl_fpga.runtime.schedule import allowed_gradient_steps, credit_chunk, lockstep_insert_steps
from pearl_fpga.runtime.threads import probe_round_starts
from pearl_fpga.runtime.vocabulary import ROLE_TASKS, ROLES, TASKS





def workload_of(config: TrainConfig) -> Workload:
    """The model's view of a TrainConfig."""
    updates = allowed_gradient_steps(config, config.total_steps) if config.total_steps else -1
    return Workload(
        envs_per_worker=config.n_envs,
        batch_size=config.batch_size,
        updates_per_step=config.gradient_steps / config.train_freq,
        sync_every=config.sync_interval,
        insert_batch=lockstep_insert_steps(config),  # in-process: a training round's env steps, inserted at once
        run_updates=updates,
        probe_rounds=thread_probe_rounds(config, updates),
        learning_starts=config.learning_starts,
        prioritized=bool(config.per),
        act_fraction=act_fraction(config),
        total_steps=config.total_steps,
        worker_insert_batch=credit_chunk(config),  # one message of a worker, inserted as one batch
    )


def thread_probe_rounds(config: TrainConfig, updates: int) -> int:
    """Probe rounds of the learner's adaptive thread count (learner_threads 0) in a run of `updates`
    gradient steps: at the first step, then at growing intervals up to every PROBE_PERIOD steps
    (runtime.threads.probe_round_starts). Rounds the controller adds when the load changes under it are not
    predictable and not counted."""
    if config.learner_threads != 0 or updates <= 0:
        return 0
    return len(probe_round_starts(updates))


@dataclass
class Plan:
    """The chosen placement and worker count, with everything the model predicted."""

    placement: str  # e.g. "act=cpu-kernel,replay=cpu,learn=cpu" (pearl_fpga.runtime.placement syntax)
    workers: int  # actor worker processes (0 = the runtime's in-process mode)
    objective: str
    prediction: Prediction
    ranked: list[Prediction]
    tables: Tables
    workload: Workload
    unavailable: dict[str, str] = field(default_factory=dict)  # "role@target" -> reason
    notes: list[str] = field(default_factory=list)
    board: str | None = None
    profile: Any = None  # the host profile the tables came from (pearl_fpga.planner.profile.Profile)

    @property
    def throughput(self) -> float:
        """Predicted env steps/s (steady state)."""
        return self.prediction.throughput

    # ------------------------------------------------------------------ views
    def task_table(self) -> list[dict[str, Any]]:
        """Per task and target: predicted seconds per call at the workload's batch and per env step."""
        w = self.workload
        batch = {"env_step": w.envs_per_worker, "act": w.envs_per_worker, "replay_insert": w.insert_batch,
                 "replay_sample": w.batch_size, "replay_update": w.batch_size, "learn": w.batch_size, "weight_sync": 1}
        rows = []
        for task in TASKS:
            for target in self.targets():
                fit = self.tables.fits.get((task, target))
                if fit is None:
                    continue
                rows.append({"task": task, "target": target, "device": self.tables.target_device[target],
                             "batch": batch[task], "seconds_per_call": fit(batch[task]), "source": fit.source,
                             "chosen": self.prediction.task_target[task] == target})
        return rows

    def targets(self) -> list[str]:
        return [t for t in TARGET_ORDER if t in self.tables.target_device]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (used by `pearl-fpga plan --json`)."""
        def pred(p: Prediction) -> dict[str, Any]:
            return {"placement": ",".join(f"{r}={p.placement[r]}" for r in ROLES), "workers": p.workers,
                    "env_steps_per_s": p.throughput, "run_env_steps_per_s": p.run_throughput,
                    "worker_startup_s": p.startup_s, "worker_shutdown_s": p.shutdown_s, "bottleneck": p.bottleneck, "power_w": p.power_w,
                    "power_source": p.power_source, "steps_per_joule": p.efficiency,
                    "task_seconds_per_env_step": dict(p.task_seconds), "device_utilization": dict(p.device_utilization)}

        return {"placement": self.placement, "workers": self.workers, "objective": self.objective, "board": self.board,
                "predicted": pred(self.prediction), "throughput_label": "modelled",
                "alternatives": [pred(p) for p in self.ranked[:10]], "tasks": self.task_table(),
                "devices": {n: {"kind": d.kind, "capacity": d.capacity, "idle_w": d.power_idle_w,
                                "active_w": d.power_active_w, "power_source": d.power_source}
                            for n, d in self.tables.devices.items()},
                "unavailable": self.unavailable, "notes": self.notes}

    def print(self, console: Any = None, alternatives: int = 6) -> None:
        """Rich tables: predicted time per task per target, the choice, and the runners-up."""
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        console = console or Console()
        targets = self.targets()
        t = Table(title="Predicted time per call (us) per task and target; * = chosen", title_justify="left")
        t.add_column("task")
        t.add_column("batch", justify="right")
        for target in targets:
            t.add_column(f"{target}\n[{self.tables.target_device[target]}]", justify="right")
        rows = self.task_table()
        for task in TASKS:
            cells = {r["target"]: r for r in rows if r["task"] == task}
            batch = next((r["batch"] for r in cells.values()), "")
            out = []
            for target in targets:
                r = cells.get(target)
                if r is None:
                    out.append("-")
                elif r["source"].startswith("none"):
                    out.append("n/a")  # e.g. no priority update without PER
                else:
                    label = "" if r["source"] == "measured" else " (csynth)" if "csynth" in r["source"] else " (m)"
                    out.append(f"{'*' if r['chosen'] else ''}{r['seconds_per_call'] * 1e6:,.1f}{label}")
            t.add_row(task, str(batch), *out)
        console.print(t)
        console.print("(m) = modelled from cycle counts (the HLS schedule model, or the RTL's with --cycles) and the board catalog; (csynth) = "
                      "modelled from the Vitis csynth report's cycles and clock plus the catalog's link; other "
                      "figures measured on this machine.")
        a = Table(title=f"Placements ranked by {self.objective} (modelled)", title_justify="left")
        for col in ("act", "replay", "learn", "workers", "steady steps/s", "run mean", "bottleneck", "watts", "steps/J"):
            a.add_column(col, justify="left" if col in ("act", "replay", "learn", "bottleneck") else "right", no_wrap=True)
        for p in self.ranked[:alternatives]:
            a.add_row(*(p.placement[r] for r in ROLES), str(p.workers), f"{p.throughput:,.0f}",
                      f"{p.run_throughput:,.0f}", p.bottleneck, f"{p.power_w:.1f} {p.power_source[:3]}.", f"{p.efficiency:.1f}")
        console.print(a)
        p = self.prediction
        console.print("[bold]chosen:[/bold] " + escape(
            f"--placement {self.placement} with {self.workers} actor worker(s): {p.throughput:,.0f} env steps/s "
            f"predicted in steady state, {p.run_throughput:,.0f} over the {self.workload.total_steps:,}-step run "
            f"(modelled), bottleneck {p.bottleneck}, {p.power_w:.1f} W ({p.power_source}), {p.efficiency:.1f} env steps/J"))
        for key, reason in sorted(self.unavailable.items()):
            console.print(escape(f"  unavailable {key}: {reason}"))
        for note in self.notes:
            console.print(escape(f"  note: {note}"))

    def report(self, measured: Mapping[str, float], console: Any = None) -> dict[str, Any]:
        """Print predicted vs measured seconds per env step per task and env steps/s overall.

        `measured`: seconds per env step of each task ("env_step", "act", "replay_insert",
        "replay_sample", "replay_update", "learn", "weight_sync") and "env_steps_per_s". Returns the
        rows (with the relative error) as a dict for logs.
        """
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        p = self.prediction
        rows: dict[str, Any] = {}
        t = Table(title=f"Planner: predicted vs measured ({self.placement}, {self.workers} workers)", title_justify="left")
        for col in ("task", "target", "predicted us/step", "measured us/step", "error"):
            t.add_column(col, justify="left" if col in ("task", "target") else "right")
        per_task = p.run_task_seconds()  # averaged over the run as the trainer's timers are
        for task in TASKS:
            pred = per_task.get(task, 0.0)
            meas = measured.get(task)
            err = _rel_err(pred, meas)
            rows[task] = {"predicted": pred, "measured": meas, "error": err}
            t.add_row(task, p.task_target[task], f"{pred * 1e6:,.1f}", "-" if meas is None else f"{meas * 1e6:,.1f}",
                      "-" if err is None else f"{err:+.0%}")
        meas_x = measured.get("env_steps_per_s")
        pred_x = p.run_throughput
        err = _rel_err(pred_x, meas_x)
        rows["env_steps_per_s"] = {"predicted": pred_x, "measured": meas_x, "error": err}
        t.add_row("[bold]env steps/s[/bold]", "", f"{pred_x:,.0f}", "-" if meas_x is None else f"{meas_x:,.0f}",
                  "-" if err is None else f"{err:+.0%}")
        console.print(t)
        console.print(f"predicted figures are means over the planned {self.workload.total_steps:,}-step run (warm-up and "
                      "worker start and stop included); periodic evaluation is not modelled and slows the measured rate.")
        if any(v.startswith("fpga") for v in p.placement.values()):
            console.print("note: fpga-emu tasks are predicted for the board; measured here they ran in emulation "
                          "on the CPU, so their times are not comparable.")
        return rows


def _rel_err(pred: float, meas: float | None) -> float | None:
    if meas is None or not math.isfinite(meas) or meas <= 0:
        return None
    return (pred - meas) / meas


def default_placement_dict() -> dict[str, str]:
    from pearl_fpga.runtime.placement import default_placement

    return default_placement().as_dict()


def choose_placement(algo: str, env_id: str, config: TrainConfig, objective: str = "throughput", constraints: str | None = None,
                     *, devices: str | Sequence[str] | None = None, board: str | None = None, sizes: Any = None,
                     reprofile: bool = False, progress: bool = True, max_workers: int | None = None,
                     cycles: str = "hls", cpu_watts: tuple[float, float] | None = None,
                     adjust_load: bool = True, csynth_dirs: Sequence[str] = ()) -> Plan:
    """Profile (cached), model and choose the placement and actor-worker count for `objective`.

    devices: targets to consider, e.g. "cpu,cpu-kernel,fpga-emu:pynq-z2"; by default the ones this
    machine really has (cpu, cpu-kernel when built, cuda when present, a board when present), so
    that `train --placement auto` runs what it planned. constraints: see pearl_fpga.planner.assign.
    Raises PlanError (a ValueError) when nothing feasible is left.
    """
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.planner.devices import cpu_cores, discover

    if config.algo != algo or config.env_id != env_id:
        raise PlanError(f"choose_placement: algo/env ({algo}, {env_id}) differ from the config's "
                        f"({config.algo}, {config.env_id}); pass the config of the run you plan")
    targets, board = parse_devices(devices, board)
    if not targets:
        found = discover()
        from pearl_fpga.runtime.placement import bf16_unsupported

        targets = ["cpu", "cpu-kernel"]
        if bf16_unsupported("cpu") is None:  # measured against float32 like any target, chosen only if faster
            targets.append("cpu-bf16")
        if any(d.kind == "cuda" and d.available for d in found):
            targets.append("cuda")
        if any(d.kind == "fpga" and d.available for d in found):
            targets.append("fpga")
        if board is not None:
            targets.append("fpga-emu")
    board_spec = None
    if board is not None or "fpga-emu" in targets or "fpga" in targets:
        try:
            board_spec = get_board(board)
        except Exception as exc:  # noqa: BLE001 - CatalogError: already a user-facing message
            raise PlanError(str(exc)) from exc
    profile = get_profile(config, targets, sizes=sizes, reprofile=reprofile, progress=progress)
    note = None
    if adjust_load and time.time() - profile.created > 60:
        # a cached profile on a machine whose load varies: re-time one learner iteration and, when
        # the CPU is now clearly slower or faster (beyond the noise of that re-timing), scale to it;
        # when it is off by more than a load swing explains, measure again
        from pearl_fpga.planner.host_probe import load_factor

        factor = load_factor(config, profile, repeats=5 if sizes is not None and sizes.repeats < 10 else 20)
        when = time.strftime('%Y-%m-%d %H:%M', time.localtime(profile.created))
        if not 0.4 <= factor <= 2.5:
            profile = get_profile(config, targets, sizes=sizes, reprofile=True, progress=progress)
            note = (f"cached profile from {when} was off by x{factor:.2f} on one learner iteration: "
                    "measured again")
        else:
            scaled = not 0.67 <= factor <= 1.5
            if scaled:
                profile = scale_profile(profile, factor)
            note = (f"cached profile from {when}; one learner iteration now takes x{factor:.2f} its profiled time"
                    + (": host times scaled to it" if scaled else " (within noise: not scaled; --reprofile to measure again)"))
    tables, unavailable, notes = build_tables(config, profile, targets, board_spec, cycles=cycles, cpu_watts=cpu_watts,
                                              csynth_dirs=csynth_dirs)
    if note:
        notes.append(note)
    workload = workload_of(config)
    usable = [t for t in TARGET_ORDER if t in tables.target_device]
    max_w = max_workers if max_workers is not None else max(2, cpu_cores())
    try:
        ranked = search(tables, workload, usable, max_workers=max_w, objective=objective, constraints=constraints,
                        min_workers=0, default=default_placement_dict())
    except PlanError as exc:
        if unavailable:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(unavailable.items()))
            raise PlanError(f"{exc} Unavailable here: {why}") from None
        raise
    best = ranked[0]
    # the runtime's fpga-emu is one catalog board: name the one planned for
    placement = ",".join(f"{r}={best.placement[r]}" + (f":{board_spec.name}" if best.placement[r] == "fpga-emu"
                                                        and board_spec is not None else "") for r in ROLES)
    return Plan(placement=placement, workers=best.workers, objective=objective, prediction=best, ranked=ranked,
                tables=tables, workload=workload, unavailable=unavailable, notes=notes,
                board=board_spec.name if board_spec is not None else None, profile=profile)


__all__ = ["Plan", "PlanError", "choose_placement", "build_tables", "workload_of", "ROLE_TASKS"]
