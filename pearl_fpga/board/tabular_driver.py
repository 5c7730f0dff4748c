"""Driver of the tabular Q-learning/SARSA IP (`tabular_top`, hls/tabular/SPEC.md) over any Transport.

`TabularDriver` speaks the IP: named registers, ap_start/ap_done, one call = n_cmds 128-bit command
words in (UPDATE, WRITE, READ, CLEAR), one response word per READ out. `TabularBoardBackend` is the
backend that `pearl_fpga.kernels.TabularQ` uses for backend="pynq"/"xrt" (and that the tests run
against the RTL through the cocotb transport): configure / update / table / load / clear, calls split
to the synthesized max_batch.
"""

from __future__ import annotations

import numpy as np

from pearl_fpga.board.driver import DEFAULT_TIMEOUT_S, CommandDriver
from pearl_fpga.board.manifest import INTERFACE_VERSIONS
from pearl_fpga.board.rtl import OnVerilator
from pearl_fpga.board.transport import Transport
from pearl_fpga.board.verilator_transport import VerilatorTransport
from pearl_fpga.errors import BackendUnavailable, PearlError
from pearl_fpga.spec import tabular as fmt

KERNEL = "tabular"
INTERFACE_VERSION = INTERFACE_VERSIONS[KERNEL]

# Registers shown in a timeout message, in map order.
REGISTERS = {
    "ctrl": fmt.REG_CTRL,
    "n_cmds": fmt.REG_N_CMDS,
    "alpha": fmt.REG_ALPHA,
    "gamma": fmt.REG_GAMMA,
    "sarsa": fmt.REG_SARSA,
    "n_actions": fmt.REG_N_ACTIONS,
    "max_states": fmt.REG_MAX_STATES,
    "max_actions": fmt.REG_MAX_ACTIONS,
    "updates": fmt.REG_UPDATES,
}


class TabularDriver(CommandDriver):
    """One `tabular_top` IP: registers and command/response calls (`run`, from CommandDriver)."""

    kernel = KERNEL
    n_cmds_register = fmt.REG_N_CMDS
    registers = REGISTERS
    identity = {"max_states": fmt.REG_MAX_STATES, "max_actions": fmt.REG_MAX_ACTIONS}
    empty_call = {fmt.REG_N_CMDS: 0}
    max_states: int
    max_actions: int


    def identity_ok(self) -> bool:
        return (1 <= self.max_actions <= fmt.MAX_ACTIONS and 1 <= self.max_states
                and self.max_states * self.max_actions <= fmt.MAX_ENTRIES)

    def read_identity(self) -> dict[str, int]:
        if self.transport.registers_readable:
            return super().read_identity()
        max_states, max_actions, _ = self.ask_identity(np.zeros((0, 2), np.uint64), 0)[1]
        return {"max_states": max_states, "max_actions": max_actions}

    def ask_identity(self, commands: np.ndarray, n_responses: int) -> tuple[np.ndarray, tuple[int, int, int]]:
        """Run `commands` with an IDENTITY command after them (for transports that cannot read output
        registers): (their n_responses response words, (max_states, max_actions, UPDATEs applied))."""
        zero = np.zeros(1, np.int64)
        ident = fmt.encode_commands(np.array([fmt.OP_IDENTITY]), zero, zero, zero)
        out = self.run(np.concatenate([commands, ident]), n_responses + 1)
        op, max_states, max_actions, updates = fmt.decode_identity(out[-1])
        if op != fmt.OP_IDENTITY:
            raise PearlError(
                f"the tabular kernel on {self.transport.description} answered opcode 0x{op:02x} to IDENTITY: the "
                "response stream is out of step, or the bitstream predates the IDENTITY command; rebuild it"
            )
        return out[:-1], (max_states, max_actions, updates)

    def configure(self, alpha_word: int, gamma_word: int, sarsa: bool, n_actions: int) -> None:
        """The run-time registers every later call uses."""
        self.transport.write(fmt.REG_ALPHA, alpha_word)
        self.transport.write(fmt.REG_GAMMA, gamma_word)
        self.transport.write(fmt.REG_SARSA, int(sarsa))
        self.transport.write(fmt.REG_N_ACTIONS, n_actions)

    def updates(self) -> int:
        """UPDATE commands the last call applied (register 0x48; see ask_identity where it cannot be read)."""
        return self.transport.read(fmt.REG_UPDATES)


