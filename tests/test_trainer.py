"""Trainer: learning smoke runs, determinism, checkpoint/resume equivalence, bad checkpoints,
Ctrl-C checkpoints, evaluation of the kept best policy."""

from __future__ import annotations

import json
import shutil
import signal

import pytest
import torch

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError
from pearl_fpga.runtime.manifest_checks import seal_manifest
from pearl_fpga.trainer import Trainer

TINY_DQN = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
                batch_size=32, eval_freq=0, total_steps=1000)


def _weights(trainer):
    return [p.detach().clone() for p in trainer.algo.q.parameters()]


def _tiny(**kw):
    return TrainConfig.preset("dqn", **{**TINY_DQN, **kw})


def test_dqn_learns_cartpole_on_the_kernel_policy():
    # A smaller config than the zoo's (learning visibly improves within CI time): random play ~22.
    cfg = TrainConfig.preset("dqn", total_steps=8000, learning_starts=500, train_freq=64, gradient_steps=32,
                             net_arch=[64, 64], buffer_size=10_000, eval_freq=2000, eval_episodes=5,
                             exploration_fraction=0.2, learning_rate=2.3e-3)
    trainer = Trainer("dqn", placement="fpga-emu", config=cfg, seed=0)
    trainer.train(8000)
    result = trainer.evaluate(10)
    assert result.policy == "best" and trainer.actor.policy.kernel is not None
    assert result.mean > 75, result  # random play: about 22; seed 0 reaches about 260


def test_ddpg_pendulum_improves_over_its_start():
    cfg = TrainConfig.preset("ddpg", total_steps=2500, learning_starts=500, net_arch=[64, 64], batch_size=64,
                             eval_freq=0, eval_episodes=4, weight_sync_interval=10)
    trainer = Trainer("ddpg", placement="cpu-kernel", config=cfg, seed=0)
    before = trainer.evaluate(4).mean
    trainer.train(2500)
    after = trainer.evaluate(4).mean
    assert after > before + 150, (before, after)  # seed 0: about -1310 -> -1010


def test_same_seed_gives_identical_runs():
    runs = []
    for _ in range(2):
        t = Trainer("dqn", placement="cpu-kernel", config=_tiny(), seed=3)
        t.train(800)
        runs.append((t.episode_log, _weights(t), t.grad_steps))
    assert runs[0][0] == runs[1][0] and runs[0][2] == runs[1][2]
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1], strict=True))
    other = Trainer("dqn", placement="cpu-kernel", config=_tiny(), seed=4)
    other.train(800)
    assert other.episode_log != runs[0][0]


