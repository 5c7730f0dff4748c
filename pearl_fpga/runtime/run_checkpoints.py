"""A deep training run's checkpoints (the Trainer's save/load, apart from its loop): written crash-
consistently and locked (runtime.checkpoint), read back validated, resumed exactly; and the guard that
keeps anything non-finite out of them and out of the actors (check_finite: DivergenceError)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError, DivergenceError
from pearl_fpga.runtime.checkpoint import (check_writable, checkpoint_lock, first_nonfinite, global_rng_state, read_newest,
                                         recover_checkpoint, restore_run_state, resumed_config, run_state,
                                         set_global_rng_state, write_checkpoint)
from pearl_fpga.runtime.envs import ENV_MODULE_CONSENT, check_env_import
from pearl_fpga.runtime.placement import Placement
from pearl_fpga.runtime.state_checks import check_trainer_state


class CheckpointedRun:
    """Mixed into pearl_fpga.Trainer; saves and restores the state its loop keeps."""

    config: Any
    seed: int
    placement: Any
    algo: Any
    replay: Any
    actor: Any
    best: dict[str, Any] | None
    episode_log: list[tuple[int, float, int]]
    eval_log: list[tuple[int, float, float]]
    env_steps: int
    grad_steps: int
    episodes: int
    checkpoint_dir: Path | None
    _lock: Any
    _stop: Any
    _faults_before: dict[str, int]
    _last_checkpoint: tuple[Path, int] | None
    losses: Any

    def faults(self) -> dict[str, int]:  # RunReports'
        raise NotImplementedError

    def check_finite(self, full: bool) -> None:
        """DivergenceError when the losses since the last report, or the policy's weights (full: every
        tensor of the algorithm, optimizer moments included), hold a NaN or an infinity."""
        problem = self.losses.problem()
        if problem is not None:
            self._diverged(problem)
        where = first_nonfinite(self.algo.state_dict() if full else self.algo.policy_module.state_dict(),
                                "" if full else "policy.")
        if where is not None:
            self._diverged(f"the weights are not finite ({where})")

    def _diverged(self, cause: str) -> None:
        cfg = self.config
        if self._last_checkpoint is not None:
            path, step = self._last_checkpoint
            kept = f"the last checkpoint, {path} (env step {step:,}), is intact"
        else:
            kept = "no checkpoint of this run was written before"
        raise DivergenceError(f"training diverged at env step {self.env_steps:,}, after {self.grad_steps:,} gradient steps: "
                              f"{cause}. Lower learning_rate (now {cfg.learning_rate:g}) or clip the gradients "
                              f"(max_grad_norm, now {cfg.max_grad_norm:g}) and start again or resume; {kept}, "
                              "nothing non-finite was saved")

    def save(self, directory: str | Path) -> Path:
        """Write a checkpoint (state.pt + manifest.json) crash-consistently: to a temporary directory,
        read back and checked, then renamed into place (runtime.checkpoint.write_checkpoint). Refuses
        (DivergenceError) a state with non-finite weights; CheckpointError on a write error (the
        previous checkpoint is kept)."""
        directory = Path(directory)
        self.check_finite(full=True)
        ours = self._lock is not None and self.checkpoint_dir is not None and \
            Path(self.checkpoint_dir).absolute() == directory.absolute()
        with self._stop.saving_checkpoint(), (contextlib.nullcontext() if ours else checkpoint_lock(directory)):
            path = self._write(directory)
        self._last_checkpoint = (path, self.env_steps)
        return path

    def _open_checkpoint_dir(self) -> None:
        """Lock the checkpoint directory, check that it is writable, and put back the newest complete
        copy a crash left (removing temporary copies), before the first step."""
        assert self.checkpoint_dir is not None
        check_writable(self.checkpoint_dir)
        self._lock = checkpoint_lock(self.checkpoint_dir).acquire()
        try:
            recover_checkpoint(self.checkpoint_dir)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def _check_saved(self, manifest: dict[str, Any], state: dict[str, Any]) -> None:
        """What a checkpoint read back must pass before it replaces the previous one."""
        check = getattr(self.replay, "check_state_dict", None)
        if check is not None:
            check(state["replay"])
        if manifest["counters"]["env_steps"] != self.env_steps or manifest["counters"]["grad_steps"] != self.grad_steps:
            raise CheckpointError("its counters differ from the trainer's")

    def _write(self, directory: Path) -> Path:
        state = run_state(self.algo, self.replay, self.actor, self.best, self.episode_log, self.eval_log)
        faults = self.faults()
        counters = {"env_steps": self.env_steps, "grad_steps": self.grad_steps, "episodes": self.episodes,
                    "target_checked": 0, **self.algo.progress_state(), "faults": faults,
                    "worker_restarts": faults["actor_restarts"]}
        return write_checkpoint(directory, state, {
            "algo": self.config.algo, "env_id": self.config.env_id, "seed": self.seed,
            "placement": str(self.placement), "config": self.config.to_dict(), "counters": counters,
        }, check=self._check_saved)

    @classmethod
    def load(cls, directory: str | Path, placement: str | Placement | dict | None = None,
             workers: int | None = None, logger: Any = None, checkpoint_dir: str | Path | None = None,
             engine: str | None = None, ray_address: str | None = None, expect: dict[str, Any] | None = None,
             overrides: dict[str, Any] | None = None, trust_env_module: bool = False) -> Any:
        """Restore a Trainer from `save()`. Networks, optimizers, replay, RNGs, envs and counters come
        back; `placement`/`workers` may differ from the saved run. `expect` (e.g. {"algo": "dqn",
        "env_id": "CartPole-v1"}) must match the manifest. `overrides` are TrainConfig fields asked for
        by the resuming run: those of RESUMABLE_FIELDS are applied, a different value of any other
        field raises CheckpointError listing the differences. A checkpoint whose env id names a module
        (`my_pkg.envs:Corridor-v0`, which gymnasium imports) is refused unless `trust_env_module` is
        True or `expect` names that same env id: a file never decides what code runs.

        When a crash left the newest complete copy beside `directory` (a `.tmp-`/`.old-` sibling), it
        is put back in place first. Raises CheckpointError, touching nothing: the process-global RNGs
        (seeded by the Trainer) are restored on any failure. A tabular run's checkpoint is
        pearl_fpga.TabularTrainer.load's (pearl_fpga.load_trainer takes either). `directory` may also be a
        run's log directory (runs/...), whose checkpoint/ is loaded, as `pearl-fpga eval` does."""
        directory = run_checkpoint_dir(Path(directory))
        rngs = global_rng_state()
        try:
            manifest, state = read_newest(directory, expect)
            try:
                config = TrainConfig.from_dict(manifest["config"])
            except ValueError as exc:
                raise CheckpointError(f"checkpoint {directory}: invalid config in manifest: {exc}") from exc
            if overrides:
                config = resumed_config(config, overrides, directory)
            check_env_import(config.env_id, f"checkpoint {directory}",
                             trust_env_module or (expect or {}).get("env_id") == config.env_id, ENV_MODULE_CONSENT)
            try:
                trainer = cls(algo=config.algo, env=config.env_id,  # type: ignore[call-arg]
                              placement=placement if placement is not None else manifest["placement"],
                              config=config, seed=int(manifest["seed"]), workers=workers, logger=logger,
                              checkpoint_dir=checkpoint_dir, engine=engine, ray_address=ray_address)
            except ValueError as exc:  # e.g. an env id or seed of the manifest that makes no trainer here
                raise CheckpointError(f"checkpoint {directory}: its manifest does not make a trainer: {exc}") from exc
            try:
                trainer._restore(state, manifest["counters"])
            except CheckpointError as exc:  # the state checks name the field, this the checkpoint
                raise CheckpointError(f"checkpoint {directory}: {exc}") from None
            except (KeyError, RuntimeError, ValueError, TypeError, IndexError) as exc:
                raise CheckpointError(f"checkpoint {directory} does not fit this trainer: {exc}") from exc
        except BaseException:
            set_global_rng_state(rngs)
            raise
        trainer._last_checkpoint = (directory, trainer.env_steps)
        return trainer

    def _restore(self, state: dict[str, Any], counters: dict[str, Any]) -> None:
        check_trainer_state(state, self)  # everything, before anything changes
        self.best, self.episode_log, self.eval_log = restore_run_state(state, self.algo, self.replay, self.actor)
        self.env_steps = int(counters["env_steps"])
        self.grad_steps = int(counters["grad_steps"])
        self.episodes = int(counters["episodes"])
        self.algo.load_progress_state(counters)
        faults = counters.get("faults", {"actor_restarts": counters.get("worker_restarts", 0)})
        self._faults_before = {k: int(v) for k, v in faults.items()}


def run_checkpoint_dir(path: Path) -> Path:
    """`path`'s checkpoint/ when `path` is a run's log directory (no manifest of its own), else `path`."""
    inner = path / "checkpoint"
    return inner if not (path / "manifest.json").exists() and inner.is_dir() else path
