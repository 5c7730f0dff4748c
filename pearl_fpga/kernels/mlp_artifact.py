"""The quantized policy as files that need no torch: what `pearl-fpga export` writes and `MLPInfer.load`
reads on a board.

A policy directory holds two files:

- `policy.npz`: the kernel's integers, one `w<l>` (int16, (m_out, n_in)) and one `b<l>` (int32, (m_out,))
  per linear layer, saved without pickle;
- `policy.json`: the manifest: format and version, the MLP kernel's interface version, the head, per
  layer its shape, ReLU flag and fixed-point formats (fractional bits of weights, inputs and outputs,
  and the accumulator's shift), the action rule of `act()` (ACTION_RULES) and the bounds it scales
  to, the SHA-256 and size
  of policy.npz, and `info` (where the policy came from: run, algorithm, env, steps, its error against
  the float network).

Reading checks everything before any backend sees it: the manifest's schema and types, the digest of
the weights, the archive's members, dtypes and shapes against the manifest, the chain of formats, and
the kernel's LOAD rules (spec.mlp.check_layers). Any problem is an ArtifactError naming the file, the
field and the fix; nothing a user loads executes code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.errors import ArtifactError, CheckpointError
from pearl_fpga.kernels.mlp_torch import LayerFormat
from pearl_fpga.safe_io import load_npz, read_bytes, read_json
from pearl_fpga.spec.mlp import (CPU_MAX_WIDTH, HEAD_RAW, HEAD_TANH, MAX_LAYERS, MAX_SHIFT, TANH_FRAC_BITS,
                                 QuantizedLayer, check_layers)
from pearl_fpga.spec.descriptor import descriptor

ARTIFACT_FORMAT = "pearl_fpga-mlp-policy"
ARTIFACT_VERSION = 1
MANIFEST_FILE = "policy.json"
WEIGHTS_FILE = "policy.npz"
FRAC_RANGE = (-64, 64)
"""Fractional bits a format may carry in a manifest (the quantizer chooses within -16..30, shifted by at most MAX_SHIFT)."""
ACTION_RULES = {
    "argmax": "the index of the largest output (DQN's greedy action; a raw head)",
    "scaled-tanh": "the tanh head's outputs scaled to the action bounds (DDPG, TD3)",
    "tanh-mean": "tanh of the first half of the raw outputs (a Gaussian's mean), scaled to the bounds (a squashed Gaussian policy)",
}
"""How `MLPInfer.act` turns a loaded policy's outputs into actions."""
MAX_WEIGHTS_BYTES = MAX_LAYERS * (CPU_MAX_WIDTH * CPU_MAX_WIDTH * 2 + CPU_MAX_WIDTH * 4) + (1 << 20)
"""Largest policy.npz a kernel-sized network gives (int16 weights, int32 biases, zip headers)."""


@dataclass(frozen=True)
class PolicyArtifact:
    """A quantized policy as read from (or about to be written to) a policy directory."""

    layers: list[QuantizedLayer]
    formats: list[LayerFormat]
    head: str
    action_low: np.ndarray  # float64 (action size,): what act() maps -1 to (rules scaled-tanh, tanh-mean)
    action_high: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)
    action: str = ""  # one of ACTION_RULES; "" = the head's own (raw: argmax, tanh: scaled-tanh)

    @property
    def action_rule(self) -> str:
        return self.action or default_action(self.head)


def default_action(head: str) -> str:
    """The action rule of a kernel head when none is given: argmax for raw, scaled-tanh for tanh."""
    return "argmax" if head == HEAD_RAW else "scaled-tanh"


def action_size(rule: str, n_out: int) -> int:
    """How many action dimensions (bounds) a rule gives from `n_out` outputs."""
    return n_out // 2 if rule == "tanh-mean" else n_out


def interface_version() -> int:
    """The MLP kernel's interface version (hls/mlp/kernel.json): a policy records the one it was made for."""
    return int(descriptor("mlp").interface_version)


