"""Bad inputs (issue 25, items 4 and 8-10): each gets a clear error that names the problem and the fix,
before anything changes, never a crash, a raw traceback from deep inside, or a memory blow-up.

The tests are grouped by category (the prefix of their names); docs/reliability.md counts the cases
of each category."""

from __future__ import annotations

import dataclasses
import json
import re

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


# ---- load: a checkpoint or replay dump is checked before anything changes --------------------------

from pearl_fpga.errors import CheckpointError  # noqa: E402
from pearl_fpga.replay import PrioritizedReplayBuffer  # noqa: E402
from pearl_fpga.replay.state import write_npz  # noqa: E402


def _buffer(**kw) -> PrioritizedReplayBuffer:
    buf = PrioritizedReplayBuffer(64, obs_shape=(3,), action_shape=(), action_dtype=np.int64, backend="numpy",
                                  seed=0, **kw)
    rng = np.random.default_rng(0)
    buf.add(rng.normal(size=(10, 3)), rng.integers(0, 2, 10), rng.normal(size=10), rng.normal(size=(10, 3)),
            np.zeros(10))
    return buf


def _obs_nan(s):
    s["obs"] = s["obs"].copy()
    s["obs"][4, 1] = np.nan


@pytest.mark.parametrize("change,words", [
    (lambda s: s.update(alpha=float("nan")), "alpha must be a finite number >= 0"),
    (lambda s: s.update(alpha=-3.0), "alpha must be a finite number >= 0"),
    (lambda s: s.update(eps=0.0), "eps must be a finite number > 0"),
    (lambda s: s.update(beta=7.0), "beta must be in [0, 1]"),
    (_obs_nan, "obs of stored transition 4 is NaN or infinite"),
    (lambda s: s.update(done=np.full(10, 7, np.float32)), "done must hold only 0 and 1"),
])
def test_load_replay_dump_with_bad_values_is_refused(tmp_path, change, words):
    state = _buffer().state_dict()
    change(state)
    write_npz(tmp_path / "d.npz", state)
    fresh = _buffer()
    before = fresh.state_dict()
    with pytest.raises(CheckpointError, match=re.escape(words)):
        fresh.load(tmp_path / "d.npz")
    assert fresh.state_dict()["alpha"] == before["alpha"] and (fresh.sampler.leaves() == before["leaves"]).all()


@pytest.mark.parametrize("name,value", [("alpha", float("nan")), ("eps", 0.0), ("beta_initial", 7.0)])
def test_load_replay_save_refuses_a_state_it_could_not_load(tmp_path, name, value):
    """An eps-0 buffer saved a file that load() refused: now save() refuses and writes nothing."""
    buf = _buffer()
    setattr(buf, name, value)
    with pytest.raises(CheckpointError):
        buf.save(tmp_path / "d.npz")
    assert not (tmp_path / "d.npz").exists()


def test_load_replay_dump_with_an_extra_member_is_refused_before_reading_it(tmp_path):
    state = _buffer().state_dict()
    state["payload"] = np.zeros(1 << 20, np.uint8)
    write_npz(tmp_path / "d.npz", state)
    with pytest.raises(CheckpointError, match=r"has members \['payload'\] that save\(\) never writes"):
        _buffer().load(tmp_path / "d.npz")


def test_load_replay_dump_member_unpacking_beyond_the_buffer_is_refused(tmp_path):
    """A small compressed member that unpacks to gigabytes is refused from its zip header."""
    import zipfile

    state = _buffer().state_dict()
    write_npz(tmp_path / "d.npz", state)
    with zipfile.ZipFile(tmp_path / "d.npz") as src, zipfile.ZipFile(tmp_path / "big.npz", "w",
                                                                      zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info.filename, data + bytes(64 << 20) if info.filename == "obs.npy" else data)
    assert (tmp_path / "big.npz").stat().st_size < 1 << 20
    with pytest.raises(CheckpointError, match=r"member obs.npy unpacks to [\d,]+ bytes, more than this buffer holds"):
        _buffer().load(tmp_path / "big.npz")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A small DQN CartPole checkpoint with a kept best policy and a replay."""
    from pearl_fpga.trainer import Trainer

    cfg = TrainConfig.preset("dqn", learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16],
                             buffer_size=4000, batch_size=32, eval_freq=200, eval_episodes=2, total_steps=1000)
    t = Trainer("dqn", placement="cpu", config=cfg, seed=0)
    t.train(300)
    assert t.best is not None
    path = t.save(tmp_path_factory.mktemp("ck") / "ck")
    t.close()
    return path


def _tampered(checkpoint, tmp_path, change):
    """A copy of `checkpoint` whose state `change` modified (checksum updated: only the contents are bad)."""
    import shutil

    import torch

    from pearl_fpga.runtime.checkpoint import pack, read_checkpoint, sha256

    path = tmp_path / "bad"
    shutil.copytree(checkpoint, path)
    manifest, state = read_checkpoint(path)
    change(state)
    torch.save(pack(state), path / "state.pt")
    manifest["files"]["state.pt"]["sha256"] = sha256(path / "state.pt")
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _adam_moment(state):
    import torch

    moments = state["algo"]["optimizer"]["state"]
    first = moments[min(moments)]
    first["exp_avg"] = torch.zeros(3, 3)


def _best_weights(state):
    import torch

    name = next(iter(state["best"]["weights"]))
    state["best"]["weights"][name] = torch.zeros(5, 5)


def _replay_field(field, value):
    def change(state):
        arr = state["replay"][field].copy()
        arr[0] = value
        state["replay"][field] = arr
    return change


def _env_attr(name, value):
    def change(state):
        for layers in state["envs"]["envs"]:
            for attrs in layers:
                if name in attrs:
                    attrs[name] = value
    return change


@pytest.mark.parametrize("change,words", [
    (_adam_moment, "algo.optimizer moment exp_avg of parameter 0 is a torch.float32 tensor of shape (3, 3)"),
    (_best_weights, "best.weights.0.weight is a torch.float32 tensor of shape (5, 5)"),
    (_replay_field("action", 7), "stored actions are not integers in [0, 2) (CartPole-v1's action space)"),
    (_replay_field("obs", np.nan), "obs of a stored transition is NaN"),
    (_env_attr("x_threshold", 1e9), "sets env attribute CartPoleEnv.x_threshold = 1000000000.0, but it is 2.4"),
    (_env_attr("state", np.full(4, np.nan)), "env attribute CartPoleEnv.state to an array holding NaN"),
    (_env_attr("_elapsed_steps", float("inf")), "TimeLimit._elapsed_steps = inf"),
])
def test_load_checkpoint_contents_are_checked_before_restoring(checkpoint, tmp_path, change, words):
    from pearl_fpga.trainer import Trainer

    bad = _tampered(checkpoint, tmp_path, change)
    with pytest.raises(CheckpointError, match=re.escape(words)):
        Trainer.load(bad)
    Trainer.load(checkpoint).close()  # the untouched one still loads
