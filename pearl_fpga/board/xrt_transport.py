"""Transport on an Alveo card with XRT (pyxrt): registers through xrt::ip, streams through data movers.

The xclbin of `make xclbin` (hls/scripts/alveo_connectivity.cfg) holds, for each kernel, its compute
unit plus two small HLS data-mover kernels (hls/datamover/): `mm2s_<kernel>` reads n words from a
device buffer into the kernel's input stream (tlast on the last) and `s2mm_<kernel>` writes n words
of the output stream into a device buffer (it counts words, so the MLP kernel's per-observation
tlast does not split the transfer). The kernel's control registers are opened as an xrt::ip in an
exclusive context, so the driver's ap_start/ap_done handshake is the same as on a Zynq board.

`pyxrt` is imported only when a transport is opened; without it, BackendUnavailable says what to do.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.board.transport import Transport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout


def import_pyxrt() -> Any:
    """The pyxrt module of an XRT installation, or BackendUnavailable naming how to get it."""
    try:
        import pyxrt
    except ImportError as exc:
        raise BackendUnavailable(
            "backend 'xrt' needs XRT's Python bindings (pyxrt), installed with the Xilinx Runtime (XRT >= 2.14) "
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
        self.xclbin = self.pyxrt.xclbin(str(xclbin))
        self.uuid = self.device.load_xclbin(self.xclbin)


class XrtTransport(Transport):
    """One kernel compute unit of a loaded xclbin, with its two data movers."""

    poll_interval_s = 1e-5

    def __init__(self, card: XrtDevice, kernel: str, cu_name: str, in_word_bytes: int, out_word_bytes: int,
                 instance: int = 0):
        px = card.pyxrt
        self.card = card
        self.in_word_bytes = in_word_bytes
        self.out_word_bytes = out_word_bytes
        # Compute units are numbered from 1 (hls/build.mk's connectivity): copy i is <name>_<i + 1>.
        cu, mm2s, s2mm = (f"{name}:{{{name}_{instance + 1}}}" for name in (cu_name, f"mm2s_{kernel}", f"s2mm_{kernel}"))
        self.description = f"XRT {cu_name}_{instance + 1}"
        try:
            self.ip = px.ip(card.device, card.uuid, cu)
            self.mm2s = px.kernel(card.device, card.uuid, mm2s)
            self.s2mm = px.kernel(card.device, card.uuid, s2mm)
        except Exception as exc:  # noqa: BLE001
            raise BackendUnavailable(
                f"the xclbin has no {cu} / {mm2s} / {s2mm} ({exc}): it does not match the manifest; "
                "rebuild it with `make xclbin PLATFORM=...`"
            ) from exc
        self._send_run: Any = None
        self._recv_run: Any = None
        self._out_bo: Any = None
        self._expected = 0

    def _bo(self, kernel: Any, nbytes: int) -> Any:
        px = self.card.pyxrt
        return px.bo(self.card.device, max(nbytes, 64), px.bo.normal, kernel.group_id(0))

    def read(self, offset: int) -> int:
        return int(self.ip.read_register(offset))

    def write(self, offset: int, value: int) -> None:
        self.ip.write_register(offset, int(value) & 0xFFFFFFFF)

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8)
        if not data.size:
            return
        bo = self._bo(self.mm2s, data.size)
        bo.write(data, 0)
        bo.sync(self.card.pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, data.size, 0)
        self._send_run = self.mm2s(bo, data.size // self.in_word_bytes)

    def arm_receive(self, n_words: int) -> None:
        self._expected = n_words * self.out_word_bytes
        self._recv_run = None
        if self._expected:
            self._out_bo = self._bo(self.s2mm, self._expected)
            self._recv_run = self.s2mm(self._out_bo, n_words)

    def receive(self, timeout_s: float) -> np.ndarray:
        px = self.card.pyxrt
        for run in (self._recv_run, self._send_run):
            if run is None:
                continue
            state = run.wait(max(1, int(timeout_s * 1000)))  # milliseconds
            if state != px.ert_cmd_state.ERT_CMD_STATE_COMPLETED:
                raise KernelTimeout(f"data mover ended in state {state} within {timeout_s:g} s")
        self._send_run = None
        if not self._expected:
            return np.zeros(0, dtype=np.uint8)
        self._out_bo.sync(px.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, self._expected, 0)
        return np.array(self._out_bo.read(self._expected, 0), dtype=np.uint8)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()
