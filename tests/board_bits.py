"""The board side's results as digests, for comparing two interpreters bit for bit: this host's and a
32-bit ARM Python (a PYNQ-Z2's, armv7l, where numpy's default integer is int32) under qemu-user
(`make test-armhf`). Only numpy and pearl_fpga's Python: the numpy references of the three kernels, an
exported policy loaded with MLPInfer on the numpy backend, and the host-side codecs the board drivers
put on the streams (spec.*).

    python tests/board_bits.py > host.json
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from pearl_fpga.kernels import MLPInfer, ReplaySampler, TabularQ
from pearl_fpga.kernels.mlp_artifact import PolicyArtifact, write_artifact
from pearl_fpga.kernels.mlp_torch import LayerFormat
from pearl_fpga.spec import mlp as mspec
from pearl_fpga.spec import replay as rspec
from pearl_fpga.spec import tabular as tspec


def digest(*arrays: object) -> str:
    """The values (integers as int64, whatever their width) and the arrays' dtypes (not those of Python
    scalars, whose numpy dtype is the platform's int), as one short hash."""
    h = hashlib.sha256()
    for a in arrays:
        x = np.asarray(a)
        h.update(x.dtype.str.encode() if x.ndim else b"scalar")
        h.update(np.ascontiguousarray(x.astype(np.int64) if x.dtype.kind in "iu" and x.dtype.itemsize < 8 else x)
                 .tobytes())
    return h.hexdigest()[:16]


def policy(rng: np.random.Generator, widths: list[int], head: str, rule: str = "") -> PolicyArtifact:
    layers, formats, fa_in = [], [], 10
    for i, (n, m) in enumerate(zip(widths[:-1], widths[1:])):
        last = i == len(widths) - 2
        w = rng.integers(-(1 << 15), 1 << 15, size=(m, n)).astype(np.int16)
        b = rng.integers(-(1 << 31), (1 << 31) - 1, size=m).astype(np.int32)
        fa_out = mspec.TANH_FRAC_BITS if head == mspec.HEAD_TANH and last else 10
        shift = int(rng.integers(10, 26))
        layers.append(mspec.QuantizedLayer(w, b, shift, not last))
        formats.append(LayerFormat(fw=shift + fa_out - fa_in, fa_in=fa_in, fa_out=fa_out))
        fa_in = fa_out
    size = widths[-1] // 2 if rule == "tanh-mean" else widths[-1]
    return PolicyArtifact(layers, formats, head, np.full(size, -2.0), np.full(size, 3.0), {}, rule)


def main() -> int:
    rng = np.random.default_rng(2024)
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, widths, head, rule in (("dqn", [4, 64, 64, 2], "raw", ""), ("ddpg", [3, 256, 1], "tanh", ""),
                                         ("sac", [3, 32, 32, 2], "raw", "tanh-mean"),
                                         ("deep", [8, 40, 17, 9, 5], "raw", "")):
            directory = write_artifact(Path(tmp) / name, policy(rng, widths, head, rule))
            p = MLPInfer.load(directory, backend="numpy")
            obs = np.concatenate([rng.normal(0, 4, size=(120, widths[0])), np.full((2, widths[0]), 1e9),
                                  (rng.integers(-99, 99, size=(6, widths[0])) + 0.5) * 2.0**-10]).astype(np.float32)
            out[f"mlp-{name}"] = digest(p(obs), p.act(obs), p.act(obs[0]))
            out[f"mlp-{name}-load-stream"] = digest(mspec.encode_load_stream(p.layers, p.head))
    for fanout in (4, 16):
        s = ReplaySampler(5000, fanout=fanout, backend="numpy")
        results = []
        for step in range(4):
            idx = rng.integers(0, 5000, 700)
            s.update(idx, rng.exponential(3.0, 700) * (step + 1))
            i, pr = s.sample(256, np.random.default_rng(step))
            results += [i, pr, np.asarray(s.total)]
        words, saturated = rspec.priorities_to_fixed(np.array([1e-9, 0.5, 1.0, 65535.9, 1e12]))
        targets = rspec.stratified_targets((1 << 40) + 12345, 64, np.random.default_rng(7))
        out[f"replay-fanout{fanout}"] = digest(*results, words, np.asarray(saturated), targets)
        n = 50
        out[f"replay-commands{fanout}"] = digest(rspec.encode_commands(
            rng.integers(0, 3, n).astype(np.uint8), rng.integers(0, 1 << 20, n).astype(np.uint32),
            rng.integers(0, 1 << 40, n, dtype=np.int64).astype(np.uint64)))
    q = TabularQ(300, 6, alpha=0.3, gamma=0.97, backend="numpy")
    for _ in range(5):
        n = 500
        q.update(rng.integers(0, 300, n), rng.integers(0, 6, n), rng.normal(0, 50, n).clip(-3e4, 3e4), rng.integers(0, 300, n),
                 rng.random(n) < 0.1)
    out["tabular"] = digest(q.table, q.greedy())
    out["tabular-rewards"] = digest(tspec.reward_words(np.array([-32768.0, -3.25, 0.0, 1e-7, 2.5e4, 32767.99])))
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
