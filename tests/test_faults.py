"""Fault injection (issue 25): signals at seeded random points, a writer killed between or during its
renames, a full disk, non-finite envs and diverging learners, crash-looping workers, two runs on one
directory. Every case checks that a loadable checkpoint survives and that nothing of it is lost.

The counts of docs/reliability.md ("Faults injected") are the cases of this file and of test_faults_runtime.py,
test_faults_files.py and test_faults_misc.py."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from pearl_fpga import PrioritizedReplayBuffer
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError, DirectoryInUse, DivergenceError, TrainingInterrupted
from pearl_fpga.runtime import checkpoint as ckpt_mod
from pearl_fpga.runtime.checkpoint import DirLock, checkpoint_lock, read_checkpoint, recover_checkpoint
from pearl_fpga.runtime.manifest_checks import seal_manifest
from pearl_fpga.trainer import Trainer

TINY = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
            batch_size=32, eval_freq=0, total_steps=1000)
ROOT = Path(__file__).resolve().parents[1]


def _cfg(**kw):
    return TrainConfig.preset("dqn", **{**TINY, **kw})


def _weights(trainer):
    return [p.detach().clone() for p in trainer.algo.q.parameters()]


def _adam_steps(trainer):
    return {int(s["step"]) for s in trainer.algo.state_dict()["optimizer"]["state"].values()}


# ---------------------------------------------------------------------------------------------- envs
class _NaNCartPole(gym.Wrapper):
    """CartPole whose `field` ("obs" or "reward") is NaN on its `at`-th step."""

    def __init__(self, field: str = "obs", at: int = 150) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.field, self.at, self.steps = field, at, 0

    def step(self, action):
        ob, r, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps == self.at:
            if self.field == "obs":
                ob = np.full_like(ob, np.nan)
            else:
                r = float("nan")
        return ob, r, terminated, truncated, info


for _name, _field in (("pearl_fpga_test/NaNObsCartPole-v0", "obs"), ("pearl_fpga_test/NaNRewardCartPole-v0", "reward")):
    if _name not in gym.registry:
        gym.register(_name, entry_point=_NaNCartPole, kwargs={"field": _field}, max_episode_steps=500)
# Registered in this process only: worker processes cannot create it (a deterministic worker failure).
if "Corridor-v0" not in gym.registry:
    gym.register("Corridor-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=500)


# ------------------------------------------------------------------------ signals at random points
def _reference(per: bool) -> Trainer:
    t = Trainer("dqn", placement="cpu", config=_cfg(per=per), seed=5)
    t.train(1000)
    return t


_REFERENCE: dict[bool, Trainer] = {}

# where a signal may land: the update, the replay insert (between data and sum tree), the priority
# write-back, the env step, and the middle of a periodic checkpoint
POINTS = ("learn", "replay_add", "sum_tree", "env_step", "checkpoint")


def _arm(monkeypatch, trainer, point, calls, signals):
    """Raise each of `signals` (SIGINT/SIGTERM) inside the `calls[j]`-th call of the function at `point`."""
    count = [0]
    pending = list(zip(calls, signals))

    def hook():
        count[0] += 1
        while pending and count[0] >= pending[0][0]:
            signal.raise_signal(pending.pop(0)[1])

    def wrap(obj, name, before=True):
        original = getattr(obj, name)

        def wrapped(*a, **k):
            if before:
                hook()
            out = original(*a, **k)
            if not before:
                hook()
            return out

        monkeypatch.setattr(obj, name, wrapped)

    if point == "learn":
        wrap(trainer.algo, "update", before=False)  # after the optimizer step, before the counters move on
    elif point == "replay_add":
        target = trainer.replay.buffer._sampler if trainer.replay.prioritized else trainer.replay
        wrap(target, "update" if trainer.replay.prioritized else "add")
    elif point == "sum_tree":
        target = trainer.replay.buffer._sampler if trainer.replay.prioritized else trainer.replay
        # uniform replay: the inline trainer draws a round's batches in one sample_many call
        wrap(target, "update" if trainer.replay.prioritized else "sample_many")
    elif point == "env_step":
        wrap(trainer.actor.envs, "step", before=False)
    else:
        wrap(ckpt_mod.torch, "save", before=False)


@pytest.mark.parametrize("trial", range(20))
def test_signal_at_a_random_point_checkpoints_at_the_next_boundary(tmp_path, monkeypatch, trial):
    rng = random.Random(2500 + trial)
    per = trial % 2 == 1
    sig = signal.SIGINT if trial % 4 < 2 else signal.SIGTERM
    point = POINTS[trial % len(POINTS)] if trial < len(POINTS) else rng.choice(POINTS)
    calls = [rng.randint(1, 6)] if point == "checkpoint" else [rng.randint(1, 40)]
    if per not in _REFERENCE:
        _REFERENCE[per] = _reference(per)
    full = _REFERENCE[per]

    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(per=per, checkpoint_freq=100), seed=5, checkpoint_dir=ck)
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with monkeypatch.context() as m:
        _arm(m, t, point, calls, [sig])
        with pytest.raises(TrainingInterrupted) as info:
            t.train(1000)
    assert info.value.signum == sig and info.value.checkpoint == ck
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # restored
    assert t.env_steps < 1000
    assert _adam_steps(t) <= {t.grad_steps}  # never an optimizer step ahead of the counter

    resumed = Trainer.load(ck)
    assert (resumed.env_steps, resumed.grad_steps) == (t.env_steps, t.grad_steps)  # nothing lost
    assert _adam_steps(resumed) <= {resumed.grad_steps}
    resumed.train(1000 - resumed.env_steps)
    assert resumed.episode_log == full.episode_log
    assert all(torch.equal(a, b) for a, b in zip(_weights(resumed), _weights(full), strict=True))


def test_a_second_signal_stops_at_once_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(checkpoint_freq=100), seed=0, checkpoint_dir=ck)
    with monkeypatch.context() as m:
        # two signals inside one update, after the 300-step checkpoint
        _arm(m, t, "learn", [60, 60], [signal.SIGINT, signal.SIGINT])
        with pytest.raises(TrainingInterrupted) as info:
            t.train(1000)
    assert info.value.checkpoint is None
    manifest, _ = read_checkpoint(ck)
    assert manifest["counters"]["env_steps"] % 100 == 0 and manifest["counters"]["env_steps"] <= t.env_steps
    Trainer.load(ck).train(50)


def test_request_stop_from_a_progress_callback(tmp_path):
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=tmp_path / "ck")
    with pytest.raises(TrainingInterrupted, match="request_stop"):
        t.train(1000, progress=lambda s: s.env_steps >= 250 and t.request_stop(), progress_interval=0.0)
    assert Trainer.load(tmp_path / "ck").env_steps == t.env_steps


def test_sigterm_ends_the_cli_like_ctrl_c(tmp_path):
    logdir = tmp_path / "run"
    cmd = [sys.executable, "-m", "pearl_fpga.cli", "train", "--steps", "200000", "--placement", "cpu", "--no-tensorboard",
           "--logdir", str(logdir), "--checkpoint-freq", "200", "--set", "net_arch=[16]", "--set", "learning_starts=100",
           "--set", "eval_freq=0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (logdir / "checkpoint" / "manifest.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "SIGTERM" in out and "--resume" in out
    steps = Trainer.load(logdir / "checkpoint").env_steps
    assert steps >= 200
    assert not [p for p in logdir.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


# ----------------------------------------------------------------------------------- the writer
class _Killed(BaseException):
    """Stands for kill -9: nothing after it runs (the writer cleans up only its own failures)."""


@pytest.mark.parametrize("kill_at", ["before_swap", "between_renames", "before_cleanup"])
def test_writer_killed_at_each_step_of_the_swap_leaves_the_newest_copy(tmp_path, monkeypatch, kill_at):
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0)
    t.train(200)
    t.save(ck)
    t.train(100)
    renames = [0]
    original_rename = Path.rename

    def rename(self, target):
        renames[0] += 1
        if kill_at == "before_swap" or (kill_at == "between_renames" and renames[0] == 2):
            raise _Killed
        return original_rename(self, target)

    def rmtree(path, ignore_errors=False):
        if ".old-" in str(path):
            raise _Killed
        return original_rmtree(path, ignore_errors=ignore_errors)

    original_rmtree = ckpt_mod.shutil.rmtree
    with monkeypatch.context() as m:
        m.setattr(Path, "rename", rename)
        if kill_at == "before_cleanup":
            m.setattr(ckpt_mod.shutil, "rmtree", rmtree)
        with pytest.raises(_Killed):
            t.save(ck)
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".ck.") and not p.name.endswith(".lock"))
    assert left  # the crash left copies beside ck
    resumed = Trainer.load(ck)  # was: "no checkpoint" when ck itself was gone
    assert resumed.env_steps == 300
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


CHILD = textwrap.dedent("""
    import sys, numpy as np
    from pathlib import Path
    from pearl_fpga.runtime.checkpoint import write_checkpoint
    d = Path(sys.argv[1])
    rng = np.random.default_rng(0)
    for n in range(1, 10_000):
        state = {"w": rng.standard_normal(300_000).astype(np.float32), "n": n}
        fields = {"algo": "dqn", "env_id": "CartPole-v1", "seed": 0, "placement": "cpu", "config": {},
                  "counters": {"env_steps": n, "grad_steps": n, "episodes": 0, "target_checked": 0}}
        write_checkpoint(d, state, fields)
        print(n, flush=True)
