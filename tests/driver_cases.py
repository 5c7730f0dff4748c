"""The board drivers' scenarios, shared by every transport they are tested over (the HLS tops in C
simulation: tests/test_board_csim.py; the UART board through a pseudo-terminal: tests/test_board_serial.py):
each drives a board backend and the numpy reference with the same calls and checks every result."""

from __future__ import annotations

import numpy as np
import pytest
from mlp_cases import random_inputs, random_layers

from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend
from pearl_fpga.backends.replay_numpy import ReplayNumpyBackend
from pearl_fpga.backends.tabular_numpy import TabularNumpyBackend
from pearl_fpga.spec import mlp as mfmt
from pearl_fpga.spec import replay as rfmt
from pearl_fpga.spec import tabular as tfmt


def replay_rounds(board, capacity: int, fanout: int, rng: np.random.Generator, rounds: int = 4, max_n: int = 50,
                  max_targets: int = 40) -> None:
    """Updates (repeated indices, zeros, saturating values in the last round), totals and samples, then
    clear, equal to the numpy reference."""
    ref = ReplayNumpyBackend(capacity, fanout)
    for round_ in range(rounds):
        n = int(rng.integers(1, max_n))
        idx = rng.integers(0, capacity, n).astype(np.uint32)
        idx[: n // 4] = idx[0]
        prio = rng.exponential(1.0, n) * (rng.random(n) > 0.2)
        if round_ == rounds - 1:
            prio[::3] = 1e9
        words, _ = rfmt.priorities_to_fixed(prio)
        board.update(idx, words)
        ref.update(idx, words)
        assert board.total() == ref.total()
        targets = rfmt.stratified_targets(ref.total(), int(rng.integers(1, max_targets)), rng)
        got, want = board.sample(targets), ref.sample(targets)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    board.clear()
    assert board.total() == 0


def mlp_networks(board, max_width: int, rng: np.random.Generator, batches: tuple[int, ...] = (1, 7, 12)) -> None:
    """LOAD and INFER (raw and tanh heads, a full-width layer, saturating shifts) equal to the numpy
    reference; a network over the synthesized width is refused."""
    for widths, head, kw in (([3, max_width, 5, 2], mfmt.HEAD_RAW, {}), ([max_width, 7, 3], mfmt.HEAD_TANH, {}),
                             ([4, 6, 6, 6, 3], mfmt.HEAD_RAW, {"shifts": (0, 3)})):
        layers = random_layers(rng, widths, head, **kw)
        board.load(layers, head)
        ref = NumpyMLPBackend()
        ref.load(layers, head)
        for batch in batches:
            x = random_inputs(rng, batch, widths[0])
            (out, argmax), (want, want_argmax) = board.infer(x), ref.infer(x)
            assert np.array_equal(out, want)
            assert (argmax is None and want_argmax is None) or np.array_equal(argmax, want_argmax)
    with pytest.raises(ValueError, match="max_width"):
        board.load(random_layers(rng, [3, max_width + 1, 2], mfmt.HEAD_RAW), mfmt.HEAD_RAW)


def tabular_updates(board, n_states: int, n_actions: int, sarsa: bool, rng: np.random.Generator,
                    configs: tuple[tuple[int, int], ...] = ((19661, 62259), (65536, 65536), (1, 0)), n: int = 150) -> None:
    """Host loads, updates (random walks, the same (s, a) over and over with s2 == s, saturation), read-back
    and clear, equal to the numpy reference."""
    ref = TabularNumpyBackend(n_states, n_actions)
    for alpha, gamma in configs:
        board.configure(alpha, gamma, sarsa)
        ref.configure(alpha, gamma, sarsa)
        start = rng.integers(tfmt.INT32_MIN, tfmt.INT32_MAX, (n_states, n_actions), dtype=np.int64).astype(np.int32)
        board.load(start)
        ref.load(start)
        s = np.where(rng.random(n) < 0.5, 0, rng.integers(0, n_states, n)).astype(np.uint32)
        s2 = np.where(rng.random(n) < 0.5, s, rng.integers(0, n_states, n)).astype(np.uint32)
        batch = (s, rng.integers(0, n_actions, n).astype(np.uint32),
                 rng.integers(tfmt.INT32_MIN, tfmt.INT32_MAX, n, dtype=np.int64).astype(np.int32), s2,
                 rng.integers(0, n_actions, n).astype(np.uint32), (rng.random(n) < 0.2).astype(np.uint8))
        board.update(*batch)
        ref.update(*batch)
        assert np.array_equal(board.table(), ref.table())
    board.clear()
    assert not board.table().any()
