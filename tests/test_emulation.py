"""fpga-emu emulates a catalog board: its kernel sizes bind the run (a run that does not fit stops at
start, naming the limit and the fixes), a preset is fitted to it, and the time table and summary carry
the board's modelled times; cpu-kernel keeps no board limits."""

from __future__ import annotations

import json

import pytest

from pearl_fpga.board.catalog import CatalogError, default_board, load_catalog, parse_catalog
from pearl_fpga.cli import main
from pearl_fpga.config import TrainConfig
from pearl_fpga.runtime.emulation import misfits, replay_sizes
from pearl_fpga.runtime.placement import parse_placement
from pearl_fpga.trainer import Trainer

TINY = {"learning_starts": 100, "train_freq": 32, "gradient_steps": 8, "net_arch": [16, 16], "buffer_size": 4000,
        "batch_size": 32, "eval_freq": 200, "eval_episodes": 2}


def _out(capsys) -> str:
    """Captured stdout and stderr with rich's line wrapping undone."""
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


def _train(tmp_path, *extra: str) -> list[str]:
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    return ["train", "--algo", "dqn", "--steps", "300", "--seed", "0", "--config", str(config), "--logdir",
            str(tmp_path / "run"), "--eval-episodes", "1", "--no-tensorboard", *extra]


def test_plain_fpga_emu_is_the_catalog_default_board():
    board = default_board()
    assert board in load_catalog()
    assert str(parse_placement("fpga-emu")) == f"act=fpga-emu:{board},replay=fpga-emu:{board},learn=cpu"
    p = parse_placement("act=fpga-emu:zcu104,replay=cpu,learn=cpu")
    assert p.board == "zcu104" and p.act == "fpga-emu" and parse_placement(str(p)) == p
    assert parse_placement("cpu-kernel").board is None


def test_unknown_board_lists_the_catalog(tmp_path, capsys):
    with pytest.raises(CatalogError, match=r"fpga-emu:nosuch.*unknown board 'nosuch'.*pynq-z2.*zcu104"):
        parse_placement("fpga-emu:nosuch")
    assert main(_train(tmp_path, "--placement", "act=fpga-emu:nosuch,replay=cpu,learn=cpu")) == 2
    assert "unknown board 'nosuch'; the catalog has: alveo-u250" in _out(capsys)
    with pytest.raises(ValueError, match="one board per run"):
        parse_placement("act=fpga-emu:kv260,replay=fpga-emu:zcu104")
    data = json.loads((load_catalog.__globals__["DEFAULT_CATALOG"]).read_text())
    with pytest.raises(CatalogError, match="default_board 'nosuch' is not one of its boards"):
        parse_catalog({**data, "default_board": "nosuch"})


def test_too_wide_network_stops_at_start_naming_limit_and_fixes(tmp_path, capsys):
    assert main(_train(tmp_path, "--placement", "fpga-emu:pynq-z2", "--set", "net_arch=[256,256]")) == 2
    out = _out(capsys)
    assert "pynq-z2's MLP kernel holds width 128; the network 4-256-256-2 has 256" in out
    assert "--set net_arch=[64,64]" in out and "--placement fpga-emu:zcu104" in out
    assert "boards that fit: zcu104, alveo-u250, alveo-u280, alveo-u55c" in out
    assert "--placement cpu-kernel" in out and "--placement auto" in out
    assert "training DQN" not in out  # before any training


def test_too_many_layers_are_named():
    # TrainConfig allows the widest board's 4 linear layers; a board synthesized for fewer refuses more
    from dataclasses import replace

    board = load_catalog()["pynq-z2"]
    small = replace(board, kernels={**board.kernels, "mlp": {**board.kernels["mlp"], "max_layers": 2}})
    problems = misfits(small, TrainConfig.preset("dqn", net_arch=[64, 64]), 4, 2, act=True, replay=False)
    assert problems == ["pynq-z2's MLP kernel holds 2 layers; the network 4-64-64-2 has 3"]


