"""`pearl-fpga devices` / `pearl-fpga plan` end to end at tiny profiling sizes, and Plan.report."""

from __future__ import annotations

import argparse
import json

import pytest

from pearl_fpga.commands import devices as devices_cmd
from pearl_fpga.commands import plan as plan_cmd
from pearl_fpga.planner.assign import TIE_TOLERANCE


def run_cmd(module, argv: list[str], capsys) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    module.configure(parser)
    code = module.run(parser.parse_args(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("profiles")


@pytest.fixture()
def cache(cache_dir, monkeypatch):
    monkeypatch.setenv("PEARL_FPGA_CACHE", str(cache_dir))
    monkeypatch.delenv("PEARL_FPGA_CACHE_DIR", raising=False)
    return cache_dir


@pytest.fixture(scope="module")
def small_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "dqn.json"
    # a network that fits the PYNQ-Z2's MLP kernel (max width 128), a buffer that fits its tree
    path.write_text(json.dumps({"net_arch": [32, 32], "buffer_size": 4096, "batch_size": 32}))
    return path


def test_devices_json_lists_cpu_and_reasons(capsys):
    code, out, _ = run_cmd(devices_cmd, ["--json"], capsys)
    assert code == 0
    found = json.loads(out)["devices"]
    cpu = [d for d in found if d["kind"] == "cpu"]
    assert len(cpu) == 1 and cpu[0]["available"] and "cores" in cpu[0]["detail"]
    for d in found:
        assert d["available"] or d["reason"], f"absent device without a reason: {d}"
    assert {d["kind"] for d in found} >= {"cpu", "cuda", "fpga", "fpga-emu"}
    code, out, _ = run_cmd(devices_cmd, ["--json", "--board", "pynq-z2"], capsys)
    sims = [d for d in json.loads(out)["devices"] if d["kind"] == "fpga-emu"]
    assert [d["name"] for d in sims] == ["fpga-emu"] or [d["name"] for d in sims] == ["fpga-emu:pynq-z2"]


def test_plan_json_with_a_modelled_board(cache, small_config, capsys):
    from pearl_fpga.runtime.placement import parse_placement

    argv = ["--json", "--quick", "--config", str(small_config), "--per", "--devices", "cpu,cpu-kernel,fpga-emu:pynq-z2",
            "--max-workers", "1"]
    code, out, err = run_cmd(plan_cmd, argv, capsys)
    assert code == 0, err
    plan = json.loads(out)
    parsed = parse_placement(plan["placement"])  # the runtime accepts what the planner chooses
    assert str(parsed) == plan["placement"]
    assert plan["workers"] in (0, 1) and plan["board"] == "pynq-z2"
    assert plan["predicted"]["env_steps_per_s"] > 0 and plan["throughput_label"] == "modelled"
    rows = {(r["task"], r["target"]): r for r in plan["tasks"]}
    assert rows[("env_step", "cpu")]["source"] == "measured"
    assert rows[("learn", "cpu")]["source"] == "measured"
    # the emulated board's kernels are modelled from cycle counts, and labelled so
    assert rows[("act", "fpga-emu")]["source"].startswith("cycle model")
    assert rows[("replay_sample", "fpga-emu")]["source"].startswith("cycle model")
    assert plan["devices"]["fpga-emu:pynq-z2"]["power_source"] == "nominal"
    assert list((cache / "profiles").glob("*.json")), "the profile was not cached"
    # pinned to the board: honoured
    code, out, err = run_cmd(plan_cmd, [*argv, "--constraints", "act=fpga-emu,replay=fpga-emu"], capsys)
    assert code == 0, err
    assert json.loads(out)["placement"].startswith("act=fpga-emu:pynq-z2,replay=fpga-emu:pynq-z2")


def test_plan_efficiency_with_set_overrides(cache, capsys):
    # the same workload as small_config, given field by field
    argv = ["--json", "--quick", "--set", "net_arch=[32, 32]", "--set", "buffer_size=4096", "--set", "batch_size=32",
            "--objective", "efficiency", "--max-workers", "1"]
    code, out, err = run_cmd(plan_cmd, argv, capsys)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["objective"] == "efficiency"
    alts = plan["alternatives"]
    best = alts[0]["run_env_steps_per_s"] / alts[0]["power_w"]
    # the first is the best, or within the tie tolerance of it (then simpler)
    assert all(a["run_env_steps_per_s"] / a["power_w"] <= best / (1 - TIE_TOLERANCE) * (1 + 1e-9) for a in alts)
    code, _, err = run_cmd(plan_cmd, ["--quick", "--set", "batch_size=-3"], capsys)
    assert code == 2 and "batch_size" in err


def test_plan_infeasible_constraint_is_a_clear_error(cache, small_config, capsys):
    argv = ["--json", "--quick", "--config", str(small_config), "--max-workers", "1", "--constraints", "learn=fpga-emu",
            "--devices", "cpu,fpga-emu:pynq-z2"]
    code, out, err = run_cmd(plan_cmd, argv, capsys)
    assert code == 2 and out == ""
    assert "learn=fpga-emu" in err and "no feasible placement" in err
    code, _, err = run_cmd(plan_cmd, ["--quick", "--devices", "cpu,tpu"], capsys)
    assert code == 2 and "unknown device 'tpu'" in err


def test_plan_report_predicted_vs_measured(cache, small_config, capsys):
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import choose_placement
    from pearl_fpga.planner.host_probe import Sizes

    config = TrainConfig.from_json(small_config, base=TrainConfig.preset("dqn"))
    plan = choose_placement("dqn", "CartPole-v1", config, sizes=Sizes.quick(), progress=False, max_workers=1)
    # the report compares means over the planned run (warm-up included, the schedule's gradient steps and
    # the thread-probe rounds counted) with the trainer's means
    pred, steps = plan.prediction, config.total_steps
    run = pred.run_task_seconds()
    share = 1 - config.learning_starts / steps
    scale = pred.run_updates / (pred.updates_per_step * share * steps)
    assert pred.run_updates == config.gradient_steps * (steps // config.train_freq - config.learning_starts // config.train_freq)
    assert run["learn"] == pytest.approx(pred.task_seconds["learn"] * share * scale + pred.probe_s / steps)
    measured = {task: 2 * sec for task, sec in run.items()}
    measured["env_steps_per_s"] = plan.prediction.run_throughput / 2
    rows = plan.report(measured)
    assert rows["env_steps_per_s"]["error"] == pytest.approx(1.0)
    assert rows["learn"]["error"] == pytest.approx(-0.5)
    out = capsys.readouterr().out
    assert "predicted vs measured" in out and "env steps/s" in out
    with pytest.raises(ValueError, match="differ"):
        choose_placement("ddpg", "Pendulum-v1", config)


def test_plan_labels_csynth_figures(cache, small_config, tmp_path, capsys):
    from test_planner_csynth import replay_report

    replay_report(tmp_path / "pynq-z2" / "replay")
    argv = ["--quick", "--config", str(small_config), "--per", "--devices", "cpu,cpu-kernel,fpga-emu:pynq-z2",
            "--max-workers", "1", "--csynth", str(tmp_path)]
    code, out, err = run_cmd(plan_cmd, [*argv, "--json"], capsys)
    assert code == 0, err
    rows = {(r["task"], r["target"]): r for r in json.loads(out)["tasks"]}
    assert rows[("replay_sample", "fpga-emu")]["source"] == "cycle model (csynth) @ pynq-z2"
    assert rows[("act", "fpga-emu")]["source"] == "cycle model (hls model) @ pynq-z2"  # no MLP report: the HLS model
    code, out, err = run_cmd(plan_cmd, argv, capsys)
    assert code == 0, err
    assert "(csynth)" in out and "(m)" in out


def test_bench_plan_plot_draws_the_accuracy_chart(tmp_path):
    """The chart of `bench plan --plot` from a result of the shape `bench plan --json` prints."""
    from pearl_fpga.bench.plan import plot

    rows = [{"placement": f"act={act},replay=cpu,learn=cpu", "workers": w, "predicted": p, "measured": m,
             "error": (p - m) / m} for act, w, p, m in (("cpu", 0, 2300, 2290), ("cpu-kernel", 1, 1200, 900))]
    png = tmp_path / "plan.png"
    plot({"algo": "dqn", "env": "CartPole-v1", "steps": 3000, "rows": rows, "within_target": 1, "cases": 2}, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plan_train_line_is_the_plan_it_made(cache, small_config, capsys):
    """`train with:` keeps --per, --config and every --set, so the run it suggests has the planned config."""
    import shlex

    from pearl_fpga.commands import train as train_cmd
    from pearl_fpga.commands.config_args import build_config

    argv = ["--quick", "--per", "--config", str(small_config), "--set", "batch_size=16", "--set",
            "net_arch=[16, 16]", "--max-workers", "1"]
    code, out, err = run_cmd(plan_cmd, argv, capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("train with: "))
    words = shlex.split(line.removeprefix("train with: "))
    assert words[:2] == ["pearl-fpga", "train"] and "--per" in words
    parser = argparse.ArgumentParser()
    train_cmd.configure(parser)
    args = parser.parse_args(words[2:])
    suggested = build_config(args, args.algo, args.env, **({"per": True} if args.per else {}))
    assert suggested.per and suggested.batch_size == 16 and suggested.net_arch == [16, 16]
    assert suggested.buffer_size == 4096  # from --config
