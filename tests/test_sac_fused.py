"""SAC's fused CPU step (pearl_fpga/algos/sac.py on FusedNet of algos/fused_net.py and FusedCritics of fused_critics.py) against its
torch step (autograd and torch.optim.Adam, `fused=False`), its schedules, and its state across a checkpoint.

Tolerances: the two steps compute the same arithmetic in the same order, but the fused one sums in another order
(native dot products and GEMMs into buffers against autograd's), so one step from the same state agrees to float
rounding: rtol 1e-5 / atol 1e-6 on parameters of size ~0.1-1 is some tens of float32 ulps, the error of a few
hundred rounded sums. Adam divides each gradient by its own running magnitude, so a rounding difference in a
gradient element near zero moves its parameter by up to a fraction of the learning rate; over several independent
steps these add up, hence the looser drift bound there (1e-4 absolute at learning rate 1e-2, two orders under one
step's change). The schedules run the same calls on the same data, so they agree bit for bit.

The fused step's squashed Gaussian is native (squash_sample, squash_backward): the sample is squash() in float64
rounded once and its gradient the torch step's float32 ops, each checked bit for bit at the end of this file; the
sample differs from the torch step's float32 one by rounding (most where tanh saturates), within the tolerances
above on these batches."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pearl_fpga.algos.common import Batch
from pearl_fpga.algos.fused import native_learner
from pearl_fpga.algos.sac import LOG_STD_MAX, LOG_STD_MIN, SAC, SQUASH_EPS, squash
from pearl_fpga.config import TrainConfig

pytestmark = [pytest.mark.skipif(native_learner() is None, reason="pearl_fpga._learner_native not built (make native)"),
              pytest.mark.usefixtures("one_torch_thread")]  # tests/conftest.py


def _batch(rng: np.random.Generator, n: int, weights: bool, obs_dim: int = 3, action_dim: int = 2) -> Batch:
    data = dict(obs=rng.normal(size=(n, obs_dim)), action=rng.uniform(-1, 1, (n, action_dim)),
                reward=3 * rng.normal(size=n), next_obs=rng.normal(size=(n, obs_dim)), done=rng.random(n) < 0.3,
                weights=rng.uniform(0.1, 1.0, n) if weights else None)
    return Batch(**data).to_torch()


def _params(sac: SAC) -> list[torch.Tensor]:
    return [*sac.actor.parameters(), *sac.critic.parameters(), *sac.critic_target.parameters(), sac.log_ent_coef]


def _pair(net_arch: list[int], **settings: object) -> tuple[SAC, SAC]:
    cfg = TrainConfig.preset("sac", net_arch=net_arch, learning_rate=1e-2, **settings)
    fused, plain = SAC(cfg, 3, 2, seed=2), SAC(cfg, 3, 2, seed=2, fused=False)
    assert fused._fused is not None and plain._fused is None
    return fused, plain


SETTINGS = [dict(), dict(ent_coef=0.2), dict(target_update_interval=3), dict(target_entropy=4.0, gamma=0.5)]


@pytest.mark.parametrize("net_arch", [[5], [16, 8, 4], [24, 40]])
@pytest.mark.parametrize("settings", SETTINGS, ids=["auto", "fixed-alpha", "interval-3", "entropy-up"])
def test_each_fused_step_equals_the_torch_step(net_arch, settings):
    """Depths 1 to 3, thin (native) and wide (torch GEMM) layers, two actions, batch sizes that change between
    calls, PER weights or none; alpha tuned or fixed; target averaging every step or every third: from the same
    state, each fused step gives the torch step's parameters, loss and |TD|, and each side loads the other's
    checkpoint (the optimizers' state is one format)."""
    fused, plain = _pair(net_arch, **settings)
    rng = np.random.default_rng(2)
    tds = []
    for step, (n, weights) in enumerate(((17, False), (5, True), (17, True), (32, False), (32, True), (17, False))):
        batch = _batch(rng, n, weights)
        source, dest = (plain, fused) if step % 2 else (fused, plain)
        dest.load_state_dict(copy.deepcopy(source.state_dict()))  # a copy: no shared optimizer step tensors
        loss_f, td_f = fused.update(batch)
        loss_p, td_p = plain.update(batch)
        tds.append((td_f, td_f.clone()))
        assert float(loss_f) == pytest.approx(float(loss_p), rel=1e-5)
        torch.testing.assert_close(td_f, td_p, rtol=1e-5, atol=1e-5)
        for p, q in zip(_params(fused), _params(plain), strict=True):
            torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    assert fused.updates == plain.updates == 6
    assert all(torch.equal(td, kept) for td, kept in tds)  # the returned |TD| is not a reused buffer
    if "ent_coef" in settings:
        assert fused.ent_coef == pytest.approx(0.2)
    else:
        assert fused.ent_coef != 1.0


@pytest.mark.parametrize("weights", [False, True])
def test_fused_and_torch_runs_stay_together(weights):
    """Ten steps of each from one seed, nothing shared: the same run to the drift bound of the module docstring
    (the same noise: both draw it from their own seeded generator in the same order)."""
    fused, plain = _pair([32, 32], target_update_interval=2)
    rng = np.random.default_rng(5)
    for _ in range(10):
        batch = _batch(rng, 64, weights)
        fused.update(batch)
        plain.update(batch)
    assert torch.equal(fused.noise.get_state(), plain.noise.get_state())
    for p, q in zip(_params(fused), _params(plain), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-4, atol=1e-4)


def test_log_std_clamp_passes_no_gradient_outside_its_range():
    """log_sigma's output row scaled so that many samples fall outside [-20, 2] (clamped: no gradient) and many
    inside; the fused step's actor gradient follows the torch step's, and the clamped samples do move nothing."""
    fused, plain = _pair([16])
    with torch.no_grad():
        head = fused.actor[-1]
        head.weight[2:] *= 100.0  # the log_sigma rows
        head.bias[2:] = torch.tensor([0.0, -10.0])
    plain.load_state_dict(copy.deepcopy(fused.state_dict()))
    batch = _batch(np.random.default_rng(3), 64, False)
    with torch.no_grad():
        raw = fused.actor(batch.obs)[:, 2:]
    outside = (raw < -20) | (raw > 2)
    assert 10 < int(outside.sum()) < 118  # both kinds of samples
    fused.update(batch)
    plain.update(batch)
    for p, q in zip(fused.actor.parameters(), plain.actor.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    # a batch whose every log_sigma is clamped: the log_sigma rows get no gradient, Adam leaves them alone
    # (a zero gradient on zero moments is a zero step)
    fresh, _ = _pair([16])
    with torch.no_grad():
        fresh.actor[-1].bias[2:] = 500.0
    before = fresh.actor[-1].weight[2:].clone()
    fresh.update(batch)
    assert torch.equal(fresh.actor[-1].weight[2:], before)
    assert not torch.equal(fresh.actor[-1].weight[:2], fused.actor[-1].weight[:2] * 0)  # the means did step


def test_schedules_give_the_same_bits_and_may_switch():
    """serial, concurrent, and a run that switches between them at every step: identical parameters, losses,
    |TD| and noise generator state."""
    cfg = TrainConfig.preset("sac", net_arch=[24, 40], learning_rate=1e-2, target_update_interval=2)
    runs = {name: SAC(cfg, 3, 2, seed=7) for name in ("serial", "concurrent", "switching")}
    assert runs["serial"].schedules == ("serial", "concurrent")
    runs["serial"].set_schedule("serial")
    runs["concurrent"].set_schedule("concurrent")
    rng = np.random.default_rng(8)
    for step in range(6):
        batch = _batch(rng, 33, step % 2 == 0)
        runs["switching"].set_schedule(("serial", "concurrent")[step % 2])
        results = {name: sac.update(batch) for name, sac in runs.items()}
        ref = results["serial"]
        for result in results.values():
            assert torch.equal(result.loss, ref.loss) and torch.equal(result.td_abs, ref.td_abs)
    for sac in (runs["concurrent"], runs["switching"]):
        for p, q in zip(_params(sac), _params(runs["serial"]), strict=True):
            assert torch.equal(p, q)
        assert torch.equal(sac.noise.get_state(), runs["serial"].noise.get_state())


@pytest.mark.parametrize("ent_coef", ["auto", 0.3])
def test_a_checkpoint_mid_run_continues_with_the_same_bits(ent_coef):
    cfg = TrainConfig.preset("sac", net_arch=[24, 40], learning_rate=3e-3, ent_coef=ent_coef, target_update_interval=2)
    rng = np.random.default_rng(9)
    batches = [_batch(rng, 32, i % 3 == 0) for i in range(8)]
    run = SAC(cfg, 3, 2, seed=1)
    for batch in batches[:3]:  # odd: the next average is due at the resumed run's first step
        run.update(batch)
    resumed = SAC(cfg, 3, 2, seed=99)
    resumed.update(batches[0])  # its own optimizer state and buffers exist before the load replaces them
    resumed.load_state_dict(copy.deepcopy(run.state_dict()))
    for batch in batches[3:]:
        a, b = run.update(batch), resumed.update(batch)
        assert torch.equal(a.loss, b.loss) and torch.equal(a.td_abs, b.td_abs)
    for p, q in zip(_params(run), _params(resumed), strict=True):
        assert torch.equal(p, q)
    assert run.updates == resumed.updates == 8


def test_the_fused_step_is_the_cpu_default_and_falls_back(monkeypatch):
    from pearl_fpga.algos import sac as sac_module
    from pearl_fpga.errors import BackendUnavailable

    cfg = TrainConfig.preset("sac", net_arch=[8])
    assert SAC(cfg, 3, 1)._fused is not None
    assert SAC.callers(cfg) == 2 and SAC.callers(TrainConfig.preset("sac", update_schedule="serial")) == 1
    serial = SAC(TrainConfig.preset("sac", net_arch=[8], update_schedule="serial"), 3, 1)
    assert serial.schedules == ("serial",) and serial._grad_thread is None
    plain = SAC(cfg, 3, 1, fused=False)
    assert plain.schedules == ("serial",) and isinstance(plain.critic_optimizer, torch.optim.Adam)
    monkeypatch.setattr(sac_module, "native_learner", lambda: None)
    with pytest.raises(BackendUnavailable, match="make native"):
        SAC(cfg, 3, 1, fused=True)
    assert SAC(cfg, 3, 1)._fused is None
    with pytest.raises(ValueError, match="features"):
        monkeypatch.undo()
        SAC(cfg, 3, 1).update(_batch(np.random.default_rng(0), 4, False, obs_dim=5, action_dim=1))


# ---- the native squashed Gaussian (squash_sample, squash_backward) against its references, bit for bit ----------

def _squash_case(data: st.DataObject) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy outputs (B, 2A) and noise (B, A) with the adversarial values: saturated means (tanh at +-1, where
    float32's 1 - a^2 cancels), log sigmas beyond both ends of the clamp and on them, zeros of both signs."""
    n, dim = data.draw(st.integers(0, 40)), data.draw(st.integers(1, 4))
    edges = st.sampled_from([0.0, -0.0, LOG_STD_MIN, LOG_STD_MAX, 30.0, -30.0, 9.0, -9.0])
    values = st.one_of(st.floats(-60, 60, width=32), edges)
    out = data.draw(hnp.arrays(np.float32, (n, 2 * dim), elements=values))
    eps = data.draw(hnp.arrays(np.float32, (n, dim), elements=st.one_of(st.floats(-7, 7, width=32), edges)))
    return torch.from_numpy(out), torch.from_numpy(eps)


@given(data=st.data())
def test_the_native_sample_is_squash_in_float64_rounded_once(data):
    """squash_sample's action, sigma and log pi: squash() evaluated in float64, each rounded to float32 once."""
    out, eps = _squash_case(data)
    n, dim = eps.shape
    action, std, log_prob = torch.empty(n, dim), torch.empty(n, dim), torch.empty(n, 1)
    native_learner().squash_sample(out.numpy(), eps.numpy(), action.numpy(), std.numpy(), log_prob.numpy())
    ref_action, ref_log_prob, _, ref_std = squash(out.double(), eps.double(), dim)
    for got, ref in ((action, ref_action), (std, ref_std), (log_prob, ref_log_prob)):
        assert torch.equal(got, ref.float()), (got, ref)


def _torch_squash_backward(q1, q2, d1, d2, action, eps, std, out, scale):
    """The gradient at the policy's outputs as the torch ops of the fused step computed it before the native
    squash_backward (the same arithmetic as autograd through squash() and torch.minimum). tanh's derivative
    1 - a^2 is rounded once (exact in float64, then to float32), as ATen's vectorized tanh_backward takes it
    with a fused multiply-add; its scalar path (ATEN_CPU_CAPABILITY=default) rounds a^2 first, so the reference
    is written out instead of calling it, and holds on every CPU path."""
    dim = action.shape[1]
    g1, g2 = d1[:, -dim:], d2[:, -dim:]
    d_action = torch.where(q1 < q2, g1, torch.where(q2 < q1, g2, 0.5 * (g1 + g2)))
    d_action += scale * 2.0 * action / ((1.0 - action.pow(2)) + SQUASH_EPS)
    d_pre = d_action * (1.0 - action.double().pow(2)).float()
    raw = out[:, dim:]
    d_log_std = (d_pre * eps * std - scale) * ((raw >= LOG_STD_MIN) & (raw <= LOG_STD_MAX))
    return torch.cat([d_pre, d_log_std], dim=1)


@given(data=st.data())
def test_the_native_sample_gradient_is_the_torch_ops_bit_for_bit(data):
    """squash_backward against the torch ops, on squash_sample's outputs: min's gradient with ties (half each),
    saturated actions, log sigmas clamped and not, critic gradients of any sign."""
    out, eps = _squash_case(data)
    n, dim = eps.shape
    native = native_learner()
    action, std, log_prob = torch.empty(n, dim), torch.empty(n, dim), torch.empty(n, 1)
    native.squash_sample(out.numpy(), eps.numpy(), action.numpy(), std.numpy(), log_prob.numpy())
    q1 = torch.from_numpy(data.draw(hnp.arrays(np.float32, (n, 1), elements=st.sampled_from([-1.0, 0.0, 2.5]))))
    q2 = torch.from_numpy(data.draw(hnp.arrays(np.float32, (n, 1), elements=st.sampled_from([-1.0, 0.0, 2.5]))))
    width = 3 + dim
    grads = st.floats(-1e3, 1e3, width=32)
    d1, d2 = (torch.from_numpy(data.draw(hnp.arrays(np.float32, (n, width), elements=grads))) for _ in range(2))
    scale = data.draw(st.sampled_from([0.0, 1.0 / 256, 0.37 / 64, 3.0]))
    d_out = torch.empty(n, 2 * dim)
    native.squash_backward(q1.numpy(), q2.numpy(), d1.numpy(), d2.numpy(), action.numpy(), eps.numpy(), std.numpy(),
                           out.numpy(), scale, d_out.numpy())
    expected = _torch_squash_backward(q1, q2, d1, d2, action, eps, std, out, scale)
    assert torch.equal(d_out.view(torch.int32), expected.view(torch.int32))  # the bits, signs of zeros included


def test_the_native_squash_names_a_wrong_shape():
    native, f = native_learner(), np.zeros
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\), expected \(4, 2\)"):
        native.squash_sample(f((4, 3), np.float32), f((4, 1), np.float32), f((4, 1), np.float32), f((4, 1), np.float32),
                             f((4, 1), np.float32))
    with pytest.raises(TypeError, match="action must be a float32 numpy array"):
        native.squash_sample(f((4, 2), np.float32), f((4, 1), np.float32), f((4, 1)), f((4, 1), np.float32),
                             f((4, 1), np.float32))
    with pytest.raises(ValueError, match="d1 must have at least the action's columns"):
        native.squash_backward(*(f((4, 1), np.float32) for _ in range(2)), f((4, 1), np.float32)[:, :0].copy(),
                               f((4, 4), np.float32), *(f((4, 1), np.float32) for _ in range(3)),
                               f((4, 2), np.float32), 0.1, f((4, 2), np.float32))