@pytest.mark.parametrize("per", [False, True])
def test_resume_equals_uninterrupted_run(tmp_path, per):
    cfg = _tiny(per=per)
    full = Trainer("dqn", placement="cpu-kernel", config=cfg, seed=1)
    full.train(900)
    half = Trainer("dqn", placement="cpu-kernel", config=cfg, seed=1)
    half.train(450)  # mid-episode and mid-round
    half.save(tmp_path / "ck")
    resumed = Trainer.load(tmp_path / "ck")
    resumed.train(450)
    assert resumed.env_steps == full.env_steps and resumed.grad_steps == full.grad_steps
    assert resumed.episode_log == full.episode_log
    assert all(torch.equal(a, b) for a, b in zip(_weights(resumed), _weights(full), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(resumed.algo.q_target.parameters(), full.algo.q_target.parameters(), strict=True))


def test_ddpg_checkpoint_round_trip(tmp_path):
    cfg = TrainConfig.preset("ddpg", total_steps=400, learning_starts=100, net_arch=[16, 16], batch_size=32,
                             eval_freq=0, buffer_size=2000)
    a = Trainer("ddpg", placement="cpu", config=cfg, seed=0)
    a.train(200)
    a.save(tmp_path / "ck")
    b = Trainer.load(tmp_path / "ck")
    a.train(100)
    b.train(100)
    for p, q in zip(a.algo.actor.parameters(), b.algo.actor.parameters(), strict=True):
        assert torch.equal(p, q)


def test_td3_trains_on_the_kernel_actor_and_resumes_bit_exact(tmp_path):
    """TD3 with the MLP kernel (tanh head) acting: a run saved and resumed mid-way (odd gradient-step count,
    so mid-way through a policy delay) gives the weights, targets and episodes of the run without a stop."""
    cfg = TrainConfig.preset("td3", total_steps=400, learning_starts=100, net_arch=[16, 16], batch_size=32,
                             eval_freq=0, buffer_size=2000, weight_sync_interval=5)
    full = Trainer("td3", placement="cpu-kernel", config=cfg, seed=0)
    full.train(400)
    assert full.actor.policy.kernel is not None and full.grad_steps == 300 and full.algo.updates == 300
    half = Trainer("td3", placement="cpu-kernel", config=cfg, seed=0)
    half.train(201)
    assert half.grad_steps % 2 == 1
    half.save(tmp_path / "ck")
    resumed = Trainer.load(tmp_path / "ck", expect={"algo": "td3"})
    resumed.train(199)
    assert resumed.episode_log == full.episode_log
    nets = ("actor", "actor_target")
    for mine, theirs in [*((getattr(resumed.algo, n), getattr(full.algo, n)) for n in nets),
                         *zip(resumed.algo.critics + resumed.algo.critic_targets, full.algo.critics + full.algo.critic_targets)]:
        assert all(torch.equal(p, q) for p, q in zip(mine.parameters(), theirs.parameters(), strict=True))
    assert resumed.evaluate(2).mean == full.evaluate(2).mean


def _snapshot(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def test_corrupt_or_mismatched_checkpoints_raise_and_touch_nothing(tmp_path):
    t = Trainer("dqn", placement="cpu", config=_tiny(), seed=0)
    t.train(200)
    ck = t.save(tmp_path / "ck")
    pristine = _snapshot(ck)

    with pytest.raises(CheckpointError, match="is for algo='dqn'"):
        Trainer.load(ck, expect={"algo": "ddpg"})
    with pytest.raises(CheckpointError, match="does not exist"):
        Trainer.load(tmp_path / "nowhere")

    bad = tmp_path / "bad"
    shutil.copytree(ck, bad)
    data = bytearray((bad / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bad / "state.pt").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum"):
        Trainer.load(bad)

    shutil.copytree(ck, bad, dirs_exist_ok=True)
    (bad / "manifest.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        Trainer.load(bad)

    manifest = json.loads((ck / "manifest.json").read_text())
    manifest["config"]["net_arch"] = [8, 8]  # shapes no longer fit the stored networks
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="digest"):  # an edited manifest is refused
        Trainer.load(bad)
    (bad / "manifest.json").write_text(json.dumps(seal_manifest(manifest)))  # re-signed: consistent, unfitting
    with pytest.raises(CheckpointError, match="does not fit"):
        Trainer.load(bad)

    manifest["version"] = 99
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="version"):
        Trainer.load(bad)
    assert _snapshot(ck) == pristine


def test_ctrl_c_writes_a_checkpoint_that_resumes(tmp_path):
    t = Trainer("dqn", placement="cpu", config=_tiny(), seed=0, checkpoint_dir=tmp_path / "ck")

    def interrupt(stats):
        if stats.env_steps >= 300:
            signal.raise_signal(signal.SIGINT)  # the handler only sets a flag; train() stops at the step boundary

    with pytest.raises(KeyboardInterrupt):
        t.train(1000, progress=interrupt, progress_interval=0.0)
    resumed = Trainer.load(tmp_path / "ck")
    assert resumed.env_steps == t.env_steps >= 300
    resumed.train(100)
    assert resumed.env_steps == t.env_steps + 100


def test_evaluate_reports_the_best_kept_policy():
    cfg = _tiny(eval_freq=300, eval_episodes=3)
    t = Trainer("dqn", placement="cpu-kernel", config=cfg, seed=0)
    t.train(900)
    assert [s for s, _, _ in t.eval_log] == [300, 600, 900]
    best_step = max(t.eval_log, key=lambda e: e[1])[0]
    r = t.evaluate(3)
    assert r.policy == "best" and r.policy_step == best_step and len(r.returns) == 3


def test_bad_arguments():
    with pytest.raises(ValueError, match="discrete"):
        Trainer("dqn", env="Pendulum-v1", config=None)
    with pytest.raises(ValueError, match="config for 'dqn'"):
        Trainer("ddpg", config=_tiny())
    with pytest.raises(ValueError, match="cannot create environment"):
        Trainer("dqn", env="NoSuchEnv-v0")
    t = Trainer("dqn", placement="cpu", config=_tiny(), seed=0)
    with pytest.raises(ValueError, match="steps"):
        t.train(0)
