"""The replay kernel's numbers and stream words (hls/replay/SPEC.md), shared by every backend and driver.

Host-side conversions live here so that all backends receive identical integers: float priorities to
Q16.16 words, stratified sampling targets, and the 128-bit command/response words of the AXI streams.
"""

from __future__ import annotations

import numpy as np

from pearl_fpga.spec.descriptor import descriptor

_KERNEL = descriptor("replay")  # hls/replay/kernel.json
FRAC_BITS = 16
PRIORITY_SCALE = float(1 << FRAC_BITS)
PRIORITY_MAX = (1 << 32) - 1
FANOUTS: tuple[int, ...] = _KERNEL.parameter("fanout").choices or ()
MAX_CAPACITY = _KERNEL.parameter("capacity").max
MAX_BATCH = _KERNEL.parameter("max_batch").max

OP_UPDATE = 0x01
OP_SAMPLE = 0x02
OP_TOTAL = 0x03
OP_IDENTITY = 0x05  # answers the synthesized capacity (value) and fan-out (index): hosts without register reads
OP_CLEAR = 0x04

# AXI4-Lite register map (byte offsets)
REG_CTRL = 0x00
REG_GIE = 0x04
REG_IER = 0x08
REG_ISR = 0x0C
REG_N_CMDS = 0x10
REG_CAPACITY = 0x18
REG_FANOUT = 0x20
REG_TOTAL_LO = 0x28
REG_TOTAL_HI = 0x2C


def tree_depth(capacity: int, fanout: int) -> int:
    """Levels below the root: ceil(log_K(capacity)), at least 1 (computed in integers)."""
    depth, span = 1, fanout
    while span < capacity:
        depth += 1
        span *= fanout
    return depth


RTL_LEVEL_CYCLES = 8
"""Sample cycles per tree level of the reference RTL (replay_level: block-RAM read, its output
register, four prefix stages, the comparisons, the selection; hls/replay/SPEC.md)."""


def batch_cycle_bound(batch: int, depth: int) -> int:
    """SPEC.md's bound: B samples (or B updates) complete in at most B + 8 * DEPTH + 16 cycles."""
    return batch + RTL_LEVEL_CYCLES * depth + 16


def priorities_to_fixed(priorities: np.ndarray) -> tuple[np.ndarray, int]:
    """Float priorities to Q16.16 words: returns (words as uint32, how many saturated).

    Raises ValueError for NaN, negative or infinite values (naming the first offending position).
    A positive priority never rounds to 0 (minimum one LSB, 2^-16).
    """
    p = np.asarray(priorities, dtype=np.float64)
    bad = ~np.isfinite(p) | (p < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"priority at position {i} is {p.flat[i]!r}: priorities must be finite and >= 0 "
            "(check the TD errors for NaN/inf before updating)"
        )
    scaled = np.floor(p * PRIORITY_SCALE + 0.5)
    saturated = int(np.count_nonzero(scaled > PRIORITY_MAX))
    words = np.clip(scaled, 0, PRIORITY_MAX)
    words = np.where((p > 0) & (words < 1), 1, words)
    return words.astype(np.uint32), saturated


def fixed_to_priorities(words: np.ndarray) -> np.ndarray:
    return np.asarray(words, dtype=np.float64) / PRIORITY_SCALE


def stratified_targets(total: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """B targets in [0, total): one per equal segment, offset drawn from `rng` (SPEC.md, "Targets")."""
    if total <= 0:
        raise ValueError("cannot sample: every priority in the tree is 0 (add transitions or update priorities first)")
    u = rng.random(batch_size)
    t = np.floor((np.arange(batch_size) + u) * (total / batch_size))
    return np.minimum(t, float(total - 1)).astype(np.uint64)


def encode_commands(
    opcodes: np.ndarray, indices: np.ndarray, values: np.ndarray
) -> np.ndarray:
    """Command words as an (N, 2) uint64 array: column 0 = bits [63:0], column 1 = bits [127:64]."""
    n = len(opcodes)
    words = np.zeros((n, 2), dtype=np.uint64)
    words[:, 0] = np.asarray(values, dtype=np.uint64)
    words[:, 1] = (np.asarray(opcodes, dtype=np.uint64) << np.uint64(56)) | np.asarray(indices, dtype=np.uint64)
    return words


def identity_word(capacity: int, fanout: int) -> np.ndarray:
    """The response to IDENTITY (SPEC.md): [63:0] capacity, [95:64] fan-out, [127:120] 0x05, as a (1, 2)
    uint64 word, low 64 bits first."""
    return np.array([[int(capacity), int(fanout) | OP_IDENTITY << 56]], dtype=np.uint64)


def decode_responses(words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, 2) uint64 response words -> (opcodes, indices, values)."""
    words = np.asarray(words, dtype=np.uint64).reshape(-1, 2)
    opcodes = (words[:, 1] >> np.uint64(56)).astype(np.uint8)
    indices = (words[:, 1] & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return opcodes, indices, words[:, 0]
