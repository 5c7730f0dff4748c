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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pearl_fpga.cli import main
from pearl_fpga.config import RANGES, TrainConfig
from pearl_fpga.errors import CheckpointError
from pearl_fpga.replay import PrioritizedReplayBuffer
from pearl_fpga.replay.state import write_npz


def _out(capsys) -> str:
    """Captured stdout and stderr with rich's line wrapping undone."""
    captured = capsys.readouterr()
    return " ".join((captured.out + captured.err).split())


# ---- config: every field has a range ---------------------------------------------------------------


def test_config_every_numeric_field_has_a_range():
    numeric = {f.name for f in dataclasses.fields(TrainConfig) if f.type in ("int", "float")}
    assert numeric == set(RANGES)


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


@pytest.mark.parametrize("field,value", [("parts", 5000), ("epochs", 0), ("success_reward", 1e6),
                                         ("exploration_episodes", 10**10), ("max_episode_steps", -1)])
def test_config_tabular_out_of_range(field, value):
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field} = .* is out of range"):
        TrainConfig.preset("qlearning", **{field: value})


def test_config_tabular_seed_out_of_range():
    from pearl_fpga import TabularTrainer

    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        TabularTrainer("qlearning", "CliffWalking-v1", seed=-1)


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
    with pytest.raises(ValueError, match=r"capacity 1,048,576 .* needs .* of memory, but"):
        PrioritizedReplayBuffer(1 << 20, obs_shape=(1 << 20,), action_shape=(), seed=0)


# ---- load: a checkpoint or replay dump is checked before anything changes --------------------------


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
    with pytest.raises(CheckpointError, match=r"has members \['payload'\] that pearl_fpga never writes"):
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
    with pytest.raises(CheckpointError, match=r"member obs.npy unpacks to [\d,]+ bytes, more than the"):
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
    from pearl_fpga.runtime.manifest_checks import seal_manifest

    path = tmp_path / "bad"
    shutil.copytree(checkpoint, path)
    manifest, state = read_checkpoint(path)
    change(state)
    torch.save(pack(state), path / "state.pt")
    manifest["files"]["state.pt"] = {"sha256": sha256(path / "state.pt"), "bytes": (path / "state.pt").stat().st_size}
    (path / "manifest.json").write_text(json.dumps(seal_manifest(manifest)))
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


# ---- api: the kernels' and the buffer's Python APIs -------------------------------------------------


def test_api_tabular_q_shared_by_two_threads_loses_no_update():
    """Q(0,0) <- r + 1.0 * max Q(0,.) with alpha 1, gamma 1 counts up by r's one LSB per transition;
    without the lock two threads' read-modify-writes lost about 40% of them."""
    from concurrent.futures import ThreadPoolExecutor

    from pearl_fpga.kernels import TabularQ

    q = TabularQ(1, 2, alpha=1.0, gamma=1.0, backend="cpu")
    n, calls = 20_000, 40
    s = np.zeros(n, np.int64)
    r = np.full(n, 2.0**-16)

    def work(_):
        for _ in range(calls):
            q.update(s, s, r, s, np.zeros(n, bool))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, range(2)))
    assert q.table[0, 0] == 2 * calls * n


def test_api_replay_numpy_backend_refuses_a_padding_index_like_the_cpu_one():
    from pearl_fpga.kernels.replay import make_backend

    for backend in ("numpy", "cpu"):
        _, tree = make_backend(backend, 100, 16)  # 256 leaves, 100 in use; ReplaySampler checks before this
        with pytest.raises(ValueError, match="index 200 is out of range for capacity 100"):
            tree.update(np.array([5, 200], np.uint32), np.array([1, 1 << 16], np.uint32))
        assert tree.total() == 0


@pytest.mark.parametrize("field,value,words", [
    ("obs", np.nan, "obs contains NaN or inf"),
    ("next_obs", np.inf, "next_obs contains NaN or inf"),
    ("reward", np.nan, "reward contains NaN or inf"),
    ("done", 7, "done must hold only 0/1"),
])
def test_api_replay_buffer_add_refuses_non_finite_values_and_bad_done(field, value, words):
    buf = _buffer()
    args = dict(obs=np.zeros((2, 3)), action=np.zeros(2, np.int64), reward=np.zeros(2), next_obs=np.zeros((2, 3)),
                done=np.zeros(2))
    args[field] = args[field].astype(np.float64)
    args[field][1] = value
    before = len(buf)
    with pytest.raises(ValueError, match=words):
        buf.add(**args)
    assert len(buf) == before


