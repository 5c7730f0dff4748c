"""From a trained run to the files a board loads: `export_run` (and `pearl-fpga export RUN`).

It loads the run's checkpoint the way `pearl-fpga eval` does, takes the policy `evaluate()` scores (the best
one periodic evaluation kept, else the last) and writes, under the output directory:

- `kernel/`: the quantized policy (policy.npz + policy.json, pearl_fpga.kernels.mlp_artifact), exactly the
  MLP kernel the run's evaluation acts with (same integers and formats), with the env's action bounds, so
  that `MLPInfer.load("kernel/", backend=...).act(obs)` returns env actions on any backend, torch-free;
- `policy.onnx`: the float policy (torch.onnx), its outputs actor-scale ([-1, 1]) for DDPG and TD3;
- `policy.qonnx.onnx`: the quantized policy in QONNX (Quant nodes, double-precision arithmetic that
  gives the kernel's bits), for hls4ml and FINN (pearl_fpga.export.onnx_files).

A run whose actors acted in torch (act=cpu or cuda) is quantized as act=cpu-kernel would have done for
the same run (the calibration batch of its seed); a run on fpga-emu:<board> keeps that board's sizes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.errors import ArtifactError, missing_dependency

KINDS = ("kernel", "onnx", "qonnx")
"""What export can write: the torch-free kernel policy, the float ONNX, the quantized QONNX."""
KERNEL_DIR = "kernel"
ONNX_FILE = "policy.onnx"
QONNX_FILE = "policy.qonnx.onnx"
SUMMARY_FILE = "export.json"


@dataclass
class ExportResult:
    """What `export_run` wrote and where the policy came from."""

    out: Path
    files: dict[str, Path] = field(default_factory=dict)  # kind -> path
    info: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "files": {k: str(v) for k, v in self.files.items()}, "info": self.info}


@dataclass
class RunPolicy:
    """The policy of a run as the training side holds it."""

    kernel: Any  # MLPInfer: the quantized policy evaluate() acts with
    module: Any  # torch nn.Sequential: the float policy with the same weights
    action: str  # how act() makes actions from the outputs (kernels.mlp_artifact.ACTION_RULES)
    action_low: np.ndarray  # env bounds (continuous) or the kernel's (-1, 1) (discrete)
    action_high: np.ndarray
    calibration: np.ndarray
    info: dict[str, Any]
    trainer: Any  # the loaded Trainer (close() it)


def checkpoint_dir(path: Path) -> Path:
    """The checkpoint directory of a run directory (its checkpoint/) or of a checkpoint directory itself."""
    for candidate in (path, path / "checkpoint"):
        if (candidate / "manifest.json").is_file():
            return candidate
        if (candidate / "tabular.npz").is_file():
            raise ArtifactError(f"{candidate} is a tabular run: its Q table is the checkpoint's tabular.npz, which the "
                                "TabularQ kernel loads as it is; export writes MLP policies (dqn, ddpg, td3)")
    raise ArtifactError(f"{path} is neither a checkpoint (no manifest.json) nor a run directory with checkpoint/; "
                        "pass e.g. runs/dqn-CartPole-v1-s0 or its checkpoint/ folder")


def export_placement(saved: str) -> str:
    """The placement the run is loaded with for export: its act target if that is a C++ kernel
    (cpu-kernel, fpga-emu:<board>), else cpu-kernel; replay and learn on the CPU (nothing trains)."""
    from pearl_fpga.runtime.placement import parse_placement

    placement = parse_placement(saved)
    act = placement.target("act") if placement.act in ("cpu-kernel", "fpga-emu") else "cpu-kernel"
    return f"act={act},replay=cpu,learn=cpu"


def run_policy(run: str | Path, which: str = "best") -> RunPolicy:
    """Load `run` (a run directory or checkpoint) and its policy: `which` = "best" (what evaluate() scores:
    the best kept by periodic evaluation, else the last) or "last"."""
    if which not in ("best", "last"):
        raise ValueError(f"which must be 'best' or 'last', not {which!r}")
    try:
        from pearl_fpga.runtime.checkpoint import MANIFEST_FILE
        from pearl_fpga.trainer import Trainer
    except ImportError as exc:
        raise (missing_dependency(exc, "pearl-fpga export (loading a training run)") or exc) from None
    from pearl_fpga.errors import CheckpointError
    from pearl_fpga.safe_io import read_json

    directory = checkpoint_dir(Path(run))
    try:
        manifest = read_json(directory / MANIFEST_FILE, "checkpoint manifest", error=CheckpointError)
    except FileNotFoundError:
        raise CheckpointError(f"{directory} is not a checkpoint: {MANIFEST_FILE} is missing") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("placement"), str):
        raise ArtifactError(f"{directory / MANIFEST_FILE} has no placement: it is not a checkpoint of a deep RL run")
    trainer = Trainer.load(directory, placement=export_placement(manifest["placement"]), workers=0, engine="inline")
    try:
        if which == "best" and trainer.best is not None:
            weights, step, chosen = trainer.best["weights"], int(trainer.best["step"]), "best"
        else:
            weights, step, chosen = trainer.algo.policy_module.state_dict(), trainer.env_steps, "last"
        policy = trainer.eval_policy  # the ActorPolicy evaluate() acts with, its kernel's formats included
        policy.load_weights(weights)
        spec = trainer.spec
        rule = policy.head.action_rule  # how the algorithm's actor head acts greedily (pearl_fpga.algos.heads)
        if rule is None:
            raise ArtifactError(f"the actor head {type(policy.head).__name__} of {trainer.config.algo} names no rule "
                                "MLPInfer.act knows (its `action_rule`: one of kernels.mlp_artifact.ACTION_RULES)")
        if spec.discrete:
            low, high = np.full(spec.action_dim, -1.0), np.full(spec.action_dim, 1.0)
        else:
            low = np.asarray(spec.action_low, dtype=np.float64).reshape(-1)
            high = np.asarray(spec.action_high, dtype=np.float64).reshape(-1)
        info: dict[str, Any] = {
            "run": str(Path(run)), "algo": trainer.config.algo, "env_id": trainer.config.env_id,
            "seed": trainer.seed, "env_steps": trainer.env_steps, "policy": chosen, "policy_step": step,
            "placement": manifest["placement"], "exported_with": str(trainer.placement),
            "obs_dim": spec.obs_dim, "discrete": spec.discrete, "action_dim": spec.action_dim,
            "best_eval_mean": float(trainer.best["mean"]) if trainer.best is not None else None,
        }
        if trainer.placement.board:
            info["board"] = trainer.placement.board
        return RunPolicy(policy.kernel, policy.module, rule, low, high, trainer.calibration, info,
                         trainer)
    except BaseException:
        trainer.close()
        raise


def export_run(run: str | Path, out: str | Path, kinds: tuple[str, ...] = KINDS, which: str = "best") -> ExportResult:
    """Write the policy of `run` under `out` (module docstring): each of `kinds`, and export.json listing
    them. Raises ArtifactError (not a run, a tabular run), MissingDependency (onnx or qonnx without the
    export extra: pip install 'pearl_fpga[export]')."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        raise ValueError(f"kinds must be among {', '.join(KINDS)}, got {', '.join(kinds) or 'none'}")
    out = Path(out)
    policy = run_policy(run, which)
    try:
        result = ExportResult(out, info=dict(policy.info))
        kernel_info = {**policy.info, "max_error": policy.kernel.max_error}
        result.info["max_error"] = kernel_info["max_error"]
        if "kernel" in kinds:
            result.files["kernel"] = policy.kernel.save(out / KERNEL_DIR, action_low=policy.action_low,
                                                        action_high=policy.action_high, info=kernel_info,
                                                        action=policy.action)
        if "onnx" in kinds or "qonnx" in kinds:
            from pearl_fpga.export import onnx_files

            if "onnx" in kinds:
                result.files["onnx"] = onnx_files.write_onnx(policy.module, policy.calibration, out / ONNX_FILE)
            if "qonnx" in kinds:
                result.files["qonnx"] = onnx_files.write_qonnx(policy.kernel, out / QONNX_FILE)
        (out / SUMMARY_FILE).write_text(json.dumps(result.as_dict(), indent=2, allow_nan=False) + "\n")
        result.files["summary"] = out / SUMMARY_FILE
        return result
    finally:
        policy.trainer.close()
