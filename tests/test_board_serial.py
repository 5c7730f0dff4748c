"""The serial transport (pearl_fpga/board/serial_transport.py) and the UART bridge: the board drivers,
unchanged, against the whole UART board design (hls/bridge/rtl/pearl_uart_top.sv: the bridge and the
three kernels, as in the ULX3S bitstream) under Verilator, through a pseudo-terminal, so that the bytes a
real FTDI chip would carry go through pyserial, the transport and the drivers; then the bridge's
answers to corrupted, short and unexpected frames, and the host's errors for a missing or silent board.

One board (pearl_fpga.board.uart_sim.SimulatedUartBoard, small kernels: SMALL_SIZES) serves the module."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from driver_cases import mlp_networks, replay_rounds, tabular_updates

from pearl_fpga.board.mlp_driver import MLPBoardBackend
from pearl_fpga.board.replay_driver import ReplayBoardBackend, ReplayDriver
from pearl_fpga.board.tabular_driver import TabularBoardBackend
from pearl_fpga.errors import BackendUnavailable, KernelTimeout, LinkError
from pearl_fpga.spec import replay as rfmt

serial = pytest.importorskip("serial", reason="the serial transport needs pyserial (the test extra)")
from pearl_fpga.board import serial_transport as st  # noqa: E402
from pearl_fpga.board.serial_transport import SerialTransport  # noqa: E402
from pearl_fpga.board.uart_sim import SMALL_SIZES, SimulatedUartBoard  # noqa: E402

pytestmark = pytest.mark.sim
TIMEOUT_S = 60.0  # wall time a call may take: the simulated line is slow on a loaded machine


@pytest.fixture(scope="module")
def board():
    with SimulatedUartBoard() as b:
        yield b


def test_replay_driver_over_the_serial_link(board):
    """driver_cases.replay_rounds in batches split to max_batch and in STREAM frames split to the bridge's
    slots, equal to the numpy reference; a smaller tree and another fan-out than synthesized."""
    t = SerialTransport(board.port, "replay", reply_timeout_s=TIMEOUT_S)
    try:
        for cap, k in ((100, 4), (60, 2)):
            b = ReplayBoardBackend(cap, k, transport=t, max_batch=80, timeout_s=TIMEOUT_S)
            replay_rounds(b, cap, k, np.random.default_rng(cap), rounds=3, max_n=120, max_targets=90)
    finally:
        t.close()


def test_mlp_driver_over_the_serial_link(board):
    """driver_cases.mlp_networks on 16-bit words, equal to the numpy reference."""
    t = SerialTransport(board.port, "mlp", reply_timeout_s=TIMEOUT_S)
    try:
        b = MLPBoardBackend(transport=t, max_batch=9, timeout_s=TIMEOUT_S)
        width = SMALL_SIZES["MLP_MAX_WIDTH"]
        assert (b.lanes, b.max_width, b.max_layers) == (SMALL_SIZES["MLP_LANES"], width, SMALL_SIZES["MLP_MAX_LAYERS"])
        mlp_networks(b, width, np.random.default_rng(1), batches=(1, 12))
    finally:
        t.close()


@pytest.mark.parametrize("sarsa", [False, True])
def test_tabular_driver_over_the_serial_link(board, sarsa):
    """driver_cases.tabular_updates, calls split to max_batch, a smaller table than synthesized: equal to numpy."""
    t = SerialTransport(board.port, "tabular", reply_timeout_s=TIMEOUT_S)
    rng = np.random.default_rng(int(sarsa))
    try:
        for n_states, n_actions in ((SMALL_SIZES["TABULAR_STATES"], SMALL_SIZES["TABULAR_ACTIONS"]), (20, 3)):
            b = TabularBoardBackend(n_states, n_actions, transport=t, max_batch=40, timeout_s=TIMEOUT_S)
            tabular_updates(b, n_states, n_actions, sarsa, rng, configs=((19661, 62259), (65536, 65536)), n=100)
    finally:
        t.close()


def test_kernels_share_one_link_and_a_hung_call_times_out_and_resets(board):
    """Two kernels' transports on one port share its link; a call whose kernel waits for commands that
    never come ends in a KernelTimeout naming the kernel and its registers within its deadline, and a
    reset of that kernel makes it usable again while the other kernel keeps its state."""
    replay = SerialTransport(board.port, "replay", reply_timeout_s=TIMEOUT_S)
    tabular = SerialTransport(board.port, "tabular", reply_timeout_s=TIMEOUT_S)
    try:
        assert replay.link is tabular.link
        tab = TabularBoardBackend(8, 2, transport=tabular, timeout_s=TIMEOUT_S)
        tab.load(np.full((8, 2), 5, np.int32))
        driver = ReplayDriver(replay, timeout_s=TIMEOUT_S)
        driver.timeout_s = 2.0
        cmds = rfmt.encode_commands(np.full(2, rfmt.OP_UPDATE), np.array([1, 2], np.uint64), np.array([5, 6], np.uint64))
        start = time.monotonic()
        with pytest.raises(KernelTimeout, match=r"replay kernel on serial .* did not signal ap_done within 2 s.*"
                                                r"n_cmds@0x10=0x00000006"):
            driver.run(cmds, 0, n_cmds=6)
        assert time.monotonic() - start < 2.0 + 10  # the deadline, and the register dump after it
        replay.reset()
        b = ReplayBoardBackend(100, 4, transport=replay, timeout_s=TIMEOUT_S)
        b.update(np.array([3]), np.array([7], np.uint32))
        assert b.total() == 7
        assert (tab.table() == 5).all()
    finally:
        replay.close()
        tabular.close()


# ----------------------------------------------------------------------------- the bridge's protocol

def _frames(port, want: int, timeout_s: float = 20.0) -> list[bytes]:
    """The next `want` frames from the board (raw pyserial, the transport's decoder)."""
    decoder, frames = st.FrameDecoder(), []
    deadline = time.monotonic() + timeout_s
    while len(frames) < want and time.monotonic() < deadline:
        frames += decoder.feed(port.read(max(1, port.in_waiting)))
    assert len(frames) == want, f"got {frames}"
    return frames


def _nak(op: int, ch: int, code: int) -> bytes:
    return bytes([st.R_NAK, ch, op, code])


def test_the_bridge_refuses_bad_frames_and_keeps_working(board):
    """Corrupted, short, overlong, unknown and misaddressed frames each get a NAK with their reason, and
    the frame after them is served as usual."""
    good_read = st.encode_frame(bytes([st.OP_READ, 0, 0x18]))  # replay's capacity register
    flipped = bytearray(st.encode_frame(bytes([st.OP_READ, 0, 0x18])))
    flipped[3] ^= 0x01  # one bit of the address: the CRC no longer matches
    body = bytes([st.OP_WRITE, 0, 0x10, 1, 2, 3, 4])
    framed = body + st.crc16(body).to_bytes(2, "big")
    cases = [
        (bytes(flipped), _nak(st.OP_READ, 0, 2)),
        (bytes([st.END, st.OP_READ, 0, st.END]), _nak(st.OP_READ, 0, 1)),  # shorter than header + CRC
        (bytes([st.END]) + framed[:-3] + bytes([st.END]), _nak(st.OP_WRITE, 0, 2)),  # cut short
        (bytes([st.END, st.OP_READ, 0, st.ESC, 0x00, 0, 0, st.END]), _nak(st.OP_READ, 0, 2)),  # bad escape
        (st.encode_frame(bytes([0x7E, 0])), _nak(0x7E, 0, 4)),  # unknown opcode
        (st.encode_frame(bytes([st.OP_READ, 9, 0x18])), _nak(st.OP_READ, 9, 5)),  # no such channel
        (st.encode_frame(bytes([st.OP_READ, 0, 0x18, 0x00])), _nak(st.OP_READ, 0, 6)),  # READ with 2 bytes
        (st.encode_frame(bytes([st.OP_STREAM, 1, 0, 1, 2, 3])), _nak(st.OP_STREAM, 1, 6)),  # 1.5 MLP words
        (st.encode_frame(bytes([st.OP_STREAM, 0, 0]) + bytes(2048)), _nak(st.OP_STREAM, 0, 3)),  # over the slot
    ]
    with serial.Serial(board.port, st.DEFAULT_BAUD, timeout=0.05) as port:
        for sent, nak in cases:
            port.write(sent)
            assert _frames(port, 1) == [nak], f"after {sent.hex()}"
            port.write(good_read)
            assert _frames(port, 1) == [bytes([st.R_DATA, 0]) + SMALL_SIZES["REPLAY_CAPACITY"].to_bytes(4, "little")]


def test_a_third_frame_in_flight_is_refused_and_reset_drops_the_stuck_ones(board):
    """The replay kernel takes no command before ap_start: a STREAM to it waits in the bridge, a second
    waits for it, a third finds no slot (NAK BUSY) while INFO is still answered; RESET of the channel
    drops the waiting frames and answers RESET_DONE, and the link works again."""
    word = bytes(16)
    stream = st.encode_frame(bytes([st.OP_STREAM, 0, st.FLAG_LAST]) + word)
    with serial.Serial(board.port, st.DEFAULT_BAUD, timeout=0.05) as port:
        port.write(stream + stream + stream)
        assert _frames(port, 1) == [_nak(st.OP_STREAM, 0, 7)]
        port.write(st.encode_frame(bytes([st.OP_INFO, 0xFF])))
        (info,) = _frames(port, 1)
        assert info[0] == st.R_INFO and info[2:5] == bytes([st.PROTOCOL_VERSION, 3, 2])
        port.write(st.encode_frame(bytes([st.OP_RESET, 0])))
        assert _frames(port, 1) == [bytes([st.R_RESET_DONE, 0])]
        port.write(st.encode_frame(bytes([st.OP_READ, 0, 0x18])))
        assert _frames(port, 1) == [bytes([st.R_DATA, 0]) + SMALL_SIZES["REPLAY_CAPACITY"].to_bytes(4, "little")]


def test_a_refused_frame_is_a_link_error(board):
    """Through the link's own API, a frame the bridge refuses raises LinkError with the reason."""
    t = SerialTransport(board.port, "replay", reply_timeout_s=TIMEOUT_S)
    try:
        with pytest.raises(LinkError, match=r"refused a frame \(op 0x02, channel 7\): a channel the board does not have"):
            t.link.request(st.OP_READ, 7, b"\x00")
        assert t.read(rfmt.REG_FANOUT) == SMALL_SIZES["REPLAY_FANOUT"]
    finally:
        t.close()


def test_host_errors_for_a_missing_or_silent_board(tmp_path, monkeypatch):
    """No such port, a port where nothing answers (a bare pseudo-terminal), a kernel the bitstream does
    not hold, and no pyserial: each a BackendUnavailable that names the fix, in bounded time."""
    with pytest.raises(BackendUnavailable, match=r"cannot open the serial port .*PEARL_FPGA_SERIAL_PORT"):
        SerialTransport(str(tmp_path / "ttyUSB9"), "replay")
    master, slave = os.openpty()
    try:
        start = time.monotonic()
        with pytest.raises(BackendUnavailable, match=r"no pearl_fpga UART bridge answered on .* within 1 s.*openFPGALoader"):
            SerialTransport(os.ttyname(slave), "replay")
        assert time.monotonic() - start < 10
    finally:
        os.close(master)
        os.close(slave)
    link = st.SerialLink.__new__(st.SerialLink)
    link.port, link.channels = "/dev/ttyX", [st.Channel(0, "replay", 16, 16), st.Channel(2, None, 16, 16)]
    with pytest.raises(BackendUnavailable, match="holds replay, not the tabular kernel"):
        link.channel_of("tabular")
    monkeypatch.setitem(__import__("sys").modules, "serial", None)
    with pytest.raises(BackendUnavailable, match=r"pip install 'pearl_fpga\[serial\]'"):
        st.import_serial()


def test_frame_codec_round_trip():
    """Byte stuffing and the CRC: every byte value survives, the CRC's residue is 0, and one flipped
    bit is caught."""
    body = bytes(range(256)) + bytes([st.END, st.ESC] * 4)
    frame = st.encode_frame(body)
    assert frame.count(st.END) == 2 and frame[0] == frame[-1] == st.END
    assert st.FrameDecoder().feed(frame) == [body]
    bad = bytearray(frame)
    bad[10] ^= 0x04
    with pytest.raises(LinkError, match="corrupted frame"):
        st.FrameDecoder().feed(bytes(bad))
