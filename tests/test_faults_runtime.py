"""Fault injection, part 2 (issue 36): actor workers that die more than once (an env that dies in
every worker, repeated kill -9), a stop request while no transitions arrive, an env that raises on the
inline engine, non-finite observations on the kernel actor. Every case is bounded by a timeout, so a
hang fails it; the counts of docs/reliability.md ("Faults injected") include these cases."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import fault_envs  # noqa: F401 - registers the failing envs in this process too
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import DivergenceError, TrainingInterrupted
from pearl_fpga.runtime import workers
from pearl_fpga.runtime.engines.inline import EnvFailed
from pearl_fpga.trainer import Trainer

TINY = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
            batch_size=32, eval_freq=0, total_steps=1000)


def _cfg(**kw):
    return TrainConfig.preset("dqn", **{**TINY, **kw})


def _consistent(trainer: Trainer) -> None:
    """The replay holds what the counters say was collected."""
    assert len(trainer.replay) == min(trainer.env_steps - trainer.faults()["nonfinite_dropped"], trainer.config.buffer_size)


# ------------------------------------------------------------------------------ dying workers
@pytest.mark.timeout(300)
def test_an_env_that_dies_in_every_worker_ends_the_run_instead_of_hanging(tmp_path, monkeypatch):
    """The issue's reproduction: each worker's env dies at its step 300 (--workers 2, learning_starts 500).
    A restart held back by its backoff used to keep the dead worker's credit: the run stalled for good."""
    monkeypatch.setattr(workers, "RESTART_LIMIT", 3)
    ck = tmp_path / "ck"
    t = Trainer("dqn", env="fault_envs:DiesAt300-v0", placement="cpu",
                config=_cfg(learning_starts=500, total_steps=3000), seed=0, workers=2, checkpoint_dir=ck)
    with pytest.raises(workers.WorkerCrashLoop, match="EnvBroke: the simulator broke at step 300"):
        t.train(3000)
    assert t.worker_restarts >= 3 and t.env_steps > 600  # restarted workers got credit again
    back = Trainer.load(ck, trust_env_module=True)  # the learner's state was checkpointed at the stop
    assert (back.env_steps, back.grad_steps) == (t.env_steps, t.grad_steps)
    _consistent(back)


@pytest.mark.timeout(420)
def test_workers_killed_again_and_again_the_run_completes(tmp_path, monkeypatch):
    """kill -9 of the actor workers four times (each twice: the second restart waits for its backoff).
    The backoff is shortened so that the last restart comes before the surviving worker ends the run alone."""
    monkeypatch.setattr(workers, "RESTART_BACKOFF_S", 0.05)
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(learning_starts=300, total_steps=4000), seed=0, workers=2,
                checkpoint_dir=ck)
    at = [300, 700, 1100, 1500]
    kills: list[int] = []

    def progress(stats):
        pids = t.engine.pids
        if len(kills) < len(at) and stats.env_steps >= at[len(kills)] and t.worker_restarts == len(kills) and pids:
            os.kill(pids[len(kills) % 2], signal.SIGKILL)
            kills.append(stats.env_steps)

    stats = t.train(4000, progress=progress, progress_interval=0.05)
    assert len(kills) == 4 and t.worker_restarts == 4
    assert stats.env_steps >= 4000
    back = Trainer.load(ck)
    assert (back.env_steps, back.grad_steps) == (t.env_steps, t.grad_steps)
    _consistent(back)


@pytest.mark.timeout(300)
def test_infinite_observations_in_workers_stop_the_run_with_a_clear_error(tmp_path):
    """A kernel actor in a worker meets an inf observation: the transition reaches the learner, whose
    replay refuses it naming the env (it used to kill the worker on the kernel's own error, and hang)."""
    t = Trainer("dqn", env="fault_envs:InfObsAt200-v0", placement="cpu-kernel",
                config=_cfg(learning_starts=100, exploration_fraction=0.01, checkpoint_freq=100), seed=0, workers=1,
                checkpoint_dir=tmp_path / "ck")
    with pytest.raises(DivergenceError, match="observation") as info:
        t.train(1000)
    assert "fault_envs:InfObsAt200-v0" in str(info.value)
    assert Trainer.load(tmp_path / "ck", trust_env_module=True).env_steps >= 100


