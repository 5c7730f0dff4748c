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
