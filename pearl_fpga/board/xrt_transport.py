"""Transport on an Alveo card with XRT (pyxrt): XRT-managed kernels, streams through data movers.

The xclbin of `make xclbin` (hls/scripts/alveo_connectivity.cfg) holds, for each kernel, its compute
unit plus two small HLS data-mover kernels (hls/datamover/): `mm2s_<kernel>` reads n words from a
device buffer into the kernel's input stream (tlast on the last) and `s2mm_<kernel>` writes n words
of the output stream into a device buffer.

pyxrt binds xrt::kernel and xrt::run but not xrt::ip (no release does), so the compute units are
driven as Vitis_Accel_Examples drive theirs: `pyxrt.kernel(context, "replay_top:{replay_top_1}")` and
one `pyxrt.run` per call. The xclbin is registered with the device and opened in a hardware context
(`device.register_xclbin`, `pyxrt.hw_context(device, uuid)`) where pyxrt binds them (XRT 2.16 on, tag 202320.2.16.204; from
2.25 `device.load_xclbin` and `kernel(device, uuid, name)` are deprecated shims); an older pyxrt
(XRT_MINIMUM, 2.13, the release `make test-xrt` runs on) loads it with `device.load_xclbin` and opens
kernels by `kernel(device, uuid, name)`, both bound in its pyxrt.cpp. The driver's register protocol maps onto that: a write to a scalar
input's offset sets that argument of the next run, a write of ap_start to 0x00 starts the run, and
0x00 reads back ap_done/ap_idle from the run's state. Output registers cannot be read through XRT:
the drivers ask each kernel on its stream (replay TOTAL and IDENTITY, tabular IDENTITY, MLP mode
IDENTITY).
Every wait is `run.wait(timeout_ms)` within the driver's deadline; the buffers are allocated once
per transport and grown only when a call needs more.

`pyxrt` is imported only when a transport is opened; without it, BackendUnavailable says what to do.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.board import xrt_kernels
from pearl_fpga.board.transport import CTRL_DONE, CTRL_IDLE, CTRL_READY, CTRL_START, Transport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout, PearlError

MIN_BO_BYTES = 4096  # one page: small calls share one allocation
XRT_MINIMUM = "2.13"  # the oldest XRT whose pyxrt binds every call made here (and the one tests/xrt_stack runs on)


def import_pyxrt() -> Any:
    """The pyxrt module of an XRT installation, or BackendUnavailable naming how to get it."""
    try:
        import pyxrt
    except ImportError as exc:
        raise BackendUnavailable(
            f"backend 'xrt' needs XRT's Python bindings (pyxrt), installed with the Xilinx Runtime (XRT >= {XRT_MINIMUM}) "
            "on a host with an Alveo card: install XRT and the card's deployment platform, then "
            "`source /opt/xilinx/xrt/setup.sh`; or use backend='cpu' / 'rtl' here"
        ) from exc
    return pyxrt


class XrtDevice:
    """An Alveo card with an xclbin loaded (shared by the transports of its kernels)."""

    def __init__(self, xclbin: Path, index: int = 0):
        self.pyxrt = import_pyxrt()
        try:
            self.device = self.pyxrt.device(index)
        except Exception as exc:  # noqa: BLE001 - pyxrt raises RuntimeError subclasses without a common type
            raise BackendUnavailable(
                f"no Alveo card at XRT device index {index} ({exc}); check `xbutil examine` and the card's platform"
            ) from exc
        self.context: Any = None  # the hardware context, where pyxrt has one
        try:
            self.xclbin = self.pyxrt.xclbin(str(xclbin))
            if hasattr(self.device, "register_xclbin") and hasattr(self.pyxrt, "hw_context"):
                self.uuid = self.device.register_xclbin(self.xclbin)
                self.context = self.pyxrt.hw_context(self.device, self.uuid)
            else:
                self.uuid = self.device.load_xclbin(self.xclbin)
        except Exception as exc:  # noqa: BLE001
            raise BackendUnavailable(
                f"XRT could not load {xclbin} ({exc}): rebuild it with `make xclbin PLATFORM=...` for this card's platform"
            ) from exc

    def kernel(self, name: str) -> Any:
        """The pyxrt kernel of compute unit spec `name`, in the hardware context where there is one."""
        if self.context is not None:
            return self.pyxrt.kernel(self.context, name)
        return self.pyxrt.kernel(self.device, self.uuid, name)


class _Mover:
    """One data-mover compute unit with its buffer object, allocated once and grown when needed."""

    def __init__(self, card: XrtDevice, kernel: Any, name: str, spec: xrt_kernels.XrtKernel):
        self.card, self.kernel, self.name = card, kernel, name
        # argument indices from the kernel's signature: the pointer is 0 for mm2s but 1 for s2mm
        self.pointer = next(i for i, a in enumerate(spec.args) if a.kind == xrt_kernels.POINTER)
        self.count = next(i for i, a in enumerate(spec.args) if a.name == "n")
        self.bo: Any = None
        self.capacity = 0

    def buffer(self, nbytes: int) -> Any:
        if nbytes > self.capacity:
            px = self.card.pyxrt
            self.capacity = max(MIN_BO_BYTES, 1 << (nbytes - 1).bit_length())
            self.bo = px.bo(self.card.device, self.capacity, px.bo.normal, self.kernel.group_id(self.pointer))
        return self.bo

    def start(self, n_words: int) -> Any:
        px = self.card.pyxrt
        run = px.run(self.kernel)
        run.set_arg(self.pointer, self.bo)
        run.set_arg(self.count, int(n_words))
        run.start()
        return run


def _as_int32(value: int) -> int:
    """pyxrt's run.set_arg takes a C int: a 32-bit register word above 2**31 goes as its two's complement."""
    value = int(value) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class XrtTransport(Transport):
    """One kernel compute unit of a loaded xclbin, with its two data movers. XRT cannot read an output
    register back: the drivers ask each kernel's IDENTITY command (or mode) on its stream instead."""

    registers_readable = False

    def __init__(self, card: XrtDevice, kernel: str, in_word_bytes: int, out_word_bytes: int, instance: int = 0):
        self.card = card
        self.in_word_bytes = in_word_bytes
        self.out_word_bytes = out_word_bytes
        self.spec = xrt_kernels.TOPS[kernel]
        mm2s_spec, s2mm_spec = xrt_kernels.MOVERS[kernel]
        names = [xrt_kernels.cu_spec(k.name, instance) for k in (self.spec, mm2s_spec, s2mm_spec)]
        self.description = f"XRT {self.spec.name}_{instance + 1}"
        try:
            cu, mm2s, s2mm = (card.kernel(name) for name in names)
        except Exception as exc:  # noqa: BLE001
            raise BackendUnavailable(
                f"the xclbin has no compute unit {' / '.join(names)} ({exc}): it does not match the manifest; "
                "rebuild it with `make xclbin PLATFORM=...`"
            ) from exc
        self.cu = cu
        self.mm2s = _Mover(card, mm2s, names[1], mm2s_spec)
        self.s2mm = _Mover(card, s2mm, names[2], s2mm_spec)
        self._args: dict[int, int] = {}  # argument index -> value for the next run
        self._cu_run: Any = None
        self._send_run: Any = None
        self._recv_run: Any = None
        self._expected = 0

    # -- registers -------------------------------------------------------------------------

    def write(self, offset: int, value: int) -> None:
        if offset == 0x00:
            if int(value) & CTRL_START:
                self._start()
            return
        index = self.spec.index_of(offset)
        if index is None:
            raise PearlError(
                f"{self.description}: offset 0x{offset:02x} is not a scalar input of {self.spec.name} "
                f"(pearl_fpga/board/xrt_kernels.py); XRT sets only kernel arguments"
            )
        self._args[index] = int(value) & 0xFFFFFFFF

    def read(self, offset: int) -> int:
        if offset == 0x00:
            return self._ctrl()
        index = self.spec.index_of(offset)
        if index is not None:  # a scalar input: what the next run is given
            return self._args.get(index, 0)
        raise PearlError(f"{self.description}: register 0x{offset:02x} cannot be read through XRT (an output register)")

    def _start(self) -> None:
        px = self.card.pyxrt
        run = px.run(self.cu)
        for index, value in sorted(self._args.items()):
            run.set_arg(index, _as_int32(value))
        run.start()
        self._cu_run = run

    def _ctrl(self) -> int:
        if self._cu_run is None:
            return CTRL_IDLE
        state = self._cu_run.state()
        states = self.card.pyxrt.ert_cmd_state
        if state == states.ERT_CMD_STATE_COMPLETED:
            return CTRL_DONE | CTRL_IDLE | CTRL_READY
        failed = (states.ERT_CMD_STATE_ERROR, states.ERT_CMD_STATE_ABORT, states.ERT_CMD_STATE_TIMEOUT,
                  states.ERT_CMD_STATE_NORESPONSE)
        if state not in failed:  # still queued or running (pyxrt does not name every running state)
            return 0
        raise PearlError(f"{self.spec.name} run on {self.description} ended in state {state}: reset the card (`xbutil reset`)")

    # -- streams ---------------------------------------------------------------------------

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8)
        self._send_run = None
        if not data.size:
            return
        bo = self.mm2s.buffer(data.size)
        bo.write(data, 0)
        bo.sync(self.card.pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, data.size, 0)
        self._send_run = self.mm2s.start(data.size // self.in_word_bytes)

    def arm_receive(self, n_words: int) -> None:
        self._expected = n_words * self.out_word_bytes
        self._recv_run = None
        if self._expected:
            self.s2mm.buffer(self._expected)
            self._recv_run = self.s2mm.start(n_words)

    def receive(self, timeout_s: float) -> np.ndarray:
        px = self.card.pyxrt
        deadline = self.now() + timeout_s
        for what, run in (("s2mm", self._recv_run), ("mm2s", self._send_run), (self.spec.name, self._cu_run)):
            if run is None:
                continue
            left_ms = max(1, int((deadline - self.now()) * 1000))
            state = run.wait(left_ms)
            if state != px.ert_cmd_state.ERT_CMD_STATE_COMPLETED:
                raise KernelTimeout(f"{what} run ended in state {state} within {timeout_s:g} s")
        self._send_run = self._recv_run = None
        if not self._expected:
            return np.zeros(0, dtype=np.uint8)
        bo = self.s2mm.bo
        bo.sync(px.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, self._expected, 0)
        return np.asarray(bo.read(self._expected, 0)).view(np.uint8).copy()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()

    def close(self) -> None:
        self._cu_run = self._send_run = self._recv_run = None
        self.mm2s.bo = self.s2mm.bo = None
        self.mm2s.capacity = self.s2mm.capacity = 0
