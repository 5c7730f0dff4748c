"""The `rtl` backends: each kernel's board driver over the VerilatorTransport, the reference RTL of its
board IP run cycle by cycle (pearl_fpga/board/verilator_transport.py).

A backend here is its kernel's board backend (replay_driver, mlp_driver, tabular_driver) on a
transport it builds for the requested shape, plus what a simulation can do that a board cannot:
`cycle_limit` bounds each wait of a call in clock cycles (None: the drivers' timeout, 1 s of simulated
time), and after a KernelTimeout the model is reset and the state the host knows is written back
(the replay leaves, the MLP network; the tabular table is cleared), so the backend stays usable.
`last_cycles` is the clock cycles of the last call, ap_start to ap_done, the figure the planner's
FPGA model uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from pearl_fpga.board.mlp_driver import DEFAULT_TIMEOUT_S, MLPBoardBackend
from pearl_fpga.board.replay_driver import ReplayBoardBackend
from pearl_fpga.board.tabular_driver import TabularBoardBackend
from pearl_fpga.board.verilator_transport import CLOCK_HZ, VerilatorTransport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout
from pearl_fpga.spec import mlp as mlp_fmt
from pearl_fpga.spec.replay import FANOUTS, MAX_CAPACITY

T = TypeVar("T")

MAX_RTL_ENTRIES = 1 << 14
"""The reference tabular RTL keeps the table in registers: larger tables take minutes to verilate."""


class _OnVerilator:
    """What every rtl backend adds to its board backend (the board backend's `driver` is set by it)."""

    name = "rtl"
    driver: Any
    _cycle_limit: int | None = None
    #: what `_restore` leaves after a timeout, for the message
    restored = ""

    def _timeout_for(self, cycle_limit: int | None) -> float:
        """The driver timeout for `cycle_limit` (checked here, before anything is built)."""
        if cycle_limit is not None and (not isinstance(cycle_limit, int) or cycle_limit < 1):
            raise ValueError(f"cycle_limit must be a positive number of cycles or None (automatic), "
                             f"got {cycle_limit!r}")
        return DEFAULT_TIMEOUT_S if cycle_limit is None else cycle_limit / CLOCK_HZ

    @property
    def cycle_limit(self) -> int | None:
        """Clock cycles each wait of a call may take (None: the drivers' default timeout)."""
        return self._cycle_limit

    @cycle_limit.setter
    def cycle_limit(self, value: int | None) -> None:
        self.driver.timeout_s = self._timeout_for(value)
        self._cycle_limit = value

    def _guarded(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)`; on KernelTimeout, reset the model, restore the host's state, and re-raise."""
        try:
            return call(*args)
        except KernelTimeout as exc:
            limit, self.cycle_limit = self.cycle_limit, None  # restoring must not hit the user's limit
            try:
                self.driver.transport.reset()
                self._restore()
            finally:
                self.cycle_limit = limit
            raise KernelTimeout(f"{exc}. The model was reset and {self.restored}; raise cycle_limit (None: "
                                "automatic) if the limit was set too low") from None

    def _restore(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Free the simulator (the backend cannot be used afterwards)."""
        self.driver.transport.close()


class ReplayRTLBackend(_OnVerilator, ReplayBoardBackend):
    """The sum tree of `capacity` leaves and fan-out `fanout` on the replay IP's RTL, built for exactly
    this shape."""

    restored = "the tree restored to its state before the call"

    def __init__(self, capacity: int, fanout: int = 16, cycle_limit: int | None = None) -> None:
        if fanout not in FANOUTS:
            raise ValueError(f"fanout={fanout} is not supported: use one of {FANOUTS}")
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ValueError(f"capacity={capacity} is out of range: use 1 .. {MAX_CAPACITY}")
        timeout_s = self._timeout_for(cycle_limit)
        self._cycle_limit = cycle_limit
        transport = VerilatorTransport("replay", {"CAPACITY": capacity, "FANOUT": fanout})
        super().__init__(capacity, fanout, transport=transport, timeout_s=timeout_s)

    def _restore(self) -> None:
        leaves = self._leaves.copy()
        ReplayBoardBackend.clear(self)
        nz = np.flatnonzero(leaves)
        ReplayBoardBackend.update(self, nz, leaves[nz])

    def update(self, indices: np.ndarray, words: np.ndarray) -> None:
        self._guarded(super().update, indices, words)

    def sample(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._guarded(super().sample, targets)

    def clear(self) -> None:
        self._guarded(super().clear)


class MLPRTLBackend(_OnVerilator, MLPBoardBackend):
    """The MLP kernel on the mlp IP's RTL with `lanes` MAC lanes, at most `max_layers` layers of at most
    `max_width` inputs or outputs, and batches of at most MAX_BATCH observations."""

    restored = "the last network that loaded reloaded"

    def __init__(self, lanes: int = 16, max_width: int = mlp_fmt.MAX_WIDTH, max_layers: int = mlp_fmt.MAX_LAYERS,
                 cycle_limit: int | None = None) -> None:
        if lanes < 2 or lanes > 64 or lanes & (lanes - 1):
            raise ValueError(f"lanes={lanes} is not supported: use a power of two from 2 to 64")
        if not 1 <= max_width <= 4096:
            raise ValueError(f"max_width={max_width} is out of range: use 1 .. 4096")
        if not 1 <= max_layers <= 16:
            raise ValueError(f"max_layers={max_layers} is out of range: use 1 .. 16")
        timeout_s = self._timeout_for(cycle_limit)
        self._cycle_limit = cycle_limit
        transport = VerilatorTransport("mlp", {"LANES": lanes, "MAX_WIDTH": max_width, "MAX_LAYERS": max_layers,
                                               "MAX_BATCH": mlp_fmt.MAX_BATCH})
        super().__init__(transport=transport, max_batch=mlp_fmt.MAX_BATCH, timeout_s=timeout_s)
        self.name = "rtl"

    def _restore(self) -> None:
        if self.layers:
            MLPBoardBackend.load(self, self.layers, self.head or mlp_fmt.HEAD_RAW)

    def load(self, layers: Sequence[mlp_fmt.QuantizedLayer], head: str) -> None:
        layers = tuple(layers)
        mlp_fmt.check_layers(layers, head, self.max_layers, self.max_width)  # the same rules as every backend
        self._guarded(super().load, layers, head)

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if not self.layers:
            raise ValueError("no weights loaded: call load() first")
        x = mlp_fmt.check_observations(x_q, self.layers[0].n_in, mlp_fmt.MAX_BATCH)
        return self._guarded(super().infer, x)


def build_shape(n_states: int, n_actions: int) -> tuple[int, int]:
    """The tabular RTL build that holds a table: rows and columns rounded up to powers of two (at least
    16 x 4), so that small tables of many shapes share one Verilator build."""
    return max(16, 1 << (n_states - 1).bit_length()), max(4, 1 << (n_actions - 1).bit_length())


class TabularRTLBackend(_OnVerilator, TabularBoardBackend):
    """The table on the tabular IP's RTL, built for `build_shape(n_states, n_actions)`; inputs arrive
    validated by TabularQ."""

    restored = "its table cleared (load it again)"

    def __init__(self, n_states: int, n_actions: int, cycle_limit: int | None = None) -> None:
        rows, cols = build_shape(n_states, n_actions)
        if rows * cols > MAX_RTL_ENTRIES:
            raise BackendUnavailable(f"backend 'rtl' simulates tables of at most {MAX_RTL_ENTRIES} entries (the "
                                     f"reference RTL holds the table in registers); {n_states} x {n_actions} is "
                                     "larger: use backend='cpu' (bit-exact with it)")
        timeout_s = self._timeout_for(cycle_limit)
        self._cycle_limit = cycle_limit
        transport = VerilatorTransport("tabular", {"N_STATES": rows, "N_ACTIONS": cols})
        super().__init__(n_states, n_actions, transport=transport, timeout_s=timeout_s)

    def _restore(self) -> None:
        TabularBoardBackend.configure(self, self._alpha, self._gamma, self._sarsa)
        TabularBoardBackend.clear(self)

    def configure(self, alpha_word: int, gamma_word: int, sarsa: bool) -> None:
        self._guarded(super().configure, alpha_word, gamma_word, sarsa)

    def update(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, a2: np.ndarray,
               done: np.ndarray) -> None:
        self._guarded(super().update, s, a, r, s2, a2, done)

    def table(self) -> np.ndarray:
        return self._guarded(super().table)

    def load(self, table: np.ndarray) -> None:
        self._guarded(super().load, table)

    def clear(self) -> None:
        self._guarded(super().clear)
