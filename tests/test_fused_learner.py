"""The fused CPU learner step (pearl_fpga/algos/fused.py, pearl_fpga/native/learner_ext.cpp).

tests/test_algos.py checks one fused DQN step against autograd + torch.optim; here: its native pieces
one by one, Adam over many steps and across a checkpoint, odd shapes, and bad inputs."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from pearl_fpga.algos import DQN, Batch
from pearl_fpga.algos import fused as fused_module
from pearl_fpga.algos.common import LeanAdam, subnormals_flushed
from pearl_fpga.algos.fused import native_gemms, native_learner
from pearl_fpga.config import TrainConfig
from pearl_fpga.host import available_cores

native = native_learner()
pytestmark = [pytest.mark.skipif(native is None, reason="pearl_fpga._learner_native not built (make native)"),
              pytest.mark.usefixtures("one_torch_thread")]  # tests/conftest.py


def _batch(rng: np.random.Generator, n: int, obs_dim: int, n_actions: int, weights: bool = False) -> Batch:
    data = {"obs": rng.normal(size=(n, obs_dim)).astype(np.float32), "action": rng.integers(0, n_actions, n),
            "reward": (3 * rng.normal(size=n)).astype(np.float32),
            "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "done": (rng.random(n) < 0.3).astype(np.float32)}
    if weights:
        data["weights"] = rng.uniform(0.1, 1.0, n).astype(np.float32)
    return Batch(**data).to_torch(discrete=True)


@pytest.mark.parametrize("max_norm,weight_decay", [(0.0, 0.0), (0.3, 0.0), (1e3, 0.01)])
def test_native_adam_tracks_torch_adam_over_steps_and_a_resume(max_norm, weight_decay):
    """Twenty clipped Adam steps against torch.nn.utils.clip_grad_norm_ + torch.optim.Adam; halfway
    the optimizer is checkpointed and resumed (the state_dict format is torch's)."""
    rng = np.random.default_rng(0)
    shapes = ((33, 7), (33,), (5, 33), (5,))
    init = [torch.tensor(rng.normal(size=s).astype(np.float32)) for s in shapes]
    ref = [p.clone().requires_grad_(True) for p in init]
    ref_opt = torch.optim.Adam(ref, lr=3e-3, weight_decay=weight_decay)
    lean = LeanAdam([p.clone().requires_grad_(True) for p in init], lr=3e-3)
    lean.optimizer.param_groups[0]["weight_decay"] = weight_decay
    for step in range(20):
        grads = [rng.normal(size=s).astype(np.float32) * (10.0 if step % 3 == 0 else 0.1) for s in shapes]
        for p, g in zip(ref, grads, strict=True):
            p.grad = torch.tensor(g)
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(ref, max_norm)
        ref_opt.step()
        norm = lean.native_step(native, [g.copy() for g in grads], max_norm)
        assert norm == pytest.approx(float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))), rel=1e-5)
        if step == 9:
            resumed = LeanAdam([p.detach().clone().requires_grad_(True) for p in lean.params], lr=3e-3)
            resumed.optimizer.load_state_dict(lean.optimizer.state_dict())
            resumed.reset_cache()
            lean = resumed
    assert float(lean.optimizer.state_dict()["state"][0]["step"]) == 20.0
    for p, r in zip(lean.params, ref, strict=True):
        torch.testing.assert_close(p.detach(), r.detach(), rtol=1e-5, atol=1e-6)