class TabularBoardBackend:
    """The tabular backend protocol on a board (or on the RTL through the simulation transport).

    The table must fit the synthesized one (n_states <= max_states, n_actions <= max_actions); a
    smaller table uses its first rows and columns (the kernel's row max runs over n_actions).
    transport: a Transport, or "pynq" / "xrt" to open copy `instance` of the tabular IP of the board's
    overlay (`instances` says how many copies the bitstream holds; TabularQ's partitioned mode runs
    its slices on all of them at once).
    """

    def __init__(self, n_states: int, n_actions: int, transport: Transport | str = "pynq", max_batch: int | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, instance: int = 0):
        self.instances = 1
        if isinstance(transport, str):
            from pearl_fpga.board.overlay import open_kernel

            transport, entry = open_kernel(KERNEL, transport, instance=instance)
            max_batch = max_batch or entry.parameters["max_batch"]
            self.instances = entry.instances
        elif instance != 0:
            raise ValueError(f"instance {instance} needs a board backend ('pynq' or 'xrt'); a given transport is one IP")
        self.instance = int(instance)
        self.driver = TabularDriver(transport, timeout_s)
        d = self.driver
        if n_states > d.max_states or n_actions > d.max_actions:
            raise ValueError(
                f"a {n_states} x {n_actions} table does not fit the tabular kernel on {transport.description}, "
                f"synthesized for {d.max_states} x {d.max_actions}: use a smaller table, backend='cpu', or a "
                "bitstream built for more (bitstreams/catalog.json, kernels.tabular.states / actions)"
            )
        self.n_states, self.n_actions = int(n_states), int(n_actions)
        self.max_batch = int(max_batch or fmt.MAX_BATCH)
        if not transport.registers_readable and self.max_batch < 2:
            raise ValueError(f"max_batch must be at least 2 on {transport.description} (each call ends with an IDENTITY command)")
        self._last_cycles: int | None = None
        self._alpha, self._gamma, self._sarsa = 0, 0, False
        self.clear()

    @property
    def last_cycles(self) -> int | None:
        """Kernel cycles of the last update (sum over its calls), where the transport counts them."""
        return self._last_cycles

    def configure(self, alpha_word: int, gamma_word: int, sarsa: bool) -> None:
        self._alpha, self._gamma, self._sarsa = int(alpha_word), int(gamma_word), bool(sarsa)
        self.driver.configure(self._alpha, self._gamma, self._sarsa, self.n_actions)

    def _run(self, commands: np.ndarray, n_responses: int) -> tuple[np.ndarray, int, int | None]:
        """`commands` in calls of at most max_batch: (the responses of all calls in order, the UPDATE
        commands the kernel applied: register 0x48, or an IDENTITY command at the end of each call
        where output registers cannot be read, the kernel cycles of the calls where counted)."""
        out, cycles, applied = [], 0, 0
        readable = self.driver.transport.registers_readable
        step = self.max_batch if readable else self.max_batch - 1  # room for the IDENTITY that counts them
        for lo in range(0, len(commands), step):
            chunk = commands[lo : lo + step]
            want = 0 if n_responses == 0 else int(np.count_nonzero(chunk[:, 1] >> np.uint64(56) == fmt.OP_READ))
            if readable:
                out.append(self.driver.run(chunk, want))
                applied += self.driver.updates()
            else:
                responses, (_, _, done) = self.driver.ask_identity(chunk, want)
                out.append(responses)
                applied += done
            cycles += self.driver.last_cycles or 0
        responses = np.concatenate(out) if out else np.zeros((0, 2), np.uint64)
        return responses, applied, (cycles if self.driver.last_cycles is not None else None)

    def update(self, s: np.ndarray, a: np.ndarray, r: np.ndarray, s2: np.ndarray, a2: np.ndarray,
               done: np.ndarray) -> None:
        """Transitions validated by TabularQ (uint32 indices, int32 reward words, uint8 done), in order."""
        n = len(s)
        if not n:
            return
        cmds = fmt.encode_commands(np.full(n, fmt.OP_UPDATE), s, a, r, s2=s2, a2=a2, done=done)
        _, applied, self._last_cycles = self._run(cmds, 0)
        if applied != n:
            raise PearlError(
                f"the tabular kernel applied {applied} of {n} updates: its table and this driver disagree on the "
                f"shape (the identity registers said {self.driver.max_states} x {self.driver.max_actions}); "
                "reload the overlay"
            )

    def table(self) -> np.ndarray:
        """The table read back word by word (READ commands), shape (n_states, n_actions)."""
        s, a = np.divmod(np.arange(self.n_states * self.n_actions, dtype=np.int64), self.n_actions)
        cmds = fmt.encode_commands(np.full(len(s), fmt.OP_READ), s, a, np.zeros(len(s), np.int64))
        ops, rs, ra, values = fmt.decode_responses(self._run(cmds, len(s))[0])
        if len(values) != len(s) or np.any(ops != fmt.OP_READ) or np.any(rs != s) or np.any(ra != a):
            raise PearlError("the tabular kernel's READ responses are out of step with the commands; reload the overlay")
        return values.reshape(self.n_states, self.n_actions).copy()

    def load(self, table: np.ndarray) -> None:
        """Write every word of `table` (int32, (n_states, n_actions)) with WRITE commands."""
        t = np.asarray(table, dtype=np.int32).reshape(self.n_states, self.n_actions)
        s, a = np.divmod(np.arange(t.size, dtype=np.int64), self.n_actions)
        self._run(fmt.encode_commands(np.full(t.size, fmt.OP_WRITE), s, a, t.ravel()), 0)

    def clear(self) -> None:
        """Every word of the synthesized table to 0 (one CLEAR command)."""
        zero = np.zeros(1, np.int64)
        self._run(fmt.encode_commands(np.array([fmt.OP_CLEAR]), zero, zero, zero), 0)


MAX_RTL_ENTRIES = 1 << 20
"""The largest table the `rtl` backend simulates (the simulated memories and the table's load and
read-back through the command stream, one word per clock, grow with it)."""


def build_shape(n_states: int, n_actions: int) -> tuple[int, int]:
    """The tabular RTL build that holds a table: rows and columns rounded up to powers of two (at least
    16 x 4), so that small tables of many shapes share one Verilator build."""
    return max(16, 1 << (n_states - 1).bit_length()), max(4, 1 << (n_actions - 1).bit_length())


class TabularRTLBackend(OnVerilator, TabularBoardBackend):
    """The table on the tabular IP's RTL, built for `build_shape(n_states, n_actions)`; inputs arrive
    validated by TabularQ."""

    restored = "its table cleared (load it again)"

    def __init__(self, n_states: int, n_actions: int, cycle_limit: int | None = None) -> None:
        rows, cols = build_shape(n_states, n_actions)
        if rows * cols > MAX_RTL_ENTRIES:
            raise BackendUnavailable(f"backend 'rtl' simulates tables of at most {MAX_RTL_ENTRIES} entries "
                                     f"(rows and columns rounded up to powers of two); {n_states} x {n_actions} is "
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
