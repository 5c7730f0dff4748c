"""Driver of the MLP-inference IP (`mlp_top`, hls/mlp/SPEC.md) over any Transport.

`MLPDriver` speaks the IP: named registers, ap_start/ap_done, a LOAD call (weights stream) and INFER
calls (observations in, outputs out, 16-bit words). `MLPBoardBackend` is the backend that
`pearl_fpga.kernels.MLPInfer` uses for backend="pynq"/"xrt" and that the tests run against the RTL
through the cocotb transport: load(layers, head), infer(x_q) -> (out, argmax or None).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pearl_fpga.spec.mlp import check_observations
from pearl_fpga.board.driver import DEFAULT_TIMEOUT_S, KernelDriver
from pearl_fpga.board.manifest import INTERFACE_VERSIONS
from pearl_fpga.board.rtl import OnVerilator
from pearl_fpga.board.transport import Transport, words_to_bytes
from pearl_fpga.board.verilator_transport import VerilatorTransport
from pearl_fpga.errors import PearlError
from pearl_fpga.spec import mlp as fmt

KERNEL = "mlp"
INTERFACE_VERSION = INTERFACE_VERSIONS[KERNEL]
WORD_BYTES = 2  # 16-bit stream words

REGISTERS = {
    "ctrl": fmt.REG_CTRL,
    "mode": fmt.REG_MODE,
    "batch": fmt.REG_BATCH,
    "lanes": fmt.REG_LANES,
    "max_width": fmt.REG_MAX_WIDTH,
    "max_layers": fmt.REG_MAX_LAYERS,
    "error": fmt.REG_ERROR,
}


class MLPDriver(KernelDriver):
    """One `mlp_top` IP: registers, LOAD and INFER calls."""

    kernel = KERNEL
    word_bytes = WORD_BYTES
    registers = REGISTERS
    identity = {"lanes": fmt.REG_LANES, "max_width": fmt.REG_MAX_WIDTH, "max_layers": fmt.REG_MAX_LAYERS}
    # An INFER of no observations: before a LOAD it only sets the error register, which every call resets.
    empty_call = {fmt.REG_MODE: fmt.MODE_INFER, fmt.REG_BATCH: 0}
    lanes: int
    max_width: int
    max_layers: int


    def identity_ok(self) -> bool:
        return 1 <= self.max_layers <= 16 and 1 <= self.max_width <= 4096 and self.lanes >= 1

    def call(self, mode: int, batch: int, words: np.ndarray, n_out: int) -> np.ndarray:
        """One ap_start call in `mode` with `words` (uint16) in; returns `n_out` uint16 words."""
        self.transport.write(fmt.REG_MODE, mode)
        self.transport.write(fmt.REG_BATCH, batch)
        raw = self.start_call(words_to_bytes(np.asarray(words, dtype=np.uint16)), n_out, "output words")
        return raw.view(np.uint16)

    def read_identity(self) -> dict[str, int]:
        """lanes, max_width, max_layers: registers 0x20..0x30, or an IDENTITY call where the transport
        cannot read output registers (XRT)."""
        if self.transport.registers_readable:
            return super().read_identity()
        lanes, max_width, max_layers, _ = self.ask_identity()
        return {"lanes": lanes, "max_width": max_width, "max_layers": max_layers}

    def ask_identity(self) -> tuple[int, int, int, int]:
        """One IDENTITY call (SPEC.md): (lanes, max_width, max_layers, status)."""
        words = self.call(fmt.MODE_IDENTITY, 0, np.zeros(0, np.uint16), 4)
        return tuple(int(w) for w in words)  # type: ignore[return-value]

    def load_rejected(self) -> bool:
        """Whether the kernel rejected the last LOAD: bit0 of the error register, or IDENTITY's status
        where output registers cannot be read (XRT)."""
        if self.transport.registers_readable:
            return bool(self.transport.read(fmt.REG_ERROR) & fmt.ERR_BAD_LOAD)
        return bool(self.ask_identity()[3] & fmt.STATUS_LOAD_REJECTED)


class MLPBoardBackend:
    """The MLP backend protocol on a board (or on the RTL through the simulation transport).

    transport: a Transport, or "pynq" / "xrt" to open the MLP IP of the board's overlay.
    """

    def __init__(self, transport: Transport | str = "pynq", max_batch: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.name = transport if isinstance(transport, str) else "board"
        if isinstance(transport, str):
            from pearl_fpga.board.overlay import open_kernel

            transport, entry = open_kernel(KERNEL, transport)
            max_batch = max_batch or entry.parameters["max_batch"]
        self.driver = MLPDriver(transport, timeout_s)
        self.max_batch = int(max_batch or fmt.MAX_BATCH)
        self.layers: tuple[fmt.QuantizedLayer, ...] = ()
        self.head: str | None = None
        self.last_cycles: int | None = None

    @property
    def lanes(self) -> int:
        return self.driver.lanes

    @property
    def max_width(self) -> int:
        return self.driver.max_width

    @property
    def max_layers(self) -> int:
        return self.driver.max_layers

    def load(self, layers: Sequence[fmt.QuantizedLayer], head: str) -> None:
        """Load the weights of `layers` with output `head` ("raw" or "tanh").

        A network that does not fit the synthesized kernel raises ValueError naming the limit, before
        anything is sent; the kernel's own check (error register) is read back as well.
        """
        layers = tuple(layers)
        if head not in (fmt.HEAD_RAW, fmt.HEAD_TANH):
            raise ValueError(f"head must be {fmt.HEAD_RAW!r} or {fmt.HEAD_TANH!r}, got {head!r}")
        if not 1 <= len(layers) <= self.max_layers:
            raise ValueError(f"{len(layers)} layers: the MLP kernel on this board has at most {self.max_layers} (max_layers)")
        for i, layer in enumerate(layers):
            if max(layer.n_in, layer.m_out) > self.max_width:
                raise ValueError(
                    f"layer {i} is {layer.n_in}x{layer.m_out}: the MLP kernel on this board is at most {self.max_width} wide (max_width)"
                )
            if i and layer.n_in != layers[i - 1].m_out:
                raise ValueError(f"layer {i} takes {layer.n_in} inputs but layer {i - 1} gives {layers[i - 1].m_out}")
            if not 0 <= layer.shift <= fmt.MAX_SHIFT:
                raise ValueError(f"layer {i} shift {layer.shift} is outside 0..{fmt.MAX_SHIFT}")
        stream = fmt.encode_load_stream(layers, head)
        self.driver.call(fmt.MODE_LOAD, 0, stream, 0)
        self.last_cycles = self.driver.last_cycles
        if self.driver.load_rejected():
            raise PearlError(
                f"the MLP kernel on {self.driver.transport.description} rejected the weights although they fit "
                f"max_layers={self.max_layers}, max_width={self.max_width}: the bitstream and this driver disagree; rebuild it"
            )
        self.layers, self.head = layers, head

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Outputs for int16 observations (B, n0): (out int16 (B, m), argmax int64 (B,) for a raw head, else None)."""
        if not self.layers:
            raise PearlError("no weights loaded: call load(layers, head) first")
        x = check_observations(x_q, self.layers[0].n_in)
        m = self.layers[-1].m_out
        raw_head = self.head == fmt.HEAD_RAW
        per_obs = m + (1 if raw_head else 0)
        out = np.empty((len(x), m), dtype=np.int16)
        argmax = np.empty(len(x), dtype=np.int64) if raw_head else None
        cycles = 0
        for s in range(0, len(x), self.max_batch):
            chunk = x[s : s + self.max_batch]
            words = self.driver.call(fmt.MODE_INFER, len(chunk), np.ascontiguousarray(chunk).view(np.uint16).ravel(), len(chunk) * per_obs)
            words = words.view(np.int16).reshape(len(chunk), per_obs)
            out[s : s + len(chunk)] = words[:, :m]
            if argmax is not None:
                argmax[s : s + len(chunk)] = words[:, m].view(np.uint16)
            cycles += self.driver.last_cycles or 0
        self.last_cycles = cycles if self.driver.last_cycles is not None else None
        return out, argmax


