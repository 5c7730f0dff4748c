"""An exported policy on the board's pynq backend, in an environment without torch (as a PYNQ-Z2's, which
has no torch wheel): MLPInfer.load on the mock Zynq gives the numpy reference's bits, and the board
example (examples/deploy_on_board.py) acts from a gymnasium env with it. tests/test_deploy.py checks the
same files against the training side's kernel."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from test_board_install import random_policy
from test_pynq_stack import board  # noqa: F401 - the mock board fixture

from pearl_fpga.kernels import MLPInfer
from pearl_fpga.kernels.mlp_artifact import write_artifact
from pearl_fpga.spec.mlp import HEAD_RAW, HEAD_TANH

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deploy_on_board.py"
CASES = {"CartPole-v1": ([4, 64, 64, 2], HEAD_RAW), "Pendulum-v1": ([3, 32, 32, 1], HEAD_TANH)}


def _example():
    spec = importlib.util.spec_from_file_location("deploy_on_board", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_this_environment_has_no_torch():
    assert importlib.util.find_spec("torch") is None


@pytest.mark.parametrize("env_id", sorted(CASES))
def test_an_exported_policy_acts_on_pynq(board, tmp_path, env_id, capsys):  # noqa: F811
    widths, head = CASES[env_id]
    artifact = random_policy(5, widths, head, low=-2.0, high=2.0)
    directory = write_artifact(tmp_path / "kernel", dataclasses.replace(artifact, info={"env_id": env_id}))
    policy = MLPInfer.load(directory, backend="pynq")
    reference = MLPInfer.load(directory, backend="numpy")
    assert type(policy.backend).__name__ != type(reference.backend).__name__  # the board driver, not numpy
    obs = np.random.default_rng(3).normal(0, 3, size=(40, widths[0])).astype(np.float32)
    assert np.array_equal(policy(obs), reference(obs))
    assert np.array_equal(policy.act(obs), reference.act(obs))
    example = _example()
    on_board = example.run_episodes(policy, env_id, 1, seed=11)
    assert on_board == example.run_episodes(reference, env_id, 1, seed=11)
    assert example.main([str(directory), "--backend", "pynq", "--episodes", "1", "--seed", "11", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == on_board
