"""SAC's bfloat16 learner (placement learn=cpu-bf16): its wide GEMMs in bfloat16 on float32 master weights, on the
fused step and on the torch step, as DDPG's and TD3's (tests/test_learner_precision.py holds theirs).

One step from the same state must agree with float32's within the rounding bfloat16 adds (a first-order bound
derived per sample from the networks, carried through the squashed Gaussian), run after run it must give the
same bits for a seed in either update schedule and across a checkpoint, and a short run must learn."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from pearl_fpga.algos import make_learner
from pearl_fpga.algos.common import Batch, forward, linear_layers
from pearl_fpga.algos.fused import native_learner
from pearl_fpga.algos.sac import LOG_STD_MAX, LOG_STD_MIN, SAC, squash
from pearl_fpga.config import TrainConfig
from pearl_fpga.runtime.placement import bf16_unsupported

from float_bounds import U_BF16, bf16_forward_bound

pytestmark = [pytest.mark.skipif(bf16_unsupported("cpu") is not None,
                                 reason=f"no bfloat16 GEMMs here: {bf16_unsupported('cpu')}"),
              pytest.mark.usefixtures("one_torch_thread")]  # tests/conftest.py
STEPS = [pytest.param(True, marks=pytest.mark.skipif(native_learner() is None, reason="make native")), False]


def _batch(rng: np.random.Generator, n: int, obs_dim: int = 3, action_dim: int = 1, weights: bool = False) -> Batch:
    data = dict(obs=rng.standard_normal((n, obs_dim)), action=rng.uniform(-1, 1, (n, action_dim)),
                reward=rng.standard_normal(n), next_obs=rng.standard_normal((n, obs_dim)), done=rng.random(n) < 0.1,
                weights=rng.uniform(0.1, 1.0, n) if weights else None)
    return Batch(**data).to_torch()


def _learner(cfg: TrainConfig, fused: bool, low: bool, seed: int = 3) -> SAC:
    return SAC(cfg, 3, 1, seed=seed, fused=fused, precision=torch.bfloat16 if low else None)


def _sample_bound(sac: SAC, obs: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The float32 actor's sample tanh(mu + sigma eps) at obs and first-order bounds on the bf16 actor's error in
    it and in its log-probability: the outputs' error (e_mu, e_log_sigma) moves the pre-tanh value by
    e_mu + sigma |eps| e_log_sigma (= e_u), the action by (1 - a^2) e_u, and log pi by e_log_sigma (its Gaussian
    term) plus 2 |a| e_u (its -log(1 - a^2 + 1e-6) term) per component."""
    layers, dim = linear_layers(sac.actor), sac.action_dim
    out, err = forward(layers, obs), bf16_forward_bound(layers, obs)
    log_std = out[:, dim:].clamp(LOG_STD_MIN, LOG_STD_MAX)
    std, e_mu, e_ls = log_std.exp(), err[:, :dim], err[:, dim:]
    action = torch.tanh(out[:, :dim] + std * eps)
    e_u = e_mu + std * eps.abs() * e_ls
    return action, (1 - action.pow(2)) * e_u, (e_ls + 2 * action.abs() * e_u).sum(1, keepdim=True)


