"""The tabular Q-learning/SARSA kernel's numbers (hls/tabular/SPEC.md), shared by every backend and
driver: the Q16.16 words of alpha, gamma and rewards, the table limits, the integer mean that merges
the tables of the partitioned (SwiftRL) mode, and the IP's register map and 128-bit stream words.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pearl_fpga.spec.descriptor import descriptor

_KERNEL = descriptor("tabular")  # hls/tabular/kernel.json
FRAC_BITS = 16
ONE = 1 << FRAC_BITS  # 1.0 in alpha/gamma words and in Q16.16
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
HAZARD_WINDOW = _KERNEL.constant("HAZARD_WINDOW")  # the HLS top: slots between a write\'s issue and a read of its row
MAX_ENTRIES = _KERNEL.constant("MAX_ENTRIES")  # n_states * n_actions the host API accepts; a board's bound is in its catalog entry
MAX_ACTIONS = _KERNEL.parameter("actions").max  # columns the hardware's row max is built for (hls/tabular/tabular.h)
MAX_BATCH = _KERNEL.parameter("max_batch").max  # commands of one ap_start call, unless the board's catalog entry says otherwise

# Opcodes of the command stream (SPEC.md, "Command word")
OP_UPDATE = 0x01  # one transition
OP_WRITE = 0x02  # Q[s][a] := value (the host's table load)
OP_READ = 0x03  # answer Q[s][a] (the host's table read-back)
OP_CLEAR = 0x04  # zero the table
OP_IDENTITY = 0x05  # answer the synthesized shape and the UPDATEs applied so far in this call (for XRT)

# AXI4-Lite register map (byte offsets), ap_ctrl_hs at 0x00
REG_CTRL = 0x00
REG_GIE = 0x04
REG_IER = 0x08
REG_ISR = 0x0C
REG_N_CMDS = 0x10
REG_ALPHA = 0x18
REG_GAMMA = 0x20
REG_SARSA = 0x28
REG_N_ACTIONS = 0x30
REG_MAX_STATES = 0x38  # identity: the synthesized rows (valid after the first ap_done on an HLS build)
REG_MAX_ACTIONS = 0x40  # identity: the synthesized columns
REG_UPDATES = 0x48  # UPDATE commands applied by the last call


def to_word(x: Any, name: str, lo: int, hi: int, what: str) -> int:
    """floor(x * 65536 + 0.5) as an int in [lo, hi]; else a ValueError saying `what` to pass."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got a bool")
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__} {x!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}; pass {what}")
    word = int(np.floor(x * ONE + 0.5))
    if not lo <= word <= hi:
        raise ValueError(f"{name}={x} is out of range; pass {what}")
    return word


def alpha_word(alpha: Any) -> int:
    return to_word(alpha, "alpha", 1, ONE, "alpha in (0, 1] (at least 2**-17, to round to a word >= 1)")


def gamma_word(gamma: Any) -> int:
    return to_word(gamma, "gamma", 0, ONE, "gamma in [0, 1]")


def reward_word(r: Any) -> int:
    return to_word(r, "r", INT32_MIN, INT32_MAX, "a finite reward in the Q16.16 range [-32768, 32768)")


def reward_words(r: np.ndarray) -> np.ndarray:
    """A 1-D float or integer array of rewards as int32 Q16.16 words; ValueError naming the first bad one."""
    if r.dtype == np.bool_ or not (np.issubdtype(r.dtype, np.floating) or np.issubdtype(r.dtype, np.integer)):
        raise TypeError(f"r must be a float or integer array, got dtype {r.dtype}")
    x = r.astype(np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"r[{i}] is {x[i]}; rewards must be finite (drop or clip that transition)")
    words = np.floor(x * ONE + 0.5)
    out = (words < INT32_MIN) | (words > INT32_MAX)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise ValueError(f"r[{i}] = {x[i]} is outside the Q16.16 range [-32768, 32768); scale the rewards down")
    return words.astype(np.int32)