""")


@pytest.mark.parametrize("trial", range(3))
def test_writer_killed_at_a_random_moment_keeps_every_completed_checkpoint(tmp_path, trial):
    d = tmp_path / "ck"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    assert first.strip() == "1"
    time.sleep(random.Random(trial).uniform(0.0, 0.4))
    proc.kill()
    rest = proc.communicate()[0].split()
    done = int(rest[-1]) if rest else 1
    assert recover_checkpoint(d) == d
    manifest, state = read_checkpoint(d)
    assert manifest["counters"]["env_steps"] >= done and state["n"] == manifest["counters"]["env_steps"]
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_stale_temporary_copies_are_cleaned_when_training_starts(tmp_path):
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=ck)
    t.train(200)
    partial = tmp_path / ".ck.tmp-999999"
    partial.mkdir()
    (partial / "state.pt").write_bytes(b"\0" * 1000)  # a writer killed mid-write
    t.train(100)
    assert not partial.exists() and Trainer.load(ck).env_steps == 300


# ------------------------------------------------------------------------------------ full disk
def _full_disk(path, mode="r", *a, **k):
    """The writer's open(): state.pt goes to a full disk (/dev/full: ENOSPC from the kernel)."""
    if "w" in mode and Path(path).name == "state.pt":
        return open("/dev/full", mode, *a, **k) if os.path.exists("/dev/full") else _Quota(open(path, mode, *a, **k))
    return open(path, mode, *a, **k)


