"""examples/dqn_on_kernels.py runs and learns: DQN on the MLP and replay kernels, used directly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dqn_on_kernels.py"


def _load():
    spec = importlib.util.spec_from_file_location("dqn_on_kernels", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


def test_dqn_on_kernels_learns_cartpole_in_a_few_thousand_steps():
    example = _load()
    result = example.train(example.Args(total_steps=3000, seed=0))
    returns = result["episode_returns"]
    # a random policy averages about 22 on CartPole; the kernel actor's greedy episodes are far above it
    assert np.mean(result["eval_returns"]) > 100
    assert np.mean(returns[-10:]) > 2 * np.mean(returns[:10])
    # the fixed-point actor chooses the float network's action on (nearly) every replayed state
    assert result["kernel_agreement"] > 0.95


def test_dqn_on_kernels_stays_readable_in_one_sitting():
    assert len(EXAMPLE.read_text().splitlines()) < 250