@pytest.mark.parametrize("fused", STEPS)
def test_a_bf16_step_is_within_the_rounding_bound_of_float32(fused):
    """Same start, same batch, same noise: each sample's TD error within the bound of its Q1 plus gamma times its
    target's (the next action's error carried into the target critics, alpha times log pi's error), the loss
    within what those move half the sum of two MSEs by (Q2's own bound), the entropy coefficient's gradient
    within the mean error of log pi, and the critics' and the actor's gradients (Adam's first moment after one
    step) within 64 u norm-wise, as DDPG's and TD3's (no derived bound: cancellation in the backward GEMMs). The
    learning rate is large so that the actor's gradient, taken on the critics after their step (SB3's order),
    would miss the bound by some 3x on a stale bf16 copy of them."""
    cfg = TrainConfig.preset("sac", net_arch=[64, 64], learning_rate=0.1)
    ref, low = _learner(cfg, fused, False), _learner(cfg, fused, True)
    batch = _batch(np.random.default_rng(0), 128)
    noise = torch.Generator().manual_seed(3)  # the learners' own: eps, then the next state's
    eps, next_eps = (torch.randn((128, 1), generator=noise) for _ in range(2))
    alpha = ref.ent_coef  # read before its own step
    with torch.no_grad():
        x = torch.cat([batch.obs, batch.action], 1)
        _, _, e_logp = _sample_bound(ref, batch.obs, eps)
        next_a, e_next_a, e_next_logp = _sample_bound(ref, batch.next_obs, next_eps)
        next_in = torch.cat([batch.next_obs, next_a], 1)
        in_err = torch.cat([torch.zeros_like(batch.next_obs), e_next_a], 1)
        targets = (ref.critic_target.q1, ref.critic_target.q2)
        next_bound = torch.stack([bf16_forward_bound(linear_layers(t), next_in, in_err) for t in targets]).max(0).values
        target_bound = ref.gamma * (1 - batch.done) * (next_bound + alpha * e_next_logp)
        # the float32 TD target, to check the float32 step against and to bound Q2's squared error
        _, next_logp_32, _, _ = squash(forward(linear_layers(ref.actor), batch.next_obs), next_eps, 1)
        next_q = torch.minimum(*(forward(linear_layers(t), next_in) for t in targets)) - alpha * next_logp_32
        target = batch.reward + (1 - batch.done) * ref.gamma * next_q
        bounds, tds = [], []
        for q in (ref.critic.q1, ref.critic.q2):
            bounds.append((bf16_forward_bound(linear_layers(q), x) + target_bound).squeeze(1) * 1.01 + 1e-6)
            tds.append((forward(linear_layers(q), x) - target).abs().squeeze(1))
    (loss32, td32), (loss16, td16) = ref.update(batch), low.update(batch)
    torch.testing.assert_close(td32, tds[0], rtol=1e-4, atol=1e-4)  # the bound's float32 side is the step's
    assert torch.all((td16 - td32).abs() <= bounds[0]), float(((td16 - td32).abs() / bounds[0]).max())
    assert bool((td16 != td32).any())  # the GEMMs really ran in bfloat16
    loss_bound = 0.5 * sum(((2 * td + d) * d).mean() for td, d in zip(tds, bounds))
    assert abs(float(loss16) - float(loss32)) <= float(loss_bound)
    states = {name: (ref.state_dict()[name]["state"], low.state_dict()[name]["state"])
              for name in ("critic_optimizer", "actor_optimizer", "ent_coef_optimizer")}
    (g32,), (g16,) = ([s["exp_avg"] for s in state.values()] for state in states.pop("ent_coef_optimizer"))
    assert abs(float(g16 - g32)) <= 0.1 * float(e_logp.mean()) * 1.01 + 1e-7  # exp_avg = (1 - beta1) g
    for name, (state32, state16) in states.items():
        for key, s32 in state32.items():
            m32, m16 = s32["exp_avg"], state16[key]["exp_avg"]
            assert m16.dtype == torch.float32  # float32 optimizer state
            assert float((m16 - m32).norm()) <= 64 * U_BF16 * float(m32.norm()) + 1e-7, (name, key)



def _params(sac: SAC) -> list[torch.Tensor]:
    return [*sac.actor.parameters(), *sac.critic.parameters(), *sac.critic_target.parameters(), sac.log_ent_coef]


