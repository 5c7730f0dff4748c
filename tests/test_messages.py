"""Messages keep their words (issue 24): bracketed text survives rich, counts and devices read right,
targets say whether they are met, and a failed run leaves no folder behind."""

from __future__ import annotations

import json

import pytest

from pearl_fpga.cli import main


def _out(capsys) -> str:
    """Captured stdout and stderr with rich's line wrapping undone."""
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


@pytest.mark.parametrize("hint", ['pip install "gymnasium[box2d]"', "pip install 'pearl_fpga[sim]'"])
def test_train_errors_keep_bracketed_install_hints(tmp_path, capsys, monkeypatch, hint):
    from pearl_fpga import trainer
    from pearl_fpga.errors import BackendUnavailable

    def fail(*args, **kwargs):
        raise BackendUnavailable(f"Box2D is not installed, run {hint}")

    monkeypatch.setattr(trainer.Trainer, "__init__", fail)
    assert main(["train", "--steps", "10", "--logdir", str(tmp_path / "run")]) == 2
    assert hint in _out(capsys)


def test_missing_box2d_names_the_extra(tmp_path, capsys):
    pytest.importorskip("gymnasium")
    try:
        import Box2D  # noqa: F401
    except ImportError:
        assert main(["train", "--env", "LunarLander-v3", "--steps", "10", "--logdir", str(tmp_path / "r")]) == 2
        assert "gymnasium[box2d]" in _out(capsys)
    else:
        pytest.skip("Box2D is installed here")


def test_one_actor_worker_is_singular():
    from pearl_fpga.commands.train_summary import engine_text as _engine_text
    from pearl_fpga.config import TrainConfig

    assert _engine_text(TrainConfig.preset("dqn", workers=1)) == "processes (1 actor worker)"
    assert _engine_text(TrainConfig.preset("dqn", workers=2)) == "processes (2 actor workers)"


def test_thread_report_without_probes_has_no_empty_parentheses():
    from pearl_fpga.runtime.threads import ThreadChoice

    text = ThreadChoice(current=1, candidates=(1, 2)).describe()
    assert text == "auto: 1 thread (0 rounds, 0 switches)"
    assert "( " not in ThreadChoice(current=2, candidates=(1, 2), median_step_s={1: 2e-3, 2: 1e-3}, rounds=1).describe()


def test_run_header_names_host_memory_replay_without_per(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"learning_starts": 50, "train_freq": 32, "gradient_steps": 2, "net_arch": [8],
                                  "buffer_size": 500, "batch_size": 16, "eval_freq": 0, "eval_episodes": 1}))
    args = ["train", "--steps", "100", "--placement", "fpga-emu", "--config", str(config), "--no-tensorboard",
            "--eval-episodes", "1", "--logdir", str(tmp_path / "run")]
    assert main(args) == 0
    out = _out(capsys)
    assert "replay=cpu (host memory)" in out and "replay=fpga-emu" not in out.split("Where the time goes")[0]


def test_bench_mlp_says_whether_targets_are_met():
    from pearl_fpga.bench.mlp import _target_text, _verdict

    rows = [{"batch": 1, "speedup_vs_torch_1thread": 0.8, "speedup_vs_torch_default": 0.9},
            {"batch": 1024, "speedup_vs_torch_1thread": 1.5, "speedup_vs_torch_default": 1.1},
            {"batch": 1024, "speedup_vs_torch_1thread": 1.7, "speedup_vs_torch_default": 0.87}]
    verdict = _verdict({"networks": [{"network": "4-64-64-2", "rows": rows}]})
    assert "NOT MET by 4-64-64-2 B=1 (0.80x), 4-64-64-2 B=1024 (0.87x)" in verdict
    # batch 1 against torch at one thread; batch 1024 against torch at its default threads (issue 22)
    assert _target_text(rows[0]) == ">=10x 1t: NOT MET" and _target_text(rows[1]) == ">=1x dflt: met"
    assert _target_text(rows[2]) == ">=1x dflt: NOT MET"
    assert _verdict({"networks": [{"network": "n", "rows": rows[1:2]}]}).endswith("all met.")


def test_failed_run_leaves_no_logdir(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main(["train", "--env", "NoSuchEnv-v0", "--steps", "10"]) == 2
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert "NoSuchEnv" in _out(capsys)


def _unescaped_prints(path):
    """Lines of console.print calls that interpolate text outside rich.markup.escape (rich would read
    brackets in it as markup) without markup=False; numbers with a format spec cannot hold markup."""
    import ast

    def is_escape(node):
        return isinstance(node, ast.Call) and getattr(node.func, "id", "") == "escape"

    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "print"
                and getattr(node.func.value, "id", "") == "console" and node.args):
            continue
        if any(k.arg == "markup" for k in node.keywords):
            continue
        safe = {id(n) for e in ast.walk(node.args[0]) if is_escape(e) for n in ast.walk(e)}
        if any(isinstance(part, ast.FormattedValue) and id(part) not in safe and part.format_spec is None
               and not is_escape(part.value) for part in ast.walk(node.args[0])):
            yield node.lineno


def test_every_interpolated_rich_message_is_escaped():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "pearl_fpga"
    bad = [f"{p.relative_to(root)}:{line}" for p in sorted(root.rglob("*.py")) for line in _unescaped_prints(p)]
    assert not bad, f"escape (rich.markup.escape) or pass markup=False: {bad}"
