"""Fixed-point MLP inference (hls/mlp/SPEC.md) behind one class, `MLPInfer`, for every backend.

    from pearl_fpga.kernels import MLPInfer
    policy = MLPInfer.from_torch(q_net, backend="cpu", calibration=obs_batch)
    q_values = policy(obs)          # float32 (B, m), like q_net(obs)
    actions = policy.act(obs)       # greedy actions (RAW head) or scaled actions (TANH head)
    policy.load_weights(q_net)      # re-quantize after a learner update
    policy.save("policy/")          # the quantized policy as files that need no torch (kernels.mlp_artifact)
    board = MLPInfer.load("policy/", backend="pynq")  # on a board: bit for bit the same outputs

Which networks: an `nn.Sequential` of Linear layers with ReLU between them (a hidden Linear may
also go without activation) and optionally one final Tanh (the tanh head; otherwise the raw head with
argmax). A wrapper module is accepted when it has an attribute `net` that is such a Sequential, or
when exactly one Sequential is among its sub-modules, and its forward gives the same output as that
Sequential (checked on the calibration batch).

How formats are chosen (per layer l, all int16 with `f` fractional bits, value = q / 2^f):
- inputs: fa_0 from max |calibration obs| with one bit of headroom;
- weights: fw_l, the finest format holding max |W_l| (and the bias in int32 at fw_l + fa_l);
- activations: fa_{l+1} from max |layer output| on the calibration batch (float forward) with one bit
  of headroom; a TANH head's output is fixed at Q3.12;
- the shift fw_l + fa_l - fa_{l+1} is kept in 0..40 (fa_{l+1} lowered, or fw_l coarsened).
`load_weights` keeps every format that still holds the new weights and calibration activations
without saturating, and widens (fewer fractional bits) only those that do not. It skips the float
pass over the calibration batch when a bound from the last pass shows every kept activation format
still holds (mlp_torch.CalibrationPass): the formats are those the pass would have given.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from pearl_fpga.backends import registry
from pearl_fpga.errors import missing_dependency
from pearl_fpga.kernels.mlp_artifact import (PolicyArtifact, action_size, default_action, read_artifact,
                                             write_artifact)
from pearl_fpga.kernels.mlp_torch import (CalibrationPass, LayerFormat, Net, check_wrapper,
                                         choose_formats, describe, find_sequential, parse, quantize, quantize_weights,
                                         torch_forward)
from pearl_fpga.spec.mlp import (
    HEAD_RAW,
    HEAD_TANH,
    INT16_MAX,
    INT16_MIN,
    MAX_BATCH,
    QuantizedLayer,
)



def _check_limits(net: Net, backend: Any) -> None:
    name = getattr(backend, "name", type(backend).__name__)
    if len(net.weights) > backend.max_layers:
        raise ValueError(
            f"the network has {len(net.weights)} linear layers; the {name} backend supports at most "
            f"{backend.max_layers} (MAX_LAYERS)"
        )
    for i, w in enumerate(net.weights):
        for what, size in (("inputs", w.shape[1]), ("outputs", w.shape[0])):
            if size > backend.max_width:
                raise ValueError(
                    f"linear layer {i} has {size} {what}; the {name} backend supports at most "
                    f"{backend.max_width} (MAX_WIDTH)"
                )


def _as_obs(obs: Any, n0: int, max_batch: int) -> tuple[np.ndarray, bool]:
    """Validated float64 (B, n0) observations and whether the input was 1-D."""
    try:
        x = np.asarray(obs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"observations must be a float array of shape (batch, {n0}): {exc}") from exc
    one_d = x.ndim == 1
    if one_d:
        if x.shape[0] != n0:
            raise ValueError(
                f"observation has shape {x.shape}; the network takes {n0} inputs: pass shape ({n0},) or (batch, {n0})"
            )
        x = x[None, :]
    elif x.ndim != 2 or x.shape[1] != n0:
        raise ValueError(
            f"observations have shape {x.shape}; the network takes {n0} inputs: pass shape (batch, {n0}) or ({n0},)"
        )
    if x.shape[0] > max_batch:
        raise ValueError(
            f"batch of {x.shape[0]} observations is over MAX_BATCH = {max_batch}: split it into chunks of at "
            f"most {max_batch}"
        )
    bad = ~np.isfinite(x)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        kind = "NaN" if np.isnan(x[r, c]) else "inf"
        raise ValueError(
            f"observation {r}, input {c} is {kind}: the kernel takes finite observations only (check the "
            "environment or replace non-finite values before calling)"
        )
    return x, one_d


def make_backend(backend: Any) -> Any:
    """A backend instance from its name ("numpy", "cpu", "rtl", "pynq", "xrt", "serial", "auto") or an instance."""
    if not isinstance(backend, str):
        return backend
    return registry.create("mlp", backend)[1]


class MLPInfer:
    """A torch MLP quantized to the kernel's int16 formats and loaded on one backend.

    Build it with `MLPInfer.from_torch`. Calls are bit-identical across backends; `max_error` is the
    largest absolute difference from the float torch network on the calibration batch.
    """

    def __init__(self) -> None:  # use from_torch
        self.backend: Any = None
        self.formats: list[LayerFormat] = []
        self._max_error: float | None = None  # measured on first use after each (re)load
        self._error_reference: Any = None  # snapshot of the float network last loaded
        self.head: str = HEAD_RAW
        self.layers: list[QuantizedLayer] = []
        self._net: Net | None = None
        self._calibration = np.zeros((0, 0))
        self._last_pass: CalibrationPass | None = None
        self._low = np.zeros(0)
        self._high = np.zeros(0)
        self.info: dict[str, Any] = {}  # what a policy read by `load` says of where it came from
        self._action = ""  # a loaded policy's action rule (mlp_artifact.ACTION_RULES); "" = the head's own

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_torch(
        cls,
        module: Any,
        backend: Any = "cpu",
        calibration: Any = None,
        head: str = "auto",
        action_low: Any = None,
        action_high: Any = None,
    ) -> MLPInfer:
        """Quantize `module` (see the module docstring for what it may be) and load it on `backend`.

        calibration: observations (B, n_0) typical of the environment; they set the activation formats
        and `max_error`. head: "auto" (tanh if the network ends in Tanh, else raw), "raw" or "tanh" (a
        check). action_low/high: bounds that `.act` maps the tanh head to (scalars or (m,) arrays;
        default -1 and 1).
        """
        if head not in ("auto", HEAD_RAW, HEAD_TANH):
            raise ValueError(f"head must be 'auto', 'raw' or 'tanh', not {head!r}")
        _require_torch("MLPInfer.from_torch")
        seq = find_sequential(module)
        net = parse(seq)
        if head != "auto" and head != net.head:
            raise ValueError(
                f"head={head!r} but the network {'ends in Tanh' if net.head == HEAD_TANH else 'has no final Tanh'}: "
                f"use head={net.head!r} or 'auto'"
            )
        self = cls()
        self.backend = make_backend(backend)
        _check_limits(net, self.backend)
        n0 = net.weights[0].shape[1]
        if calibration is None:
            raise ValueError(
                f"a calibration batch is needed to choose activation formats: pass calibration= observations of "
                f"shape (batch, {n0}) typical of the environment"
            )
        calib, _ = _as_obs(calibration, n0, max_batch=np.iinfo(np.int64).max)
        if calib.shape[0] == 0:
            raise ValueError("the calibration batch is empty")
        if module is not seq:
            check_wrapper(module, seq, calib)
        m = net.weights[-1].shape[0]
        self._low, self._high = _bounds(action_low, action_high, m)
        formats, last_pass = choose_formats(net, calib, previous=None)
        self._install(net, formats, calib, module, last_pass)
        return self

    def load_weights(self, module: Any) -> None:
        """Re-quantize from `module` (same architecture) and load; formats kept unless they would saturate.

        Raises ValueError (nothing changes) when the architecture differs or the kernel rejects it.
        """
        if self._net is None:
            raise ValueError("MLPInfer is not initialized from a torch network: build it with MLPInfer.from_torch "
                             "(a policy read by MLPInfer.load holds no float network to re-quantize from)")
        _require_torch("MLPInfer.load_weights")
        seq = find_sequential(module)
        net = parse(seq)
        if net.shapes() != self._net.shapes() or net.head != self._net.head:
            raise ValueError(
                f"load_weights needs the same architecture: loaded {describe(self._net)}, got {describe(net)}; "
                "build a new MLPInfer with from_torch for a different network"
            )
        formats, last_pass = choose_formats(net, self._calibration, previous=self.formats, last_pass=self._last_pass)
        self._install(net, formats, self._calibration, module, last_pass)

    def _install(self, net: Net, formats: list[LayerFormat], calib: np.ndarray, module: Any,
                 last_pass: CalibrationPass | None) -> None:
        """Quantize, load on the backend (which validates), and only then replace this object's state."""
        layers = []
        for i, (w, b, f) in enumerate(zip(net.weights, net.biases, formats, strict=True)):
            wq = quantize_weights(w, f.fw, np.int16)
            bq = quantize_weights(b, f.fw + f.fa_in, np.int32)
            layers.append(QuantizedLayer(wq, bq, f.shift, net.relu[i]))
        self._load_layers(layers, formats, net.head)
        self._net = net
        self._calibration = calib
        self._last_pass = last_pass
        # max_error is measured when first read (learner syncs reload often and rarely read it), against
        # a copy of the module made once and given `net`'s weights (a copy of the module's) when read
        if self._error_reference is None:
            self._error_reference = copy.deepcopy(module)
        self._max_error = None

    def _load_layers(self, layers: list[QuantizedLayer], formats: list[LayerFormat], head: str) -> None:
        """Load quantized layers on the backend (which validates), then take them as this object's."""
        self.backend.load(layers, head)
        self.layers, self.formats, self.head = layers, formats, head
        fa_in = formats[0].fa_in
        fa_out = formats[-1].fa_out if head == HEAD_RAW else 15
        self._out_scale = 2.0**-fa_out
        if hasattr(self.backend, "infer_float"):
            self.backend.set_io_format(fa_in, fa_out)
            self._forward = self.backend.infer_float
        else:
            self._forward = self._forward_generic

    # ------------------------------------------------------------------ files (no torch)
    def save(self, directory: Any, action_low: Any = None, action_high: Any = None,
             info: dict[str, Any] | None = None, action: str | None = None) -> Any:
        """Write the quantized policy (integers, formats, head, action rule and bounds) to `directory` as
        policy.npz and policy.json (pearl_fpga.kernels.mlp_artifact), which `MLPInfer.load` reads
        without torch on any backend, giving the same bits. action: how the loaded policy's `.act` makes
        actions (mlp_artifact.ACTION_RULES; default this object's: argmax for a raw head, scaled-tanh for
        a tanh head; "tanh-mean" for a squashed Gaussian policy's (mean, log std) outputs). action_low/high: the bounds it
        scales to (default: this object's). `info`: JSON-able facts to keep (where the policy came
        from); `max_error` is added when known. Returns the directory."""
        if not self.layers:
            raise ValueError("MLPInfer holds no policy yet: build it with from_torch or load")
        rule = action or self.action_rule
        size = action_size(rule, self.n_out)
        if action_low is None and action_high is None and len(self._low) == size:
            low, high = self._low, self._high
        else:
            low, high = _bounds(action_low, action_high, size)
        info = dict(info or {})
        error = self.max_error
        if error == error:  # not NaN
            info.setdefault("max_error", error)
        return write_artifact(directory, PolicyArtifact(self.layers, self.formats, self.head, low, high, info, rule))

    @classmethod
    def load(cls, directory: Any, backend: Any = "cpu") -> MLPInfer:
        """The policy that `save` (or `pearl-fpga export`) wrote, on `backend`; needs no torch. Raises
        ArtifactError for a missing, changed or corrupt file, ValueError when the network is larger than
        the backend holds (e.g. a board synthesized with a smaller MAX_WIDTH)."""
        artifact = read_artifact(directory)
        self = cls()
        self.backend = make_backend(backend)
        _check_limits(Net([layer.weight for layer in artifact.layers], [layer.bias for layer in artifact.layers],
                          [layer.relu for layer in artifact.layers], artifact.head), self.backend)
        self._load_layers(artifact.layers, artifact.formats, artifact.head)
        self._low, self._high = artifact.action_low.copy(), artifact.action_high.copy()
        self._action = artifact.action_rule
        error = artifact.info.get("max_error")
        self._max_error = float(error) if isinstance(error, (int, float)) else float("nan")
        self.info = artifact.info
        return self

    @property
    def max_error(self) -> float:
        """Largest absolute difference from the float network on the calibration batch (NaN before
        from_torch); measured on first read after each load. A policy read by `load` reports what its
        file says (NaN if nothing)."""
        if self._net is None:
            return self._max_error if self._max_error is not None else float("nan")
        if self._max_error is None:
            _set_linear_weights(self._error_reference, self._net)
            self._max_error = self._measure_error(self._error_reference, self._calibration)
        return self._max_error

    def _measure_error(self, module: Any, calib: np.ndarray) -> float:
        ref = torch_forward(module, calib)
        got = np.concatenate(
            [self(calib[i : i + self.max_batch]) for i in range(0, calib.shape[0], self.max_batch)]
        ).astype(np.float64)
        return float(np.max(np.abs(got - ref))) if got.size else 0.0

    # ------------------------------------------------------------------ inference
    @property
    def n_in(self) -> int:
        """Observation width n_0."""
        return int(self.layers[0].n_in)

    @property
    def n_out(self) -> int:
        """Output width m (Q-values or action dimensions)."""
        return int(self.layers[-1].m_out)

    @property
    def max_batch(self) -> int:
        """Most observations per call (the backend's MAX_BATCH)."""
        return int(getattr(self.backend, "max_batch", MAX_BATCH))

    @property
    def last_cycles(self) -> int | None:
        """Clock cycles of the last call on a cycle-accurate backend (rtl), else None."""
        return self.backend.last_cycles

    def __call__(self, obs: Any) -> np.ndarray:
        """Network outputs as float32: (B, m) for (B, n_0) observations, (m,) for one (n_0,) observation.

        A raw head returns the dequantized Q-values; a tanh head returns tanh outputs in [-1, 1].
        Raises ValueError for a wrong width, a batch over MAX_BATCH or NaN/inf values.
        """
        return self._forward(obs)

    @property
    def action_rule(self) -> str:
        """How `act` makes actions (mlp_artifact.ACTION_RULES): argmax, scaled-tanh, or tanh-mean (a squashed Gaussian policy)."""
        return self._action or default_action(self.head)

    def act(self, obs: Any) -> Any:
        """Greedy actions (RAW head: argmax, int64 (B,) or an int for one observation) or actions scaled
        to [action_low, action_high] (TANH head: float32 (B, m) or (m,); a loaded squashed Gaussian policy, rule
        tanh-mean: tanh of the first half of the outputs, scaled likewise)."""
        if self.action_rule == "tanh-mean":
            m = len(self._low)
            return self._scale(np.tanh(np.asarray(self._forward(obs), dtype=np.float32)[..., :m]))
        if self.head == HEAD_RAW:
            if hasattr(self.backend, "act_argmax"):
                return self.backend.act_argmax(obs)
            x_q, one_d = self._quantize(obs)
            _, argmax = self.backend.infer(x_q)
            return int(argmax[0]) if one_d else argmax
        return self._scale(self._forward(obs))

    def _scale(self, t: np.ndarray) -> np.ndarray:
        """[-1, 1] -> [action_low, action_high], as Stable-Baselines3's unscale_action (and the Trainer's
        to_env_action), so that an exported policy's actions are the trainer's bit for bit."""
        t = np.asarray(t, dtype=np.float64)
        return (self._low + 0.5 * (t + 1.0) * (self._high - self._low)).astype(np.float32)

    def _quantize(self, obs: Any) -> tuple[np.ndarray, bool]:
        x, one_d = _as_obs(obs, self.n_in, self.max_batch)
        fa = self.formats[0].fa_in
        return quantize(x, fa, INT16_MIN, INT16_MAX).astype(np.int16), one_d

    def _forward_generic(self, obs: Any) -> np.ndarray:
        x_q, one_d = self._quantize(obs)
        out, _ = self.backend.infer(x_q)
        y = (np.asarray(out).astype(np.float64) * self._out_scale).astype(np.float32)
        return y[0] if one_d else y

    def __repr__(self) -> str:
        if not self.layers:
            return "MLPInfer(uninitialized)"
        widths = "-".join(str(w) for w in [self.n_in] + [layer.m_out for layer in self.layers])
        return (
            f"MLPInfer({widths} {self.head} head, backend={getattr(self.backend, 'name', '?')!r}, "
            f"max_error={self.max_error:.3g})"
        )


def _bounds(low: Any, high: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    lo = np.broadcast_to(np.asarray(-1.0 if low is None else low, dtype=np.float64), (m,)).copy()
    hi = np.broadcast_to(np.asarray(1.0 if high is None else high, dtype=np.float64), (m,)).copy()
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)):
        raise ValueError(f"action bounds must be finite with low < high, got low={low!r}, high={high!r}")
    return lo, hi


def _set_linear_weights(module: Any, net: Net) -> None:
    """Write `net`'s weights (float64 copies of a module's, so exact in the module's dtype) into the
    Linear layers of `module`'s Sequential. A wrapper's other state does not reach the output: its
    forward equals the Sequential's (check_wrapper)."""
    import torch
    from torch import nn

    linears = [m for m in find_sequential(module) if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for layer, w, b in zip(linears, net.weights, net.biases, strict=True):
            layer.weight.copy_(torch.from_numpy(w))
            if layer.bias is not None:
                layer.bias.copy_(torch.from_numpy(b))


def _require_torch(what: str) -> None:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise (missing_dependency(exc, what) or exc) from None