# --------------------------------------------------------------------- a stop while nothing arrives
@pytest.mark.timeout(60)
def test_sigterm_stops_the_run_while_no_transitions_arrive(tmp_path, monkeypatch):
    """The first SIGTERM was acted on only when transitions arrived: with every actor down, never."""
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=ck)
    t.train(200)

    def nothing(upto, wait):  # every actor down: sample() returns nothing, again and again
        time.sleep(0.01)
        return []

    monkeypatch.setattr(t.engine, "sample", nothing)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(TrainingInterrupted, match="stopped by SIGTERM at env step 200") as info:
            t.train(1000)
    finally:
        timer.cancel()
    assert info.value.checkpoint is not None and Trainer.load(ck).env_steps == 200


# ------------------------------------------------------------------------ env errors, inline
@pytest.mark.timeout(120)
def test_an_env_exception_inline_ends_the_run_with_a_checkpoint_of_the_work_done(tmp_path):
    ck = tmp_path / "ck"
    t = Trainer("dqn", env="fault_envs:DiesAt300-v0", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=ck)
    with pytest.raises(EnvFailed, match="EnvBroke: the simulator broke at step 300") as info:
        t.train(1000)
    assert "fault_envs:DiesAt300-v0" in str(info.value) and "fault_envs.py" in str(info.value)
    assert t.env_steps == 299  # every step before the failing one is kept, and learned from
    back = Trainer.load(ck, trust_env_module=True)
    assert (back.env_steps, back.grad_steps) == (299, t.grad_steps) and back.grad_steps > 0
    _consistent(back)


@pytest.mark.timeout(120)
def test_an_env_exception_inline_through_the_cli_is_a_clear_error(tmp_path, capsys):
    from pearl_fpga.cli import main

    logdir = tmp_path / "run"
    code = main(["train", "--env", "fault_envs:DiesAt300-v0", "--steps", "1000", "--placement", "cpu",
                 "--set", "net_arch=[16]", "--set", "learning_starts=100", "--no-tensorboard", "--logdir", str(logdir)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2 and "EnvBroke: the simulator broke at step 300" in out and "Traceback" not in out
    assert Trainer.load(logdir / "checkpoint", trust_env_module=True).env_steps == 299


# ----------------------------------------------------------- non-finite observations, kernel actor
@pytest.mark.timeout(120)
@pytest.mark.parametrize("placement", [None, "cpu-kernel"])
def test_a_nan_observation_is_dropped_on_the_kernel_actor(tmp_path, placement):
    """nonfinite_transitions=drop with the kernel actor (the default placement's): the actor acts on the
    NaN observation without the kernel's refusal, and the replay drops its two transitions."""
    t = Trainer("dqn", env="fault_envs:NaNObsAt400-v0", placement=placement,
                config=_cfg(nonfinite_transitions="drop", exploration_fraction=0.01), seed=0,
                checkpoint_dir=tmp_path / "ck")
    assert t.placement.kernel_actor
    t.train(1000)
    assert t.faults()["nonfinite_dropped"] == 2 and len(t.replay) == 998
    assert np.isfinite(t.replay.obs[: len(t.replay)]).all()
    back = Trainer.load(tmp_path / "ck", trust_env_module=True)
    assert back.faults()["nonfinite_dropped"] == 2
    _consistent(back)


@pytest.mark.timeout(120)
def test_a_nan_observation_on_the_kernel_actor_stops_the_run_naming_the_env(tmp_path):
    t = Trainer("dqn", env="fault_envs:NaNObsAt400-v0", placement="cpu-kernel",
                config=_cfg(exploration_fraction=0.01, checkpoint_freq=300), seed=0, checkpoint_dir=tmp_path / "ck")
    with pytest.raises(DivergenceError, match="observation") as info:  # the round ends at 416: the actor acts on it
        t.train(1000)
    assert "nonfinite_transitions=drop" in str(info.value)
    assert Trainer.load(tmp_path / "ck", trust_env_module=True).env_steps == 300