@pytest.mark.parametrize("fused", STEPS)
def test_bf16_runs_repeat_their_bits_in_either_schedule_and_across_a_checkpoint(fused):
    """Three bf16 learners of one seed (the fused one's serial, concurrent, and switching every step; the torch
    step has one schedule) give the same bits step for step; a fourth resumes the first's checkpoint mid-run
    (a target average due at its first step) and continues with the same bits. The state is float32."""
    cfg = TrainConfig.preset("sac", net_arch=[24, 40], learning_rate=3e-3, target_update_interval=2)
    runs = [_learner(cfg, fused, True, seed=1) for _ in range(3)]
    if fused:
        for sac, schedule in zip(runs, ("serial", "concurrent", "concurrent")):
            sac.set_schedule(schedule)
    rng = np.random.default_rng(9)
    batches = [_batch(rng, 32, weights=i % 3 == 0) for i in range(8)]
    resumed = _learner(cfg, fused, True, seed=99)
    resumed.update(batches[0])  # its own optimizer state and buffers exist before the load replaces them
    for step, batch in enumerate(batches):
        if step == 3:
            state = copy.deepcopy(runs[0].state_dict())
            tensors = [t for part in state.values() if isinstance(part, dict) for t in part.values()
                       if isinstance(t, torch.Tensor)]
            assert tensors and all(t.dtype == torch.float32 for t in tensors)
            resumed.load_state_dict(state)
        if fused:
            runs[2].set_schedule(("serial", "concurrent")[step % 2])
        results = [sac.update(batch) for sac in (*runs, *([resumed] if step >= 3 else []))]
        for result in results[1:]:
            assert torch.equal(result.loss, results[0].loss) and torch.equal(result.td_abs, results[0].td_abs)
    for sac in (*runs[1:], resumed):
        for p, q in zip(_params(sac), _params(runs[0]), strict=True):
            assert torch.equal(p, q)
        assert torch.equal(sac.noise.get_state(), runs[0].noise.get_state())


def test_checkpoints_cross_precisions_and_the_placement_builds_it():
    """make_learner(learn=cpu-bf16) builds the bf16 SAC (the fused step where it runs); a float32 learner loads
    its state and acts the same, and it loads a float32 learner's."""
    cfg = TrainConfig.preset("sac", net_arch=[32, 32])
    low = make_learner(cfg, 3, 1, device="cpu-bf16", seed=0)
    assert isinstance(low, SAC) and low.precision == torch.bfloat16
    assert (low._fused is not None) == (native_learner() is not None)
    rng = np.random.default_rng(1)
    for _ in range(5):
        low.update(_batch(rng, 32))
    full = make_learner(cfg, 3, 1, device="cpu", seed=9)
    full.load_state_dict(copy.deepcopy(low.state_dict()))
    obs = torch.as_tensor(rng.uniform(-1, 1, (16, 3)), dtype=torch.float32)
    with torch.no_grad():
        assert torch.equal(full.actor(obs), low.actor(obs))
    low.update(_batch(rng, 32))
    low.load_state_dict(copy.deepcopy(full.state_dict()))


def test_a_short_bf16_run_learns():
    """One-step episodes with reward -(a - 0.5 obs[0])^2: the critics fit it and the greedy action tanh(mu)
    follows 0.5 obs[0]."""
    cfg = TrainConfig.preset("sac", net_arch=[64, 64], learning_rate=1e-3)
    sac = make_learner(cfg, 3, 1, device="cpu-bf16", seed=0)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(400):
        obs = rng.uniform(-1, 1, (64, 3))
        action = rng.uniform(-1, 1, (64, 1))
        reward = -(action[:, 0] - 0.5 * obs[:, 0]) ** 2
        batch = Batch(obs=obs, action=action, reward=reward, next_obs=obs, done=np.ones(64)).to_torch()
        losses.append(float(sac.update(batch).loss))
    assert np.mean(losses[-20:]) < 0.2 * np.mean(losses[:20])
    probe = np.linspace(-1, 1, 41, dtype=np.float32)
    obs = torch.as_tensor(np.stack([probe, np.zeros_like(probe), np.zeros_like(probe)], 1))
    with torch.no_grad():
        greedy = torch.tanh(sac.actor(obs)[:, 0]).numpy()
    assert np.abs(greedy - 0.5 * probe).max() < 0.15, np.abs(greedy - 0.5 * probe).max()
