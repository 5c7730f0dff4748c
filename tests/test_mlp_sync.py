"""Weight syncs (MLPInfer.load_weights): the fast path (skipped calibration passes, native weight
quantization) gives formats, integers and backend outputs bit-identical to the reference quantizer
(a calibration pass on every sync, numpy quantization), on random and adversarial weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from pearl_fpga.kernels import MLPInfer
from pearl_fpga.kernels.mlp import make_backend
from pearl_fpga.kernels import mlp_torch
from pearl_fpga.kernels.mlp_torch import INT32_MAX, CalibrationPass, choose_formats, parse, quantize
from pearl_fpga.spec.mlp import INT16_MAX, INT16_MIN, QuantizedLayer

BACKENDS = ["numpy", "cpu"]


def mlp(widths: list[int], tanh: bool, seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for n, m in zip(widths[:-1], widths[1:]):
        mods += [nn.Linear(n, m), nn.ReLU()]
    return nn.Sequential(*(mods[:-1] + ([nn.Tanh()] if tanh else [])))


def reference_layers(net: nn.Sequential, calib: np.ndarray, previous):
    """The reference quantizer: a calibration pass on every sync, numpy round-half-up and saturation."""
    parsed = parse(net)
    formats, _ = choose_formats(parsed, calib, previous)
    layers = [(quantize(w, f.fw, INT16_MIN, INT16_MAX).astype(np.int16),
               quantize(b, f.fw + f.fa_in, -INT32_MAX - 1, INT32_MAX).astype(np.int32))
              for w, b, f in zip(parsed.weights, parsed.biases, formats)]
    return formats, layers


def perturb(net: nn.Sequential, rng: np.random.Generator, scale: float) -> None:
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.as_tensor(rng.standard_normal(p.shape) * scale * float(p.abs().max() + 1e-3),
                                   dtype=p.dtype))


def assert_same(policy: MLPInfer, formats, layers, calib: np.ndarray) -> None:
    assert policy.formats == formats
    for got, (w, b) in zip(policy.layers, layers):
        np.testing.assert_array_equal(got.weight, w)
        np.testing.assert_array_equal(got.bias, b)
        assert got.weight.dtype == np.int16 and got.bias.dtype == np.int32
    reference = MLPInfer()  # the reference integers on the numpy backend
    reference.backend = make_backend("numpy")
    reference._load_layers([QuantizedLayer(w, b, f.shift, layer.relu)
                            for (w, b), f, layer in zip(layers, formats, policy.layers)], formats, policy.head)
    np.testing.assert_array_equal(policy(calib), reference(calib))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("tanh", [False, True])
def test_syncs_match_the_reference_quantizer_and_skip_passes(backend, tanh, monkeypatch):
    rng = np.random.default_rng(7)
    widths = [3, 64, 48, 2]
    net = mlp(widths, tanh, seed=1)
    calib = (rng.standard_normal((256, 3)) * 4).astype(np.float32)
    policy = MLPInfer.from_torch(net, backend=backend, calibration=calib)
    passes: list[int] = []
    run = CalibrationPass.run.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(CalibrationPass, "run", classmethod(lambda cls, n, c: passes.append(1) or run(cls, n, c)))
    previous = policy.formats
    synced_passes: list[int] = []
    # learner-like drift (small steps), then jumps that must widen formats, then shrinking weights
    for scale in [1e-4] * 12 + [0.0] * 3 + [0.5, 2.0, 1e-3, 8.0] + [-0.3] * 3:
        if scale < 0:
            with torch.no_grad():
                for p in net.parameters():
                    p.mul_(0.5)
        else:
            perturb(net, rng, scale)
        try:
            formats, layers = reference_layers(net, calib, previous)
        except ValueError as exc:  # a tanh head the kernel cannot reach: refused alike, nothing changes
            with pytest.raises(ValueError, match=str(exc)[:30]):
                policy.load_weights(net)
            synced_passes.append(1)
            continue
        before = len(passes)
        policy.load_weights(net)
        synced_passes.append(len(passes) - before)
        assert_same(policy, formats, layers, calib)
        previous = formats
    assert sum(synced_passes[:15]) <= 2  # learner-like drift: (nearly) every pass skipped
    assert sum(synced_passes[15:19]) >= 1  # the jumps widen formats: they ran one


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), scale=st.sampled_from([0.0, 1e-12, 1e-6, 1e-3, 0.1, 1.0, 30.0]),
       magnitude=st.sampled_from([1e-30, 1e-6, 1.0, 1e3, 1e6]), zero_layer=st.booleans())
def test_output_bounds_hold(seed, scale, magnitude, zero_layer):
    """The bound that skips a pass is at least the float32 maximum the pass would find."""
    rng = np.random.default_rng(seed)
    widths = [int(rng.integers(1, 6))] + [int(rng.integers(1, 80)) for _ in range(int(rng.integers(1, 4)))]
    net = mlp(widths, tanh=False, seed=seed % 1000)
    calib = (rng.standard_normal((int(rng.integers(1, 64)), widths[0])) * magnitude).astype(np.float32)
    first, _ = CalibrationPass.run(parse(net), calib)
    perturb(net, rng, scale)
    if zero_layer:
        with torch.no_grad():
            net[0].weight.zero_()
    parsed = parse(net)
    outs = parsed.layer_outputs(calib)
    for native in (True, False):
        for bound, out in zip(first.output_bounds(parsed, native=native), outs):
            assert float(np.max(np.abs(out))) <= bound


@settings(max_examples=40, deadline=None)
@given(frac=st.integers(-16, 30), values=st.lists(
    st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32),
              st.integers(-70000, 70000).map(lambda k: k / 2.0),  # ties at frac 0, 1
              st.sampled_from([0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, 32767.5, -32768.5, 32766.5])),
    min_size=1, max_size=64))
def test_native_quantizer_matches_numpy(frac, values):
    x = np.asarray(values, dtype=np.float64)
    for lo, hi, dtype in ((INT16_MIN, INT16_MAX, np.int16), (-INT32_MAX - 1, INT32_MAX, np.int32)):
        want = quantize(x, frac, lo, hi).astype(dtype)
        got = mlp_torch.quantize_weights(x, frac, dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
        fallback = mlp_torch.quantize_weights(x, frac, dtype, native=False)
        np.testing.assert_array_equal(fallback, want)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_refused_and_nothing_changes(bad):
    net = mlp([3, 16, 1], tanh=True, seed=2)
    calib = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    policy = MLPInfer.from_torch(net, backend="cpu", calibration=calib)
    before = policy(calib)
    with torch.no_grad():
        net[2].weight[0, 3] = bad
    with pytest.raises(ValueError, match="NaN or inf"):
        policy.load_weights(net)
    np.testing.assert_array_equal(policy(calib), before)
