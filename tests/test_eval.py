"""`pearl-fpga eval`, Trainer.predict (SB3's names and return convention) and the Python API's logs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pearl_fpga import Trainer, TrainConfig
from pearl_fpga.cli import main

TINY = {"learning_starts": 50, "train_freq": 16, "gradient_steps": 2, "net_arch": [8], "buffer_size": 500,
        "batch_size": 16, "eval_freq": 0, "eval_episodes": 1}


def _out(capsys) -> str:
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    config = tmp / "tiny.json"
    config.write_text(json.dumps(TINY))
    run = tmp / "run"
    assert main(["train", "--steps", "100", "--config", str(config), "--logdir", str(run), "--no-tensorboard",
                 "--eval-episodes", "1"]) == 0
    return run


def test_eval_a_run_or_its_checkpoint(run_dir, capsys):
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert "mean return" in _out(capsys)
    assert main(["eval", str(run_dir / "checkpoint"), "--episodes", "2", "--placement", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["eval_episodes"] == 2 and data["env_steps"] == 100 and data["placement"].startswith("act=cpu")


def test_eval_errors_are_clear(run_dir, tmp_path, capsys):
    assert main(["eval", str(tmp_path)]) == 2
    assert "neither a checkpoint" in _out(capsys)
    assert main(["eval", str(run_dir), "--video", str(tmp_path / "a.mp4")]) == 2
    assert "--render rgb_array" in _out(capsys)
    try:
        import moviepy  # noqa: F401
    except ImportError:
        assert main(["eval", str(run_dir), "--render", "rgb_array", "--video", str(tmp_path / "a.mp4")]) == 2
        assert "pearl_fpga[video]" in _out(capsys)


def test_resume_with_steps_not_above_the_checkpoint_says_so(run_dir, capsys):
    capsys.readouterr()
    assert main(["train", "--resume", "--steps", "50", "--logdir", str(run_dir), "--no-tensorboard",
                 "--eval-episodes", "1"]) == 0
    out = _out(capsys)
    assert "--steps 50 is not above the checkpoint's 100 env steps" in out
    assert "Where the time goes" not in out and "env steps/s 0" not in out
    assert main(["train", "--resume", "--logdir", str(run_dir), "--no-tensorboard", "--eval-episodes", "1"]) == 0
    assert "total_steps (100) is reached at the checkpoint's 100 env steps: nothing to train" in _out(capsys)


@pytest.mark.parametrize("placement", ["cpu", "cpu-kernel", "fpga-emu"])
def test_predict_follows_sb3(placement):
    dqn = Trainer("dqn", "CartPole-v1", placement=placement, config=TrainConfig.preset("dqn", **TINY))
    obs = np.zeros(4, dtype=np.float32)
    action, state = dqn.predict(obs)
    assert state is None and np.ndim(action) == 0 and int(action) in (0, 1)
    actions, _ = dqn.predict(np.zeros((3, 4), dtype=np.float32), deterministic=False)
    assert actions.shape == (3,)
    assert int(dqn.predict(obs, deterministic=True)[0]) == int(dqn.eval_policy.deterministic(obs[None])[0])
    with pytest.raises(ValueError, match="expected observations of shape"):
        dqn.predict(np.zeros(5))
    ddpg = Trainer("ddpg", "Pendulum-v1", placement=placement, config=TrainConfig.preset("ddpg", **TINY))
    action, _ = ddpg.predict(np.zeros(3, dtype=np.float32))
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0  # the env's bounds, not [-1, 1]


def test_python_api_logs_like_the_cli(tmp_path):
    logdir = tmp_path / "api"
    with Trainer("dqn", "CartPole-v1", placement="cpu", logdir=logdir,
                 config=TrainConfig.preset("dqn", **{**TINY, "eval_freq": 100})) as trainer:
        trainer.train(200)
    assert (logdir / "episodes.csv").read_text().startswith("env_step,return,length")
    assert (logdir / "evaluations.csv").exists()
    assert (logdir / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert list((logdir / "tensorboard").glob("events.out.tfevents.*"))
    with pytest.raises(ValueError, match="either logger= or logdir="):
        Trainer("dqn", logdir=tmp_path / "x", logger=object())