class MLPRTLBackend(OnVerilator, MLPBoardBackend):
    """The MLP kernel on the mlp IP's RTL with `lanes` MAC lanes, at most `max_layers` layers of at most
    `max_width` inputs or outputs, and batches of at most MAX_BATCH observations."""

    restored = "the last network that loaded reloaded"

    def __init__(self, lanes: int = 16, max_width: int = fmt.MAX_WIDTH, max_layers: int = fmt.MAX_LAYERS,
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
                                               "MAX_BATCH": fmt.MAX_BATCH})
        super().__init__(transport=transport, max_batch=fmt.MAX_BATCH, timeout_s=timeout_s)
        self.name = "rtl"

    def _restore(self) -> None:
        if self.layers:
            MLPBoardBackend.load(self, self.layers, self.head or fmt.HEAD_RAW)

    def load(self, layers: Sequence[fmt.QuantizedLayer], head: str) -> None:
        layers = tuple(layers)
        fmt.check_layers(layers, head, self.max_layers, self.max_width)  # the same rules as every backend
        self._guarded(super().load, layers, head)

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        if not self.layers:
            raise ValueError("no weights loaded: call load() first")
        x = fmt.check_observations(x_q, self.layers[0].n_in, fmt.MAX_BATCH)
        return self._guarded(super().infer, x)