class _Quota:
    """A file that takes 4 KiB and then fails with ENOSPC (where /dev/full does not exist)."""

    def __init__(self, fh):
        self.fh, self.left = fh, 4096

    def write(self, data):
        if len(data) > self.left:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.left -= len(data)
        return self.fh.write(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


def test_full_disk_is_a_clear_error_and_later_checkpoints_work(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(checkpoint_freq=200), seed=0, checkpoint_dir=ck)
    t.train(200)
    with monkeypatch.context() as m:
        m.setattr(ckpt_mod, "_open", _full_disk)
        with pytest.raises(CheckpointError, match="no space left") as info:
            t.train(300)  # the periodic checkpoint at 400 fails: the run stops with the reason
        assert "unexpected pos" not in str(info.value)
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # the partial copy is gone
    assert Trainer.load(ck).env_steps == 200  # the previous checkpoint is whole
    t.save(ck)  # space again: checkpoints work
    assert Trainer.load(ck).env_steps == t.env_steps


def test_unwritable_checkpoint_dir_is_found_before_the_first_step(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=blocker / "ck")
    with pytest.raises(CheckpointError, match="not writable"):
        t.train(1000)
    assert t.env_steps == 0
    if os.geteuid() != 0:  # root ignores permissions
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=ro / "ck")
        with pytest.raises(CheckpointError, match="not writable"):
            t.train(1000)