def test_too_big_buffer_stops_at_start(tmp_path, capsys):
    assert main(_train(tmp_path, "--per", "--placement", "fpga-emu:pynq-z2", "--set", "buffer_size=100000")) == 2
    out = _out(capsys)
    assert "pynq-z2's replay kernel holds 16,384 transitions; buffer_size is 100,000" in out
    assert "--set buffer_size=16384" in out and "alveo-u250" in out and "training DQN" not in out


def test_cpu_kernel_has_no_board_limits():
    config = TrainConfig.preset("dqn", per=True, net_arch=[256, 256], buffer_size=100_000)
    trainer = Trainer("dqn", placement="cpu-kernel", config=config, seed=0)
    assert trainer.placement.board is None and trainer.config.net_arch == [256, 256]
    assert trainer.actor.policy.kernel.backend.max_width > 256  # the C++ build's own limit
    assert replay_sizes(trainer.placement) == {}


def test_the_emulated_kernels_have_the_boards_sizes():
    trainer = Trainer("dqn", placement="fpga-emu:pynq-z2", config=TrainConfig.preset("dqn", **TINY, per=True), seed=0)
    mlp = load_catalog()["pynq-z2"].kernels["mlp"]
    backend = trainer.actor.policy.kernel.backend
    assert (backend.max_width, backend.max_layers, backend.max_batch) == (mlp["max_width"], mlp["max_layers"],
                                                                          mlp["max_batch"])
    assert replay_sizes(trainer.placement) == {"fanout": 16, "max_batch": 1024}
    assert trainer.replay.buffer._sampler.max_batch == 1024


def test_preset_is_fitted_to_the_board_and_says_so():
    trainer = Trainer("dqn", env="CartPole-v1", placement="fpga-emu", seed=0)  # the rl-zoo preset: [256, 256]
    assert trainer.config.net_arch == [64, 64]
    assert "runs the DQN CartPole-v1 preset with net_arch=[64, 64]" in trainer.preset_note
    assert "holds width 128; the network 4-256-256-2 has 256" in trainer.preset_note
    assert Trainer("dqn", env="CartPole-v1", placement="cpu-kernel", seed=0).config.net_arch == [256, 256]


def test_fitting_run_reports_modelled_board_times(tmp_path, capsys):
    assert main(_train(tmp_path, "--per", "--placement", "fpga-emu:pynq-z2")) == 0
    out = _out(capsys)
    assert "emulating pynq-z2 (100 MHz" in out and "pynq-z2 us" in out
    assert "env steps/s the board would sustain" in out
    board = json.loads((tmp_path / "run" / "summary.json").read_text())["board_modelled"]
    assert board["board"] == "pynq-z2" and board["clock_mhz"] == 100
    assert set(board["seconds_per_env_step"]) == {"act", "weight_sync", "replay_insert", "replay_sample", "replay_update"}
    assert all(s > 0 for s in board["seconds_per_env_step"].values()) and board["env_steps_per_s"] > 0
    assert all("@ pynq-z2" in s for s in board["sources"].values())


def test_the_catalog_is_read_once_per_trainer_set_up(monkeypatch):
    """The board is looked up when the placement is made; everything after reads placement.board_spec."""
    from pearl_fpga.board import catalog

    reads = []
    real = catalog._read
    monkeypatch.setattr(catalog, "_read", lambda path: reads.append(path) or real(path))
    trainer = Trainer("dqn", placement="fpga-emu:pynq-z2", config=TrainConfig.preset("dqn", **TINY, per=True), seed=0)
    assert trainer.placement.board_spec is not None and trainer.placement.board_spec.name == "pynq-z2"
    assert len(reads) == 1


def test_the_cpu_mlp_build_takes_smaller_sizes_only():
    from pearl_fpga.backends.mlp_cpu import CpuMLPBackend

    built = CpuMLPBackend()
    small = CpuMLPBackend(max_layers=2, max_width=16, max_batch=8)
    assert (small.max_layers, small.max_width, small.max_batch) == (2, 16, 8)
    with pytest.raises(ValueError, match="max_width must be an integer from 1 to"):
        CpuMLPBackend(max_width=built.max_width + 1)
