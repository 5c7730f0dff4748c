"""What the commands share: the error line, the default log directory, the progress display of a
training run (any Trainer: the deep and the tabular ones report the same Stats), and its summary.json."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pearl_fpga.runtime.run_protocol import TrainerProtocol


def report_error(console: Any, exc: BaseException) -> int:
    """Print `error: <exc>` (escaped: the text may hold brackets) and return the exit status 2."""
    from rich.markup import escape

    console.print(f"[red]error:[/red] {escape(str(exc))}")
    return 2


def default_logdir(name: str, env_id: str, seed: int, resume: bool) -> Path:
    """runs/<name>-<env>-s<seed>; a new run never overwrites an earlier one (-2, -3, ... suffixes),
    --resume without --logdir continues the unsuffixed one."""
    base = Path("runs") / f"{name}-{env_id}-s{seed}"
    if resume or not base.exists():
        return base
    n = 2
    while (base.parent / f"{base.name}-{n}").exists():
        n += 1
    return base.parent / f"{base.name}-{n}"


def fmt(x: float | None, digits: int = 1) -> str:
    """A figure for a progress line: "-" when there is none yet (None or NaN)."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def train_with_progress(trainer: Any, steps: int, console: Any) -> None:
    """trainer.train(steps) with live rich progress on a terminal; a plain line every 10 s otherwise."""
    from pearl_fpga.runtime.logger import loss_text

    if console.is_terminal:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        columns = (TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                   TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"), TextColumn("{task.fields[rate]}"),
                   TextColumn("return {task.fields[ret]}"), TextColumn("loss {task.fields[loss]}"),
                   TextColumn("ETA"), TimeRemainingColumn())
        with Progress(*columns, console=console, refresh_per_second=4) as progress:
            start = trainer.env_steps
            task = progress.add_task(trainer.config.algo.upper(), total=steps, rate="", ret="-", loss="-")

            def update(stats: Any) -> None:
                progress.update(task, completed=min(stats.env_steps - start, steps),
                                rate=f"{stats.steps_per_s:,.0f} steps/s", ret=fmt(stats.recent_return),
                                loss=loss_text(stats, 4) or "-")

            trainer.train(steps, progress=update)
        return

    last = [0.0]

    def line(stats: Any) -> None:
        now = time.monotonic()
        if now - last[0] < 10 and stats.env_steps < stats.target_steps:
            return
        last[0] = now
        rate = stats.steps_per_s
        eta = max(stats.target_steps - stats.env_steps, 0) / rate if rate > 0 else float("nan")
        print(f"step {stats.env_steps:,}/{stats.target_steps:,}  {rate:,.0f} steps/s  ETA {fmt(eta, 0)} s  "
              f"return {fmt(stats.recent_return)}  loss {loss_text(stats, 4) or '-'}  best eval {fmt(stats.best_eval)}",
              file=sys.stderr if console.stderr else sys.stdout, flush=True)

    trainer.train(steps, progress=line, progress_interval=1.0)


def warn_no_learning(trainer: TrainerProtocol, steps: int, strict: bool, console: Any) -> bool:
    """A budget in which the schedule allows no update (trainer.no_learning_problem): with --strict, train()
    raises NoLearningError; else the warning goes to the console here, at the start. True when it was printed."""
    from rich.markup import escape

    trainer.strict = strict
    problem = trainer.no_learning_problem(steps)
    if problem is None or strict:
        return False
    console.print(f"[yellow]warning:[/yellow] {escape(problem)} (--strict makes this an error)")
    return True
def write_summary(logdir: Path, summary: dict[str, Any]) -> None:
    """summary.json, atomically: a full disk leaves the previous one (or none), never half a file."""
    from pearl_fpga.runtime.atomic import write_atomically

    write_atomically(logdir / "summary.json", lambda fh: fh.write((json.dumps(summary, indent=2) + "\n").encode()))


def report_lost_outputs(console: Any, exc: OSError, logdir: Path, ckpt: Path | None) -> int:
    """Training ended, but its pictures or summary could not be written (a full disk): say so, exit 1."""
    from rich.markup import escape

    from pearl_fpga.runtime.atomic import describe_write_error

    kept = f"the checkpoint in {ckpt} is complete (pearl-fpga eval {ckpt} evaluates it again)" if ckpt else \
        "nothing else was lost"
    console.print("[red]error:[/red] " + escape(
        f"training finished, but its summary and learning curve could not be written to {logdir}: "
        f"{describe_write_error(exc, 'choose another --logdir')}; {kept}"))
    return 1