def write_artifact(directory: str | os.PathLike[str], artifact: PolicyArtifact) -> Path:
    """Write `artifact` as `directory`/policy.npz and policy.json (the manifest last, so that a directory
    with a manifest is complete); read it back and compare before returning the directory."""
    directory = Path(directory)
    _check(artifact, f"the policy for {directory}")
    directory.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {}
    for i, layer in enumerate(artifact.layers):
        arrays[f"w{i}"] = np.ascontiguousarray(layer.weight, dtype=np.int16)
        arrays[f"b{i}"] = np.ascontiguousarray(layer.bias, dtype=np.int32)
    weights = directory / WEIGHTS_FILE
    with open(weights, "wb") as fh:
        np.savez(fh, **arrays)
    data = weights.read_bytes()
    manifest = {
        "format": ARTIFACT_FORMAT, "version": ARTIFACT_VERSION, "kernel": "mlp",
        "interface_version": interface_version(), "head": artifact.head, "action": artifact.action_rule,
        "layers": [{"n_in": layer.n_in, "m_out": layer.m_out, "relu": bool(layer.relu), "fw": f.fw,
                    "fa_in": f.fa_in, "fa_out": f.fa_out, "shift": int(layer.shift)}
                   for layer, f in zip(artifact.layers, artifact.formats, strict=True)],
        "action_low": [float(v) for v in artifact.action_low],
        "action_high": [float(v) for v in artifact.action_high],
        "weights": {"file": WEIGHTS_FILE, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)},
        "info": artifact.info,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (directory / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n")
    back = read_artifact(directory)
    if any(not (np.array_equal(a.weight, b.weight) and np.array_equal(a.bias, b.bias))
           for a, b in zip(back.layers, artifact.layers, strict=True)):
        raise ArtifactError(f"the policy written to {directory} reads back differently; check the disk")
    return directory


def read_artifact(directory: str | os.PathLike[str]) -> PolicyArtifact:
    """The validated policy of a directory written by `write_artifact` (or its policy.json)."""
    path = Path(directory)
    if path.name == MANIFEST_FILE and not path.is_dir():
        path = path.parent
    manifest_path = path / MANIFEST_FILE
    where = f"policy {manifest_path}"
    try:
        manifest = read_json(manifest_path, "policy manifest", error=ArtifactError)
    except FileNotFoundError:
        raise ArtifactError(f"{path} holds no {MANIFEST_FILE}: pass the directory `pearl-fpga export RUN --out DIR` "
                            "wrote (its kernel/ folder)") from None
    except ValueError as exc:
        raise ArtifactError(str(exc)) from None
    m = _Fields(manifest, where)
    if m.get("format", str) != ARTIFACT_FORMAT:
        raise ArtifactError(f"{where}: format is {manifest.get('format')!r}, not {ARTIFACT_FORMAT!r}; it is not a "
                            "policy that pearl-fpga export wrote")
    version = m.get("version", int)
    if version != ARTIFACT_VERSION:
        raise ArtifactError(f"{where}: version {version} is not the {ARTIFACT_VERSION} this pearl_fpga reads; export "
                            "the run again with this version, or install the pearl_fpga that wrote it")
    if m.get("kernel", str) != "mlp":
        raise ArtifactError(f"{where}: kernel {manifest['kernel']!r} is not 'mlp'")
    if m.get("interface_version", int) != interface_version():
        raise ArtifactError(f"{where}: made for the MLP kernel's interface version {manifest['interface_version']}, "
                            f"this pearl_fpga has {interface_version()}; export the run again with this version")
    head = m.get("head", str)
    if head not in (HEAD_RAW, HEAD_TANH):
        raise ArtifactError(f"{where}: head {head!r} is neither {HEAD_RAW!r} nor {HEAD_TANH!r}")
    entries = m.get("layers", list)
    if not 1 <= len(entries) <= MAX_LAYERS:
        raise ArtifactError(f"{where}: {len(entries)} layers; the kernel holds 1 to {MAX_LAYERS}")
    specs = [_Fields(e, f"{where}, layer {i}") for i, e in enumerate(entries)]
    shapes = [(s.get("n_in", int), s.get("m_out", int)) for s in specs]
    for i, (n, mo) in enumerate(shapes):
        if not (1 <= n <= CPU_MAX_WIDTH and 1 <= mo <= CPU_MAX_WIDTH):
            raise ArtifactError(f"{where}, layer {i}: shape {mo}x{n} is outside the kernel's 1..{CPU_MAX_WIDTH}")
    weights_info = _Fields(m.get("weights", dict), f"{where}, weights")
    if weights_info.get("file", str) != WEIGHTS_FILE:
        raise ArtifactError(f"{where}: weights.file must be {WEIGHTS_FILE!r}")
    arrays = _read_weights(path / WEIGHTS_FILE, weights_info, shapes)
    layers: list[QuantizedLayer] = []
    formats: list[LayerFormat] = []
    for i, s in enumerate(specs):
        fw, fa_in, fa_out, shift = (s.get(k, int) for k in ("fw", "fa_in", "fa_out", "shift"))
        if not all(FRAC_RANGE[0] <= v <= FRAC_RANGE[1] for v in (fw, fa_in, fa_out)):
            raise ArtifactError(f"{where}, layer {i}: fractional bits outside {FRAC_RANGE[0]}..{FRAC_RANGE[1]}")
        if shift != fw + fa_in - fa_out or not 0 <= shift <= MAX_SHIFT:
            raise ArtifactError(f"{where}, layer {i}: shift {shift} is not fw + fa_in - fa_out = {fw + fa_in - fa_out} "
                                f"in 0..{MAX_SHIFT}")
        if i > 0 and fa_in != formats[-1].fa_out:
            raise ArtifactError(f"{where}, layer {i}: its input format Q.{fa_in} is not layer {i - 1}'s output "
                                f"Q.{formats[-1].fa_out}")
        formats.append(LayerFormat(fw=fw, fa_in=fa_in, fa_out=fa_out))
        layers.append(QuantizedLayer(arrays[f"w{i}"], arrays[f"b{i}"], shift, s.get("relu", bool)))
    if head == HEAD_TANH and formats[-1].fa_out != TANH_FRAC_BITS:
        raise ArtifactError(f"{where}: a tanh head's last layer outputs Q.{TANH_FRAC_BITS}, not Q.{formats[-1].fa_out}")
    try:
        check_layers(layers, head, MAX_LAYERS, CPU_MAX_WIDTH)
    except ValueError as exc:
        raise ArtifactError(f"{where}: {exc}") from None
    n_out = shapes[-1][1]
    rule = m.get("action", str)
    _check_rule(rule, head, n_out, where)
    low = _bounds(m.get("action_low", list), action_size(rule, n_out), f"{where}, action_low")
    high = _bounds(m.get("action_high", list), action_size(rule, n_out), f"{where}, action_high")
    if not np.all(low < high):
        raise ArtifactError(f"{where}: action_low must be below action_high in every dimension")
    return PolicyArtifact(layers, formats, head, low, high, m.get("info", dict), rule)


def _check_rule(rule: str, head: str, n_out: int, where: str) -> None:
    if rule not in ACTION_RULES:
        raise ArtifactError(f"{where}: action rule {rule!r} is not one of {', '.join(ACTION_RULES)}")
    need = HEAD_TANH if rule == "scaled-tanh" else HEAD_RAW
    if head != need or (rule == "tanh-mean" and n_out % 2):
        raise ArtifactError(f"{where}: action rule {rule!r} needs a {need} head"
                            + (" with an even number of outputs (mean, log std)" if rule == "tanh-mean" else "")
                            + f", the policy has a {head} head with {n_out} outputs")


def _read_weights(path: Path, info: _Fields, shapes: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    size = info.get("bytes", int)
    if not 0 < size <= MAX_WEIGHTS_BYTES:
        raise ArtifactError(f"{path}: the manifest gives {size:,} bytes; a kernel-sized policy has at most "
                            f"{MAX_WEIGHTS_BYTES:,}")
    try:
        data = read_bytes(path, "policy weights", MAX_WEIGHTS_BYTES, ArtifactError)
    except FileNotFoundError:
        raise ArtifactError(f"{path} is missing: copy the whole policy directory (policy.json and policy.npz)") from None
    except ValueError as exc:
        raise ArtifactError(str(exc)) from None
    if len(data) != size or hashlib.sha256(data).hexdigest() != info.get("sha256", str):
        raise ArtifactError(f"{path} does not match its manifest (size or SHA-256 differ): it is truncated or changed; "
                            "copy it again from the export")
    keys = [f"{p}{i}" for i in range(len(shapes)) for p in ("w", "b")]
    try:
        arrays = load_npz(path, "policy weights", keys, "export the run again",
                          max_member_bytes=CPU_MAX_WIDTH * CPU_MAX_WIDTH * 2 + 4096)
    except CheckpointError as exc:
        raise ArtifactError(str(exc)) from None
    for i, (n, m) in enumerate(shapes):
        for key, dtype, shape in ((f"w{i}", np.int16, (m, n)), (f"b{i}", np.int32, (m,))):
            a = arrays.get(key)
            if a is None or a.dtype != dtype or a.shape != shape:
                got = "missing" if a is None else f"{a.dtype} {a.shape}"
                raise ArtifactError(f"{path}: {key} must be {np.dtype(dtype).name} {shape} as the manifest says, got {got}")
    return arrays


def _bounds(values: list[Any], n: int, where: str) -> np.ndarray:
    if len(values) != n or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                   for v in values):
        raise ArtifactError(f"{where}: must be {n} finite numbers")
    return np.asarray(values, dtype=np.float64)


def _check(artifact: PolicyArtifact, where: str) -> None:
    if len(artifact.formats) != len(artifact.layers):
        raise ArtifactError(f"{where}: {len(artifact.formats)} formats for {len(artifact.layers)} layers")
    n_out = int(artifact.layers[-1].weight.shape[0]) if artifact.layers else 0
    _check_rule(artifact.action_rule, artifact.head, n_out, where)
    size = action_size(artifact.action_rule, n_out)
    if artifact.action_low.shape != (size,) or artifact.action_high.shape != (size,):
        raise ArtifactError(f"{where}: action bounds must have {size} values for the rule {artifact.action_rule!r}")
    try:
        check_layers(artifact.layers, artifact.head, MAX_LAYERS, CPU_MAX_WIDTH)
        json.dumps(artifact.info, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"{where}: {exc}") from None


class _Fields:
    """Typed access to one JSON object of a manifest: a missing field or a wrong type is an ArtifactError."""

    def __init__(self, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            raise ArtifactError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        self.obj, self.where = obj, where

    def get(self, key: str, kind: type) -> Any:
        if key not in self.obj:
            raise ArtifactError(f"{self.where}: field {key!r} is missing; export the run again")
        value = self.obj[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            raise ArtifactError(f"{self.where}: field {key!r} must be {kind.__name__}, got {type(value).__name__}")
        return value

