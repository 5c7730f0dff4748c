"""MLPInfer: quantization fidelity to float torch, formats, load_weights, wrappers, bad input.

Stated tolerances (README): random MLPs: max |error| <= 2e-3 * max |float output| on the calibration
batch and on fresh data of the same distribution; tanh actors: <= 1e-3 * max(1, max |pre-tanh value|)
on tanh outputs (in [-1, 1]; the table alone contributes <= 4.8e-5); a CartPole
Q-network trained briefly: greedy actions agree on >= 99% of visited states.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.kernels import MLPInfer
from pearl_fpga.kernels.mlp_torch import LayerFormat, frac_bits

RELATIVE_TOL = 2e-3
TANH_TOL = 1e-3
BACKENDS = ["numpy", "cpu"]


def mlp(widths: list[int], tanh: bool = False, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for n, m in zip(widths[:-1], widths[1:]):
        mods += [nn.Linear(n, m), nn.ReLU()]
    mods = mods[:-1] + ([nn.Tanh()] if tanh else [])
    return nn.Sequential(*mods)


def torch_out(net: nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return net(torch.as_tensor(x, dtype=torch.float32)).double().numpy()


def test_frac_bits_fits_and_is_tightest():
    for v in [1e-6, 0.3, 1.0, 1.5, 2.0, 255.9, 32767.0, 1e6]:
        f = frac_bits(v)
        assert v * 2.0**f <= 32767 and (f == 30 or v * 2.0 ** (f + 1) > 32767)
    assert frac_bits(0.0) == 30
    assert frac_bits(1.0, headroom=2.0) == frac_bits(1.0) - 1


@pytest.mark.parametrize("seed", range(6))
def test_random_mlps_within_stated_tolerance(seed):
    rng = np.random.default_rng(seed)
    widths = [int(rng.integers(2, 24))] + [int(rng.integers(8, 300)) for _ in range(rng.integers(1, 3))]
    widths.append(int(rng.integers(1, 8)))
    net = mlp(widths, seed=seed)
    scale = float(rng.uniform(0.1, 10.0))
    calib = (rng.standard_normal((1024, widths[0])) * scale).astype(np.float32)
    policy = MLPInfer.from_torch(net, backend="cpu", calibration=calib)
    ref = torch_out(net, calib)
    assert policy.max_error == pytest.approx(np.max(np.abs(policy(calib) - ref)), abs=1e-7)
    assert policy.max_error <= RELATIVE_TOL * np.max(np.abs(ref))
    fresh = (rng.standard_normal((512, widths[0])) * scale).astype(np.float32)
    err = np.max(np.abs(policy(fresh) - torch_out(net, fresh)))
    assert err <= RELATIVE_TOL * np.max(np.abs(ref))
    for f in policy.formats:
        assert 0 <= f.shift <= 40
    assert [f.fa_out for f in policy.formats[:-1]] == [f.fa_in for f in policy.formats[1:]]


def test_numpy_and_cpu_give_identical_floats_including_rounding_corners():
    net = mlp([5, 32, 3], seed=3)
    rng = np.random.default_rng(3)
    calib = rng.standard_normal((256, 5)).astype(np.float32)
    cpu = MLPInfer.from_torch(net, backend="cpu", calibration=calib)
    ref = MLPInfer.from_torch(net, backend="numpy", calibration=calib)
    assert cpu.formats == ref.formats
    fa = cpu.formats[0].fa_in
    halfway = (rng.integers(-5000, 5000, size=(64, 5)) + 0.5) / 2.0**fa  # exact halves: round up
    huge = rng.choice([-1e9, 1e9, 1e30, -1e30, 0.0], size=(16, 5))  # saturating inputs
    edges = np.array([-32769.0, -32768.5, -32768.25, -32767.5, -1.5, -0.5, -0.25, 32766.5, 32767.25, 32767.5, 32768.0])
    at_the_bounds = rng.choice(edges, size=(32, 5)) / 2.0**fa  # halves and the int16 bounds of the input quantization
    for x in (calib, halfway, huge, at_the_bounds, halfway.astype(np.float32), calib.astype(np.float64)):
        np.testing.assert_array_equal(cpu(x), ref(x))
        np.testing.assert_array_equal(cpu.act(x), ref.act(x))
    assert cpu(calib[0]).shape == (3,) and isinstance(cpu.act(calib[0]), int)
    np.testing.assert_array_equal(cpu(calib[0]), ref(calib[0]))
    assert cpu(np.zeros((0, 5))).shape == (0, 3)
    np.testing.assert_array_equal(cpu([list(map(float, calib[0]))]), ref(calib[:1]))  # lists convert


def _collect_cartpole(n_steps: int, seed: int) -> tuple[np.ndarray, ...]:
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    data: list[list] = [[], [], [], [], []]
    for _ in range(n_steps):
        heuristic = int(obs[2] + 0.5 * obs[3] > 0)  # push towards the pole's fall
        action = heuristic if rng.random() > 0.3 else int(rng.integers(2))
        nxt, reward, term, trunc, _ = env.step(action)
        for store, v in zip(data, (obs, action, reward, nxt, term)):
            store.append(v)
        obs = env.reset()[0] if term or trunc else nxt
    env.close()
    return tuple(np.asarray(d) for d in data)


@pytest.fixture
def one_torch_thread():
    """Small torch work on a shared 2-core machine: one thread is many times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_cartpole_q_network_greedy_agreement(one_torch_thread):
    """A 4-64-64-2 Q-network trained briefly (fitted DQN updates on 4000 CartPole transitions)."""
    obs, act, rew, nxt, done = _collect_cartpole(4000, seed=0)
    torch.manual_seed(0)
    q, target = mlp([4, 64, 64, 2], seed=0), mlp([4, 64, 64, 2], seed=0)
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    t = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in dict(o=obs, r=rew, n=nxt, d=done).items()}
    a = torch.as_tensor(act, dtype=torch.int64)
    gen = torch.Generator().manual_seed(0)
    for step in range(600):
        if step % 50 == 0:
            target.load_state_dict(q.state_dict())
        idx = torch.randint(0, len(a), (256,), generator=gen)
        with torch.no_grad():
            y = t["r"][idx] + 0.99 * (1 - t["d"][idx]) * target(t["n"][idx]).max(1).values
        loss = nn.functional.smooth_l1_loss(q(t["o"][idx]).gather(1, a[idx, None]).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    greedy_float = torch_out(q, obs).argmax(1)
    assert 0.05 < greedy_float.mean() < 0.95  # the network learned a state-dependent policy
    policy = MLPInfer.from_torch(q, backend="cpu", calibration=obs[:1000])
    agreement = float(np.mean(policy.act(obs) == greedy_float))
    assert agreement >= 0.99, f"greedy agreement {agreement:.4f}"
    fresh, *_ = _collect_cartpole(1000, seed=1)
    assert float(np.mean(policy.act(fresh) == torch_out(q, fresh).argmax(1))) >= 0.99


@pytest.mark.parametrize("backend", BACKENDS)
def test_tanh_actor_within_stated_error(backend):
    net = mlp([3, 64, 64, 1], tanh=True, seed=5)
    with torch.no_grad():
        net[4].weight.mul_(30.0)  # drive the tanh over its whole range, saturation included
    rng = np.random.default_rng(5)
    calib = np.stack([rng.uniform(-1, 1, 2048), rng.uniform(-1, 1, 2048), rng.uniform(-8, 8, 2048)], 1)
    actor = MLPInfer.from_torch(net, backend=backend, calibration=calib, action_low=-2.0, action_high=2.0)
    assert actor.head == "tanh" and actor.formats[-1].fa_out == 12
    ref = torch_out(net, calib)
    assert np.abs(ref).max() > 0.99  # the test reaches tanh saturation
    tol = TANH_TOL * max(1.0, float(np.abs(torch_out(net[:-1], calib)).max()))
    assert actor.max_error <= tol
    np.testing.assert_allclose(actor.act(calib), 2.0 * ref, atol=2.0 * tol)
    low, high = np.array([-1.0]), np.array([3.0])
    shifted = MLPInfer.from_torch(net, backend=backend, calibration=calib, action_low=low, action_high=high)
    np.testing.assert_allclose(shifted.act(calib), 1.0 + 2.0 * ref, atol=2.0 * tol)
    gentle = mlp([3, 64, 64, 1], tanh=True, seed=6)  # an actor fresh from initialization
    assert MLPInfer.from_torch(gentle, backend=backend, calibration=calib).max_error <= TANH_TOL


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_weights_requantizes_in_place(backend):
    net = mlp([4, 32, 32, 2], seed=7)
    rng = np.random.default_rng(7)
    calib = rng.standard_normal((512, 4))
    policy = MLPInfer.from_torch(net, backend=backend, calibration=calib)
    formats = list(policy.formats)
    with torch.no_grad():  # a small learner step: formats stay
        for p in net.parameters():
            p.add_(0.001 * torch.randn_like(p))
    policy.load_weights(net)
    assert policy.formats == formats
    ref = torch_out(net, calib)
    assert np.max(np.abs(policy(calib) - ref)) == pytest.approx(policy.max_error)
    assert policy.max_error <= RELATIVE_TOL * np.abs(ref).max()
    with torch.no_grad():  # weights 8x larger: formats widen, nothing saturates
        for p in net.parameters():
            p.mul_(8.0)
    policy.load_weights(net)
    assert policy.formats[0].fw < formats[0].fw
    ref = torch_out(net, calib)
    assert policy.max_error <= RELATIVE_TOL * np.abs(ref).max()
    fresh = MLPInfer.from_torch(net, backend=backend, calibration=calib)
    assert fresh.max_error <= RELATIVE_TOL * np.abs(ref).max()


def test_wrapper_modules():
    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp([4, 16, 2], seed=1)

        def forward(self, x):
            return self.net(x)

    class OneSequential(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = mlp([4, 16, 2], seed=1)

        def forward(self, x):
            return self.body(x)

    class TwoSequentials(OneSequential):
        def __init__(self):
            super().__init__()
            self.other = mlp([4, 16, 2], seed=2)

    class Scaled(Wrapped):
        def forward(self, x):
            return 2.0 * self.net(x)

    calib = np.random.default_rng(0).standard_normal((64, 4))
    plain = MLPInfer.from_torch(mlp([4, 16, 2], seed=1), calibration=calib)
    for module in (Wrapped(), OneSequential()):
        np.testing.assert_array_equal(MLPInfer.from_torch(module, calibration=calib)(calib), plain(calib))
    with pytest.raises(ValueError, match="2 nn.Sequential"):
        MLPInfer.from_torch(TwoSequentials(), calibration=calib)
    with pytest.raises(ValueError, match="differs from its nn.Sequential"):
        MLPInfer.from_torch(Scaled(), calibration=calib)


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_observations_raise_and_change_nothing(backend):
    net = mlp([4, 16, 3], seed=2)
    calib = np.random.default_rng(2).standard_normal((128, 4))
    policy = MLPInfer.from_torch(net, backend=backend, calibration=calib)
    before, formats = policy(calib), list(policy.formats)
    nan_obs = calib[:5].copy()
    nan_obs[3, 1] = np.nan
    inf_obs = calib[:5].astype(np.float32)
    inf_obs[0, 2] = -np.inf
    cases = [
        (np.zeros(5), ValueError, "takes 4 inputs"),
        (np.zeros((2, 3)), ValueError, "takes 4 inputs"),
        (np.zeros((2, 2, 4)), ValueError, "takes 4 inputs"),
        (np.zeros((policy.max_batch + 1, 4)), ValueError, "MAX_BATCH = 4096"),
        (nan_obs, ValueError, "observation 3, input 1 is NaN"),
        (inf_obs, ValueError, "observation 0, input 2 is inf"),
        (np.array([["a", "b", "c", "d"]]), (TypeError, ValueError), "float"),
    ]
    for obs, exc, message in cases:
        for call in (policy, policy.act):
            with pytest.raises(exc, match=message):
                call(obs)
    np.testing.assert_array_equal(policy(calib), before)
    assert policy.formats == formats


@pytest.mark.parametrize("backend", BACKENDS)
def test_networks_the_kernel_cannot_hold(backend):
    calib = np.zeros((8, 4))
    with pytest.raises(ValueError, match=r"600 outputs.*at most 512 \(MAX_WIDTH\)"):
        MLPInfer.from_torch(mlp([4, 600, 2]), backend=backend, calibration=calib)
    with pytest.raises(ValueError, match=r"5 linear layers.*at most 4 \(MAX_LAYERS\)"):
        MLPInfer.from_torch(mlp([4, 8, 8, 8, 8, 2]), backend=backend, calibration=calib)
    with pytest.raises(ValueError, match=r"layer 1 \(Sigmoid\) is not supported"):
        MLPInfer.from_torch(nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 2)), backend=backend, calibration=calib)
    with pytest.raises(ValueError, match=r"layer 1 \(Tanh\) is only supported as the last layer"):
        MLPInfer.from_torch(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), backend=backend, calibration=calib)
    with pytest.raises(ValueError, match="followed by ReLU"):
        MLPInfer.from_torch(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), backend=backend, calibration=calib)
    with pytest.raises(ValueError, match="head='tanh'"):
        MLPInfer.from_torch(mlp([4, 8, 2]), backend=backend, calibration=calib, head="tanh")
    with pytest.raises(ValueError, match="calibration"):
        MLPInfer.from_torch(mlp([4, 8, 2]), backend=backend)
    with pytest.raises(ValueError, match="action bounds"):
        MLPInfer.from_torch(mlp([4, 8, 2], tanh=True), backend=backend, calibration=calib, action_low=1, action_high=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_weights_with_another_architecture_changes_nothing(backend):
    calib = np.random.default_rng(4).standard_normal((64, 4))
    policy = MLPInfer.from_torch(mlp([4, 16, 2], seed=4), backend=backend, calibration=calib)
    before, formats, err = policy(calib), list(policy.formats), policy.max_error
    for other in (mlp([4, 17, 2]), mlp([4, 16, 2], tanh=True), mlp([4, 16, 16, 2])):
        with pytest.raises(ValueError, match="same architecture"):
            policy.load_weights(other)
    np.testing.assert_array_equal(policy(calib), before)
    assert policy.formats == formats and policy.max_error == err


def test_backend_names():
    calib = np.zeros((4, 4))
    with pytest.raises(ValueError, match="unknown mlp backend 'gpu'"):
        MLPInfer.from_torch(mlp([4, 8, 2]), backend="gpu", calibration=calib)
    assert MLPInfer.from_torch(mlp([4, 8, 2]), backend="auto", calibration=calib).backend.name == "cpu"
    for board in ("pynq", "xrt", "serial"):  # no board and no bitstream on this machine
        with pytest.raises(BackendUnavailable):
            MLPInfer.from_torch(mlp([4, 8, 2]), backend=board, calibration=calib)
    assert LayerFormat(fw=14, fa_in=10, fa_out=12).shift == 12


def test_max_error_is_measured_lazily_against_the_loaded_weights():
    """max_error refers to the network as it was loaded, even if it trains on afterwards, and a
    load_weights through a wrapper module (other state_dict keys) works."""

    class Wrapper(nn.Module):
        def __init__(self, inner: nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)

    net = mlp([4, 16, 2], seed=3)
    calib = np.random.default_rng(3).standard_normal((64, 4)).astype(np.float32)
    policy = MLPInfer.from_torch(net, backend="cpu", calibration=calib)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(1.5)
    policy.load_weights(Wrapper(net))
    loaded = torch_out(net, calib)
    with torch.no_grad():  # the learner moves on; max_error still describes the loaded weights
        for p in net.parameters():
            p.add_(1.0)
    assert policy.max_error == pytest.approx(np.max(np.abs(policy(calib) - loaded)), abs=1e-7)
    assert policy.max_error <= RELATIVE_TOL * np.max(np.abs(loaded))
