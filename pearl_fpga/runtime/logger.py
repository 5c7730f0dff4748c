"""Run logs: CSV files, TensorBoard events and the PNG learning curve of a training run."""

from __future__ import annotations

import csv
import math
import tempfile
from collections import deque
from pathlib import Path
from typing import Any


EPISODE_WINDOW = 100
"""rollout/ep_rew_mean and rollout/ep_len_mean average the last this many episodes (SB3's stats_window_size)."""

TENSORBOARD_TAGS = {
    "rollout/ep_rew_mean": "mean return of the last 100 episodes (SB3's tag), at each episode's end",
    "rollout/ep_len_mean": "mean length of the last 100 episodes (SB3's tag)",
    "eval/mean_reward": "mean return of an evaluation (SB3's EvalCallback tag)",
    "eval/std_reward": "its standard deviation",
    "time/fps": "env steps per second of the current train() call (SB3's tag)",
    "time/episodes": "episodes so far (SB3's time/episodes)",
    "train/loss": "the learner's last loss (SB3's tag; an actor-critic's: its critic's)",
    "train/n_updates": "gradient steps so far (SB3's tag)",
}
"""Every TensorBoard tag a run writes, each at the env step (SB3's x axis): the names SB3 users' dashboards
read (docs/training.md lists them)."""


class RunLogger:
    """Writes episodes.csv, evaluations.csv, progress.csv and TensorBoard events under `logdir`."""

    def __init__(self, logdir: str | Path, tensorboard: bool = True, append: bool = False) -> None:
        """append=False starts the CSV files afresh (a new run); True continues them (a resumed run)."""
        self.logdir = Path(logdir)
        self.append = append
        try:  # found now, not at the first episode's row (the CSV files open lazily)
            self.logdir.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.logdir).close()
        except OSError as exc:
            raise ValueError(f"the log directory (--logdir) {self.logdir} cannot hold the run's logs "
                             f"({exc.strerror or exc}); pass a writable folder") from None
        self._files: dict[str, Any] = {}
        self._writers: dict[str, Any] = {}
        self.messages: list[str] = []
        self._recent: deque[tuple[float, int]] = deque(maxlen=EPISODE_WINDOW)  # (return, length)
        self.tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(self.logdir / "tensorboard"))

    def _row(self, name: str, header: list[str], row: list[Any]) -> None:
        if name not in self._files:
            path = self.logdir / f"{name}.csv"
            new = not self.append or not path.exists() or path.stat().st_size == 0
            fh = open(path, "a" if self.append else "w", newline="")
            self._files[name] = fh
            self._writers[name] = csv.writer(fh)
            if new:
                self._writers[name].writerow(header)
        self._writers[name].writerow(row)
        self._files[name].flush()

    def episode(self, step: int, ret: float, length: int) -> None:
        self._row("episodes", ["env_step", "return", "length"], [step, f"{ret:.4f}", length])
        if self.tb is not None:
            self._recent.append((ret, length))
            self.tb.add_scalar("rollout/ep_rew_mean", sum(r for r, _ in self._recent) / len(self._recent), step)
            self.tb.add_scalar("rollout/ep_len_mean", sum(n for _, n in self._recent) / len(self._recent), step)

    def evaluation(self, step: int, mean: float, std: float) -> None:
        self._row("evaluations", ["env_step", "mean_return", "std_return"], [step, f"{mean:.4f}", f"{std:.4f}"])
        if self.tb is not None:
            self.tb.add_scalar("eval/mean_reward", mean, step)
            self.tb.add_scalar("eval/std_reward", std, step)

    def progress(self, stats: Any) -> None:
        self._row("progress", ["env_step", "grad_steps", "elapsed_s", "env_steps_per_s", "loss", "recent_return"],
                  [stats.env_steps, stats.grad_steps, f"{stats.elapsed:.3f}", f"{stats.steps_per_s:.1f}",
                   loss_text(stats, 6),
                   "" if math.isnan(stats.recent_return) else f"{stats.recent_return:.3f}"])
        if self.tb is not None:
            self.tb.add_scalar("time/fps", stats.steps_per_s, stats.env_steps)
            self.tb.add_scalar("time/episodes", stats.episodes, stats.env_steps)
            self.tb.add_scalar("train/n_updates", stats.grad_steps, stats.env_steps)
            if stats.loss_known:  # a NaN loss is logged as NaN: it must not look like "no loss yet"
                self.tb.add_scalar("train/loss", stats.loss, stats.env_steps)

    def message(self, text: str) -> None:
        self.messages.append(text)
        with open(self.logdir / "messages.log", "a") as fh:
            fh.write(text + "\n")

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()
        if self.tb is not None:
            self.tb.flush()
            self.tb.close()
            self.tb = None


def loss_text(stats: Any, digits: int = 4) -> str:
    """The loss for a log or a progress line: "" before the first gradient step, "nan"/"inf" when the
    loss is not finite (never hidden as "no loss yet")."""
    if not stats.loss_known:
        return ""
    if math.isnan(stats.loss):
        return "nan"
    if math.isinf(stats.loss):
        return "inf" if stats.loss > 0 else "-inf"
    return f"{stats.loss:.{digits}f}"


def plot_learning_curve(episode_log: list[tuple[int, float, int]], eval_log: list[tuple[int, float, float]],
                        path: str | Path, title: str) -> Path:
    """PNG of episode returns (and their moving average) and evaluation means against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    if episode_log:
        steps = np.array([s for s, _, _ in episode_log])
        rets = np.array([r for _, r, _ in episode_log])
        ax.plot(steps, rets, ".", alpha=0.25, markersize=3, label="training episodes")
        k = min(20, len(rets))
        smooth = np.convolve(rets, np.ones(k) / k, mode="valid")
        ax.plot(steps[k - 1:], smooth, label=f"moving average ({k})")
    if eval_log:
        es = np.array(eval_log)
        ax.errorbar(es[:, 0], es[:, 1], yerr=es[:, 2], fmt="o-", capsize=3, label="evaluation (deterministic)")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def logger_for(logger: Any, logdir: str | Path | None) -> Any:
    """The logger of a trainer given `logger=` (an object with RunLogger's methods) or `logdir=` (a
    RunLogger there, with TensorBoard events when tensorboard is installed), not both."""
    if logdir is None:
        return logger
    if logger is not None:
        raise ValueError("pass either logger= or logdir= to Trainer, not both")
    import importlib.util

    return RunLogger(logdir, tensorboard=importlib.util.find_spec("tensorboard") is not None)