# ------------------------------------------------------------------------ divergence, NaN envs
@pytest.mark.parametrize("env_id, words", [("pearl_fpga_test/NaNObsCartPole-v0", "observation"),
                                           ("pearl_fpga_test/NaNRewardCartPole-v0", "reward")])
def test_a_nan_from_the_env_stops_the_run_naming_env_and_field(tmp_path, env_id, words):
    t = Trainer("dqn", env=env_id, placement="cpu", config=_cfg(checkpoint_freq=100), seed=0, checkpoint_dir=tmp_path / "ck")
    with pytest.raises(DivergenceError, match=words) as info:
        t.train(400)
    assert env_id in str(info.value) and "nonfinite_transitions=drop" in str(info.value)
    assert np.isfinite(t.replay.obs[: len(t.replay)]).all() and np.isfinite(t.replay.reward[: len(t.replay)]).all()
    assert Trainer.load(tmp_path / "ck").env_steps == 100


def test_nan_transitions_are_counted_and_dropped_when_configured():
    t = Trainer("dqn", env="pearl_fpga_test/NaNObsCartPole-v0", placement="cpu",
                config=_cfg(nonfinite_transitions="drop", per=True), seed=0)
    t.train(400)
    # the NaN observation is next_obs of one transition and obs of the next one
    assert t.faults()["nonfinite_dropped"] == 2 and len(t.replay) == 398


