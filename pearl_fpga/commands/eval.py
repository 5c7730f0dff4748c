"""`pearl-fpga eval RUN_OR_CHECKPOINT`: evaluate a saved run's policy (the best one periodic evaluation
kept, else the last) for deterministic episodes on the act device, without training; optionally
record one episode as a video."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HELP = "evaluate a saved run or checkpoint (e.g. runs/dqn-CartPole-v1-s0), optionally recording a video"
VIDEO_EXTRA = "pip install 'pearl_fpga[video]' (moviepy, and pygame for the classic-control envs)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN_OR_CHECKPOINT",
                        help="a run's log directory (its checkpoint/) or a checkpoint directory")
    parser.add_argument("--episodes", type=int, default=20, help="deterministic episodes (default 20)")
    parser.add_argument("--placement", default=None, help="act device (default: the run's placement)")
    parser.add_argument("--render", choices=("rgb_array",), default=None, help="render frames (needed by --video)")
    parser.add_argument("--video", type=Path, default=None, metavar="OUT.mp4", help="record one episode to this file")
    parser.add_argument("--fps", type=int, default=30, help="frames per second of --video (default 30)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--trust-env-module", action="store_true",
                        help="import the module that the checkpoint's env id names (module:Env-v0); without it "
                             "such a checkpoint is refused, since a file must not decide what code runs")


def checkpoint_of(path: Path) -> Path:
    """The checkpoint directory of a run directory or of a checkpoint directory itself (a deep run's
    manifest.json or a tabular run's tabular.npz)."""
    from pearl_fpga.runtime.tabular_trainer import CHECKPOINT_FILE

    for candidate in (path, path / "checkpoint"):
        if (candidate / "manifest.json").is_file() or (candidate / CHECKPOINT_FILE).is_file():
            return candidate
    raise ValueError(f"{path} is neither a checkpoint (no manifest.json) nor a run directory with checkpoint/; "
                     "pass e.g. runs/dqn-CartPole-v1-s0 or its checkpoint/ folder")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from pearl_fpga.commands.common import report_error
    from pearl_fpga.errors import PearlError
    from pearl_fpga.trainers import load_trainer

    console = Console(stderr=args.json)
    trainer = None
    try:
        if args.episodes < 1:
            raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
        if args.video is not None and args.render != "rgb_array":
            raise ValueError("--video needs --render rgb_array")
        if args.video is not None:
            _video_writer()  # fail before loading anything when the extra is missing
        trainer = load_trainer(checkpoint_of(args.run), placement=args.placement, workers=0, engine="inline",
                               trust_env_module=args.trust_env_module)
        result = trainer.evaluate(args.episodes)
        video = record_video(trainer, args.video, args.fps) if args.video is not None else None
    except (PearlError, ValueError) as exc:
        return report_error(console, exc)
    finally:
        if trainer is not None:
            trainer.close()
    summary = {"algo": trainer.config.algo, "env_id": trainer.config.env_id, "env_steps": trainer.env_steps,
               "placement": str(trainer.placement), "eval_mean_return": result.mean, "eval_std_return": result.std,
               "eval_episodes": len(result.returns), "eval_policy": result.policy,
               "eval_policy_step": result.policy_step, "video": str(video) if video else None}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        console.print(escape(f"{trainer.config.algo.upper()} on {trainer.config.env_id}, trained {trainer.env_steps:,} "
                             f"env steps, act on {trainer.device_of('act')}: {result}"))
        if video:
            console.print(escape(f"video: {video}"))
    return 0


def _video_writer() -> Any:
    try:
        from moviepy.video.io.ImageSequenceClip import ImageSequenceClip
    except ImportError as exc:
        raise ValueError(f"--video needs moviepy, which is not installed: {VIDEO_EXTRA}") from exc
    return ImageSequenceClip


def record_video(trainer: Any, path: Path, fps: int) -> Path:
    """One deterministic episode of `trainer.predict`, rendered to `path` (an .mp4)."""
    import gymnasium as gym
    import numpy as np

    clip = _video_writer()
    try:
        env = gym.make(trainer.config.env_id, render_mode="rgb_array")
        obs, _ = env.reset(seed=trainer.seed + 3_000_000)
        frames = [env.render()]
        done = False
        while not done:
            action, _ = trainer.predict(obs, deterministic=True)
            obs, _, terminated, truncated, _ = env.step(action.item() if np.ndim(action) == 0 else action)
            frames.append(env.render())
            done = terminated or truncated
        env.close()
    except gym.error.DependencyNotInstalled as exc:
        raise ValueError(f"rendering {trainer.config.env_id} needs a package that is not installed ({exc}): "
                         f"{VIDEO_EXTRA}") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    clip(frames, fps=fps).write_videofile(str(path), logger=None)
    return path
