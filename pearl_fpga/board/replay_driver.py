"""Driver of the replay-sampler IP (`replay_top`, hls/replay/SPEC.md) over any Transport.

`ReplayDriver` speaks the IP: named registers, the ap_start/ap_done handshake, one call = n_cmds
128-bit command words in, one response word per SAMPLE/TOTAL out. `ReplayBoardBackend` is the
backend that `pearl_fpga.kernels.ReplaySampler` uses for backend="pynq"/"xrt" (and that the tests
run against the RTL through the cocotb transport): update / sample / total / clear / leaves,
batches split to the synthesized MAX_BATCH.
"""

from __future__ import annotations

import numpy as np

from pearl_fpga.board.driver import DEFAULT_TIMEOUT_S, CommandDriver
from pearl_fpga.board.manifest import INTERFACE_VERSIONS
from pearl_fpga.board.rtl import OnVerilator
from pearl_fpga.board.transport import Transport
from pearl_fpga.board.verilator_transport import VerilatorTransport
from pearl_fpga.errors import PearlError
from pearl_fpga.spec import replay as fmt

KERNEL = "replay"
INTERFACE_VERSION = INTERFACE_VERSIONS[KERNEL]

# Registers shown in a timeout message, in map order.
REGISTERS = {
    "ctrl": fmt.REG_CTRL,
    "n_cmds": fmt.REG_N_CMDS,
    "capacity": fmt.REG_CAPACITY,
    "fanout": fmt.REG_FANOUT,
    "total_lo": fmt.REG_TOTAL_LO,
    "total_hi": fmt.REG_TOTAL_HI,
}


class ReplayDriver(CommandDriver):
    """One `replay_top` IP: registers and command/response calls (`run`, from CommandDriver)."""

    kernel = KERNEL
    n_cmds_register = fmt.REG_N_CMDS
    registers = REGISTERS
    identity = {"capacity": fmt.REG_CAPACITY, "fanout": fmt.REG_FANOUT}
    empty_call = {fmt.REG_N_CMDS: 0}
    capacity: int
    fanout: int


    def identity_ok(self) -> bool:
        return self.fanout in fmt.FANOUTS and 1 <= self.capacity <= fmt.MAX_CAPACITY

    def read_identity(self) -> dict[str, int]:
        """The synthesized capacity and fan-out: registers 0x18/0x20, or an IDENTITY command where the
        transport cannot read output registers (XRT)."""
        if self.transport.registers_readable:
            return super().read_identity()
        zero = np.zeros(1, np.uint64)
        ops, fanout, capacity = fmt.decode_responses(self.run(fmt.encode_commands(np.array([fmt.OP_IDENTITY]), zero, zero), 1))
        if ops[0] != fmt.OP_IDENTITY:
            raise PearlError(f"the replay kernel on {self.transport.description} answered opcode 0x{int(ops[0]):02x} to "
                             "IDENTITY: the response stream is out of step, or the bitstream predates the IDENTITY "
                             "command; rebuild it")
        return {"capacity": int(capacity[0]), "fanout": int(fanout[0])}

    def total(self) -> int:
        """The root sum: registers 0x28/0x2c (latched at the last ap_done), or a TOTAL command where the
        transport cannot read output registers (XRT)."""
        if not self.transport.registers_readable:
            zero = np.zeros(1, np.uint64)
            ops, _, value = fmt.decode_responses(self.run(fmt.encode_commands(np.array([fmt.OP_TOTAL]), zero, zero), 1))
            if ops[0] != fmt.OP_TOTAL:
                raise PearlError(f"replay kernel answered opcode 0x{int(ops[0]):02x} to a TOTAL: the response stream is "
                                 "out of step with the commands; reload the overlay")
            return int(value[0])
        return self.transport.read(fmt.REG_TOTAL_LO) | (self.transport.read(fmt.REG_TOTAL_HI) << 32)


