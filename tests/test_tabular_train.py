"""Tabular training: config and presets, short learning smoke tests, exact resume, validated checkpoints
and datasets, the offline mode, `pearl-fpga train --algo qlearning|sarsa`; the full targets are `slow`."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from pearl_fpga.algos.tabular import TabularConfig, load_dataset, save_dataset
from pearl_fpga.cli import main
from pearl_fpga.errors import CheckpointError
from pearl_fpga.kernels import TabularQ
from pearl_fpga.runtime.tabular import TabularTrainer, exact_evaluation


def _out(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_config_validation_schedule_and_env_ids():
    cfg = TabularConfig(episodes=100, eps_start=1.0, eps_end=0.1, eps_decay=0.5)
    assert cfg.epsilon(0) == 1.0 and cfg.epsilon(25) == pytest.approx(0.55) and cfg.epsilon(50) == 0.1
    assert cfg.epsilon(99) == 0.1 and cfg.kernel_algo == "q"
    assert TabularConfig.preset("sarsa", "Taxi-v4").alpha == 0.2 and TabularConfig.preset("qlearning", "Taxi-v4").alpha == 0.5
    for bad, match in ((dict(alpha=0.0), r"alpha = 0.0 is out of range: it must be in \(0, 1\]"),
                       (dict(gamma=1.5), r"gamma = 1.5 is out of range"), (dict(algo="dqn"), "algo must be one of"),
                       (dict(parts=0), r"parts = 0 is out of range: it must be in \[1, 1024\]"),
                       (dict(episodes=-1), "episodes = -1 is out of range"), (dict(episodes=2.5), "must be an integer")):
        with pytest.raises(ValueError, match=match):
            TabularConfig(**bad)
    with pytest.raises(ValueError, match="unknown TabularConfig field"):
        TabularConfig.from_dict({"lr": 0.1})
    with pytest.raises(ValueError, match="no Taxi-v3; use --env Taxi-v4"):
        TabularConfig.preset("qlearning", "Taxi-v3")
    with pytest.raises(ValueError, match="no CliffWalking-v0; use --env CliffWalking-v1"):
        TabularConfig.preset("qlearning", "CliffWalking-v0")
    with pytest.raises(ValueError, match="discrete states"):
        TabularTrainer(TabularConfig(env_id="CartPole-v1"))


@pytest.mark.parametrize("algo,episodes", [("qlearning", 300), ("sarsa", 1000)])
def test_cliffwalking_learns_to_reach_the_goal(algo, episodes):
    t = TabularTrainer(TabularConfig.preset(algo, "CliffWalking-v1", episodes=episodes, backend="numpy"))
    t.train()
    ret, success = exact_evaluation(t.env, t.kernel.greedy(), t.config.success_reward)
    assert success == 1.0 and ret >= -17  # the optimal path is -13; SARSA prefers the safer -17 one
    if algo == "qlearning":
        assert ret == -13
    result = t.evaluate(5)
    assert result.success_rate == 1.0 and result.mean == pytest.approx(ret)


def test_exact_evaluation_of_a_known_policy():
    env = TabularTrainer(TabularConfig.preset("qlearning", "CliffWalking-v1", episodes=0, backend="numpy")).env
    policy = np.zeros(48, np.int64)  # always "up": never reaches the goal
    ret, success = exact_evaluation(env, policy, -1.0)
    assert success == 0.0 and ret < -400
    policy[36], policy[24:35] = 0, 1  # up from the start, right along row 2, then down
    policy[35] = 2
    assert exact_evaluation(env, policy, -1.0) == (-13.0, 1.0)


def test_grid_layouts_for_the_policy_picture(tmp_path):
    from pearl_fpga.runtime.tabular import make_env
    from pearl_fpga.runtime.tabular_plot import grid_layout, plot_policy

    cells, _ = grid_layout(make_env("CliffWalking-v1"))
    assert cells.shape == (4, 12) and cells[3, 0] == "S" and cells[3, 11] == "G" and (cells[3, 1:11] == "C").all()
    cells, _ = grid_layout(make_env("FrozenLake8x8-v1"))
    assert cells.shape == (8, 8) and cells[0, 0] == "S" and (cells == "H").sum() == 10
    assert grid_layout(make_env("Taxi-v4")) is None
    assert plot_policy(make_env("Taxi-v4"), np.zeros((500, 6)), tmp_path / "p.png", "t") is None
    path = plot_policy(make_env("FrozenLake8x8-v1"), np.random.default_rng(0).random((64, 4)), tmp_path / "p.png", "t")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_available_backends_lists_what_constructs():
    from pearl_fpga.kernels.tabular import available_backends

    found = available_backends()
    assert "numpy" in found and "auto" not in found


def test_resume_continues_exactly_like_the_uninterrupted_run(tmp_path):
    cfg = dict(episodes=120, backend="numpy")
    full = TabularTrainer(TabularConfig.preset("sarsa", "CliffWalking-v1", **cfg))
    full.train()
    half = TabularTrainer(TabularConfig.preset("sarsa", "CliffWalking-v1", **cfg), checkpoint_dir=tmp_path)
    half.train(until=50)  # as if interrupted: the epsilon schedule is still the 120-episode one
    resumed = TabularTrainer.load(tmp_path, expect={"algo": "sarsa"})
    assert resumed.episode == 50
    resumed.train()
    np.testing.assert_array_equal(resumed.kernel.table, full.kernel.table)
    assert resumed.episode_log == full.episode_log and resumed.env_steps == full.env_steps


def test_checkpoint_validation(tmp_path):
    t = TabularTrainer(TabularConfig.preset("qlearning", "CliffWalking-v1", episodes=3, backend="numpy"))
    t.train()
    t.save(tmp_path)
    with pytest.raises(CheckpointError, match="env_id='CliffWalking-v1', not 'Taxi-v4'"):
        TabularTrainer.load(tmp_path, expect={"env_id": "Taxi-v4"})
    with pytest.raises(CheckpointError, match="does not exist; train without --resume first"):
        TabularTrainer.load(tmp_path / "nope")
    path = tmp_path / "tabular.npz"
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    np.savez(path, **{**data, "table": data["table"].astype(np.float64)})
    with pytest.raises(CheckpointError, match="expected int32"):
        TabularTrainer.load(tmp_path)
    np.savez(path, table=np.array([object()], dtype=object))  # pickled content is refused, not executed
    with pytest.raises(CheckpointError, match="not an .npz that pearl_fpga wrote"):
        TabularTrainer.load(tmp_path)
    path.write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="corrupt"):
        TabularTrainer.load(tmp_path)


def _dataset(tmp_path, **changes):
    rng = np.random.default_rng(0)
    arrays = dict(s=rng.integers(0, 48, 300), a=rng.integers(0, 4, 300), r=rng.normal(size=300),
                  s2=rng.integers(0, 48, 300), done=rng.random(300) < 0.05, a2=rng.integers(0, 4, 300))
    if not changes:
        return save_dataset(tmp_path / "d.npz", **arrays, n_states=48, n_actions=4, env_id="CliffWalking-v1"), arrays
    arrays.update(changes)  # written raw, as a foreign tool might
    np.savez(tmp_path / "d.npz", **arrays, n_states=48, n_actions=4, env_id="CliffWalking-v1")
    return tmp_path / "d.npz", arrays


def test_offline_training_equals_the_kernel_over_the_dataset(tmp_path):
    path, arrays = _dataset(tmp_path)
    for parts in (1, 3):
        t = TabularTrainer(TabularConfig.preset("sarsa", "CliffWalking-v1", backend="numpy", epochs=2, parts=parts))
        t.train_offline(path)
        k = TabularQ(48, 4, t.config.alpha, t.config.gamma, algo="sarsa", backend="numpy")
        for _ in range(2):
            if parts == 1:
                k.update(**arrays)
            else:
                k.update_partitioned(**arrays, parts=parts)
        np.testing.assert_array_equal(t.kernel.table, k.table)
        assert t.env_steps == 600


@pytest.mark.parametrize("change,match", [
    (dict(s=np.full(300, 48)), "s holds values outside"),
    (dict(r=np.full(300, np.nan)), "NaN/inf"),
    (dict(done=np.zeros(300, np.int64)), "done must be a 1-D bool"),
    (dict(a=np.zeros(299, np.int64)), "a must be a 1-D integer array of 300"),
    (dict(a=np.zeros(300)), "a must be a 1-D integer array"),
])
def test_bad_datasets_are_rejected(tmp_path, change, match):
    path, _ = _dataset(tmp_path, **change)
    with pytest.raises(CheckpointError, match=match):
        load_dataset(path, 48, 4)


def test_dataset_shape_env_keys_and_pickle(tmp_path):
    path, _ = _dataset(tmp_path)
    with pytest.raises(CheckpointError, match="48 states x 4 actions, the env has 500 x 6"):
        load_dataset(path, 500, 6)
    with pytest.raises(CheckpointError, match="recorded on CliffWalking-v1, not Taxi-v4"):
        load_dataset(path, 48, 4, env_id="Taxi-v4")
    np.savez(tmp_path / "k.npz", s=np.zeros(3, np.int64))
    with pytest.raises(CheckpointError, match="lacks key"):
        load_dataset(tmp_path / "k.npz")
    np.savez(tmp_path / "p.npz", s=np.array([{}], dtype=object))
    with pytest.raises(CheckpointError, match="Object arrays cannot be loaded when allow_pickle=False"):
        load_dataset(tmp_path / "p.npz")
    t = TabularTrainer(TabularConfig.preset("sarsa", "CliffWalking-v1", backend="numpy"))
    np.savez(tmp_path / "noa2.npz", **{k: v for k, v in np.load(path).items() if k != "a2"})
    with pytest.raises(CheckpointError, match="SARSA needs them"):
        t.train_offline(tmp_path / "noa2.npz")


def test_cli_online_with_dataset_then_offline_then_resume(tmp_path, capsys):
    run = tmp_path / "run"
    data = tmp_path / "cliff.npz"
    base = ["train", "--algo", "qlearning", "--env", "CliffWalking-v1", "--backend", "numpy", "--no-tensorboard"]
    assert main([*base, "--episodes", "300", "--logdir", str(run), "--save-dataset", str(data),
                 "--eval-episodes", "3", "--set", "alpha=0.5", "--set", "eps_end=0.02"]) == 0
    out = _out(capsys)
    assert "episode 300/300" in out and "steps/s" in out and "ETA" in out
    assert "mean return -13.000" in out and "return -13.0000, success 1.0000" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == 300 and summary["eval_episodes"] == 3 and summary["exact_mean_return"] == -13
    assert summary["config"]["eps_end"] == 0.02
    assert (run / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (run / "policy.png").read_bytes()[:4] == b"\x89PNG" and "policy: " in out
    assert len(list(csv.DictReader(open(run / "episodes.csv")))) == 300
    assert load_dataset(data, 48, 4)["n"] == summary["env_steps"]

    off = tmp_path / "off"
    assert main([*base, "--dataset", str(data), "--epochs", "2", "--parts", "2", "--logdir", str(off), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)  # --json: stdout is the summary alone
    assert summary == json.loads((off / "summary.json").read_text())
    assert summary["mode"] == "offline" and summary["config"]["parts"] == 2 and summary["exact_success_rate"] == 1.0

    assert main([*base, "--episodes", "320", "--logdir", str(run), "--resume"]) == 0
    assert "resumed" in _out(capsys)
    assert json.loads((run / "summary.json").read_text())["episodes"] == 320
    assert len(list(csv.DictReader(open(run / "episodes.csv")))) == 320


@pytest.mark.parametrize("argv,match", [
    (["--steps", "10"], "--steps are for dqn/ddpg"),
    (["--placement", "cpu"], "--placement is for dqn/ddpg"),
    (["--env", "Taxi-v3"], "use --env Taxi-v4"),
    (["--dataset", "/nonexistent.npz"], "does not exist"),
    (["--backend", "gpu"], "unknown tabular backend"),
    (["--set", "lr=0.1"], "with a TabularConfig field"),
    (["--set", "alpha=2"], "TabularConfig.alpha = 2 is out of range: it must be in (0, 1]"),
])
def test_cli_errors(tmp_path, capsys, argv, match):
    assert main(["train", "--algo", "qlearning", "--env", "CliffWalking-v1", "--logdir", str(tmp_path / "r"),
                 "--no-tensorboard", *argv]) == 2
    assert match in _out(capsys)


def test_dqn_rejects_tabular_options(capsys):
    assert main(["train", "--algo", "dqn", "--episodes", "5"]) == 2
    assert "--episodes are for --algo qlearning|sarsa" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("env_id,check", [
    ("Taxi-v4", lambda ev, ret, win: ev.success_rate == 1.0 and ret >= 7.9 and win == 1.0),
    ("CliffWalking-v1", lambda ev, ret, win: ret == -13 and ev.mean == -13),
    ("FrozenLake8x8-v1", lambda ev, ret, win: ev.success_rate >= 0.85 and win >= 0.85),
])
def test_learning_targets(env_id, check):
    """The issue's targets with the presets: 2,000 greedy evaluation episodes plus the exact figures."""
    t = TabularTrainer(TabularConfig.preset("qlearning", env_id))
    t.train()
    ev = t.evaluate(2000)
    ret, win = exact_evaluation(t.env, t.kernel.greedy(), t.config.success_reward)
    assert check(ev, ret, win), (env_id, ev.mean, ev.success_rate, ret, win)


