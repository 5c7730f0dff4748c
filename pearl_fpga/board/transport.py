"""The one small interface between a kernel driver and whatever carries its traffic.

A transport connects ONE kernel instance (one HLS IP) to the host:
- its AXI4-Lite control registers (32-bit read/write at byte offsets of the SPEC.md register map);
- its input stream and output stream, as whole buffers: `send(words)` queues the words of one call
  on the input stream (DMA MM2S on a Zynq board, a data-mover kernel on Alveo, an AxiStreamSource
  in simulation) and `receive(n)` returns the next n words of the output stream;
- waiting: `sleep(seconds)` advances time between polls (wall time on a board, simulated clock
  cycles in the cocotb simulation), `now()` tells the elapsed time in the same units, and
  `cycles()` counts kernel clock cycles where the transport can (simulation) or returns None.

The drivers (replay_driver, mlp_driver) hold the register map and the ap_start/ap_done handshake,
so exactly the same driver code runs on a PYNQ board, on an Alveo card and against the RTL in
simulation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from pearl_fpga.errors import KernelTimeout

# Vitis ap_ctrl_hs control register bits (offset 0x00 of every kernel).
CTRL_START = 1 << 0
CTRL_DONE = 1 << 1
CTRL_IDLE = 1 << 2
CTRL_READY = 1 << 3


class Transport(ABC):
    """Registers, streams and time of one kernel instance (see the module docstring)."""

    #: bytes per word of the input and output streams (16 for the replay kernel, 2 for the MLP kernel)
    in_word_bytes: int
    out_word_bytes: int
    #: a short description for error messages ("pynq dma_replay/replay_top_0", "cocotb replay_top")
    description: str = "transport"
    #: whether output registers can be read back (not through XRT: the drivers use the response stream)
    registers_readable: bool = True

    @abstractmethod
    def read(self, offset: int) -> int:
        """Read the 32-bit AXI4-Lite register at byte `offset`."""

    @abstractmethod
    def write(self, offset: int, value: int) -> None:
        """Write the 32-bit AXI4-Lite register at byte `offset`."""

    @abstractmethod
    def send(self, words: np.ndarray) -> None:
        """Queue `words` (uint8 array, a whole number of input words, little-endian) on the input
        stream, with tlast on the final word; returns without waiting for the kernel to take them."""

    @abstractmethod
    def arm_receive(self, n_words: int) -> None:
        """Prepare to collect the next `n_words` words of the output stream (before ap_start, so that
        a DMA is ready to accept them)."""

    @abstractmethod
    def receive(self, timeout_s: float) -> np.ndarray:
        """The words armed by `arm_receive`, as a uint8 array; raises KernelTimeout if they do not
        all arrive within `timeout_s` (in this transport's time, see `now`)."""

    @abstractmethod
    def sleep(self, seconds: float) -> None:
        """Let `seconds` pass between two polls (simulated time in simulation)."""

    @abstractmethod
    def now(self) -> float:
        """Seconds elapsed, in the same time base as `sleep` and the timeouts."""

    def cycles(self) -> int | None:
        """Kernel clock cycles elapsed so far, where the transport can count them (simulation)."""
        return None

    def close(self) -> None:
        """Release the transport (DMA buffers, device handles)."""

    # -- shared helpers ----------------------------------------------------------------------

    poll_interval_s: float = 1e-5

    def wait_done(self, kernel: str, timeout_s: float, registers: dict[str, int]) -> None:
        """Poll the control register until ap_done; on timeout raise `hang(...)`."""
        deadline = self.now() + timeout_s
        while True:
            ctrl = self.read(0x00)
            if ctrl & CTRL_DONE:
                return
            if self.now() >= deadline:
                raise self.hang(kernel, timeout_s, registers)
            self.sleep(self.poll_interval_s)

    def hang(self, kernel: str, timeout_s: float, registers: dict[str, int]) -> KernelTimeout:
        """The KernelTimeout of a kernel that did not signal ap_done, naming it and the values of
        `registers` (name -> offset), so the message shows the state it hung in."""
        return KernelTimeout(
            f"{kernel} kernel on {self.description} did not signal ap_done within {self.describe_wait(timeout_s)}; "
            f"register state: {self.dump(registers)}. The kernel waits for more stream words than "
            "it was sent, or its clock/reset is not running: check the command count, reload the "
            "overlay, or reset the board"
        )

    def describe_wait(self, timeout_s: float) -> str:
        """A timeout as error messages show it ("0.5 s"; simulations add the cycles)."""
        return f"{timeout_s:g} s"

    def dump(self, registers: dict[str, int]) -> str:
        """'name=0x... ' for each register, read now (for error messages)."""
        parts = []
        for name, offset in registers.items():
            try:
                parts.append(f"{name}@0x{offset:02x}=0x{self.read(offset):08x}")
            except Exception as exc:  # noqa: BLE001 - the dump must not hide the original problem
                parts.append(f"{name}@0x{offset:02x}=<unreadable: {exc}>")
        return ", ".join(parts)


def words_to_bytes(words: np.ndarray) -> np.ndarray:
    """A contiguous little-endian uint8 view of `words` (any integer dtype or (N, k) uint64 array)."""
    arr = np.ascontiguousarray(words)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and np.little_endian is False):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr.view(np.uint8).reshape(-1)
