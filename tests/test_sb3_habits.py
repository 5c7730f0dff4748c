"""Issue 34: what an SB3 user expects, and nothing silent (no-learning budgets, network limits where a
kernel runs, plan's train line, fpga-emu's change of the experiment, SB3's habits)."""

from __future__ import annotations

import json
import warnings

import pytest

from pearl_fpga.cli import main
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import NoLearningError, NoLearningWarning
from pearl_fpga.runtime.schedule import allowed_gradient_steps, no_learning_problem

TINY = {"learning_starts": 50, "train_freq": 32, "gradient_steps": 2, "net_arch": [8], "buffer_size": 500,
        "batch_size": 16, "eval_freq": 0, "eval_episodes": 1}


def _out(capsys) -> str:
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


@pytest.mark.parametrize("end", range(1, 200))
def test_no_learning_problem_agrees_with_the_schedule(end):
    config = TrainConfig.preset("dqn", **TINY)
    problem = no_learning_problem(config, 0, 0, end)
    assert (problem is None) == (allowed_gradient_steps(config, end) > 0)
    if problem is not None:
        assert "learning_starts 50" in problem and f"ends at env step {end:,}" in problem


def test_no_learning_problem_gives_a_fix_that_learns():
    config = TrainConfig.preset("ddpg", "Pendulum-v1")
    problem = no_learning_problem(config, 0, 0, 5_000)
    assert problem is not None and f"learning_starts {config.learning_starts:,}" in problem
    need = int(problem.split("--steps ")[1].split(";")[0])
    assert allowed_gradient_steps(config, need) == 1 and allowed_gradient_steps(config, need - 1) == 0
    below = int(problem.split("N below ")[1].split(")")[0].replace(",", ""))
    fixed = TrainConfig.preset("ddpg", "Pendulum-v1", learning_starts=below - 1)
    assert no_learning_problem(fixed, 0, 0, 5_000) is None
    assert no_learning_problem(TrainConfig.preset("ddpg", "Pendulum-v1", learning_starts=below), 0, 0, 5_000)


def test_trainer_warns_or_raises_when_the_budget_cannot_learn():
    from pearl_fpga.trainer import Trainer

    strict = Trainer("dqn", "CartPole-v1", config=TrainConfig.preset("dqn", **TINY), strict=True)
    with pytest.raises(NoLearningError, match="learning_starts 50"):
        strict.train(40)
    assert strict.env_steps == 0  # refused before the first step
    strict.train(100)  # a budget that learns runs
    assert strict.grad_steps > 0
    lax = Trainer("dqn", "CartPole-v1", config=TrainConfig.preset("dqn", **TINY))
    with pytest.warns(NoLearningWarning, match="--steps 64"):
        lax.train(40)
    assert lax.env_steps == 40 and lax.grad_steps == 0


