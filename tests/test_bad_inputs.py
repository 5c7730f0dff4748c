"""Bad inputs (issue 25, items 4 and 8-10): each gets a clear error that names the problem and the fix,
before anything changes, never a crash, a raw traceback from deep inside, or a memory blow-up.

The tests are grouped by category (the prefix of their names); docs/reliability.md counts the cases
of each category."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pearl_fpga.algos.tabular import TABULAR_RANGES, TabularConfig
from pearl_fpga.cli import main
from pearl_fpga.config import RANGES, TrainConfig


def _out(capsys) -> str:
    """Captured stdout and stderr with rich's line wrapping undone."""
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


# ---- config: every field has a range ---------------------------------------------------------------


@pytest.mark.parametrize("cls,ranges", [(TrainConfig, RANGES), (TabularConfig, TABULAR_RANGES)])
def test_config_every_numeric_field_has_a_range(cls, ranges):
    numeric = {f.name for f in dataclasses.fields(cls) if f.type in ("int", "float")}
    assert numeric == set(ranges)


@pytest.mark.parametrize("field,value,shown", [
    ("learner_threads", 100_000, "[0, 1024]"),
    ("workers", 65, "[0, 64]"),
    ("n_envs", 5000, "[1, 1024]"),
    ("actors", 0, "[1, 1024]"),
    ("replay_shards", 1000, "[1, 256]"),
    ("buffer_size", 10**13, "[1, 1099511627776]"),
    ("batch_size", 10**6, "[1, 65536]"),
    ("total_steps", 10**13, "[1, 1000000000000]"),
    ("gradient_steps", 10**7, "[0, 1000000]"),
    ("eval_episodes", 0, "[1, 1000000]"),
    ("per_eps", 0.0, "(0, 1]"),
    ("per_alpha", 2.0, "[0, 1]"),
    ("tau", 0.0, "(0, 1]"),
    ("action_noise_std", 100.0, "[0, 10]"),
    ("max_grad_norm", -1.0, "[0, 1e+09]"),
    ("learning_rate", 0.0, "(0, inf)"),
])
def test_config_out_of_range_names_field_value_range_and_fix(field, value, shown):
    with pytest.raises(ValueError) as info:
        TrainConfig.preset("dqn", **{field: value})
    msg = str(info.value)
    assert f"TrainConfig.{field} = {value!r} is out of range" in msg and shown in msg and f"--set {field}=" in msg


@pytest.mark.parametrize("field,value", [("parts", 5000), ("seed", -1), ("success_reward", 1e6), ("episodes", 10**10)])
def test_config_tabular_out_of_range(field, value):
    with pytest.raises(ValueError, match=rf"TabularConfig\.{field} = .* is out of range"):
        TabularConfig(**{field: value})


def test_config_learner_threads_from_the_cli_is_an_error_not_a_segfault(tmp_path, capsys):
    assert main(["train", "--steps", "100", "--logdir", str(tmp_path / "r"), "--set", "learner_threads=100000"]) == 2
    assert "TrainConfig.learner_threads = 100000 is out of range" in _out(capsys)


def test_config_buffer_beyond_memory_is_refused_up_front(tmp_path, capsys):
    """buffer_size=10^11 passed the config's range and died in np.zeros (ArrayMemoryError)."""
    assert main(["train", "--steps", "100", "--placement", "cpu", "--logdir", str(tmp_path / "r"),
                 "--set", "buffer_size=100000000000"]) == 2
    out = _out(capsys)
    assert "buffer_size=100,000,000,000" in out and "of memory, but" in out and "lower buffer_size" in out


def test_config_replay_buffer_beyond_memory_is_refused():
    from pearl_fpga.replay import PrioritizedReplayBuffer

    with pytest.raises(ValueError, match=r"capacity 1,048,576 .* needs .* of memory, but"):
        PrioritizedReplayBuffer(1 << 20, obs_shape=(1 << 20,), action_shape=(), seed=0)