def test_native_adam_on_two_threads_gives_the_bits_of_one():
    """clip_adam's element-wise update in chunks on the caller and the native pool's helper: the same
    parameters and moments, to the bit, as one pass (parameters of several chunks and of less than one)."""
    rng = np.random.default_rng(4)
    shapes = ((300, 100), (300,), (2, 300), (2,))
    init = [torch.tensor(rng.normal(size=s).astype(np.float32)) for s in shapes]
    lean = {t: LeanAdam([p.clone().requires_grad_(True) for p in init], lr=1e-3) for t in (1, 2)}
    for step in range(5):
        grads = [rng.normal(size=s).astype(np.float32) for s in shapes]
        norms = {t: adam.native_step(native, [g.copy() for g in grads], 10.0, threads=t) for t, adam in lean.items()}
        assert norms[1] == norms[2]
    for t in (1, 2):
        lean[t].reset_cache()
    for a, b in zip(lean[1].params, lean[2].params, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(lean[1].optimizer.state.values(), lean[2].optimizer.state.values(), strict=True):
        assert torch.equal(a["exp_avg"], b["exp_avg"]) and torch.equal(a["exp_avg_sq"], b["exp_avg_sq"])


gemms = native_gemms()
needs_gemms = pytest.mark.skipif(gemms is None, reason="torch's BLAS is not MKL here: the fused DQN step keeps torch ops")


@needs_gemms
@pytest.mark.parametrize("m,n,k", [(64, 256, 256), (1, 1, 1), (37, 5, 300), (3, 200, 1), (0, 4, 3), (5, 4, 0)])
@pytest.mark.parametrize("threads", [1, 2])
def test_native_gemm_tasks_give_torch_s_bits(m, n, k, threads):
    """Each kind of task (a Linear's forward with bias and ReLU, a weight gradient d^T a, a masked input
    gradient d W), several at once on the caller and the helper: torch.addmm's and torch.mm's bits (the
    same BLAS routine at the same thread count)."""
    rng = np.random.default_rng(m * 7 + n * 3 + k)
    x, w = rng.normal(size=(m, k)).astype(np.float32), rng.normal(size=(n, k)).astype(np.float32)
    b, d = rng.normal(size=n).astype(np.float32), rng.normal(size=(m, n)).astype(np.float32)
    mask = rng.normal(size=(m, k)).astype(np.float32)
    tx, tw, tb, td = map(torch.from_numpy, (x, w, b, d))
    expected = [torch.addmm(tb, tx, tw.t()).relu_(), torch.addmm(tb, tx, tw.t()), td.t().mm(tx),
                td.mm(tw) * torch.from_numpy(mask > 0)]
    outs = [np.full(e.shape, np.nan, np.float32) for e in expected]
    gemms.gemms([(x, False, w, True, outs[0], b, True, None), (x, False, w, True, outs[1], b, False, None),
                 (d, True, x, False, outs[2], None, False, None), (d, False, w, False, outs[3], None, False, mask)],
                threads, torch.get_num_threads())
    for out, e in zip(outs, expected, strict=True):
        assert torch.equal(torch.from_numpy(out), e)


@needs_gemms
@pytest.mark.skipif(available_cores() < 2, reason="the helper needs a core of its own to take tasks in time")
def test_the_helper_runs_gemm_tasks_with_the_caller_s_subnormal_mode():
    """Tasks the helper thread takes flush subnormals as the caller does (the learner flushes them on its
    threads): with subnormal inputs, every task of a run on two threads gives the caller's bits, flushed
    or not."""
    tiny = np.full((64, 256), 1e-39, np.float32)  # subnormal: zero where denormals are zero
    ones = np.ones((256, 256), np.float32)

    def run(threads: int) -> list[np.ndarray]:
        for _ in range(20):  # until the helper took a task (it joins within microseconds on a free core)
            outs = [np.empty((64, 256), np.float32) for _ in range(16)]
            by_helper = gemms.gemms([(tiny, False, ones, True, o, None, False, None) for o in outs], threads, 1)
            if threads == 1 or by_helper > 0:
                assert by_helper == 0 or threads > 1
                return outs
        raise AssertionError("the native pool's helper never took a task")

    with subnormals_flushed():
        flushed_alone, flushed_beside = run(1), run(2)
    alone, beside = run(1), run(2)
    assert not np.array_equal(flushed_alone[0], alone[0])  # the inputs do exercise the mode
    for expected, runs in ((flushed_alone, flushed_beside), (alone, beside)):
        for e, got in zip(expected, runs, strict=True):
            np.testing.assert_array_equal(got, e)


@needs_gemms
def test_native_gemm_tasks_reject_bad_inputs():
    a, w = np.zeros((4, 8), np.float32), np.zeros((5, 8), np.float32)
    out = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="out has shape"):
        gemms.gemms([(a, False, w, True, np.zeros((4, 6), np.float32), None, False, None)], 1, 1)
    with pytest.raises(ValueError, match="do not chain"):
        gemms.gemms([(a, False, w, False, out, None, False, None)], 1, 1)
    with pytest.raises(TypeError, match="a must be a float32"):
        gemms.gemms([(a.astype(np.float64), False, w, True, out, None, False, None)], 1, 1)
    with pytest.raises(ValueError, match="bias has shape"):
        gemms.gemms([(a, False, w, True, out, np.zeros(4, np.float32), False, None)], 1, 1)
    with pytest.raises(ValueError, match="a GEMM task is"):
        gemms.gemms([(a, False, w, True, out)], 1, 1)
    with pytest.raises(ValueError, match="out must be writable"):
        out.flags.writeable = False
        gemms.gemms([(a, False, w, True, out, None, False, None)], 1, 1)
    with pytest.raises(ValueError, match="needs both routines' addresses"):  # refused before it replaces any
        native.set_blas(0, 1)