@pytest.mark.parametrize("signame,at", [("SIGINT", 17), ("SIGTERM", 63)])
def test_a_signal_stops_between_episodes_with_a_checkpoint_that_resumes_exactly(tmp_path, signame, at):
    """SIGINT or SIGTERM only sets a flag: the episode in progress ends, the checkpoint is written there
    (never from inside a table update), TrainingInterrupted says so, and the resumed run ends as the
    uninterrupted one does."""
    import os
    import signal

    from pearl_fpga.errors import TrainingInterrupted

    cfg = dict(episodes=120, backend="cpu")
    full = TabularTrainer(TabularConfig.preset("qlearning", "CliffWalking-v1", **cfg))
    full.train()
    cut = TabularTrainer(TabularConfig.preset("qlearning", "CliffWalking-v1", **cfg), checkpoint_dir=tmp_path)

    def progress(stats):
        if stats.episode == at:
            os.kill(os.getpid(), getattr(signal, signame))

    with pytest.raises(TrainingInterrupted, match=f"stopped by {signame} at episode {at}; checkpoint written") as info:
        cut.train(progress=progress, interval=0.0)
    assert info.value.signum == getattr(signal, signame)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handlers are put back
    resumed = TabularTrainer.load(tmp_path, expect={"algo": "qlearning"})
    assert resumed.episode == at
    resumed.train()
    np.testing.assert_array_equal(resumed.kernel.table, full.kernel.table)
    assert resumed.episode_log == full.episode_log


def test_the_tabular_cli_exits_with_the_signal_and_says_where_it_saved(tmp_path, capsys, monkeypatch):
    import signal

    from pearl_fpga.runtime import tabular as runtime_tabular

    original = runtime_tabular.TabularTrainer._episode

    def episode(self):
        if self.episode == 5:
            self.request_stop()
            self._stop.signum = signal.SIGTERM
        return original(self)

    monkeypatch.setattr(runtime_tabular.TabularTrainer, "_episode", episode)
    code = main(["train", "--algo", "qlearning", "--env", "CliffWalking-v1", "--set", "episodes=40",
                 "--logdir", str(tmp_path / "run")])
    assert code == 128 + signal.SIGTERM
    out = _out(capsys)
    assert "interrupted at episode 6: checkpoint written to" in out and "--resume" in out
    assert TabularTrainer.load(tmp_path / "run" / "checkpoint").episode == 6