class ReplayBoardBackend:
    """The replay backend protocol on a board (or on the RTL through the simulation transport).

    `capacity` may be at most the synthesized capacity: the leaves above it stay 0, which gives the
    same samples as a tree of exactly `capacity` leaves (a sample is the first leaf whose running
    sum exceeds the target, whatever the tree's shape). `fanout` is the requested one; the
    synthesized fan-out (`hw_fanout`) may differ for the same reason, and the results are the same.

    transport: a Transport, or "pynq" / "xrt" to open the replay IP of the board's overlay.
    """

    def __init__(self, capacity: int, fanout: int = 16, transport: Transport | str = "pynq", max_batch: int | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        if isinstance(transport, str):
            from pearl_fpga.board.overlay import open_kernel

            transport, entry = open_kernel(KERNEL, transport)
            max_batch = max_batch or entry.parameters["max_batch"]
        self.driver = ReplayDriver(transport, timeout_s)
        if not 1 <= capacity <= self.driver.capacity:
            raise ValueError(
                f"capacity {capacity} does not fit the replay kernel on {transport.description}, synthesized for "
                f"{self.driver.capacity} leaves: use capacity <= {self.driver.capacity} or a bitstream built for more "
                "(bitstreams/catalog.json, kernels.replay.capacity)"
            )
        if fanout not in fmt.FANOUTS:
            raise ValueError(f"fanout must be one of {fmt.FANOUTS}, got {fanout}")
        self.capacity = int(capacity)
        self.fanout = int(fanout)
        self.hw_fanout = self.driver.fanout
        self.max_batch = int(max_batch or fmt.MAX_BATCH)
        # The kernel has no read-back of single leaves: the host mirrors what it wrote.
        self._leaves = np.zeros(self.capacity, dtype=np.uint32)
        self.clear()

    @property
    def last_cycles(self) -> int | None:
        """Kernel cycles of the last call (sum over its chunks), where the transport counts them."""
        return self._last_cycles

    def _batches(self, n: int) -> range:
        return range(0, n, self.max_batch)

    def update(self, indices: np.ndarray, words: np.ndarray) -> None:
        """Set leaves `indices` (uint32) to priority words `words` (uint32), in order."""
        idx = np.asarray(indices)
        w = np.asarray(words)
        if idx.ndim != 1 or w.shape != idx.shape:
            raise ValueError(f"indices and words must be 1-D of the same length, got {idx.shape} and {w.shape}")
        if w.dtype != np.uint32:
            raise TypeError(f"priority words must be uint32 (spec.replay.priorities_to_fixed), got {w.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.capacity):
            bad = int(idx[(idx < 0) | (idx >= self.capacity)][0])
            raise IndexError(f"leaf index {bad} out of range [0, {self.capacity})")
        cycles = 0
        for s in self._batches(len(idx)):
            i, v = idx[s : s + self.max_batch], w[s : s + self.max_batch]
            cmds = fmt.encode_commands(np.full(len(i), fmt.OP_UPDATE), i.astype(np.uint64), v.astype(np.uint64))
            self.driver.run(cmds, 0)
            cycles += self.driver.last_cycles or 0
            self._leaves[i.astype(np.int64)] = v  # numpy fancy assignment: the last repeat wins, as in the kernel
        self._last_cycles = cycles if self.driver.last_cycles is not None else None

    def sample(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Leaves for `targets` (uint64, each < total): (indices int64, priority words uint32)."""
        tg = np.asarray(targets)
        if tg.ndim != 1 or tg.dtype != np.uint64:
            raise TypeError(f"targets must be a 1-D uint64 array, got {tg.dtype} {tg.shape}")
        total = self.total()
        if tg.size and int(tg.max()) >= total:
            raise ValueError(f"target {int(tg.max())} is not below the tree total {total} (spec.replay.stratified_targets draws valid ones)")
        out_idx = np.empty(len(tg), dtype=np.int64)
        out_words = np.empty(len(tg), dtype=np.uint32)
        cycles = 0
        for s in self._batches(len(tg)):
            chunk = tg[s : s + self.max_batch]
            cmds = fmt.encode_commands(np.full(len(chunk), fmt.OP_SAMPLE), np.zeros(len(chunk), np.uint64), chunk)
            ops, idx, vals = fmt.decode_responses(self.driver.run(cmds, len(chunk)))
            if np.any(ops != fmt.OP_SAMPLE):
                raise PearlError(
                    f"replay kernel answered opcode 0x{int(ops[ops != fmt.OP_SAMPLE][0]):02x} to a SAMPLE: the response "
                    "stream is out of step with the commands; reload the overlay"
                )
            out_idx[s : s + len(chunk)] = idx
            out_words[s : s + len(chunk)] = vals.astype(np.uint32)
            cycles += self.driver.last_cycles or 0
        self._last_cycles = cycles if self.driver.last_cycles is not None else None
        return out_idx, out_words

    def total(self) -> int:
        return self.driver.total()

    def clear(self) -> None:
        """All leaves to 0 (one CLEAR command)."""
        cmds = fmt.encode_commands(np.array([fmt.OP_CLEAR]), np.zeros(1, np.uint64), np.zeros(1, np.uint64))
        self.driver.run(cmds, 0)
        self._last_cycles = self.driver.last_cycles
        self._leaves[:] = 0

    def leaves(self) -> np.ndarray:
        """The leaf priority words (uint32, length capacity), as last written."""
        return self._leaves.copy()


class ReplayRTLBackend(OnVerilator, ReplayBoardBackend):
    """The sum tree of `capacity` leaves and fan-out `fanout` on the replay IP's RTL, built for exactly
    this shape."""

    restored = "the tree restored to the host's mirror (the leaves of every chunk of the call that completed)"

    def __init__(self, capacity: int, fanout: int = 16, cycle_limit: int | None = None) -> None:
        if fanout not in fmt.FANOUTS:
            raise ValueError(f"fanout={fanout} is not supported: use one of {fmt.FANOUTS}")
        if not 1 <= capacity <= fmt.MAX_CAPACITY:
            raise ValueError(f"capacity={capacity} is out of range: use 1 .. {fmt.MAX_CAPACITY}")
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
