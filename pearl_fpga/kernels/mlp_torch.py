"""From a torch network to the MLP kernel's fixed-point layers: parsing the nn.Sequential (or a wrapper
around one), the float forward pass on the calibration batch, and the per-layer formats (see
pearl_fpga.kernels.mlp for the rules)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.spec.mlp import (
    HEAD_RAW,
    HEAD_TANH,
    INT16_MAX,
    MAX_SHIFT,
    TANH_FRAC_BITS,
)

HEADROOM = 2.0  # activation ranges get one extra integer bit beyond the calibration maximum
FRAC_MIN, FRAC_MAX = -16, 30  # fractional bits considered for any format
INT32_MAX = 2**31 - 1



@dataclass(frozen=True)
class LayerFormat:
    """Fixed-point formats of one linear layer (fractional bits; value = integer / 2**bits)."""

    fw: int
    """weights (int16) and, with fa_in, the bias (int32, fw + fa_in bits)"""
    fa_in: int
    """input activations (int16)"""
    fa_out: int
    """output activations (int16); 12 for a tanh head"""

    @property
    def shift(self) -> int:
        """Right shift of the accumulator: fw + fa_in - fa_out (0..40)."""
        return self.fw + self.fa_in - self.fa_out


def frac_bits(max_abs: float, limit: float = INT16_MAX, headroom: float = 1.0) -> int:
    """Most fractional bits f (FRAC_MIN..FRAC_MAX) with max_abs * headroom * 2**f <= limit."""
    if not math.isfinite(max_abs):
        raise ValueError(f"cannot choose a fixed-point format for a non-finite range ({max_abs})")
    if max_abs <= 0.0:
        return FRAC_MAX
    f = math.floor(math.log2(limit / (max_abs * headroom)))
    while f > FRAC_MIN and max_abs * headroom * 2.0**f > limit:  # guard log2 rounding
        f -= 1
    return int(min(max(f, FRAC_MIN), FRAC_MAX))


def quantize(x: np.ndarray, frac: int, lo: int, hi: int) -> np.ndarray:
    """floor(x * 2**frac + 0.5) clamped to [lo, hi], computed in float64 (SPEC.md rounding), int64."""
    q = np.floor(np.asarray(x, dtype=np.float64) * 2.0**frac + 0.5)
    return np.clip(q, lo, hi).astype(np.int64)


def quantize_weights(x: np.ndarray, frac: int, dtype: type[np.int16] | type[np.int32],
                     native: bool = True) -> np.ndarray:
    """`quantize` to int16 (weights) or int32 (biases) of finite values: the native extension's loop
    (outside the GIL, the same integers) where it is built, else numpy."""
    if native:
        ext = _native_function("quantize_int16" if dtype is np.int16 else "quantize_int32")
        if ext is not None:
            return ext(x, frac)
    info = np.iinfo(dtype)
    return quantize(x, frac, int(info.min), int(info.max)).astype(dtype)


def _native_function(name: str) -> Any:
    """A function of the native extension, or None where it is not built (or is an older build)."""
    try:
        from pearl_fpga import _mlp_native
    except ImportError:
        return None
    return getattr(_mlp_native, name, None)


@dataclass(frozen=True)
class Net:
    """The float network as the kernel sees it."""

    weights: list[np.ndarray]  # float64 (m, n)
    biases: list[np.ndarray]  # float64 (m,)
    relu: list[bool]
    head: str

    def shapes(self) -> list[tuple[int, int, bool]]:
        return [(w.shape[1], w.shape[0], r) for w, r in zip(self.weights, self.relu, strict=True)]

    def layer_outputs(self, x: np.ndarray) -> list[np.ndarray]:
        """Float32 output of every linear layer after its activation (before the tanh of the head): the
        ranges that choose the activation formats (float32 as the network computes; twice as fast as
        float64 for the re-quantization at every learner weight sync)."""
        import torch

        outs = []
        with torch.no_grad():  # torch, not numpy: numpy's BLAS threads crawl on a busy shared machine
            a = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
            for w, b, r in zip(self.weights, self.biases, self.relu, strict=True):
                a = torch.addmm(torch.from_numpy(b).float(), a, torch.from_numpy(w).float().T)
                if r:
                    a = torch.relu(a)
                outs.append(a.numpy())
        return outs


def find_sequential(module: Any) -> Any:
    from torch import nn

    if isinstance(module, nn.Sequential):
        return module
    if not isinstance(module, nn.Module):
        raise TypeError(f"expected a torch nn.Module (an nn.Sequential of Linear/ReLU/Tanh), got {type(module).__name__}")
    net = getattr(module, "net", None)
    if isinstance(net, nn.Sequential):
        return net
    found = [m for m in module.modules() if isinstance(m, nn.Sequential)]
    if len(found) == 1:
        return found[0]
    raise ValueError(
        f"{type(module).__name__} holds {len(found)} nn.Sequential modules and no `net` attribute: pass the "
        "nn.Sequential of Linear/ReLU/Tanh layers itself, or expose it as `module.net`"
    )


def parse(seq: Any) -> Net:
    import torch
    from torch import nn

    mods = list(seq)
    weights, biases, relu = [], [], []
    head = HEAD_RAW
    for i, m in enumerate(mods):
        if isinstance(m, nn.Linear):
            # copies (one each): the Net is the snapshot that later syncs and max_error compare with
            w = m.weight.detach().to("cpu", torch.float64, copy=True).numpy()
            b = (m.bias.detach().to("cpu", torch.float64, copy=True).numpy() if m.bias is not None
                 else np.zeros(w.shape[0]))
            weights.append(w)
            biases.append(b)
            relu.append(False)
        elif isinstance(m, nn.ReLU):
            if not weights or relu[-1]:
                raise ValueError(f"layer {i} (ReLU) must follow a Linear layer")
            relu[-1] = True
        elif isinstance(m, nn.Tanh):
            if i != len(mods) - 1 or not weights or relu[-1]:
                raise ValueError(f"layer {i} (Tanh) is only supported as the last layer, right after a Linear")
            head = HEAD_TANH
        else:
            raise ValueError(
                f"layer {i} ({type(m).__name__}) is not supported: the MLP kernel runs Linear layers with ReLU "
                "between them and an optional final Tanh"
            )
    if not weights:
        raise ValueError("the network has no Linear layer")
    if relu[-1]:
        raise ValueError("the last Linear layer is followed by ReLU: the output head must be raw or Tanh")
    for i in range(1, len(weights)):  # torch would only fail at the first forward, with a shape error
        if weights[i].shape[1] != weights[i - 1].shape[0]:
            raise ValueError(f"Linear layer {i} takes {weights[i].shape[1]} inputs, but the layer before it gives "
                             f"{weights[i - 1].shape[0]} outputs: make each Linear's in_features the previous one's "
                             "out_features")
    return Net(weights, biases, relu, head)


def describe(net: Net) -> str:
    widths = [net.weights[0].shape[1]] + [w.shape[0] for w in net.weights]
    return "-".join(map(str, widths)) + f" {net.head} head"


def torch_forward(module: Any, x: np.ndarray) -> np.ndarray:
    import torch

    param = next(iter(module.parameters()), None)
    dtype = param.dtype if param is not None else torch.float32
    device = param.device if param is not None else "cpu"
    with torch.no_grad():
        out = module(torch.as_tensor(x, dtype=dtype, device=device))
    return out.detach().to("cpu").double().numpy()


def check_wrapper(module: Any, seq: Any, calib: np.ndarray) -> None:
    try:
        a = torch_forward(module, calib[:64])
    except Exception as exc:  # the wrapper's forward takes something else
        raise ValueError(
            f"{type(module).__name__}'s forward cannot be called on observations ({exc}): pass its "
            "nn.Sequential itself"
        ) from exc
    b = torch_forward(seq, calib[:64])
    if a.shape != b.shape or not np.allclose(a, b, rtol=1e-6, atol=1e-6):
        raise ValueError(
            f"{type(module).__name__}'s forward differs from its nn.Sequential (it transforms the output): "
            "pass the nn.Sequential itself (and action_low/action_high for a scaled actor)"
        )


@dataclass(frozen=True)
class CalibrationPass:
    """What the last float forward pass over the calibration batch found: the network it ran and, per
    layer, the largest |output| of each unit (after its ReLU) over the batch. `choose_formats` bounds
    the outputs of changed weights from it, to skip a pass that cannot change the formats."""

    net: Net
    unit_max: list[np.ndarray]  # float64 (m_l,) per layer
    input_max: np.ndarray  # float64 (n_0,): largest |calibration input| per input

    @classmethod
    def run(cls, net: Net, calib: np.ndarray) -> tuple[CalibrationPass, list[np.ndarray]]:
        outs = net.layer_outputs(calib)
        x32 = np.ascontiguousarray(calib, dtype=np.float32)
        unit_max = [np.max(np.abs(a), axis=0).astype(np.float64) if a.size else np.zeros(a.shape[1]) for a in outs]
        input_max = np.max(np.abs(x32), axis=0).astype(np.float64) if x32.size else np.zeros(x32.shape[1])
        return cls(net, unit_max, input_max), outs

    def output_bounds(self, net: Net, native: bool = True) -> list[float]:
        """Per layer, an upper bound of max |output| that `net` (same shapes) would give on the batch.

        The float32 outputs of `net` differ from the recorded ones by at most, per unit (ReLU is
        1-Lipschitz): |W' - W| a + |W'| d + |b' - b| plus the float32 rounding of both passes and of the
        weights, bounded by 4 (n + 4) 2^-24 ((|W'| + |W|)(a + d) + |b'| + |b|) (the dot-product error
        bound gamma_n with margin; |W| <= |W'| + |W' - W| spares a pass over W), where a is the recorded
        largest |input| per unit and d the bound of the previous layer (0 for the calibration inputs,
        which are the same)."""
        ext = _native_function("drift_sums") if native else None
        if ext is not None:
            return self._bounds(net, lambda w_new, w_old, a, d: ext(w_new, w_old, a, d).T)
        return self._bounds(net, _drift_sums_torch)

    def _bounds(self, net: Net, drift_sums: Any) -> list[float]:
        a, d = self.input_max, np.zeros_like(self.input_max)
        bounds = []
        for w_new, b_new, w_old, b_old, out_max in zip(net.weights, net.biases, self.net.weights, self.net.biases,
                                                       self.unit_max, strict=True):
            gamma = 4.0 * (w_new.shape[1] + 4) * 2.0**-24
            dw_a, w_d, w_ad, dw_ad = drift_sums(w_new, w_old, a, d)
            abs_db, abs_b = np.abs(b_new - b_old), np.abs(b_new)
            d = dw_a + w_d + abs_db + gamma * (2.0 * w_ad + dw_ad + 2.0 * abs_b + abs_db)
            bounds.append(float(np.max(out_max + d)) * (1.0 + 2.0**-40) if d.size else 0.0)
            a = out_max
        return bounds


def _drift_sums_torch(w_new: np.ndarray, w_old: np.ndarray, a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The native drift_sums in torch float64 (torch, not numpy: its threads follow the process's
    setting): rows |W'-W| a, |W'| d, |W'| (a+d), |W'-W| (a+d)."""
    import torch

    with torch.no_grad():
        abs_dw = torch.sub(torch.from_numpy(w_new), torch.from_numpy(w_old)).abs_()
        abs_new = torch.from_numpy(w_new).abs()
        a_t, d_t = torch.from_numpy(a), torch.from_numpy(d)
        by_dw, by_new = abs_dw @ torch.stack([a_t, a_t + d_t], dim=1), abs_new @ torch.stack([d_t, a_t + d_t], dim=1)
    return np.stack([by_dw[:, 0].numpy(), by_new[:, 0].numpy(), by_new[:, 1].numpy(), by_dw[:, 1].numpy()])


def choose_formats(net: Net, calib: np.ndarray, previous: Sequence[LayerFormat] | None,
                   last_pass: CalibrationPass | None = None) -> tuple[list[LayerFormat], CalibrationPass | None]:
    """Per-layer formats (module docstring). With `previous`, keep each format that still fits.

    With `last_pass` (the pass over the same `calib` that chose `previous`), the float forward pass
    is skipped when bounds from it show that every kept activation format still holds the outputs:
    the formats are then exactly those the pass would give. Returns the formats and the pass they
    rest on (a new one when it ran, else `last_pass`).
    """

    def pick(max_abs: float, old: int | None) -> int:
        if old is not None and max_abs * 2.0**old <= INT16_MAX:
            return old  # still holds the range: keep (no churn between learner syncs)
        return frac_bits(max_abs, headroom=HEADROOM)

    for i, (w, b) in enumerate(zip(net.weights, net.biases, strict=True)):
        for what, x in (("weights", w), ("bias", b)):
            if not np.isfinite(x).all():  # a NaN would quantize to some integer silently (a tanh head's last bias to 0)
                raise ValueError(f"linear layer {i}'s {what} hold NaN or inf (the network diverged?): the kernel "
                                 "takes finite weights only; load weights from before the divergence")
    head_layer = len(net.weights) - 1 if net.head == HEAD_TANH else -1  # its output format is fixed
    max_out: list[float] | None = None  # largest |output| per layer on the batch, or a bound of it
    if previous and last_pass is not None:
        bounds = last_pass.output_bounds(net)
        if all(bound * 2.0**old.fa_out <= INT16_MAX
               for i, (bound, old) in enumerate(zip(bounds, previous, strict=True)) if i != head_layer):
            max_out = bounds  # pick keeps every old format, as it would with the pass's (smaller) maxima
    if max_out is None:
        last_pass, outs = CalibrationPass.run(net, calib)
        max_out = [float(np.max(np.abs(a))) if a.size else 0.0 for a in outs]
    fa_in = previous[0].fa_in if previous else frac_bits(float(np.max(np.abs(calib))), headroom=HEADROOM)
    formats = []
    n_layers = len(net.weights)
    for i, (w, b, max_a) in enumerate(zip(net.weights, net.biases, max_out, strict=True)):
        old = previous[i] if previous else None
        max_w = float(np.max(np.abs(w))) if w.size else 0.0
        fw_w = frac_bits(max_w)
        max_b = float(np.max(np.abs(b))) if b.size else 0.0
        fw = min(fw_w, frac_bits(max_b, limit=INT32_MAX) - fa_in) if max_b > 0 else fw_w
        if old is not None and old.fw <= fw:
            fw = old.fw
        last = i == n_layers - 1
        if last and net.head == HEAD_TANH:
            fa_out = TANH_FRAC_BITS
        else:
            fa_out = pick(max_a, old.fa_out if old is not None else None)
        shift = fw + fa_in - fa_out
        if shift < 0:
            if last and net.head == HEAD_TANH:
                raise ValueError(
                    f"linear layer {i}: weights up to {max_w:.3g} with inputs in Q.{fa_in} cannot reach the tanh "
                    "head's Q3.12 output (the shift would be negative): scale the network's last layer down"
                )
            fa_out = fw + fa_in
        elif shift > MAX_SHIFT:
            fw -= shift - MAX_SHIFT
        formats.append(LayerFormat(fw=fw, fa_in=fa_in, fa_out=fa_out))
        fa_in = fa_out
    return formats, last_pass
