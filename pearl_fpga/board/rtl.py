"""What every `rtl` backend adds to its kernel's board backend: the reference RTL of the board IP run
cycle by cycle on the VerilatorTransport (pearl_fpga/board/verilator_transport.py).

Each kernel's `rtl` backend sits beside its driver (ReplayRTLBackend in replay_driver.py,
MLPRTLBackend in mlp_driver.py, TabularRTLBackend in tabular_driver.py): its board backend on a
transport built for the requested shape, plus, from `OnVerilator`, what a simulation can do that a
board cannot:
`cycle_limit` bounds each wait of a call in clock cycles (None: the drivers' timeout, 1 s of simulated
time), and after a KernelTimeout the model is reset and the state the host knows is written back
(the replay leaves, the MLP network; the tabular table is cleared), so the backend stays usable.
`last_cycles` is the clock cycles of the last call, ap_start to ap_done, the figure the planner's
FPGA model uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pearl_fpga.board.driver import DEFAULT_TIMEOUT_S
from pearl_fpga.board.verilator_transport import CLOCK_HZ
from pearl_fpga.errors import KernelTimeout

T = TypeVar("T")



class OnVerilator:
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
