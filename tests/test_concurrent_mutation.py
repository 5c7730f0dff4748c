"""Another thread changes the caller's arrays while a native kernel call runs with the GIL released
(issue 25, item 3). The native code copies, or reads once and checks as read, whatever it uses: no
crash, no write outside the table, and each call either applies one consistent batch or raises a
clear ValueError. Each scenario runs in a child process, so that a segfault fails the test instead of
killing the run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A thread that keeps toggling entries of the arrays between bad and good values until `stop` is set.
MUTATOR = """
import sys
import threading
import numpy as np
sys.setswitchinterval(1e-4)  # the caller's Python steps wait less for the GIL that the spinning thread holds
stop = threading.Event()
def toggle(pairs):
    def run():
        while not stop.is_set():
            for arr, where, bad, good in pairs:
                arr[where] = bad
            for arr, where, bad, good in pairs:
                arr[where] = good
    thread = threading.Thread(target=run, daemon=True)  # a failing caller must still exit
    thread.start()
    return thread
"""

TABULAR = """
from pearl_fpga.kernels import TabularQ
n, n_states = 100_000, 16
dt = np.dtype(DTYPE)
q = TabularQ(n_states, 4, alpha=0.5, gamma=0.9, backend="cpu")
s, a, s2 = np.zeros(n, dt), np.ones(n, dt), np.zeros(n, dt)
r, done = np.ones(n), np.zeros(n, bool)
ends = np.array([0, n // 2, n - 1])
# Out of range by far: a write there lands outside the table's memory.
thread = toggle([(s, ends, 2**31 - 1, 0), (s2, ends, 2**31 - 1, 0)])
refused = 0
for _ in range(ROUNDS):
    try:
        q.update(s, a, r, s2, done)
    except ValueError as exc:
        assert "out of range" in str(exc), exc
        refused += 1
stop.set(); thread.join()
table = q.table
# Every applied transition was (0, 1, 1.0, 0): only Q[0, 1] moved, towards 1 / (1 - 0.9) = 10.
assert (table[1:] == 0).all() and (table[0, [0, 2, 3]] == 0).all(), table
assert 0 <= table[0, 1] <= 10 * 65536, table[0, 1]
print("refused", refused)
"""

SUM_TREE = """
from pearl_fpga import _replay_native
from pearl_fpga.backends.replay_numpy import ReplayNumpyBackend
cap = 1 << 20
tree = _replay_native.SumTree(cap, 16)
idx = np.arange(cap, dtype=np.uint32)
words = np.full(cap, 1 << 16, np.uint32)
every7 = np.arange(0, cap, 7)
thread = toggle([(idx, every7, 5, every7), (words[::3], slice(None), 7, 1 << 16)])
for _ in range(ROUNDS):
    tree.update(idx, words)
stop.set(); thread.join()
# The tree must still be the sum tree of its leaves: every descent agrees with the reference's.
ref = ReplayNumpyBackend(cap, 16)
ref.update(np.arange(cap, dtype=np.uint32), tree.leaves())
targets = np.linspace(0, tree.total() - 1, 4096).astype(np.uint64)
assert tree.total() == ref.total()
assert (tree.sample(targets)[0] == ref.sample(targets)[0]).all()
print("consistent")
"""


def _run(body: str, **names: object) -> str:
    code = MUTATOR + textwrap.dedent(body)
    for name, value in names.items():
        code = code.replace(name, repr(value))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("dtype", ["uint32", "int64"], ids=["validated-path", "fast-path"])
def test_tabular_update_survives_arrays_changing_underneath(dtype):
    """uint32 arrays went to the kernel uncopied (checked, then read again with the GIL released); the
    int64 fast path's rollback re-read s[j]. Both wrote outside the table (segfault)."""
    assert "refused" in _run(TABULAR, DTYPE=dtype, ROUNDS=60)


def test_sum_tree_update_stays_consistent_when_its_inputs_change():
    """The tree read each index twice (leaf, then ancestors): a change in between left a delta on the
    path of another leaf, and later descents disagreed with the leaves."""
    assert "consistent" in _run(SUM_TREE, ROUNDS=10)
