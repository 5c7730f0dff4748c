"""SBX's gradient step beside `bench learner`'s (its `--sbx`): the same algorithm of SBX (SB3's API on JAX,
its whole update compiled by XLA) at the same configuration, timed the same way, so that the two learner
steps compare at equal work and the share of the GEMM peak each reaches is on one scale.

What is timed is SBX's own `train(gradient_steps, batch_size)` as its `learn` calls it, with the config's
gradient_steps (1 for the continuous presets, called once per env step; DQN's rl-zoo preset runs 128 per
call, which SBX compiles into one loop), divided by the gradient steps: a sample from its replay buffer
(filled here with random transitions of the env's shapes), the copy into JAX arrays, the compiled update
and the losses read back. pearl_fpga's step is timed on a fixed batch, so SBX's figure includes a replay
sample that pearl_fpga's does not (a sample of a few hundred rows: tens of microseconds). JAX keeps its default threads, as SBX's users run it.
The rounds follow pearl_fpga's rounds of the same algorithm.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from pearl_fpga.bench.learner import time_steps

FILL = 2048  # random transitions in SBX's replay buffer before the step is timed


def sbx_step(cfg: Any, rounds: int, seconds: float) -> dict[str, Any]:
    """Median seconds of one SBX gradient step at `cfg`'s settings over `rounds` rounds of `seconds` each,
    and the seconds its first two steps took (XLA compiles then); {"skipped": reason} without SBX."""
    from pearl_fpga.bench.train import jax_device, sbx_module

    sbx = sbx_module()
    if sbx is None:
        return {"skipped": "SBX is not installed (pip install 'pearl_fpga[bench]')"}
    with jax_device("cpu"):  # the CPU learner's rival on the same cores, also where JAX sees a GPU
        return _sbx_step(sbx, cfg, rounds, seconds)


def _sbx_step(sbx: Any, cfg: Any, rounds: int, seconds: float) -> dict[str, Any]:
    from pearl_fpga.bench.train import baseline_model

    try:
        model = baseline_model(sbx, cfg, seed=0)
    except ValueError as exc:  # a setting SBX does not have (baseline_kwargs says which)
        return {"skipped": str(exc)}
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    _fill(model, cfg.batch_size)
    steps = max(1, int(cfg.gradient_steps))  # -1 (as many as env steps) counts as one per call

    def call() -> None:
        model.train(gradient_steps=steps, batch_size=cfg.batch_size)

    t0 = time.perf_counter()
    for _ in range(2):
        call()
    first = time.perf_counter() - t0
    per_round = [time_steps(call, seconds) / steps for _ in range(max(1, rounds))]
    import jax

    return {"step_s": statistics.median(per_round), "rounds_s": per_round, "first_steps_s": first,
            "gradient_steps_per_call": steps,
            "version": sbx.__version__, "jax": jax.__version__, "devices": [str(d) for d in jax.devices("cpu")]}


def _fill(model: Any, batch_size: int) -> None:
    """Random transitions of the env's spaces in the model's replay buffer (its values do not change the work)."""
    rng = np.random.default_rng(0)
    space, obs_space = model.action_space, model.observation_space
    for _ in range(max(FILL, 2 * batch_size)):
        obs = rng.standard_normal((1, *obs_space.shape)).astype(np.float32)
        nxt = rng.standard_normal((1, *obs_space.shape)).astype(np.float32)
        if hasattr(space, "n"):
            action = rng.integers(0, space.n, (1, 1))
        else:
            action = rng.uniform(-1, 1, (1, *space.shape)).astype(np.float32)
        model.replay_buffer.add(obs, nxt, action, rng.standard_normal(1).astype(np.float32),
                                np.array([rng.random() < 0.05]), [{}])
