"""What every kernel driver does over a Transport, whatever the kernel.

A driver is made for one IP: it checks that the transport's streams have the IP's word width,
reads the IP's identity registers (its synthesized sizes) and checks them, and runs calls: arm the
output stream, ap_start, send the input words, collect the output words and wait for ap_done, with
a KernelTimeout that names the kernel and shows its registers when something hangs. The kernel
drivers (replay_driver.ReplayDriver, tabular_driver.TabularDriver on CommandDriver, the calls of
128-bit command words; mlp_driver.MLPDriver) add their register map and calls.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from pearl_fpga.board.transport import CTRL_START, Transport, words_to_bytes
from pearl_fpga.errors import KernelTimeout, PearlError

REG_CTRL = 0x00  # ap_ctrl_hs control register of every kernel


DEFAULT_TIMEOUT_S = 1.0
"""Seconds a call may take before KernelTimeout (simulated seconds on the Verilator transport)."""

class KernelDriver:
    """Base of the kernel drivers; subclasses set the class attributes and `identity_ok`."""

    kernel: str = ""
    #: bytes per word of the IP's input and output streams
    word_bytes: int = 0
    #: registers shown in timeout messages, in map order (name -> offset)
    registers: dict[str, int] = {}
    #: identity registers read once at construction into attributes of the same names
    identity: Mapping[str, int] = {}
    #: register writes that make an ap_start call do nothing (e.g. {n_cmds: 0}). When set, the driver
    #: runs that call before reading the identity: an HLS top writes its output registers (the
    #: identity among them) only during a call, so they read 0 until the first ap_done.
    empty_call: Mapping[int, int] | None = None

    def __init__(self, transport: Transport, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if transport.in_word_bytes != self.word_bytes or transport.out_word_bytes != self.word_bytes:
            raise PearlError(
                f"{transport.description} carries {transport.in_word_bytes}/{transport.out_word_bytes}-byte "
                f"stream words; the {self.kernel} kernel needs {self.word_bytes}-byte ({8 * self.word_bytes}-bit) "
                f"words: is it wired to the {self.kernel} IP?"
            )
        self.transport = transport
        self.timeout_s = timeout_s
        self.last_cycles: int | None = None
        values = self.read_identity()
        for name, value in values.items():
            setattr(self, name, value)
        if not self.identity_ok():
            shown = ", ".join(f"{name} {value}" for name, value in values.items())
            raise PearlError(
                f"the IP on {transport.description} reports {shown}, which no {self.kernel} kernel has: "
                f"the overlay does not hold the {self.kernel} IP at this address"
            )

    def read_identity(self) -> dict[str, int]:
        """The identity registers (after the empty call, where the IP needs one)."""
        if self.empty_call is not None:
            for offset, value in self.empty_call.items():
                self.transport.write(offset, value)
            self.start_call(np.zeros(0, dtype=np.uint8), 0, "output words")
        return {name: self.transport.read(offset) for name, offset in self.identity.items()}

    def identity_ok(self) -> bool:
        """Whether the identity registers read at construction describe this kernel."""
        raise NotImplementedError

    def start_call(self, payload: np.ndarray, n_out: int, what: str) -> np.ndarray:
        """One ap_start call (the call's own registers already written): arm the output stream for
        `n_out` words, start, send `payload` (uint8, whole input words), collect the outputs and wait
        for ap_done. Sets `last_cycles` where the transport counts cycles; returns the raw uint8
        output. `what` names the output words in the timeout message ("responses")."""
        t = self.transport
        t.arm_receive(n_out)
        start = t.cycles()
        t.write(REG_CTRL, CTRL_START)
        t.send(payload)
        try:
            raw = t.receive(self.timeout_s)
        except KernelTimeout as exc:
            failed = f"sent fewer than {n_out} {what}" if n_out else "did not finish the call"
            raise KernelTimeout(
                f"{self.kernel} kernel on {t.description} {failed} within "
                f"{t.describe_wait(self.timeout_s)}; register state: {t.dump(self.registers)}; transport: {exc}"
            ) from None
        t.wait_done(self.kernel, self.timeout_s, self.registers)
        end = t.cycles()
        self.last_cycles = None if start is None or end is None else end - start
        return raw


class CommandDriver(KernelDriver):
    """A kernel driven by 128-bit command words: an n_cmds register says how many one ap_start call
    takes, and some commands answer one 128-bit response word (the replay and tabular IPs)."""

    word_bytes = 16
    #: offset of the n_cmds register
    n_cmds_register: int = 0x10

    def run(self, commands: np.ndarray, n_responses: int, n_cmds: int | None = None) -> np.ndarray:
        """Send `commands` ((N, 2) uint64 words, low 64 bits first) in one ap_start call and return the
        (n_responses, 2) uint64 response words. `n_cmds` (default N) is what the n_cmds register is
        told; it differs from N only to test the timeout path (a kernel that waits for commands that
        never come)."""
        self.transport.write(self.n_cmds_register, len(commands) if n_cmds is None else n_cmds)
        raw = self.start_call(words_to_bytes(commands), n_responses, "responses")
        return raw.view(np.uint64).reshape(-1, 2)