@pytest.mark.parametrize("name", ["obs_dtype", "action_dtype"])
def test_api_replay_buffer_refuses_an_object_dtype_at_construction(name):
    """An object dtype saved dumps that np.load without pickle cannot read back."""
    with pytest.raises(TypeError, match=f"{name} must be a numeric dtype"):
        PrioritizedReplayBuffer(8, obs_shape=(2,), **{name: object})


def test_api_tanh_head_with_a_nan_last_bias_is_refused():
    """The NaN quantized to 0 silently: the kernel acted on a network the learner never had."""
    import torch

    from pearl_fpga.kernels import MLPInfer

    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2), torch.nn.Tanh())
    with torch.no_grad():
        net[2].bias[1] = float("nan")
    with pytest.raises(ValueError, match="linear layer 1's bias hold NaN or inf"):
        MLPInfer.from_torch(net, backend="numpy", head="tanh", action_low=-1.0, action_high=1.0,
                            calibration=np.zeros((4, 3), np.float32))


# ---- files: corrupt, hostile or misplaced files give clear errors -----------------------------------


def _manifest_build(folder):
    from test_board_manifest import make_build  # tests/ is on sys.path, as for mlp_cases

    folder.mkdir(parents=True, exist_ok=True)
    return make_build(folder, "pynq-z2")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("make,words", [
    (lambda p: p.write_bytes(b'{"schema": "\xff\xfe"}'), "is not UTF-8 text"),
    (lambda p: p.write_text(_nested(100_000)), "nests too deeply"),
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: p.symlink_to("/dev/zero"), "is not a regular file"),
    (lambda p: p.write_bytes(b" " * (2 << 20)), "is larger than 1.0 MiB"),
])
def test_files_bad_board_manifest_is_a_manifest_error(tmp_path, make, words):
    from pearl_fpga.board.manifest import load_manifest
    from pearl_fpga.errors import ManifestError

    make(tmp_path / "manifest.json")
    with pytest.raises(ManifestError, match=words):
        load_manifest(tmp_path)


def test_files_one_bad_bitstream_folder_does_not_break_discovery(tmp_path, monkeypatch):
    from pearl_fpga.board import overlay

    monkeypatch.setenv("PEARL_FPGA_BITSTREAMS", str(tmp_path))
    for name in ("PEARL_FPGA_BOARD", "BOARD"):
        monkeypatch.delenv(name, raising=False)
    _manifest_build(tmp_path / "pynq-z2")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_bytes(b"\xff\xff not utf-8")
    with pytest.warns(RuntimeWarning, match=r"skipping bitstream folder .*broken: .*not UTF-8"):
        assert overlay.find_bitstream_dir("pynq") == tmp_path / "pynq-z2"


@pytest.mark.parametrize("content", ['{"schema": 1, "machine": [1], "workloads": {}}', _nested(100_000), "\udcff"])
def test_files_bad_profile_cache_warns_and_is_replaced(tmp_path, content):
    from pearl_fpga.planner import profile

    path = tmp_path / "cache.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    machine = {"host": "h", "key": "k"}
    with pytest.warns(UserWarning, match="is unusable"):
        assert profile.load_cached(machine, "w", path) is None
    fresh = profile.Profile(machine, "w")
    assert profile.save_cached(fresh, path) == path and profile.load_cached(machine, "w", path) is not None


def test_files_nested_checkpoint_manifest_is_a_checkpoint_error(checkpoint, tmp_path):
    import shutil

    from pearl_fpga.trainer import Trainer

    bad = tmp_path / "bad"
    shutil.copytree(checkpoint, bad)
    (bad / "manifest.json").write_text(_nested(100_000))
    with pytest.raises(CheckpointError, match="nests too deeply"):
        Trainer.load(bad)


