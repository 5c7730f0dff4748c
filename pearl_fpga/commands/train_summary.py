"""The end of a deep `pearl-fpga train` run: summary.json's record and the console's summary table (where the
time goes, per device, rates, the emulated board's modelled times)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pearl_fpga.config import TrainConfig


def board_report(trainer: Any) -> dict[str, Any] | None:
    """The emulated board's modelled times of the run's kernel tasks (planner.fpga_model.board_run)."""
    from pearl_fpga.planner.fpga_model import board_run
    from pearl_fpga.runtime.emulation import emulated_board
    from pearl_fpga.runtime.engines import resolve_engine

    board = emulated_board(trainer.placement)
    if board is None:
        return None
    stats = trainer.stats()
    return board_run(board, trainer.config, trainer.spec.obs_dim, trainer.spec.action_dim, trainer.spec.discrete,
                     trainer.placement, trainer.timer.seconds, trainer.timer.calls, stats.env_steps_run, stats.elapsed,
                     resolve_engine(trainer.config) == "inline")


def engine_text(config: TrainConfig, engine_obj: Any = None) -> str:
    from pearl_fpga.runtime.engines import resolve_engine

    engine = resolve_engine(config)
    if engine == "processes":
        return f"processes ({config.workers} actor worker{'s' if config.workers != 1 else ''})"
    if engine == "ray":
        where = config.ray_address or "local Ray instance"
        sizing = getattr(engine_obj, "sizing", "")
        return (f"ray ({config.actors} actor{'s' if config.actors != 1 else ''}, {config.replay_shards} replay "
                f"shard{'s' if config.replay_shards != 1 else ''}, {where}{'; ' + sizing if sizing else ''})")
    return "inline"


def run_summary(trainer: Any, measured: dict[str, float], result: Any) -> dict[str, Any]:
    """summary.json: "placement" is the one asked for (a --placement value); "placed" where each task ran, as
    the console says it (a uniform buffer is host memory wherever replay is placed); "board_fit" what fitting
    the preset to an emulated board changed, with the console's line; rates count this command's steps."""
    stats = trainer.stats()
    return {
        "algo": trainer.config.algo, "env_id": trainer.config.env_id, "seed": trainer.seed,
        "placement": str(trainer.placement),
        "placed": {task: trainer.device_of(task) for task in ("act", "replay", "learn")},
        "board_fit": getattr(trainer, "board_fit", None), "workers": trainer.config.workers,
        "env_steps": trainer.env_steps, "grad_steps": trainer.grad_steps, "episodes": trainer.episodes,
        "env_steps_run": stats.env_steps_run, "grad_steps_run": stats.grad_steps_run,
        "grad_steps_per_s": stats.grad_steps_run / stats.elapsed if stats.elapsed > 0 else 0.0,
        "updates_per_env_step": trainer.grad_steps / max(trainer.env_steps, 1),
        "updates_per_env_step_configured": trainer.config.gradient_steps / trainer.config.train_freq,
        "engine": engine_text(trainer.config, trainer.engine), "faults": trainer.faults(),
        "worker_restarts": trainer.worker_restarts,
        "eval_mean_return": result.mean, "eval_std_return": result.std, "eval_episodes": len(result.returns),
        "eval_policy": result.policy, "eval_policy_step": result.policy_step,
        "seconds_per_env_step": {k: v for k, v in measured.items() if k != "env_steps_per_s"},
        "env_steps_per_s": measured["env_steps_per_s"],
        "learner_threads": trainer.learner_threads_report(),
        "update_schedule": trainer.update_schedule_report(),
        "devices": {k: trainer.device_of(k) for k in measured if k != "env_steps_per_s"},
        "config": trainer.config.to_dict(),
    }


def print_summary(console: Any, trainer: Any, measured: dict[str, float], result: Any, png: Path,
                   board: dict[str, Any] | None = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    from pearl_fpga.runtime.vocabulary import TASKS

    stats = trainer.stats()
    if not stats.env_steps_run:  # nothing trained in this command (--steps not above the checkpoint's)
        console.print(escape(f"evaluation: {result}"))
        return
    steps = max(stats.env_steps_run, 1)
    modelled = board["seconds_per_env_step"] if board else {}
    title = "Where the time goes (summed over processes" + (
        f"; {board['board']} us: the board's modelled time per env step)" if board else ")")
    table = Table(title=title, title_justify="left")
    cols = ("task", "device", "total s", "us / env step", *((f"{board['board']} us",) if board else ()),
            "calls", "calls / s")
    for col in cols:
        table.add_column(col, justify="left" if col in ("task", "device") else "right")
    per_device: dict[str, float] = {}
    for key in (*TASKS, "eval", "checkpoint"):
        secs = trainer.timer.seconds.get(key, 0.0)
        calls = trainer.timer.calls.get(key, 0)
        if not calls:
            continue
        device = trainer.device_of(key)
        per_device[device] = per_device.get(device, 0.0) + secs
        on_board = (f"{modelled[key] * 1e6:,.1f}" if key in modelled else "-",) if board else ()
        table.add_row(key, device, f"{secs:.2f}", f"{secs / steps * 1e6:,.1f}", *on_board, f"{calls:,}",
                      f"{calls / secs:,.0f}" if secs > 0 else "-")
    console.print(table)
    fit = getattr(trainer, "board_fit", None)
    if fit:
        console.print(escape("the experiment was changed for the board: " + fit["text"]))
    dev = Table(title="Time per device", title_justify="left")
    dev.add_column("device")
    dev.add_column("busy s", justify="right")
    for device, secs in sorted(per_device.items(), key=lambda kv: -kv[1]):
        dev.add_row(device, f"{secs:.2f}")
    console.print(dev)
    elapsed = stats.elapsed
    console.print(f"env steps/s {measured['env_steps_per_s']:,.0f}   gradient updates/s "
                  f"{stats.grad_steps_run / elapsed if elapsed > 0 else 0:,.0f}   episodes {trainer.episodes:,}   "
                  f"actor restarts {trainer.worker_restarts}", markup=False)
    if board:
        rate = board["env_steps_per_s"]
        console.print(f"{board['board']} (modelled): kernel tasks {sum(modelled.values()) * 1e6:,.1f} us / env step on the "
                      "board; " + (f"env steps/s the board would sustain {rate:,.0f} (this run with the kernel tasks "
                                   "timed as on the board)" if rate else "env steps/s modelled for inline runs only"),
                      markup=False)
    faults = trainer.faults()
    if faults.get("nonfinite_dropped"):
        console.print(f"[yellow]transitions dropped for non-finite values (nonfinite_transitions=drop): "
                      f"{faults['nonfinite_dropped']:,}[/yellow]")
    if faults["shard_restarts"]:
        console.print(f"[yellow]replay shard restarts {faults['shard_restarts']:d}, transitions lost with them "
                      f"{faults['transitions_lost']:,}[/yellow]")
    console.print(escape(f"learner threads: {trainer.learner_threads_report()}"))
    if trainer.update_schedule_report() is not None:
        console.print(escape(f"update schedule: {trainer.update_schedule_report()}"))
    console.print(escape(f"evaluation: {result}"))
    console.print(escape(f"learning curve: {png}"))