def test_the_fused_dqn_step_needs_no_native_gemm_tasks(monkeypatch):
    """Without MKL in torch (aarch64 wheels), or where a probe GEMM misses torch's bits (with a warning), the
    native GEMM tasks are off; the fused DQN step, whose GEMMs are torch's own inside its program, still runs
    on two threads and matches the torch step."""
    monkeypatch.setattr(torch.backends.mkl, "is_available", lambda: False)
    fused_module.native_gemms.cache_clear()
    try:
        assert native_gemms() is None
        monkeypatch.undo()
        fused_module.native_gemms.cache_clear()
        monkeypatch.setattr(fused_module, "_gemms_match_torch", lambda native: False)
        with pytest.warns(UserWarning, match="do not give torch.mm's bits"):
            assert native_gemms() is None
        cfg = TrainConfig.preset("dqn", net_arch=[24, 40], update_schedule="auto", learning_rate=1e-2)
        fused, plain = DQN(cfg, 3, 4, seed=2, fused=True), DQN(cfg, 3, 4, seed=2, fused=False)
        fused.set_schedule("concurrent")  # its target pass and weight gradient on the native helper
        batch = _batch(np.random.default_rng(5), 17, 3, 4)
        fused.update(batch)
        plain.update(batch)
        for p, q in zip(fused.q.parameters(), plain.q.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    finally:
        monkeypatch.undo()
        fused_module.native_gemms.cache_clear()
    assert (native_gemms() is None) == (gemms is None)


@pytest.mark.parametrize("n_in,n_out", [(4, 40), (40, 3), (7, 7), (1, 1)])
def test_native_thin_layers_against_numpy(n_in, n_out):
    """Forward, weight gradient and masked input gradient, in both loop orientations."""
    rng = np.random.default_rng(n_in * 100 + n_out)
    x = rng.normal(size=(9, n_in)).astype(np.float32)
    w = rng.normal(size=(n_out, n_in)).astype(np.float32)
    b = rng.normal(size=n_out).astype(np.float32)
    out = np.empty((9, n_out), np.float32)
    for relu in (False, True):
        native.linear_thin(x, w, b, out, relu)
        ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
        np.testing.assert_allclose(out, np.maximum(ref, 0) if relu else ref, rtol=1e-5, atol=1e-5)
    d = rng.normal(size=(9, n_out)).astype(np.float32)
    dw = np.empty_like(w)
    native.weight_grad_thin(d, x, dw)
    np.testing.assert_allclose(dw, d.T.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)
    a = np.maximum(x, 0)
    dx = np.empty_like(x)
    native.input_grad_thin(d, w, a, dx)
    np.testing.assert_allclose(dx, np.where(a > 0, d.astype(np.float64) @ w, 0), rtol=1e-5, atol=1e-5)


def _dot_in_order(a: np.ndarray, b: np.ndarray) -> np.float32:
    """The native dot product's float32 sum, in its order: sixteen partial sums along the vector (the tail
    into the first), then the partials in turn."""
    whole = len(a) - len(a) % 16
    part = np.zeros(16, np.float32)
    for i in range(0, whole, 16):
        part += a[i:i + 16] * b[i:i + 16]
    for i in range(whole, len(a)):
        part[0] += a[i] * b[i]
    total = np.float32(0)
    for value in part:
        total += value
    return total


@pytest.mark.parametrize("n_in,n_out", [(4, 400), (3, 37), (300, 1), (40, 3), (6, 6)])
def test_native_thin_layers_sum_in_a_fixed_order(n_in, n_out):
    """The thin layers' loops add in one order on every instruction-set path (make test-isa runs this under
    each): the bits of float32 numpy arithmetic in that order, at the shapes of an input layer (the long side
    in vectors of sixteen and a tail) and of an output layer."""
    rng = np.random.default_rng(n_in * 1000 + n_out)
    rows = 5
    x = rng.normal(size=(rows, n_in)).astype(np.float32)
    w = rng.normal(size=(n_out, n_in)).astype(np.float32)
    b = rng.normal(size=n_out).astype(np.float32)
    out = np.empty((rows, n_out), np.float32)
    native.linear_thin(x, w, b, out, True)
    if n_out >= n_in:  # b, then each input's column in turn
        ref = np.repeat(b[None], rows, 0)
        for k in range(n_in):
            ref = ref + x[:, k:k + 1] * w[:, k][None]
    else:
        ref = np.array([[b[n] + _dot_in_order(x[i], w[n]) for n in range(n_out)] for i in range(rows)], np.float32)
    np.testing.assert_array_equal(out, np.where(ref > 0, ref, np.float32(0)))
    d = rng.normal(size=(rows, n_out)).astype(np.float32)
    dw = np.empty_like(w)
    native.weight_grad_thin(d, x, dw)
    ref_dw = np.zeros_like(w)
    for i in range(rows):  # row by row, from zero
        ref_dw = ref_dw + d[i][:, None] * x[i][None]
    np.testing.assert_array_equal(dw, ref_dw)
    a = np.maximum(rng.normal(size=(rows, n_in)), 0).astype(np.float32)
    dx = np.empty_like(x)
    native.input_grad_thin(d, w, a, dx)
    if n_out > n_in:
        ref_dx = np.array([[_dot_in_order(d[i], w[:, k]) for k in range(n_in)] for i in range(rows)], np.float32)
    else:
        ref_dx = np.zeros_like(x)
        for n in range(n_out):
            ref_dx = ref_dx + d[:, n:n + 1] * w[n][None]
    np.testing.assert_array_equal(dx, np.where(a > 0, ref_dx, np.float32(0)))


def _bf16_bits(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.bfloat16).view(torch.int16).numpy()


def test_native_passes_narrow_and_widen_bfloat16_as_torch_does():
    """A bfloat16 step's native passes widen a GEMM's bfloat16 result and narrow their float32 result for the
    next GEMM: the bits of torch's own conversions (round to nearest, ties to even; subnormals kept) on every
    instruction-set path, at rounding ties, subnormals, infinities, values that round up to infinity and -0,
    and NaN stays NaN."""
    rng = np.random.default_rng(3)
    rows, cols = 7, 45
    special = np.array([0.0, -0.0, 1e-40, -1e-40, 2.0**-126, 3.4e38, -3.4e38, np.inf, -np.inf,
                        1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-8 + 2.0**-20, -(1.0 + 2.0**-8), 65504.0], np.float32)
    x = (rng.normal(size=(rows, cols)) * 10).astype(np.float32)
    x.reshape(-1)[:len(special)] = special
    b = np.zeros(cols, np.float32)
    b[len(special):] = rng.normal(size=cols - len(special))  # no bias on the specials (it would turn -0 into 0)
    for relu in (False, True):
        out, low = x.copy(), np.empty((rows, cols), np.int16)
        native.bias_relu(out, b, relu, None, low)
        ref = x + b
        ref = np.where(ref > 0, ref, np.float32(0)) if relu else ref
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(low, _bf16_bits(torch.from_numpy(ref)))
        src = _bf16_bits(torch.from_numpy(x))  # a bfloat16 GEMM's result: widened, the bias added, narrowed
        out2, low2 = np.empty_like(x), np.empty((rows, cols), np.int16)
        native.bias_relu(out2, b, relu, src, low2)
        ref2 = torch.from_numpy(src.copy()).view(torch.bfloat16).float().numpy() + b
        ref2 = np.where(ref2 > 0, ref2, np.float32(0)) if relu else ref2
        np.testing.assert_array_equal(out2, ref2)
        np.testing.assert_array_equal(low2, _bf16_bits(torch.from_numpy(ref2)))
    a = np.maximum(rng.normal(size=(rows, cols)), 0).astype(np.float32)
    src, d, low = _bf16_bits(torch.from_numpy(x)), np.empty_like(x), np.empty((rows, cols), np.int16)
    native.relu_backward(d, a, src, low)
    ref = np.where(a > 0, torch.from_numpy(src.copy()).view(torch.bfloat16).float().numpy(), np.float32(0))
    np.testing.assert_array_equal(d, ref)
    np.testing.assert_array_equal(low, _bf16_bits(torch.from_numpy(ref)))
    # the thin layers narrow what they wrote
    w, bt = rng.normal(size=(cols, 3)).astype(np.float32), rng.normal(size=cols).astype(np.float32)
    xt, out, low = rng.normal(size=(rows, 3)).astype(np.float32), np.empty((rows, cols), np.float32), np.empty((rows, cols), np.int16)
    native.linear_thin(xt, w, bt, out, True, low)
    np.testing.assert_array_equal(low, _bf16_bits(torch.from_numpy(out)))
    dh, gi, low = rng.normal(size=(rows, 1)).astype(np.float32), np.empty((rows, cols), np.float32), np.empty((rows, cols), np.int16)
    native.input_grad_thin(dh, rng.normal(size=(1, cols)).astype(np.float32), a, gi, low)
    np.testing.assert_array_equal(low, _bf16_bits(torch.from_numpy(gi)))
    nan = np.full((1, 4), np.nan, np.float32)
    low = np.empty((1, 4), np.int16)
    native.bias_relu(nan.copy(), np.zeros(4, np.float32), False, None, low)
    assert torch.from_numpy(low).view(torch.bfloat16).float().isnan().all()
    with pytest.raises(ValueError, match="out_low has shape"):
        native.bias_relu(x.copy(), b, False, None, np.empty((rows, cols + 1), np.int16))
    with pytest.raises(TypeError, match="src must be a 16-bit integer"):
        native.bias_relu(x.copy(), b, False, x, None)
    with pytest.raises(ValueError, match="out_low must be writable"):
        ro = np.empty((rows, cols), np.int16)
        ro.flags.writeable = False
        native.relu_backward(d, a, None, ro)


def test_native_pieces_against_numpy():
    rng = np.random.default_rng(1)
    d = rng.normal(size=(13, 9)).astype(np.float32)
    db = np.empty(9, np.float32)
    native.bias_grad(d, db)
    np.testing.assert_allclose(db, d.sum(0), rtol=1e-5, atol=1e-6)
    a = np.maximum(rng.normal(size=(13, 9)), 0).astype(np.float32)
    masked = d.copy()
    native.relu_backward(masked, a)
    np.testing.assert_array_equal(masked, np.where(a > 0, d, 0))
    b = rng.normal(size=9).astype(np.float32)
    for relu in (False, True):
        out = d.copy()
        native.bias_relu(out, b, relu)
        np.testing.assert_array_equal(out, np.maximum(d + b, 0) if relu else d + b)
    with pytest.raises(ValueError, match="b has shape"):
        native.bias_relu(d.copy(), np.zeros(8, np.float32), True)


@pytest.mark.parametrize("net_arch", [[5], [16, 8, 4], [24, 40]])
@pytest.mark.parametrize("double_q", [True, False])
def test_fused_step_equals_torch_step_on_other_shapes(net_arch, double_q):
    """Depths 1 to 3, thin (native) and wide (torch GEMM) layers, batch sizes that change between
    calls, PER weights: fused and torch steps agree."""
    cfg = TrainConfig.preset("dqn", net_arch=net_arch, double_q=double_q, learning_rate=1e-2, max_grad_norm=1.0)
    fused, plain = DQN(cfg, 3, 4, seed=2, fused=True), DQN(cfg, 3, 4, seed=2, fused=False)
    rng = np.random.default_rng(2)
    for n, weights in ((17, False), (5, True), (17, True)):
        batch = _batch(rng, n, 3, 4, weights)
        # compare single steps from the same state (a deep copy: torch's load_state_dict would share the
        # optimizer's step tensors between the two)
        plain.load_state_dict(copy.deepcopy(fused.state_dict()))
        loss_f, td_f = fused.update(batch)
        loss_p, td_p = plain.update(batch)
        assert float(loss_f) == pytest.approx(float(loss_p), rel=1e-5)
        torch.testing.assert_close(td_f, td_p, rtol=1e-5, atol=1e-6)
        for p, q in zip(fused.q.parameters(), plain.q.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert fused.updates == plain.updates


def test_fused_step_returns_fresh_td_and_learns():
    cfg = TrainConfig.preset("dqn", net_arch=[32], gamma=0.0, learning_rate=1e-2)
    algo = DQN(cfg, 4, 2, seed=0, fused=True)
    batch = _batch(np.random.default_rng(3), 64, 4, 2)
    first_loss, first_td = algo.update(batch)
    kept = first_td.clone()
    for _ in range(300):
        loss, _ = algo.update(batch)
    assert torch.equal(first_td, kept)  # the returned TD errors are not a view of a reused buffer
    assert float(loss) < 0.1 * float(first_loss)


def test_native_pieces_reject_bad_inputs():
    q = np.zeros((4, 2), np.float32)
    col = np.zeros((4, 1), np.float32)
    out = np.zeros((4, 2), np.float32)
    td = np.zeros(4, np.float32)
    act = np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="q_next_target has shape"):
        native.dqn_loss_grad(q, q, np.zeros((3, 2), np.float32), act, col, col, None, 0.99, True, out, td)
    with pytest.raises(ValueError, match="out of range"):
        native.dqn_loss_grad(q, q, q, np.full(4, 2, np.int64), col, col, None, 0.99, True, out, td)
    with pytest.raises(ValueError, match=r"action must have shape \(B,\)"):
        native.dqn_loss_grad(q, q, q, np.zeros((4, 1), np.int64), col, col, None, 0.99, True, out, td)
    with pytest.raises(ValueError, match="must be 0-D, 1-D or 2-D"):
        native.bias_grad(np.zeros((2, 2, 2), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="w has shape"):
        native.linear_thin(q, np.zeros((3, 3), np.float32), np.zeros(3, np.float32), out, False)
    with pytest.raises(TypeError, match="float32"):
        native.bias_grad(q.astype(np.float64), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        native.relu_backward(np.zeros((2, 4), np.float32).T, q)
    with pytest.raises(ValueError, match="writable"):
        ro = np.zeros(2, np.float32)
        ro.flags.writeable = False
        native.bias_grad(q, ro)
    p, step = [np.zeros(3, np.float32)], [np.zeros((), np.float32)]
    with pytest.raises(ValueError, match="same length"):
        native.clip_adam(p, [], p, p, step, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0.0)
    with pytest.raises(ValueError, match="size differs"):
        native.clip_adam(p, [np.zeros(4, np.float32)], p, p, step, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0.0)
    assert float(step[0]) == 0.0  # a rejected call counts no step
    with pytest.raises(ValueError, match="one value"):
        native.clip_adam(p, p, p, p, [np.zeros(2, np.float32)], 1e-3, 0.9, 0.999, 1e-8, 0.0, 0.0)
    two = [np.zeros((), np.float32), np.ones((), np.float32)]
    with pytest.raises(ValueError, match="step counters"):
        native.clip_adam(p * 2, p * 2, p * 2, p * 2, two, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0.0)


def test_fused_required_but_unavailable_is_a_clear_error(monkeypatch):
    from pearl_fpga.algos import dqn as dqn_module
    from pearl_fpga.errors import BackendUnavailable

    monkeypatch.setattr(dqn_module, "native_learner", lambda: None)
    with pytest.raises(BackendUnavailable, match="make native"):
        DQN(TrainConfig.preset("dqn", net_arch=[4]), 4, 2, fused=True)
    assert DQN(TrainConfig.preset("dqn", net_arch=[4]), 4, 2)._fused is None  # auto falls back to torch ops


def test_cpu_dqn_uses_the_fused_step_by_default():
    algo = DQN(TrainConfig.preset("dqn", net_arch=[4]), 4, 2)
    assert algo._fused is not None
    assert DQN(TrainConfig.preset("dqn", net_arch=[4]), 4, 2, precision=torch.bfloat16)._fused is not None
    batch = _batch(np.random.default_rng(5), 8, 4, 2)
    loss, td = algo.update(batch)
    assert isinstance(loss, float) and td.shape == (8,) and algo.updates == 1
    with pytest.raises(ValueError, match="out of range"):  # a failed step is not counted
        algo.update(Batch(obs=batch.obs, action=batch.action + 5, reward=batch.reward, next_obs=batch.next_obs,
                         done=batch.done))
    assert algo.updates == 1


def test_native_actor_critic_pieces_against_numpy():
    """The critics' MSE gradient (with and without IS weights) and the unmasked input gradient in both
    loop orientations (a network's input layer: many outputs; an output layer: few)."""
    rng = np.random.default_rng(7)
    q, target = rng.normal(size=(11, 1)).astype(np.float32), rng.normal(size=(11, 1)).astype(np.float32)
    d_q, abs_td = np.empty((11, 1), np.float32), np.empty(11, np.float32)
    for weights in (None, rng.uniform(0.1, 1.0, 11).astype(np.float32)):
        w = np.ones(11) if weights is None else weights.astype(np.float64)
        td = q[:, 0].astype(np.float64) - target[:, 0]
        loss = native.mse_loss_grad(q, target, weights, d_q, abs_td)
        assert loss == pytest.approx(float((w * td**2).mean()), rel=1e-6)
        np.testing.assert_allclose(d_q[:, 0], 2 * w * td / 11, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(abs_td, np.abs(td), rtol=1e-6)
    native.mse_loss_grad(q, target, None, d_q, None)  # no |TD error| wanted: Q2's
    for n_out, n_in in ((40, 4), (1, 30), (6, 6)):
        d = rng.normal(size=(9, n_out)).astype(np.float32)
        w = rng.normal(size=(n_out, n_in)).astype(np.float32)
        dx = np.empty((9, n_in), np.float32)
        native.input_grad_thin(d, w, None, dx)
        np.testing.assert_allclose(dx, d.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
        a = np.maximum(rng.normal(size=(9, n_in)), 0).astype(np.float32)
        native.input_grad_thin(d, w, a, dx)
        np.testing.assert_allclose(dx, np.where(a > 0, d.astype(np.float64) @ w, 0), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="target has shape"):
        native.mse_loss_grad(q, np.zeros((10, 1), np.float32), None, d_q, None)
    with pytest.raises(ValueError, match="weights has shape"):
        native.mse_loss_grad(q, target, np.ones(3, np.float32), d_q, None)


def _ac_batch(rng: np.random.Generator, n: int, obs_dim: int, action_dim: int, weights: bool) -> Batch:
    data = {"obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "action": rng.uniform(-1, 1, (n, action_dim)).astype(np.float32),
            "reward": (3 * rng.normal(size=n)).astype(np.float32),
            "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
            "done": (rng.random(n) < 0.3).astype(np.float32)}
    if weights:
        data["weights"] = rng.uniform(0.1, 1.0, n).astype(np.float32)
    return Batch(**data).to_torch()


def _ac_networks(algo):
    return [algo.actor, algo.actor_target, *algo.critics, *algo.critic_targets]


@pytest.mark.parametrize("net_arch", [[5], [16, 8, 4], [24, 40]])
@pytest.mark.parametrize("algo_name,concurrent", [("ddpg", True), ("ddpg", False), ("td3", False), ("td3", True)])
def test_fused_actor_critic_step_equals_torch_step_on_other_shapes(algo_name, concurrent, net_arch):
    """DDPG and TD3 (policy delay, smoothing noise): depths 1 to 3, thin (native) and wide (torch GEMM)
    layers, two actions, batch sizes that change between calls, PER weights, the torch step's checkpoint
    loaded into the fused one: each step agrees with the torch step from the same state."""
    from pearl_fpga.algos import make_learner

    cfg = TrainConfig.preset(algo_name, net_arch=net_arch, learning_rate=1e-2, concurrent_updates=concurrent)
    cls = type(make_learner(cfg, 3, 2))
    fused, plain = cls(cfg, 3, 2, seed=2, fused=True), cls(cfg, 3, 2, seed=2, fused=False)
    rng = np.random.default_rng(2)
    tds = []
    for step, (n, weights) in enumerate(((17, False), (5, True), (17, True), (17, False))):
        batch = _ac_batch(rng, n, 3, 2, weights)
        # single steps from the same state (a deep copy: torch's load_state_dict would share the optimizer's
        # step tensors between the two); the fused learner takes the torch one's state every other step
        source, dest = (plain, fused) if step % 2 else (fused, plain)
        dest.load_state_dict(copy.deepcopy(source.state_dict()))
        loss_f, td_f = fused.update(batch)
        loss_p, td_p = plain.update(batch)
        tds.append((td_f, td_f.clone()))
        assert float(loss_f) == pytest.approx(float(loss_p), rel=1e-5)
        torch.testing.assert_close(td_f, td_p, rtol=1e-5, atol=1e-5)
        for a, b in zip(_ac_networks(fused), _ac_networks(plain), strict=True):
            for p, q in zip(a.parameters(), b.parameters(), strict=True):
                torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert fused.updates == plain.updates == 4
    assert all(torch.equal(td, kept) for td, kept in tds)  # the returned TD errors are not a reused buffer


def test_fused_actor_critic_learns_and_falls_back(monkeypatch):
    """On a CPU the fused step is the default; without the native module it is a clear error when asked
    for and the torch ops otherwise; a compiled step excludes it."""
    from pearl_fpga.algos import DDPG, TD3
    from pearl_fpga.algos import td3 as td3_module
    from pearl_fpga.errors import BackendUnavailable

    cfg = TrainConfig.preset("td3", net_arch=[32, 32], gamma=0.0, learning_rate=3e-3)
    algo = TD3(cfg, 3, 1, seed=0)
    assert algo._fused is not None
    batch = _ac_batch(np.random.default_rng(4), 64, 3, 1, False)
    first, _ = algo.update(batch)
    for _ in range(200):
        loss, _ = algo.update(batch)
    assert float(loss) < 0.1 * float(first)  # the critics fit the rewards (gamma 0)
    with pytest.raises(ValueError, match="exclusive"):
        DDPG(TrainConfig.preset("ddpg", net_arch=[4], learner_compile=True), 3, 1, fused=True)
    monkeypatch.setattr(td3_module, "native_learner", lambda: None)
    with pytest.raises(BackendUnavailable, match="make native"):
        DDPG(TrainConfig.preset("ddpg", net_arch=[4]), 3, 1, fused=True)
    assert DDPG(TrainConfig.preset("ddpg", net_arch=[4]), 3, 1)._fused is None
    monkeypatch.undo()
    # auto: the fused step in either update order and every schedule (each arithmetic is the same in both
    # schedules, so the schedule may change)
    for schedule in ("auto", "serial", "concurrent"):
        assert DDPG(TrainConfig.preset("ddpg", net_arch=[32, 32], update_schedule=schedule), 3, 1)._fused is not None
    assert DDPG(TrainConfig.preset("ddpg", net_arch=[32, 32], concurrent_updates=False), 3, 1)._fused is not None
