"""What a deep training run settles before its first step: the config it runs (the preset, or the caller's,
fitted to an emulated board), the placement, the env's spec, and the learner's thread control."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pearl_fpga import presets as registry
from pearl_fpga.config import TrainConfig, run_config
from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.runtime.emulation import board_fit_record, board_preset, check_fits
from pearl_fpga.runtime.engines import resolve_engine
from pearl_fpga.runtime.envs import EnvSpec, check_action_space, env_spec, is_user_env
from pearl_fpga.runtime.placement import Placement, parse_placement
from pearl_fpga.runtime.thread_bits import reproducible_controller
from pearl_fpga.runtime.threads import AdaptiveThreads, learner_callers, limit_blas_threads


@dataclass
class RunPlan:
    """A deep run's settled inputs."""

    config: TrainConfig
    placement: Placement
    spec: EnvSpec
    preset_note: str | None
    board_fit: dict[str, Any] | None  # what fitting the preset to the emulated board changed (emulation.board_fit_record)
    learner_threads: AdaptiveThreads | None


def plan_run(algo: str, env: str | None, placement: str | Placement | dict | None, config: TrainConfig | None,
             seed: int, workers: int | None, engine: str | None, ray_address: str | None) -> RunPlan:
    """Check the arguments of a deep run and settle its config; seed the process-global RNGs."""
    algo = str(algo).lower()
    if registry.get(algo).family != "deep":
        raise ValueError(f"{algo} is a tabular algorithm: use pearl_fpga.TabularTrainer({algo!r}, ...) or "
                         f"pearl_fpga.make_trainer({algo!r}, ...), which takes every algorithm")
    preset = config is None
    config = run_config(algo, env, config, stacklevel=4)
    if workers is not None:
        config.workers = int(workers)
    if engine is not None:
        config.engine = str(engine).lower()
    if ray_address is not None:
        config.ray_address = str(ray_address)
    config.validate()
    if is_user_env(config.env_id) and resolve_engine(config) != "inline":
        raise ValueError(f"engine {resolve_engine(config)} starts worker processes, which cannot make an env passed as "
                         "an instance or a callable (it exists only in this process): use engine='inline' (workers=0), "
                         "or register the env with gymnasium.register in a module the workers import and pass its id")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    where = parse_placement(placement)
    spec = env_spec(config.env_id)
    check_action_space(algo, config.env_id, spec.discrete)
    # an emulated board holds the sizes it was synthesized for: a preset is fitted, a given config checked
    note, fit = None, None
    if preset:
        fitted, note = board_preset(config, where, spec.obs_dim, spec.action_dim)
        config, fit = fitted, board_fit_record(config, fitted, note)
    check_fits(config, spec.obs_dim, spec.action_dim, where)
    if where.learn_device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable(f"placement learn={where.learn}, but torch sees no CUDA device; use learn=cpu")
    threads = learner_thread_control(config, where, spec)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return RunPlan(config, where, spec, note, fit, threads)


def learner_thread_control(config: TrainConfig, placement: Placement, spec: EnvSpec) -> AdaptiveThreads | None:
    """learner_threads 0: the count is measured and re-measured while training (runtime.threads); an inline
    float32 run promises the same bits for a seed, so it uses only the counts that give them here (a bf16 or
    compiled learner makes no such promise: the probe would time another step). Else the fixed count is set."""
    control: Any = None
    if config.learner_threads == 0:
        reproducible = (resolve_engine(config) == "inline" and placement.learn == "cpu"
                        and not config.learner_compile)
        control = (reproducible_controller(config, spec.obs_dim, spec.action_dim)
                   if reproducible else AdaptiveThreads(callers=learner_callers(config)))
    else:
        torch.set_num_threads(config.learner_threads)
    limit_blas_threads()
    return control
