"""The Verilator transport (pearl_fpga/board/verilator_transport.py): the board drivers against the RTL
of each IP through the one C++ harness, kernels that never answer, and models that are instances of
their own. The rtl backends built on it are checked against numpy in tests/test_*_rtl.py."""

from __future__ import annotations

import numpy as np
import pytest

from pearl_fpga.board.mlp_driver import MLPDriver
from pearl_fpga.board.replay_driver import ReplayBoardBackend, ReplayDriver
from pearl_fpga.board.verilator_transport import CLOCK_HZ, VerilatorTransport
from pearl_fpga.errors import KernelTimeout
from pearl_fpga.spec import mlp as mfmt
from pearl_fpga.spec import replay as rfmt

pytestmark = pytest.mark.sim

SHORT_S = 2000 / CLOCK_HZ  # 2000 clock cycles


def test_kernel_waiting_for_commands_times_out_with_its_state() -> None:
    """n_cmds says 6, two are sent: ap_done never comes; the wait ends at the cycle limit with a
    KernelTimeout naming the kernel, the limit and the registers, and a reset makes the IP usable."""
    t = VerilatorTransport("replay", {"CAPACITY": 100, "FANOUT": 4})
    driver = ReplayDriver(t, timeout_s=SHORT_S)
    cmds = rfmt.encode_commands(np.full(2, rfmt.OP_UPDATE), np.array([1, 2], np.uint64), np.array([5, 6], np.uint64))
    start = t.now()
    with pytest.raises(KernelTimeout, match=r"replay kernel on Verilator simulation of replay_top "
                                            r"\(CAPACITY=100, FANOUT=4\) did not signal ap_done within 2000 clock "
                                            r"cycles.*n_cmds@0x10=0x00000006"):
        driver.run(cmds, 0, n_cmds=6)
    assert t.now() - start < 3 * SHORT_S, "the wait ran past its cycle limit"
    t.reset()
    backend = ReplayBoardBackend(100, 4, transport=t)
    backend.update(np.array([3]), np.array([7], np.uint32))
    assert backend.total() == 7


def test_missing_responses_time_out() -> None:
    """A call that expects more responses than its commands give: receive ends at the cycle limit."""
    t = VerilatorTransport("replay", {"CAPACITY": 100, "FANOUT": 4})
    driver = ReplayDriver(t, timeout_s=SHORT_S)
    total = rfmt.encode_commands(np.array([rfmt.OP_TOTAL]), np.zeros(1, np.uint64), np.zeros(1, np.uint64))
    with pytest.raises(KernelTimeout, match=r"sent fewer than 3 responses within 2000 clock cycles.*"
                                            r"transport: 1 of 3 words arrived within 2000 clock cycles"):
        driver.run(total, 3)


def test_mlp_infer_short_of_observations_times_out() -> None:
    """The same harness on 16-bit streams: an INFER of 2 observations sent 1 never finishes."""
    t = VerilatorTransport("mlp", {"LANES": 2, "MAX_WIDTH": 8, "MAX_LAYERS": 2, "MAX_BATCH": 16})
    driver = MLPDriver(t, timeout_s=SHORT_S)
    assert (driver.lanes, driver.max_width, driver.max_layers) == (2, 8, 2)
    layer = mfmt.QuantizedLayer(np.ones((2, 3), np.int16), np.zeros(2, np.int32), 0, False)
    driver.call(mfmt.MODE_LOAD, 0, mfmt.encode_load_stream([layer], mfmt.HEAD_RAW), 0)
    assert not driver.load_rejected()
    with pytest.raises(KernelTimeout, match=r"mlp kernel on Verilator simulation of mlp_top.*within 2000 clock cycles"):
        driver.call(mfmt.MODE_INFER, 2, np.ones(3, np.uint16), 2 * 3)


def test_each_transport_is_a_model_of_its_own() -> None:
    a = ReplayBoardBackend(64, 4, transport=VerilatorTransport("replay", {"CAPACITY": 64, "FANOUT": 4}))
    b = ReplayBoardBackend(64, 4, transport=VerilatorTransport("replay", {"CAPACITY": 64, "FANOUT": 4}))
    a.update(np.array([0, 5]), np.array([3, 4], np.uint32))
    assert (a.total(), b.total()) == (7, 0)
    assert a.last_cycles is not None and a.last_cycles >= 2


def test_unknown_kernel() -> None:
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        VerilatorTransport("nope", {})
