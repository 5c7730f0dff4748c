"""Reusable command sequences for the replay kernel's cross-backend tests.

Every backend must give exactly the numpy reference's leaves, totals and samples for these. To run
another backend through them (e.g. "rtl" in tests/test_replay_rtl.py):

    from replay_cases import CASES, random_ops, adversarial_ops, assert_backends_agree
    assert_backends_agree("rtl", capacity, fanout, random_ops(capacity, seed=1))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pearl_fpga.kernels.replay import ReplaySampler
from pearl_fpga.spec.replay import PRIORITY_MAX

# Backends checked against "numpy" in test_replay_sampler.py; other suites may extend the list.
BACKENDS = ["cpu"]

# (capacity, fanout): fan-outs 2/4/16 (and 8), capacities 1, non-powers of K, exact powers.
CASES = [
    (1, 2),
    (1, 16),
    (2, 2),
    (3, 2),
    (3, 4),
    (16, 4),
    (17, 4),
    (17, 16),
    (64, 8),
    (1000, 2),
    (1000, 4),
    (1000, 16),
    (4096, 16),
]


@dataclass
class Op:
    """One call: "update" (indices + words), "sample" (batch from a seeded generator), "targets"
    (explicit targets), "clear"."""

    kind: str
    indices: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    words: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint32))
    batch: int = 0
    seed: int = 0
    targets: np.ndarray | None = None


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random Q16.16 words with zeros, ones and the maximum mixed in."""
    words = rng.integers(0, 1 << 32, n, dtype=np.uint64) >> rng.integers(0, 33, n).astype(np.uint64)
    special = rng.random(n)
    words[special < 0.15] = 0
    words[(special >= 0.15) & (special < 0.2)] = PRIORITY_MAX
    words[(special >= 0.2) & (special < 0.25)] = 1
    return words.astype(np.uint32)


def random_ops(capacity: int, seed: int, n_ops: int = 24, max_batch: int = 64) -> list[Op]:
    """Random updates (many repeated indices within a batch), samples and an occasional clear."""
    rng = np.random.default_rng(seed)
    ops: list[Op] = []
    for k in range(n_ops):
        roll = rng.random()
        if roll < 0.5:
            n = int(rng.integers(1, max_batch + 1))
            hot = rng.integers(0, capacity, 3)
            indices = np.where(rng.random(n) < 0.3, rng.choice(hot, n), rng.integers(0, capacity, n))
            ops.append(Op("update", indices=indices.astype(np.int64), words=_words(rng, n)))
        elif roll < 0.95:
            ops.append(Op("sample", batch=int(rng.integers(1, max_batch + 1)), seed=seed * 1000 + k))
        else:
            ops.append(Op("clear"))
    return ops


def adversarial_ops(capacity: int) -> list[Op]:
    """Edge cases: a single non-zero leaf at either end, all leaves at the maximum word, zeros between
    non-zeros, a repeated index whose last write is 0, and samples at every leaf boundary."""
    last = capacity - 1
    all_idx = np.arange(capacity, dtype=np.int64)
    ops = [
        Op("update", indices=np.array([last]), words=np.array([1], dtype=np.uint32)),
        Op("sample", batch=8, seed=1),
        Op("update", indices=np.array([last, 0]), words=np.array([0, PRIORITY_MAX], dtype=np.uint32)),
        Op("sample", batch=8, seed=2),
        Op("update", indices=all_idx, words=np.full(capacity, PRIORITY_MAX, dtype=np.uint32)),
        Op("sample", batch=16, seed=3),
        Op("update", indices=all_idx, words=(all_idx % 3 == 1).astype(np.uint32) * 7),
        Op("update", indices=np.array([0, 0, 0]), words=np.array([5, 9, 0], dtype=np.uint32)),
        Op("sample", batch=32, seed=4),
        Op("targets"),  # every leaf boundary: prefix - 1 and prefix, within [0, total)
        Op("clear"),
        Op("update", indices=np.array([last // 2]), words=np.array([3], dtype=np.uint32)),
        Op("targets"),
    ]
    return [op for op in ops if len(op.indices) <= 4096]


def boundary_targets(leaves: np.ndarray) -> np.ndarray:
    """Targets just below and at every prefix sum of the leaves (those inside [0, total))."""
    prefix = np.cumsum(leaves.astype(np.uint64), dtype=np.uint64)
    total = int(prefix[-1])
    t = np.concatenate([prefix.astype(np.int64) - 1, prefix.astype(np.int64), [0, total - 1]])
    t = np.unique(t[(t >= 0) & (t < total)])
    return t[:4096].astype(np.uint64)


def run_ops(sampler: ReplaySampler, ops: list[Op]) -> list[tuple]:
    """Apply ops; record everything observable after each one."""
    trace: list[tuple] = []
    for op in ops:
        if op.kind == "update":
            sampler.update(op.indices, words=op.words)
        elif op.kind == "clear":
            sampler.clear()
        elif sampler.total_fixed == 0:
            trace.append(("empty",))
            continue
        elif op.kind == "sample":
            idx, words = sampler.sample_fixed(op.batch, np.random.default_rng(op.seed))
            trace.append(("sample", idx.tolist(), words.tolist()))
        elif op.kind == "targets":
            targets = op.targets if op.targets is not None else boundary_targets(sampler.leaves())
            idx, words = sampler.sample_targets(targets)
            trace.append(("targets", idx.tolist(), words.tolist()))
        trace.append(("state", sampler.total_fixed, sampler.leaves().tolist()))
    return trace


def assert_backends_agree(backend: str, capacity: int, fanout: int, ops: list[Op], reference: str = "numpy") -> None:
    """`backend` and the reference produce identical traces for ops."""
    ref = run_ops(ReplaySampler(capacity, fanout, backend=reference), ops)
    got_sampler = ReplaySampler(capacity, fanout, backend=backend)
    try:
        got = run_ops(got_sampler, ops)
    finally:
        got_sampler.close()
    assert len(got) == len(ref)
    for step, (a, b) in enumerate(zip(got, ref, strict=True)):
        assert a == b, f"{backend} differs from {reference} at trace step {step}: {str(a)[:200]} vs {str(b)[:200]}"


def check_descent(leaves: np.ndarray, targets: np.ndarray, idx: np.ndarray, words: np.ndarray) -> None:
    """Independent check of the SPEC's descent: prefix[idx-1] <= target < prefix[idx], word > 0."""
    prefix = np.concatenate([[0], np.cumsum(leaves.astype(np.uint64), dtype=np.uint64)])
    t = targets.astype(np.uint64)
    assert (prefix[idx] <= t).all() and (t < prefix[idx + 1]).all()
    assert (words == leaves[idx]).all() and (words > 0).all()
