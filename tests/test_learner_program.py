"""The native learner's programs (pearl_fpga._learner_native.Program): a part of a step recorded piece by piece
and run with the GIL released once. A program computes the bits of the same pieces called one by one (the
module's functions, torch.mm and torch's conversions), runs a beside program on two threads with the bits of
one, holds the arrays it was given, and rejects bad inputs when they are recorded, naming them."""

from __future__ import annotations

import copy
import gc

import numpy as np
import pytest
import torch

from pearl_fpga.algos.fused import native_learner
from pearl_fpga.runtime.placement import bf16_unsupported

native = native_learner()
pytestmark = pytest.mark.skipif(native is None, reason="needs pearl_fpga._learner_native and _aten_gemm (make native)")


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy()


def _operand(rows: int, cols: int, transposed: bool, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A (rows, cols) operand as a torch view: stored (cols, rows) and transposed when `transposed`."""
    stored = torch.randn(cols, rows, generator=gen) if transposed else torch.randn(rows, cols, generator=gen)
    stored = stored.to(dtype)
    return stored.t() if transposed else stored


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", [(64, 256, 256), (1, 1, 1), (37, 5, 300), (3, 200, 1), (0, 4, 3), (5, 4, 0)])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_program_gemm_gives_torch_mm_s_bits(dtype, m, n, k, trans_a, trans_b):
    gen = torch.Generator().manual_seed(m * 1000 + n * 10 + k)
    a, b = _operand(m, k, trans_a, dtype, gen), _operand(k, n, trans_b, dtype, gen)
    view = _bits if dtype == torch.bfloat16 else (lambda t: t.numpy())
    out = torch.full((m, n), float("nan"), dtype=dtype)
    prog = native.Program()
    prog.gemm(view(a.t() if trans_a else a), trans_a, view(b.t() if trans_b else b), trans_b, view(out))
    assert prog.run() == []
    expected = torch.mm(a, b)
    assert torch.equal(out.view(torch.int16) if dtype == torch.bfloat16 else out,
                       expected.view(torch.int16) if dtype == torch.bfloat16 else expected)


def _pieces(rng: np.random.Generator) -> list[tuple[str, tuple, list[int]]]:
    """(name, arguments, the indices of the arguments it writes) of every piece a program shares with the
    module, on small random inputs (bfloat16 bits where a piece takes them)."""
    f32 = lambda *shape: rng.normal(size=shape).astype(np.float32)  # noqa: E731
    bits = lambda *shape: _bits(torch.from_numpy(f32(*shape)).to(torch.bfloat16)).copy()  # noqa: E731
    B, N, K, A = 9, 21, 3, 2
    params = [f32(N, K), f32(N)]
    return [
        ("bias_grad", (f32(B, N), f32(N)), [1]),
        ("bias_relu", (f32(B, N), f32(N), True, bits(B, N), bits(B, N)), [0, 4]),
        ("relu_backward", (f32(B, N), f32(B, N), bits(B, N), bits(B, N)), [0, 3]),
        ("linear_thin", (f32(B, K), f32(N, K), f32(N), f32(B, N), True, bits(B, N)), [3, 5]),
        ("weight_grad_thin", (f32(B, N), f32(B, K), f32(N, K)), [2]),
        ("input_grad_thin", (f32(B, N), f32(N, K), f32(B, K), f32(B, K), bits(B, K)), [3, 4]),
        ("squash_sample", (f32(B, 2 * A), f32(B, A), f32(B, A), f32(B, A), f32(B, 1)), [2, 3, 4]),
        ("squash_backward", (f32(B, 1), f32(B, 1), f32(B, K + A), f32(B, K + A), np.tanh(f32(B, A)), f32(B, A),
                             np.exp(f32(B, A)), f32(B, 2 * A), 0.01, f32(B, 2 * A)), [9]),
        ("mse_loss_grad", (f32(B, 1), f32(B, 1), np.abs(f32(B)), f32(B, 1), f32(B), 0.5), [3, 4]),
        ("dqn_loss_grad", (f32(B, A), f32(B, A), f32(B, A), rng.integers(0, A, size=B), f32(B), (f32(B) > 0).astype(np.float32),
                           np.abs(f32(B)), 0.99, True, f32(B, A), f32(B)), [9, 10]),
        ("clip_adam", ([p.copy() for p in params], [f32(*p.shape) for p in params], [np.zeros_like(p) for p in params],
                       [np.zeros_like(p) for p in params], [np.zeros((), np.float32) for _ in params], 1e-3, 0.9, 0.999,
                       1e-8, 0.0, 0.5, 1), [0, 1, 2, 3, 4]),
    ]


def _copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def test_program_pieces_give_the_module_s_bits_and_values():
    """Every piece recorded into one program and run at once writes what the module's function writes, and
    run() returns the values the functions return (the losses and the gradient norm), by index."""
    rng = np.random.default_rng(7)
    prog, called, recorded, slots = native.Program(), [], [], {}
    for name, args, writes in _pieces(rng):
        now, later = _copy(list(args)), _copy(list(args))
        called.append((name, getattr(native, name)(*now), now, writes))
        slot = getattr(prog, name)(*later)
        if slot is not None:
            slots[name] = slot
        recorded.append(later)
    values = prog.run()
    assert sorted(slots) == ["clip_adam", "dqn_loss_grad", "mse_loss_grad"]
    for (name, value, now, writes), later in zip(called, recorded, strict=True):
        for i in writes:
            for got, expected in zip(*(v if isinstance(v, list) else [v] for v in (later[i], now[i])), strict=True):
                np.testing.assert_array_equal(got, expected, err_msg=f"{name}: argument {i}")
        if name in slots:
            assert values[slots[name]] == value, name


def test_program_narrow_widen_and_concat_are_torch_s():
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(6, 33)) * 100).astype(np.float32)
    x.reshape(-1)[:6] = [0.0, -0.0, 1e-40, 3.4e38, np.inf, 1.0 + 2.0**-8]
    low, wide = np.empty(x.shape, np.int16), np.empty_like(x)
    a, b, both = x[:, :5].copy(), x[:, 5:].copy(), np.empty_like(x)
    prog = native.Program()
    prog.narrow(x, low)
    prog.widen(low, wide)
    prog.concat(both, a, b)
    prog.run()
    expected = torch.from_numpy(x).to(torch.bfloat16)
    np.testing.assert_array_equal(low, _bits(expected))
    np.testing.assert_array_equal(wide, expected.float().numpy())
    np.testing.assert_array_equal(both, torch.cat([torch.from_numpy(a), torch.from_numpy(b)], dim=1).numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias_shape", [(1, -1), (-1, 1)])
def test_program_gemm_with_a_bias_is_torch_addmm(dtype, bias_shape):
    """A low-precision DQN layer: torch.addmm(b, x, W^T), the bias added inside the GEMM, with its bits."""
    gen = torch.Generator().manual_seed(5)
    x, w, b = (torch.randn(*shape, generator=gen).to(dtype) for shape in ((128, 40), (24, 40), (24,)))
    view = _bits if dtype == torch.bfloat16 else (lambda t: t.numpy())
    out = torch.empty(128, 24, dtype=dtype)
    prog = native.Program()
    prog.gemm(view(x), False, view(w), True, view(out), view(b).reshape(bias_shape))
    prog.run()
    expected = torch.addmm(b, x, w.t())
    assert torch.equal(out.view(torch.int16), expected.view(torch.int16)) if dtype == torch.bfloat16 \
        else torch.equal(out, expected)
    with pytest.raises(ValueError, match="bias must hold out's 24 columns"):
        prog.gemm(view(x), False, view(w), True, view(out), view(b)[:20].reshape(1, -1))
    with pytest.raises(TypeError, match="bias must have out's type"):
        other = np.zeros((1, 24), np.float32 if dtype == torch.bfloat16 else np.int16)
        prog.gemm(view(x), False, view(w), True, view(out), other)


def test_program_relu_is_torch_s():
    x = np.array([[-0.0, np.nan, -1.0, 0.0, 2.0, -np.inf, np.inf, 1e-40, -1e-40] * 3], np.float32)
    got = x.copy()
    prog = native.Program()
    prog.relu(got)
    prog.run()
    expected = torch.relu(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))  # -0 and NaN as torch keeps them


def test_a_dqn_loss_with_a_bad_action_is_refused_when_recorded_and_writes_nothing():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(4, 2)).astype(np.float32)
    d_q, abs_td = np.full((4, 2), 7.0, np.float32), np.full(4, 7.0, np.float32)
    column = np.zeros(4, np.float32)
    for call in (native.dqn_loss_grad, native.Program().dqn_loss_grad):
        with pytest.raises(ValueError, match="action 2 out of range"):
            call(q, q, q, np.array([0, 1, 2, 0]), column, column, None, 0.99, True, d_q, abs_td)
        assert (d_q == 7.0).all() and (abs_td == 7.0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_beside_program_on_two_threads_gives_the_bits_of_one(dtype):
    """A layer's weight gradient beside its input gradient (FusedNet.backward's split): the same bits on one
    thread and on two; run() forgets what it ran, so running again repeats nothing."""
    gen = torch.Generator().manual_seed(0)
    d, a, w = (torch.randn(*s, generator=gen).to(dtype) for s in ((64, 48), (64, 40), (48, 40)))
    view = _bits if dtype == torch.bfloat16 else (lambda t: t.numpy())
    results = []
    for threads in (1, 2, 2):
        dw, da = torch.empty(48, 40, dtype=dtype), torch.empty(64, 40, dtype=dtype)
        dw_wide = torch.empty(48, 40)
        prog = native.Program()
        side = prog.beside()
        side.gemm(view(d), True, view(a), False, view(dw))
        if dtype == torch.bfloat16:
            side.widen(view(dw), dw_wide.numpy())
        prog.gemm(view(d), False, view(w), False, view(da))
        prog.join()
        prog.run(threads)
        results.append((dw.clone(), da.clone()))
        dw.zero_()
        prog.run(threads)  # nothing left to run
        assert not dw.any()
    for dw, da in results:
        assert torch.equal(dw.view(torch.int16) if dtype == torch.bfloat16 else dw,
                           torch.mm(d.t(), a).view(torch.int16) if dtype == torch.bfloat16 else torch.mm(d.t(), a))
        assert torch.equal(da.float(), torch.mm(d, w).float())


def test_a_program_holds_the_arrays_it_was_given():
    """Arrays recorded into a program stay alive until it has run, though the caller dropped them."""
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(30, 20, generator=gen), torch.randn(20, 10, generator=gen)
    out = torch.empty(30, 10)
    prog = native.Program()
    prog.gemm(a.clone().numpy(), False, b.clone().numpy(), False, out.numpy())
    gc.collect()
    torch.randn(30, 20).fill_(7.0)  # reuse freed memory, if any was freed
    prog.run()
    assert torch.equal(out, torch.mm(a, b))


def test_programs_reject_bad_inputs_when_recorded():
    prog = native.Program()
    f32 = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="do not chain"):
        prog.gemm(f32, False, np.zeros((4, 5), np.float32), False, np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match=r"out has shape \(4, 4\), expected \(4, 5\)"):
        prog.gemm(f32, False, np.zeros((3, 5), np.float32), False, np.zeros((4, 4), np.float32))
    with pytest.raises(TypeError, match="must all be float32 or all bfloat16"):
        prog.gemm(f32, False, np.zeros((3, 5), np.int16), False, np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="b must be C-contiguous"):
        prog.gemm(np.zeros((4, 3), np.int16), False, np.zeros((5, 3), np.int16).T, False, np.zeros((4, 5), np.int16))
    with pytest.raises(ValueError, match="a must be 2-D"):
        prog.gemm(np.zeros(4, np.int16), False, np.zeros((4, 5), np.int16), False, np.zeros((1, 5), np.int16))
    with pytest.raises(ValueError, match="out must be writable"):
        readonly = np.zeros((4, 5), np.float32)
        readonly.flags.writeable = False
        prog.gemm(f32, False, np.zeros((3, 5), np.float32), False, readonly)
    with pytest.raises(TypeError, match="b must be an array, not None"):
        prog.gemm(f32, False, None, False, f32)
    with pytest.raises(ValueError, match=r"low has shape \(4, 4\), expected \(4, 3\)"):
        prog.narrow(f32, np.zeros((4, 4), np.int16))
    with pytest.raises(ValueError, match=r"b has shape"):
        prog.concat(np.zeros((4, 5), np.float32), f32, np.zeros((4, 3), np.float32))
    side = prog.beside()
    with pytest.raises(RuntimeError, match="not joined yet"):
        prog.beside()
    with pytest.raises(RuntimeError, match="beside program is not joined"):
        prog.run()
    side.narrow(f32, np.zeros((4, 3), np.int16))
    prog.join()
    with pytest.raises(RuntimeError, match="this beside program is joined"):
        side.narrow(f32, np.zeros((4, 3), np.int16))
    with pytest.raises(RuntimeError, match="no beside program to join"):
        prog.join()
    side = prog.beside()
    side.beside()  # a beside program of the beside program, left open
    with pytest.raises(RuntimeError, match="beside program's own beside program is not joined"):
        prog.join()
    side.join()
    prog.join()
    assert prog.run(2) == []  # nothing recorded failed: the program still runs


@pytest.mark.skipif(bf16_unsupported("cpu") is not None, reason=f"no bfloat16 GEMMs here: {bf16_unsupported('cpu')}")
@pytest.mark.parametrize("algo", ["dqn", "ddpg", "td3", "sac"])
def test_a_bfloat16_learner_resumed_from_its_state_gives_the_run_s_bits(algo):
    """A fused bfloat16 step refreshes each bfloat16 weight copy where its weights change, not every copy at
    each step's start; a learner that loads a state (after steps of its own on other weights) refreshes them
    all again, so it continues with the bits of the run the state came from."""
    from pearl_fpga.algos import make_learner
    from pearl_fpga.algos.common import Batch
    from pearl_fpga.bench.learner import synthetic_batch
    from pearl_fpga.config import TrainConfig

    cfg = TrainConfig.from_dict({**TrainConfig.preset(algo, None).to_dict(), "net_arch": [40, 32],
                                 "update_schedule": "concurrent"})
    obs, act = (4, 2) if algo == "dqn" else (3, 1)
    run = make_learner(cfg, obs, act, device="cpu-bf16", seed=0)
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(8):
        data = synthetic_batch(algo, obs, 32)
        data = {k: v + rng.normal(size=v.shape).astype(v.dtype) if v.dtype == np.float32 else v for k, v in data.items()}
        batches.append(Batch(**data).to_torch(run.device, discrete=algo == "dqn"))
    for batch in batches[:4]:
        run.update(batch)
    state = copy.deepcopy(run.state_dict())
    resumed = make_learner(cfg, obs, act, device="cpu-bf16", seed=5)
    resumed.update(batches[0])  # its copies made from other weights
    resumed.load_state_dict(state)
    for batch in batches[4:]:
        assert float(run.update(batch)[0]) == float(resumed.update(batch)[0])
    for x, y in zip(run.policy_module.state_dict().values(), resumed.policy_module.state_dict().values(), strict=True):
        assert torch.equal(x, y)


def test_piece_timing_counts_each_piece_run_while_on_and_forgets_what_it_returned():
    """time_pieces (bench learner --profile): each piece a program records or a module function runs while it is on,
    by name, with its calls and seconds; GEMMs left to torch's profiler; nothing counted once it is off."""
    src, low = np.ones((8, 4), np.float32), np.zeros((8, 4), np.int16)
    a, b, out = np.ones((8, 4), np.float32), np.ones((4, 3), np.float32), np.zeros((8, 3), np.float32)
    assert isinstance(native.time_pieces(True), dict)  # earlier times forgotten
    prog = native.Program()
    prog.narrow(src, low)
    prog.narrow(src, low)
    prog.gemm(a, False, b, False, out)
    prog.run()
    native.bias_grad(np.ones((8, 3), np.float32), np.zeros(3, np.float32))
    times = native.time_pieces(False)
    assert set(times) == {"narrow", "bias_grad"} and times["narrow"][0] == 2 and times["bias_grad"][0] == 1
    assert all(seconds >= 0.0 for _, seconds in times.values())
    np.testing.assert_array_equal(out, np.full((8, 3), 4.0, np.float32))  # timing changes nothing it runs
    prog.narrow(src, low)
    prog.run()
    assert native.time_pieces(False) == {}