def merge_partitions(tables: list[np.ndarray]) -> np.ndarray:
    """The integer mean of K tables rounded half up: floor((sum_k Q_k + floor(K/2)) / K), summed in int64."""
    if not tables:
        raise ValueError("merge_partitions needs at least one table")
    k = len(tables)
    total = np.sum(np.stack([np.asarray(t, dtype=np.int64) for t in tables]), axis=0)
    return ((total + k // 2) // k).astype(np.int32)


def encode_commands(op: np.ndarray, s: np.ndarray, a: np.ndarray, value: np.ndarray, s2: np.ndarray | None = None,
                    a2: np.ndarray | None = None, done: np.ndarray | None = None) -> np.ndarray:
    """(N, 2) uint64 command words (low, high 64 bits) of SPEC.md's layout, as 32-bit fields:
    [31:0] value (reward or table word, int32), [63:32] s, [95:64] s2, [103:96] a, [111:104] a2,
    [112] done, [127:120] opcode."""
    n = len(op)
    zeros = np.zeros(n, dtype=np.uint64)
    s2 = zeros if s2 is None else np.asarray(s2).astype(np.uint64)
    a2 = zeros if a2 is None else np.asarray(a2).astype(np.uint64)
    done = zeros if done is None else np.asarray(done).astype(np.uint64)
    words = np.empty((n, 2), dtype=np.uint64)
    words[:, 0] = (np.asarray(value).astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFFFFF)) | (
        np.asarray(s).astype(np.uint64) << np.uint64(32))
    words[:, 1] = s2 | (np.asarray(a).astype(np.uint64) << np.uint64(32)) | (a2 << np.uint64(40)) | (
        done << np.uint64(48)) | (np.asarray(op).astype(np.uint64) << np.uint64(56))
    return words


def identity_word(max_states: int, max_actions: int, updates: int) -> np.ndarray:
    """The response to IDENTITY (SPEC.md): [31:0] UPDATEs applied so far in this call, [63:32]
    max_states, [95:64] max_actions, [127:120] 0x05. As a (1, 2) uint64 word, low 64 bits first."""
    lo = (int(updates) & 0xFFFFFFFF) | (int(max_states) & 0xFFFFFFFF) << 32
    hi = (int(max_actions) & 0xFFFFFFFF) | OP_IDENTITY << 56
    return np.array([[lo, hi]], dtype=np.uint64)


def decode_identity(word: np.ndarray) -> tuple[int, int, int, int]:
    """(opcode, max_states, max_actions, updates) of one IDENTITY response word."""
    lo, hi = (int(x) for x in np.asarray(word, dtype=np.uint64).reshape(2))
    return hi >> 56, lo >> 32, hi & 0xFFFFFFFF, lo & 0xFFFFFFFF


def decode_responses(words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(opcode, s, a, value int32) of (N, 2) uint64 response words (a READ echoes s and a)."""
    w = np.asarray(words, dtype=np.uint64).reshape(-1, 2)
    value = (w[:, 0] & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
    s = (w[:, 0] >> np.uint64(32)).astype(np.int64)
    a = ((w[:, 1] >> np.uint64(32)) & np.uint64(0xFF)).astype(np.int64)
    op = (w[:, 1] >> np.uint64(56)).astype(np.int64)
    return op, s, a, value


def hls_issue_schedule(s: Any, s2: Any) -> list[int]:
    """The issue slot (counted from 1) of each UPDATE of a run (rows s, bootstrap rows s2) in the HLS
    top, one per clock at II = 1 (SPEC.md, "Pipeline hazards"), and in the reference RTL, which keeps
    the same rule: in order, an UPDATE issues one slot after the one before, but not within
    HAZARD_WINDOW slots of the issue of an UPDATE that wrote its row s or s2."""
    last_write: dict[int, int] = {}
    slot = 0
    slots = []
    for row, row2 in zip(np.asarray(s, dtype=np.int64).tolist(), np.asarray(s2, dtype=np.int64).tolist()):
        slot = max(slot + 1, last_write.get(row, -HAZARD_WINDOW) + HAZARD_WINDOW,
                   last_write.get(row2, -HAZARD_WINDOW) + HAZARD_WINDOW)
        last_write[row] = slot
        slots.append(slot)
    return slots


def hls_issue_slots(s: Any, s2: Any) -> int:
    """Issue slots a run of UPDATEs takes (the last one's slot in hls_issue_schedule; 0 for none)."""
    schedule = hls_issue_schedule(s, s2)
    return schedule[-1] if schedule else 0


def rtl_latency(actions: int) -> int:
    """Clocks from an UPDATE's issue to its write in the reference RTL (rtl/tabular_core.sv, LATENCY):
    2 for the block-RAM read and its register, one per level of the row-max tree (at least one), one
    for the bootstrap, six for the products, sums and saturation, one for the write."""
    levels = max(1, (int(actions) - 1).bit_length())
    return levels + 9