@pytest.mark.parametrize("placement", ["cpu", "cpu-kernel"])
def test_a_diverging_learner_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, placement):
    ck = tmp_path / "ck"
    cfg = _cfg(learning_rate=1e30, learning_starts=200, train_freq=16, gradient_steps=8, checkpoint_freq=200,
               exploration_fraction=0.01)
    t = Trainer("dqn", placement=placement, config=cfg, seed=0, checkpoint_dir=ck)
    with pytest.raises(DivergenceError, match="diverged") as info:
        t.train(3000)
    assert "fixed-point" not in str(info.value) and "learning_rate" in str(info.value)
    assert str(ck) in str(info.value)
    good = Trainer.load(ck)
    assert all(torch.isfinite(p).all() for p in good.algo.q.parameters())
    with pytest.raises(DivergenceError):  # nothing non-finite is ever saved
        t.save(tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_the_cli_shows_nan_and_exits_non_zero(tmp_path, capsys):
    from pearl_fpga.cli import main
    from pearl_fpga.runtime.logger import loss_text
    from pearl_fpga.runtime.stats import Stats

    assert loss_text(Stats(loss=float("nan"), loss_known=True)) == "nan"
    assert loss_text(Stats()) == ""
    code = main(["train", "--steps", "3000", "--placement", "cpu", "--set", "learning_rate=1e30", "--set",
                 "learning_starts=200", "--set", "train_freq=16", "--set", "gradient_steps=8", "--set", "net_arch=[16]",
                 "--no-tensorboard", "--logdir", str(tmp_path / "run")])
    out = " ".join(capsys.readouterr().out.split())
    assert code != 0 and "diverged" in out


# --------------------------------------------------------------------------- crash-looping workers
def test_a_worker_that_always_fails_stops_the_run_with_its_error(tmp_path, monkeypatch):
    from pearl_fpga.runtime import workers

    monkeypatch.setattr(workers, "RESTART_LIMIT", 1)
    monkeypatch.setattr(workers, "RESTART_BACKOFF_S", 0.05)
    t = Trainer("dqn", env="Corridor-v0", placement="cpu", config=_cfg(), seed=0, workers=1,
                checkpoint_dir=tmp_path / "ck")
    start = time.monotonic()
    with pytest.raises(workers.WorkerCrashLoop, match="Environment `Corridor` doesn't exist") as info:
        t.train(1000)
    assert "--workers 0" in str(info.value) and time.monotonic() - start < 90
    assert t.worker_restarts == 1
    Trainer.load(tmp_path / "ck")  # the learner's state was checkpointed at the stop


# ---------------------------------------------------------------------- two runs on one directory
def test_a_second_run_on_a_logdir_stops_at_once(tmp_path, capsys):
    from pearl_fpga.cli import main

    logdir = tmp_path / "run"
    logdir.mkdir()
    (logdir / "episodes.csv").write_text("env_step,return,length\n1,2.0,3\n")
    with DirLock(logdir / ".lock", "log directory"):
        code = main(["train", "--steps", "300", "--placement", "cpu", "--no-tensorboard", "--logdir", str(logdir)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2 and "in use by another run" in out and str(os.getpid()) in out
    assert (logdir / "episodes.csv").read_text() == "env_step,return,length\n1,2.0,3\n"  # untouched


def test_a_second_trainer_on_a_checkpoint_dir_stops_at_once(tmp_path):
    ck = tmp_path / "ck"
    with checkpoint_lock(ck):
        t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0, checkpoint_dir=ck)
        with pytest.raises(DirectoryInUse, match="in use"):
            t.train(100)
        assert t.env_steps == 0
    t.train(100)


# ------------------------------------------------------------------------ torn states and loads
def test_prioritized_buffer_refuses_to_save_a_state_it_cannot_load(tmp_path):
    buf = PrioritizedReplayBuffer(64, obs_shape=(2,), action_shape=(), action_dtype=np.int64, seed=0)
    buf.add(np.zeros((8, 2)), np.zeros(8, dtype=np.int64), np.ones(8), np.zeros((8, 2)), np.zeros(8))
    p = tmp_path / "buf.npz"
    buf.save(p)
    before = p.read_bytes()
    buf.sampler.update([3], [0.0])
    with pytest.raises(CheckpointError, match="not saved"):
        buf.save(p)
    assert p.read_bytes() == before and not list(tmp_path.glob("*.tmp"))
    PrioritizedReplayBuffer(64, obs_shape=(2,), action_shape=(), action_dtype=np.int64).load(p)


def test_a_torn_replay_state_never_replaces_the_checkpoint(tmp_path):
    ck = tmp_path / "ck"
    t = Trainer("dqn", placement="cpu", config=_cfg(per=True), seed=0)
    t.train(200)
    t.save(ck)
    t.train(50)
    t.replay.buffer.sampler.update([len(t.replay) + 5], [1.0])  # a priority beyond the stored transitions
    with pytest.raises(CheckpointError, match="previous one"):
        t.save(ck)
    assert Trainer.load(ck).env_steps == 200


def test_a_failed_load_leaves_the_global_rngs_untouched(tmp_path):
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0)
    t.train(200)
    ck = t.save(tmp_path / "ck")
    manifest = json.loads((ck / "manifest.json").read_text())
    manifest["config"]["net_arch"] = [8, 8]
    (ck / "manifest.json").write_text(json.dumps(seal_manifest(manifest)))  # a consistent, unfitting checkpoint
    random.seed(11)
    np.random.seed(12)
    torch.manual_seed(13)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    with pytest.raises(CheckpointError, match="does not fit"):
        Trainer.load(ck)
    assert random.getstate() == before[0]
    assert np.array_equal(np.random.get_state()[1], before[1]) and torch.equal(torch.get_rng_state(), before[2])


def test_resume_applies_resumable_fields_and_refuses_the_others(tmp_path):
    t = Trainer("dqn", placement="cpu", config=_cfg(), seed=0)
    t.train(200)
    ck = t.save(tmp_path / "ck")
    with pytest.raises(CheckpointError, match=r"learning_rate: checkpoint 0.0023, asked 0.01.*per: checkpoint False"):
        Trainer.load(ck, overrides={"learning_rate": 0.01, "per": True, "eval_freq": 100})
    same = Trainer.load(ck, overrides={"learning_rate": 0.0023, "total_steps": 5000, "eval_freq": 100})
    assert same.config.total_steps == 5000 and same.config.eval_freq == 100
