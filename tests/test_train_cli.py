"""`pearl-fpga train` end to end at tiny step counts: logs (CSV, TensorBoard), PNG, summary,
checkpoints and --resume, plain progress lines when stdout is not a terminal, clear errors."""

from __future__ import annotations

import csv
import json

from pearl_fpga.cli import main

TINY = {"learning_starts": 100, "train_freq": 32, "gradient_steps": 8, "net_arch": [16, 16], "buffer_size": 4000,
        "batch_size": 32, "eval_freq": 200, "eval_episodes": 2}


def _out(capsys) -> str:
    """Captured stdout with rich's line wrapping undone."""
    return " ".join(capsys.readouterr().out.split())


def _config(tmp_path, **extra):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**TINY, **extra}))
    return path


def test_train_writes_logs_curve_checkpoint_and_resumes(tmp_path, capsys):
    logdir = tmp_path / "run"
    args = ["train", "--algo", "dqn", "--steps", "400", "--seed", "0", "--placement", "fpga-emu",
            "--config", str(_config(tmp_path)), "--logdir", str(logdir), "--eval-episodes", "2"]
    assert main(args) == 0
    out = _out(capsys)
    assert "steps/s" in out and "ETA" in out  # plain progress line (stdout is not a terminal here)
    assert "Where the time goes" in out and "learn" in out and "fpga-emu" in out
    with open(logdir / "episodes.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and set(rows[0]) == {"env_step", "return", "length"}
    assert len(list(csv.DictReader(open(logdir / "evaluations.csv")))) == 2
    assert list((logdir / "tensorboard").glob("events.out.tfevents.*"))
    assert (logdir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["env_steps"] == 400 and summary["grad_steps"] == 72
    assert set(summary["seconds_per_env_step"]) >= {"env_step", "act", "replay_insert", "replay_sample", "learn"}
    manifest = json.loads((logdir / "checkpoint" / "manifest.json").read_text())
    assert manifest["counters"]["env_steps"] == 400

    assert main([*args[:4], "600", *args[5:], "--resume"]) == 0
    out = _out(capsys)
    assert "resumed" in out and "at env step 400" in out
    assert json.loads((logdir / "summary.json").read_text())["env_steps"] == 600


def test_train_json_output(tmp_path, capsys):
    args = ["train", "--algo", "ddpg", "--steps", "150", "--placement", "cpu", "--json", "--no-tensorboard",
            "--config", str(_config(tmp_path, batch_size=16)), "--logdir", str(tmp_path / "r"), "--eval-episodes", "1"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algo"] == "ddpg" and data["env_steps"] == 150 and data["placement"].startswith("act=cpu")
    assert data["update_schedule"].startswith("auto: ")  # DDPG's serial or concurrent step, measured (issue 34)


def test_train_td3(tmp_path, capsys):
    args = ["train", "--algo", "td3", "--steps", "150", "--json", "--no-tensorboard", "--config",
            str(_config(tmp_path, batch_size=16)), "--logdir", str(tmp_path / "r"), "--eval-episodes", "1"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algo"] == "td3" and data["env_steps"] == 150 and data["grad_steps"] == 8
    assert data["placement"].startswith("act=cpu-kernel")  # the default: the actor on the MLP kernel


def test_train_errors_are_clear(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"gamma": 3}')
    assert main(["train", "--config", str(bad), "--logdir", str(tmp_path / "a")]) == 2
    assert "gamma" in _out(capsys)
    assert main(["train", "--placement", "act=tpu", "--steps", "10", "--logdir", str(tmp_path / "b")]) == 2
    assert "cannot run task" in _out(capsys)
    assert main(["train", "--resume", "--checkpoint-dir", str(tmp_path / "none"), "--logdir", str(tmp_path / "c")]) == 2
    assert "no checkpoint" in _out(capsys)
    assert main(["train", "--algo", "ddpg", "--env", "CartPole-v1", "--steps", "10", "--logdir", str(tmp_path / "d")]) == 2
    assert "continuous" in _out(capsys)


def test_bench_train_runs_both_libraries_at_tiny_scale(capsys, tmp_path):
    import importlib.util

    png = tmp_path / "bench.png"
    assert main(["bench", "train", "--algo", "dqn", "--steps", "300", "--eval-episodes", "1", "--json",
                 "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert "seed 0: pearl_fpga ..." in captured.err and "done: " in captured.err  # each run says when it ends
    # the record says what ran, where, and how busy the machine was
    assert record["benchmark"] == "train" and record["command"].startswith("pearl-fpga bench train --algo dqn")
    assert record["machine"]["cores"] >= 1 and len(record["load_average_before"]) == 3
    assert isinstance(record["under_load"], bool)
    data = record["results"]
    run = data["runs"][0]
    assert data["steps"] == 300 and run["pearl_fpga"]["env_steps_per_s"] > 0
    assert data["pearl_threads"] == "auto" and "auto" in run["pearl_fpga"]["learner_threads"]
    assert isinstance(run["pearl_fpga"]["under_load"], bool) and len(run["pearl_fpga"]["load_before"]) == 3
    assert data["config"]["double_q"] is False  # the same (vanilla) DQN target as SB3 unless --double-q
    assert set(run["pearl_fpga"]["us_per_env_step"]) >= {"env_step", "act", "learn"}
    import torch

    assert data["sb3_threads"] == {"1": 1, "default": torch.get_num_threads()}
    if importlib.util.find_spec("stable_baselines3") is not None:
        assert data["sb3"] == "installed" and set(run["sb3"]) == {"1", "default"}
        for name in ("1", "default"):  # learning_starts 1000 > 300: no update yet
            assert run["sb3"][name]["grad_steps"] == 0 and run["speedup"][name] > 0
        assert set(data["median_speedup"]) == {"1", "default"}
    else:
        assert "not installed" in data["sb3"] and run["sb3"] == {}
    # SBX (the bench extra) runs beside them at the same settings; the record names every library's version
    assert "cpu_features" in data and data["libraries"]["torch"] == torch.__version__
    if importlib.util.find_spec("sbx") is not None:
        assert data["sbx"] == "installed" and run["sbx"]["grad_steps"] == 0 and run["speedup_sbx"] > 0
        assert data["median_speedup_sbx"] == run["speedup_sbx"] and "sbx-rl" in data["libraries"]
    else:
        assert "not installed" in data["sbx"] and "sbx" not in run


def test_bench_train_runs_td3_beside_sb3s_td3(capsys):
    import importlib.util

    assert main(["bench", "train", "--algo", "td3", "--steps", "300", "--set", "learning_starts=200", "--set",
                 "net_arch=[16,16]", "--sb3-threads", "1", "--eval-episodes", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["results"]
    assert data["algo"] == "td3" and data["config"]["policy_delay"] == 2
    run = data["runs"][0]
    assert run["pearl_fpga"]["grad_steps"] == 100
    if importlib.util.find_spec("stable_baselines3") is not None:
        assert run["sb3"]["1"]["grad_steps"] == 100  # SB3's TD3 at the same settings and schedule
    else:
        assert run["sb3"] == {}


def test_bench_train_shows_progress_with_rate_and_eta(monkeypatch):
    """A long run logs its step, rate and ETA every few seconds (not at every report), and not at its end."""
    from pearl_fpga.bench import train as bench_train
    from pearl_fpga.runtime.stats import Stats

    clock = iter([0.0, 3.0, 11.0, 12.0, 25.0])
    monkeypatch.setattr(bench_train.time, "monotonic", lambda: next(clock))
    lines: list[str] = []
    report = bench_train._progress_lines("seed 0: pearl_fpga", lines.append)
    for steps in (1_000, 4_000, 5_000, 20_000):
        report(Stats(env_steps=steps, target_steps=20_000, env_steps_run=steps, elapsed=steps / 500))
    assert lines == ["seed 0: pearl_fpga: step 4,000/20,000, 500 steps/s, ETA 32 s"]


def test_bench_train_rejects_bad_thread_settings(capsys):
    assert main(["bench", "train", "--sb3-threads", "zero", "--steps", "10"]) == 2
    assert "--sb3-threads" in capsys.readouterr().err  # errors go to stderr, apart from a --json record


def test_bench_train_keep_best_reports_the_kept_policy(capsys):
    # past the preset's first periodic evaluation (every 5,000 env steps), so a best policy is kept
    assert main(["bench", "train", "--algo", "dqn", "--steps", "5100", "--eval-episodes", "1", "--no-sb3",
                 "--keep-best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["results"]
    assert data["keep_best"] is True and data["config"]["eval_freq"] == 5000
    ours = data["runs"][0]["pearl_fpga"]
    assert ours["eval_policy"] == "best" and ours["eval_policy_step"] == 5000


def test_set_overrides_any_field_with_clear_errors(tmp_path, capsys):
    from pearl_fpga.commands.config_args import parse_set

    assert parse_set(["net_arch=[64,64]", "per=true", "env_id=Acrobot-v1"]) == {
        "net_arch": [64, 64], "per": True, "env_id": "Acrobot-v1"}
    assert main(["train", "--set", "nosuch=1", "--steps", "10", "--logdir", str(tmp_path / "a")]) == 2
    assert "no field 'nosuch'" in _out(capsys)
    assert main(["train", "--set", "gamma=3", "--steps", "10", "--logdir", str(tmp_path / "b")]) == 2
    assert "gamma" in _out(capsys)
    assert main(["train", "--set", "batch_size", "--steps", "10", "--logdir", str(tmp_path / "c")]) == 2
    assert "FIELD=VALUE" in _out(capsys)
    assert main(["bench", "train", "--set", "learning_rate=-1", "--steps", "10", "--no-sb3"]) == 2
    assert "learning_rate" in capsys.readouterr().err  # benchmarks keep stdout for their tables and records


def test_resume_applies_what_may_change_and_refuses_the_rest(tmp_path, capsys):
    logdir = tmp_path / "run"
    args = ["train", "--steps", "300", "--placement", "cpu", "--no-tensorboard", "--config", str(_config(tmp_path)),
            "--logdir", str(logdir), "--eval-episodes", "1"]
    assert main(args) == 0
    capsys.readouterr()
    # was: exit 0 with the old settings
    assert main([*args, "--resume", "--per", "--set", "learning_rate=0.01"]) == 2
    out = _out(capsys)
    assert "learning_rate: checkpoint 0.0023, asked 0.01" in out and "per: checkpoint False, asked True" in out
    assert "may change only total_steps" in out
    assert main([*args[:2], "400", *args[3:], "--resume", "--set", "eval_freq=50"]) == 0
    assert "resumed" in _out(capsys)
    rows = list(csv.DictReader(open(logdir / "evaluations.csv")))
    assert [int(r["env_step"]) for r in rows] == [200, 350, 400]  # eval_freq 200 before the resume, 50 after


def test_shared_options_mean_the_same_for_every_algorithm(tmp_path, capsys):
    """--steps, --eval-freq and --checkpoint-freq count env steps and --eval-episodes is every evaluation's
    length, for DQN and for tabular Q-learning (which acts at the end of the episode that reaches a count)."""
    shared = ["--eval-freq", "100", "--eval-episodes", "1", "--checkpoint-freq", "100", "--no-tensorboard", "--json"]
    dqn, tab = tmp_path / "dqn", tmp_path / "tab"
    assert main(["train", "--algo", "dqn", "--steps", "200", "--placement", "cpu", "--config", str(_config(tmp_path)),
                 "--logdir", str(dqn), *shared]) == 0
    assert main(["train", "--algo", "qlearning", "--env", "FrozenLake-v1", "--steps", "200", "--logdir", str(tab),
                 *shared]) == 0
    capsys.readouterr()
    for run in (dqn, tab):
        summary = json.loads((run / "summary.json").read_text())
        assert {k: summary["config"][k] for k in ("eval_freq", "eval_episodes", "checkpoint_freq", "total_steps")} == {
            "eval_freq": 100, "eval_episodes": 1, "checkpoint_freq": 100, "total_steps": 200}
        assert summary["eval_episodes"] == 1
    assert [int(r["env_step"]) for r in csv.DictReader(open(dqn / "evaluations.csv"))] == [100, 200]
    ends = [int(r["env_step"]) for r in csv.DictReader(open(tab / "episodes.csv"))]
    evals = [int(r["env_step"]) for r in csv.DictReader(open(tab / "evaluations.csv"))]
    assert ends[-1] >= 200 > ends[-2]  # the run ends with the episode that reaches --steps
    # one evaluation at the end of each episode that crossed a multiple of 100, then the final one
    crossed = [b for a, b in zip([0, *ends], ends) if b // 100 > a // 100]
    assert evals == [*crossed, ends[-1]]
