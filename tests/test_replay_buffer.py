"""PrioritizedReplayBuffer: storage and wrap-around, PER priorities, importance weights, beta
annealing, bad input, save/load and state_dict."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from pearl_fpga import PrioritizedReplayBuffer
from pearl_fpga.errors import CheckpointError
from pearl_fpga.spec.replay import priorities_to_fixed

BUFFER_BACKENDS = ["cpu", "numpy"]


def make(capacity=8, backend="cpu", **kw) -> PrioritizedReplayBuffer:
    kw.setdefault("seed", 0)
    return PrioritizedReplayBuffer(capacity, (3,), (), action_dtype=np.int64, backend=backend, **kw)


def transitions(start: int, n: int):
    """Transition k carries k in every field, so rows can be traced back."""
    k = np.arange(start, start + n)
    obs = np.repeat(k[:, None], 3, axis=1).astype(np.float32)
    return obs, k.astype(np.int64), k.astype(np.float32), obs + 0.5, (k % 2).astype(np.float32)


@pytest.mark.parametrize("backend", BUFFER_BACKENDS)
def test_add_single_and_batch_and_wrap_around(backend):
    buf = make(5, backend)
    obs, act, rew, nxt, done = transitions(0, 3)
    buf.add(obs[0], act[0], rew[0], nxt[0], done[0])  # single
    buf.add(obs[1:], act[1:], rew[1:], nxt[1:], done[1:])  # batch
    assert len(buf) == 3
    buf.add(*transitions(3, 4))  # 3..6: slots 3, 4, 0, 1
    assert len(buf) == 5
    state = buf.state_dict()
    assert state["pos"] == 2
    assert state["action"].tolist() == [5, 6, 2, 3, 4]
    assert state["obs"][:, 0].tolist() == [5, 6, 2, 3, 4]
    assert state["next_obs"][:, 0].tolist() == [5.5, 6.5, 2.5, 3.5, 4.5]
    assert state["done"].tolist() == [1, 0, 0, 1, 0]
    # a batch larger than the capacity keeps only its newest transitions
    buf.add(*transitions(100, 12))
    assert sorted(buf.state_dict()["action"].tolist()) == [107, 108, 109, 110, 111]


@pytest.mark.parametrize("backend", BUFFER_BACKENDS)
def test_sampled_rows_belong_to_their_indices(backend):
    buf = make(64, backend)
    buf.add(*transitions(0, 40))
    batch = buf.sample(32)
    assert batch.indices.dtype == np.int64 and (batch.indices < 40).all()
    k = batch.indices
    assert (batch.action == k).all() and (batch.reward == k).all()
    assert (batch.obs == np.repeat(k[:, None], 3, 1)).all() and (batch.next_obs == batch.obs + 0.5).all()
    assert (batch.done == k % 2).all()
    assert batch.obs.dtype == np.float32 and batch.obs.flags.c_contiguous and batch.weights.dtype == np.float32


def test_new_transitions_get_the_max_priority_so_far():
    buf = make(10, alpha=0.5, eps=0.0 + 1e-6)
    buf.add(*transitions(0, 4))
    assert (buf.sampler.leaves()[:4] == 65536).all()  # priority 1 at first
    buf.update_priorities(np.array([1, 2]), np.array([3.0, 8.0]))
    expected = (8.0 + 1e-6) ** 0.5
    assert buf.max_priority == pytest.approx(expected)
    buf.add(*transitions(4, 2))
    words = buf.sampler.leaves()
    assert words[4] == words[5] == priorities_to_fixed(np.array([expected]))[0][0]
    assert words[6:].tolist() == [0] * 4


def test_update_priorities_formula_and_repeated_indices():
    buf = make(10, alpha=0.7, eps=0.01)
    buf.add(*transitions(0, 10))
    idx = np.array([3, 5, 3])
    td = np.array([-2.0, 0.0, 0.5])
    buf.update_priorities(idx, td)
    words = buf.sampler.leaves()
    ref = priorities_to_fixed((np.abs(td) + 0.01) ** 0.7)[0]
    assert words[3] == ref[2] and words[5] == ref[1]  # the last write to 3 wins


@pytest.mark.parametrize("backend", BUFFER_BACKENDS)
def test_importance_weights_match_direct_formula(backend):
    buf = make(50, backend, beta=0.4, beta_final=0.4)
    buf.add(*transitions(0, 30))
    rng = np.random.default_rng(1)
    buf.update_priorities(np.arange(30), rng.normal(size=30) * 3)
    batch = buf.sample(64)
    p = buf.sampler.priorities()  # as stored (Q16.16)
    prob = p[batch.indices] / p.sum()
    w = (len(buf) * prob) ** -0.4
    np.testing.assert_allclose(batch.weights, w / w.max(), rtol=1e-6)
    assert batch.weights.max() == 1.0


def test_beta_anneals_linearly_then_stays():
    buf = make(10, beta=0.4, beta_final=1.0, beta_steps=4)
    buf.add(*transitions(0, 10))
    betas = []
    for _ in range(6):
        betas.append(buf.beta)
        buf.sample(2)
    np.testing.assert_allclose(betas, [0.4, 0.55, 0.7, 0.85, 1.0, 1.0])
    assert make(4, beta_steps=0).beta == 1.0


def test_weights_use_the_annealed_beta():
    buf = make(10, beta=0.0, beta_final=1.0, beta_steps=2)
    buf.add(*transitions(0, 10))
    buf.update_priorities(np.arange(10), np.arange(10, dtype=float))
    assert (buf.sample(8).weights == 1.0).all()  # beta 0: uniform weights
    buf.sample(8)
    batch = buf.sample(8)  # beta 1
    p = buf.sampler.priorities()[batch.indices]
    np.testing.assert_allclose(batch.weights, p.min() / p, rtol=1e-6)


def test_same_seed_same_samples():
    a, b = make(100, seed=5), make(100, seed=5)
    for buf in (a, b):
        buf.add(*transitions(0, 100))
    assert (a.sample(16).indices == b.sample(16).indices).all()


# ---- bad input -----------------------------------------------------------------------------------
def test_bad_input_leaves_buffer_unchanged():
    buf = make(10)
    buf.add(*transitions(0, 6))
    before = buf.state_dict()
    obs, act, rew, nxt, done = transitions(0, 2)
    bad_calls = [
        (lambda: buf.update_priorities(np.array([6]), np.array([1.0])), ValueError, "0..5"),
        (lambda: buf.update_priorities(np.array([-1]), np.array([1.0])), ValueError, "0..5"),
        (lambda: buf.update_priorities(np.array([1.0]), np.array([1.0])), TypeError, "integers"),
        (lambda: buf.update_priorities(np.array([1, 2]), np.array([1.0])), ValueError, "same length"),
        (lambda: buf.update_priorities(np.array([1, 2]), np.array([1.0, np.nan])), ValueError, "NaN"),
        (lambda: buf.update_priorities(np.array([1]), np.array([np.inf])), ValueError, "NaN or inf"),
        (lambda: buf.add(obs[:, :2], act, rew, nxt, done), ValueError, "obs has shape"),
        (lambda: buf.add(obs, act[:1], rew, nxt, done), ValueError, "action has shape"),
        (lambda: buf.add(obs, act, rew, nxt[:1], done), ValueError, "next_obs has shape"),
        (lambda: buf.add(obs, act.astype(float), rew, nxt, done), TypeError, "integers"),
        (lambda: buf.add(obs, act, np.array([1.0, np.nan]), nxt, done), ValueError, "reward"),
        (lambda: buf.add(obs, act, rew, nxt, np.array(["a", "b"])), TypeError, "numeric"),
        (lambda: buf.sample(0), ValueError, "at least 1"),
        (lambda: buf.sample(5000), ValueError, "max_batch"),
    ]
    for call, exc, match in bad_calls:
        with pytest.raises(exc, match=match):
            call()
        after = buf.state_dict()
        for key, value in before.items():
            if key != "rng_state":
                assert np.array_equal(np.asarray(value), np.asarray(after[key])), key


def test_sampling_an_empty_buffer_is_an_error():
    with pytest.raises(ValueError, match="empty buffer"):
        make(4).sample(2)


@pytest.mark.parametrize(
    "kwargs,match",
    [({"alpha": -1}, "alpha"), ({"beta": 1.5}, "beta"), ({"eps": 0}, "eps"), ({"beta_steps": -1}, "beta_steps")],
)
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make(4, **kwargs)


def test_large_add_and_update_are_split_into_kernel_batches():
    buf = PrioritizedReplayBuffer(10000, (2,), (), seed=0, max_batch=64)
    n = 300
    buf.add(np.zeros((n, 2)), np.zeros(n), np.zeros(n), np.zeros((n, 2)), np.zeros(n))
    buf.update_priorities(np.arange(n), np.full(n, 2.0))
    assert len(buf) == n and (buf.sampler.leaves()[:n] > 0).all()


# ---- save / load ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BUFFER_BACKENDS)
def test_save_load_round_trip_samples_the_same(tmp_path, backend):
    buf = make(16, backend, beta_steps=10)
    buf.add(*transitions(0, 20))  # wrapped
    buf.update_priorities(np.arange(16), np.linspace(-3, 3, 16))
    buf.sample(4)
    path = tmp_path / "replay.npz"
    buf.save(path)
    other = make(16, backend, seed=99)
    other.load(path)
    assert len(other) == len(buf) and other.beta == buf.beta and other.max_priority == buf.max_priority
    for _ in range(3):
        a, b = buf.sample(8), other.sample(8)
        for x, y in zip(vars(a).values(), vars(b).values(), strict=True):
            assert np.array_equal(x, y)
    buf.add(*transitions(50, 3))
    other.add(*transitions(50, 3))
    assert np.array_equal(buf.sampler.leaves(), other.sampler.leaves())


def test_state_dict_round_trip():
    buf = make(8)
    buf.add(*transitions(0, 5))
    state = buf.state_dict()
    other = make(8, seed=3)
    other.load_state_dict(state)
    assert np.array_equal(other.sample(4).indices, buf.sample(4).indices)


def test_load_mismatched_or_corrupt_file_raises_and_leaves_buffer(tmp_path):
    src = make(8)
    src.add(*transitions(0, 5))
    good = tmp_path / "good.npz"
    src.save(good)

    target = make(8, seed=1)
    target.add(*transitions(10, 3))
    before = target.state_dict()

    def unchanged() -> None:
        after = target.state_dict()
        for key, value in before.items():
            assert np.array_equal(np.asarray(value), np.asarray(after[key])), key

    with pytest.raises(CheckpointError, match="capacity"):
        make(9).load(good)
    with pytest.raises(CheckpointError, match="obs_shape"):
        PrioritizedReplayBuffer(8, (4,), (), action_dtype=np.int64).load(good)
    with pytest.raises(CheckpointError, match="action_dtype"):
        PrioritizedReplayBuffer(8, (3,), (), action_dtype=np.float32).load(good)

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[:200])
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="does not exist"):
        target.load(tmp_path / "missing.npz")
    for path in (truncated, garbage):
        with pytest.raises(CheckpointError, match="corrupt"):
            target.load(path)
    unchanged()

    def variant(name: str, **changes) -> None:
        state = {k: np.asarray(v) for k, v in src.state_dict().items()}
        state.update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del state[key]
        path = tmp_path / f"{name}.npz"
        np.savez(path, **state)
        with pytest.raises(CheckpointError):
            target.load(path)
        unchanged()

    variant("missing_key", leaves=None)
    variant("bad_leaves", leaves=np.zeros(8, dtype=np.uint32))
    variant("bad_dtype", obs=np.zeros((5, 3), dtype=np.float64))
    variant("bad_size", size=np.int64(9))
    variant("bad_rng", rng_state=np.array("{not json"))
    variant("bad_format", format=np.int64(2))
    variant("object_array", obs=np.array([object()] * 5, dtype=object))

    with zipfile.ZipFile(tmp_path / "pickled.npz", "w") as z:  # an npy that needs pickle
        with z.open("obs.npy", "w") as f:
            np.lib.format.write_array(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointError):
        target.load(tmp_path / "pickled.npz")
    unchanged()


def test_state_dict_survives_a_weights_only_torch_checkpoint(tmp_path):
    """The training runtime stores the state in torch checkpoints: arrays as tensors, loaded with
    weights_only=True (no pickle of numpy objects)."""
    import torch
    buf = make(8)
    buf.add(*transitions(0, 6))
    as_tensors = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in buf.state_dict().items()}
    torch.save(as_tensors, tmp_path / "ckpt.pt")
    other = make(8, seed=4)
    other.load_state_dict(torch.load(tmp_path / "ckpt.pt", weights_only=True))
    assert np.array_equal(other.sample(5).indices, buf.sample(5).indices)


def test_native_and_numpy_importance_weights_agree(monkeypatch):
    import pearl_fpga.replay.buffer as replay_module

    rng = np.random.default_rng(3)
    words = rng.integers(1, 2**32, 512, dtype=np.uint64).astype(np.uint32)
    native = replay_module._importance_weights(words, 0.7)
    monkeypatch.setattr(replay_module, "_native_weights", None)
    reference = replay_module._importance_weights(words, 0.7)
    assert native.dtype == reference.dtype == np.float32
    np.testing.assert_allclose(native, reference, rtol=1e-6)
    assert native.max() == 1.0