def test_cli_warns_at_start_and_strict_makes_it_an_error(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    args = ["train", "--steps", "40", "--config", str(config), "--no-tensorboard", "--eval-episodes", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoLearningWarning)  # the console says it; no second warning
        assert main([*args, "--logdir", str(tmp_path / "a")]) == 0
    out = _out(capsys)
    assert "warning:" in out and "no gradient step can run" in out and "--strict" in out
    assert out.index("no gradient step") < out.index("Where the time goes")
    assert main([*args, "--strict", "--logdir", str(tmp_path / "b")]) == 2
    out = _out(capsys)
    assert "error:" in out and "learning_starts 50" in out and "--steps 64" in out


def test_net_arch_beyond_the_kernel_trains_on_torch_and_kernel_placement_names_the_kernel(tmp_path, capsys):
    config = tmp_path / "wide.json"
    config.write_text(json.dumps({**TINY, "net_arch": [1024, 16, 16, 16]}))  # wider and deeper than the kernel
    args = ["train", "--steps", "70", "--config", str(config), "--no-tensorboard", "--eval-episodes", "1"]
    assert main([*args, "--placement", "cpu", "--logdir", str(tmp_path / "a")]) == 0
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["grad_steps"] > 0
    capsys.readouterr()
    assert main([*args, "--placement", "cpu-kernel", "--logdir", str(tmp_path / "b")]) == 2
    out = _out(capsys)
    assert "MLP kernel (its cpu build) holds width 512; the network 4-1024-16-16-16-2 has 1024" in out
    assert "holds 4 linear layers (3 hidden)" in out and "--placement act=cpu" in out


def test_fpga_emu_states_the_changed_experiment_in_summary_and_json(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({k: v for k, v in TINY.items() if k != "net_arch"}))  # the preset's [256, 256]
    logdir = tmp_path / "run"
    assert main(["train", "--steps", "70", "--placement", "fpga-emu:pynq-z2", "--config", str(config),
                 "--no-tensorboard", "--eval-episodes", "1", "--logdir", str(logdir)]) == 0
    out = _out(capsys)
    summary = json.loads((logdir / "summary.json").read_text())
    fit = summary["board_fit"]
    assert fit["changes"]["net_arch"] == {"preset": [256, 256], "run": [64, 64]}
    assert "the experiment was changed for the board: " + fit["text"] in out.split("Where the time goes")[1]
    assert summary["placed"]["replay"] == "cpu (host memory)" and "replay=cpu (host memory)" in out


def test_resumed_summary_counts_this_runs_updates(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    logdir = tmp_path / "run"
    base = ["train", "--config", str(config), "--no-tensorboard", "--eval-episodes", "1", "--logdir", str(logdir)]
    assert main([*base, "--steps", "128"]) == 0
    first = json.loads((logdir / "summary.json").read_text())["grad_steps"]
    assert main([*base, "--steps", "192", "--resume"]) == 0
    summary = json.loads((logdir / "summary.json").read_text())
    assert first > 0 and summary["grad_steps_run"] == summary["grad_steps"] - first > 0
    assert summary["env_steps_run"] == 64


def test_trainer_takes_an_env_instance_or_a_callable_as_sb3_does():
    import gymnasium as gym

    from pearl_fpga.trainer import Trainer

    config = TrainConfig.preset("dqn", **TINY)
    made = gym.make("CartPole-v1")
    trainer = Trainer("dqn", made, config=config, placement="cpu")
    assert trainer.config.env_id.startswith("pearl_fpga_user/CartPole-v")
    trainer.train(100)
    assert trainer.grad_steps > 0 and trainer.spec.obs_dim == 4
    assert Trainer("dqn", made).config.gamma == TrainConfig.preset("dqn", "CartPole-v1").gamma  # the id's preset
    calls = []

    def make_cartpole():
        calls.append(1)
        return gym.make("CartPole-v1")

    trainer = Trainer("dqn", make_cartpole, config=config, placement="cpu")
    trainer.train(70)
    assert calls and trainer.config.env_id.startswith("pearl_fpga_user/make_cartpole-v")
    with pytest.raises(ValueError, match="worker processes.*register the env with gymnasium.register"):
        Trainer("dqn", make_cartpole, config=config, placement="cpu", workers=1)
    with pytest.raises(ValueError, match="env must be a gymnasium id"):
        Trainer("dqn", 3, config=config)


def test_tensorboard_tags_are_sb3s(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from pearl_fpga.runtime.logger import TENSORBOARD_TAGS, RunLogger
    from pearl_fpga.runtime.stats import Stats

    logger = RunLogger(tmp_path)
    logger.episode(10, 1.0, 10)
    logger.episode(30, 3.0, 20)
    logger.evaluation(30, 2.5, 0.5)
    logger.progress(Stats(env_steps=30, grad_steps=4, episodes=2, elapsed=1.0, loss=0.25, loss_known=True,
                          env_steps_run=30))
    logger.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == set(TENSORBOARD_TAGS)
    assert {"rollout/ep_rew_mean", "train/loss", "time/fps"} <= set(TENSORBOARD_TAGS)
    assert [e.value for e in events.Scalars("rollout/ep_rew_mean")] == [1.0, 2.0]  # the mean of the window
    assert events.Scalars("train/n_updates")[0].value == 4


def test_trainer_load_takes_a_run_directory(tmp_path):
    from pearl_fpga.trainer import Trainer
    from pearl_fpga.trainers import load_trainer

    trainer = Trainer("dqn", "CartPole-v1", config=TrainConfig.preset("dqn", **TINY), placement="cpu",
                      checkpoint_dir=tmp_path / "run" / "checkpoint")
    trainer.train(70)
    trainer.close()
    for loaded in (Trainer.load(tmp_path / "run"), load_trainer(tmp_path / "run")):
        assert loaded.env_steps == 70
        loaded.close()


def test_cli_messages_an_sb3_user_meets(tmp_path, capsys):
    assert main(["train", "--set", "net_arch=64,64", "--logdir", str(tmp_path / "a")]) == 2
    assert "--set net_arch=[64,64]" in _out(capsys)
    assert main(["train", "--env", "FrozenLake-v1", "--steps", "10", "--logdir", str(tmp_path / "b")]) == 2
    assert "--algo qlearning" in _out(capsys)
    assert main(["train", "--env", "CartPol-v1", "--steps", "10", "--logdir", str(tmp_path / "c")]) == 2
    out = _out(capsys)
    assert "no preset" not in out and "CartPol-v1" in out