@pytest.fixture(scope="module")
def tabular_files(tmp_path_factory):
    from pearl_fpga import TabularTrainer
    from pearl_fpga.algos.tabular import save_dataset

    folder = tmp_path_factory.mktemp("tabular")
    rng = np.random.default_rng(0)
    dataset = save_dataset(folder / "d.npz", rng.integers(0, 48, 300), rng.integers(0, 4, 300), rng.normal(size=300),
                           rng.integers(0, 48, 300), rng.random(300) < 0.05, 48, 4, "CliffWalking-v1")
    t = TabularTrainer("qlearning", "CliffWalking-v1", config=TrainConfig.preset("qlearning", "CliffWalking-v1", backend="numpy"))
    t.train(100)
    return {"dataset": dataset.read_bytes(), "checkpoint": t.save(folder / "ck").read_bytes()}


def _load_tabular(kind, path):
    from pearl_fpga.algos.tabular import load_dataset
    from pearl_fpga.runtime.tabular_trainer import TabularTrainer

    if kind == "dataset":
        load_dataset(path)
    else:
        TabularTrainer.load(path.parent, record=False)


@pytest.mark.parametrize("kind", ["dataset", "checkpoint"])
@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_files_truncated_or_bit_flipped_tabular_file_is_a_checkpoint_error(tabular_files, tmp_path, kind, data):
    """BadZipFile, zlib.error or a short read escaped as raw tracebacks; now each is a CheckpointError
    (or, where the flip hit bytes nothing reads, such as a timestamp, the file still loads)."""
    original = tabular_files[kind]
    if data.draw(st.booleans(), label="truncate"):
        damaged = original[: data.draw(st.integers(0, len(original) - 1), label="length")]
    else:
        at = data.draw(st.integers(0, len(original) - 1), label="byte")
        damaged = bytearray(original)
        damaged[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
    path = tmp_path / kind / ("d.npz" if kind == "dataset" else "tabular.npz")
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(bytes(damaged))
    try:
        _load_tabular(kind, path)
    except CheckpointError:
        pass


@pytest.mark.parametrize("kind", ["dataset", "checkpoint"])
def test_files_tabular_file_with_an_extra_member_is_refused(tabular_files, tmp_path, kind):
    import io
    import zipfile

    path = tmp_path / ("d.npz" if kind == "dataset" else "tabular.npz")
    buf = io.BytesIO(tabular_files[kind])
    with zipfile.ZipFile(buf, "a") as z:
        z.writestr("extra.npy", b"x")
    path.write_bytes(buf.getvalue())
    with pytest.raises(CheckpointError, match=r"has members \['extra'\] that pearl_fpga never writes"):
        _load_tabular(kind, path)


def test_files_logdir_that_is_a_file_is_refused_at_start(tmp_path, capsys):
    (tmp_path / "f").write_text("not a folder")
    assert main(["train", "--steps", "100", "--placement", "cpu", "--logdir", str(tmp_path / "f"),
                 "--no-tensorboard"]) == 2
    out = _out(capsys)
    assert f"log directory {tmp_path / 'f'}" in out.replace("(--logdir) ", "") and "writable" in out


@pytest.mark.skipif(__import__("os").geteuid() == 0, reason="root writes into read-only folders")
def test_files_read_only_logdir_is_refused_at_start(tmp_path, capsys):
    (tmp_path / "ro").mkdir(mode=0o555)
    assert main(["train", "--steps", "100", "--placement", "cpu", "--logdir", str(tmp_path / "ro"),
                 "--no-tensorboard"]) == 2
    out = _out(capsys)
    assert f"log directory {tmp_path / 'ro'}" in out.replace("(--logdir) ", "") and "writable" in out


# ---- cli: options refused or reported before training -----------------------------------------------


def test_cli_eval_episodes_zero_is_refused_before_training(tmp_path, capsys):
    assert main(["train", "--steps", "100", "--logdir", str(tmp_path / "r"), "--eval-episodes", "0"]) == 2
    assert "--eval-episodes 0: every evaluation needs at least 1 episode" in _out(capsys)
    assert not (tmp_path / "r").exists()  # nothing trained, nothing written


def test_cli_replay_placement_without_per_is_reported(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"learning_starts": 50, "train_freq": 16, "gradient_steps": 2, "net_arch": [8],
                                  "buffer_size": 500, "batch_size": 16, "eval_freq": 0}))
    assert main(["train", "--steps", "100", "--logdir", str(tmp_path / "r"), "--placement", "act=cpu,replay=fpga-emu",
                 "--config", str(config), "--eval-episodes", "1", "--no-tensorboard"]) == 0
    assert "notice: placement replay=fpga-emu is not used: the replay kernel serves prioritized replay only" in _out(capsys)
