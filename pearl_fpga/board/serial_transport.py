"""Transport over a serial port to a board whose kernels sit behind the UART bridge
(hls/bridge/rtl/uart_bridge.sv; the ULX3S's FTDI USB-UART): the drivers run over it unchanged.

    transport = SerialTransport("/dev/ttyUSB0", "replay")      # pyserial, imported when used
    backend = ReplayBoardBackend(1000, 16, transport=transport)

The frame format (docs/hardware.md, "UART bridge") in short: SLIP-delimited frames, each
[op][channel][payload][CRC-16/CCITT-FALSE, high byte first]. Register reads and writes are one frame
and one reply each; a send is split into STREAM frames of whole words that fill the bridge's slots,
at most `slots` frames unanswered (the bridge refuses more: no flow control on the line, so the host
keeps the window); output words come back in OUT frames whenever the kernel offers them and are kept
per channel until `receive` takes them. Every wait has a deadline: a board that does not answer is a
KernelTimeout (or, when the port is opened, BackendUnavailable naming the likely causes), never a hang.

One `SerialLink` per port carries every kernel channel of the board; the transports of one port share
it (`open_link`), and it is closed with the last of them.
"""

from __future__ import annotations

import binascii
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.board.transport import Transport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout, LinkError
from pearl_fpga.spec.kernels import KERNELS

END, ESC, ESC_END, ESC_ESC = 0xC0, 0xDB, 0xDC, 0xDD
OP_WRITE, OP_READ, OP_STREAM, OP_RESET, OP_INFO = 0x01, 0x02, 0x03, 0x04, 0x05
R_ACK, R_DATA, R_OUT, R_INFO, R_RESET_DONE, R_NAK = 0x81, 0x82, 0x83, 0x84, 0x85, 0x8F
PROTOCOL_VERSION = 1
FLAG_LAST = 0x01  # STREAM flags: tlast on the frame's last word
KERNEL_CODES = {"replay": 1, "mlp": 2, "tabular": 3}  # the bridge's channel kinds (pearl_uart_top.sv)
NAK_REASONS = {
    1: "a frame shorter than its header and CRC",
    2: "a CRC mismatch (a byte was corrupted on the line, or the baud rate is wrong)",
    3: "a frame longer than the bridge's slot",
    4: "an unknown opcode",
    5: "a channel the board does not have",
    6: "a length that does not fit its opcode",
    7: "no free frame slot (more frames in flight than the bridge holds)",
}
DEFAULT_BAUD = 3_000_000
OPEN_TIMEOUT_S = 1.0  # how long the board has to answer INFO when the port is opened
REPLY_TIMEOUT_S = 1.0  # how long a register access may take


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE (polynomial 0x1021, initial value 0xFFFF), the bridge's frame check."""
    return binascii.crc_hqx(data, 0xFFFF)


def encode_frame(body: bytes) -> bytes:
    """`body` ([op][channel][payload]) with its CRC, byte-stuffed and delimited by END on both sides
    (the leading END ends whatever garbage the line carried before)."""
    data = body + crc16(body).to_bytes(2, "big")
    stuffed = data.replace(bytes([ESC]), bytes([ESC, ESC_ESC])).replace(bytes([END]), bytes([ESC, ESC_END]))
    return bytes([END]) + stuffed + bytes([END])


class FrameDecoder:
    """Bytes from the line in, whole checked frames ([op][channel][payload], CRC removed) out."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._escaped = False
        self._bad = False

    def feed(self, data: bytes) -> list[bytes]:
        frames = []
        for byte in data:
            if byte == END:
                if self._buf or self._bad:
                    frames.append(self._finish())
                continue
            if self._escaped:
                self._escaped = False
                if byte not in (ESC_END, ESC_ESC):
                    self._bad = True
                self._buf.append(END if byte == ESC_END else ESC)
            elif byte == ESC:
                self._escaped = True
            else:
                self._buf.append(byte)
        return frames

    def _finish(self) -> bytes:
        data, bad = bytes(self._buf), self._bad or self._escaped
        self._buf.clear()
        self._bad = self._escaped = False
        if bad or len(data) < 4 or crc16(data) != 0:
            raise LinkError(f"a corrupted frame came from the board ({data.hex()}): line noise, or another baud rate "
                            "than the bitstream's; reset the kernel (transport.reset()) and retry")
        return data[:-2]


@dataclass(frozen=True)
class Channel:
    """One kernel channel of the bridge, as its INFO reply describes it."""

    index: int
    kernel: str | None  # None: the channel is absent from this bitstream
    in_bytes: int
    out_bytes: int


def import_serial() -> Any:
    """pyserial, or BackendUnavailable naming how to install it."""
    try:
        import serial  # pyserial
    except ImportError as exc:
        raise BackendUnavailable("the serial transport needs pyserial: pip install 'pearl_fpga[serial]' "
                                 "(or pip install pyserial)") from exc
    return serial


class SerialLink:
    """One serial port to a board's UART bridge: frames out, replies and output words in (see the
    module docstring). Thread-safe: one operation at a time."""

    def __init__(self, port: str, baudrate: int = DEFAULT_BAUD, open_timeout_s: float = OPEN_TIMEOUT_S,
                 reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        serial = import_serial()
        self.port = port
        self.reply_timeout_s = reply_timeout_s  # how long a register access, a window slot or a reset may take
        try:
            self._serial = serial.Serial(port, baudrate=baudrate, timeout=0.01, write_timeout=reply_timeout_s)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise BackendUnavailable(
                f"cannot open the serial port {port!r}: {exc}. Is the board plugged in and is this its port "
                "(ULX3S: the FTDI's /dev/ttyUSB<n>; set PEARL_FPGA_SERIAL_PORT), and may this user open it "
                "(the dialout group)?") from None
        try:
            self._serial.set_low_latency_mode(True)  # FTDI: flush small replies after 1 ms, not 16 ms
        except (AttributeError, OSError, ValueError, NotImplementedError):
            pass  # not a Linux USB serial port (a pty, another OS): nothing to tune
        self._lock = threading.RLock()
        self._decoder = FrameDecoder()
        self._pending: deque[tuple[int, int, int]] = deque()  # (sequence, op, channel) awaiting replies
        self._done: dict[int, int] = {}  # sequence -> the reply's value (DATA) or 0 (ACK)
        self._seq = 0
        self._out: dict[int, bytearray] = {}
        self.users = 0
        self._info_payload = b""
        self._serial.reset_input_buffer()
        self._serial.write(bytes([END]))
        self.version, self.slots, self.slot_bytes, self.channels = self._hello(open_timeout_s)

    # -- frames ------------------------------------------------------------------------------

    def _pump(self, deadline: float) -> bool:
        """Read what the line has (waiting until `deadline` for the first byte) and dispatch its
        frames; False if nothing came."""
        self._serial.timeout = max(0.0, min(0.05, deadline - time.monotonic()))
        data = self._serial.read(max(1, self._serial.in_waiting))
        for frame in self._decoder.feed(data):
            self._dispatch(frame)
        return bool(data)

    def _dispatch(self, frame: bytes) -> None:
        op, ch, payload = frame[0], frame[1], frame[2:]
        if op == R_OUT:
            self._out.setdefault(ch, bytearray()).extend(payload)
        elif op in (R_ACK, R_DATA):
            if not self._pending:
                raise LinkError(f"the board answered 0x{op:02x} on channel {ch} to no frame: the link is out of step; "
                                "reset the kernel (transport.reset())")
            seq, sent_op, sent_ch = self._pending.popleft()
            if (op == R_DATA) != (sent_op == OP_READ) or ch != sent_ch:
                raise LinkError(f"the board answered 0x{op:02x} on channel {ch} to op 0x{sent_op:02x} on channel "
                                f"{sent_ch}: the link is out of step; reset the kernel (transport.reset())")
            self._done[seq] = struct.unpack("<I", payload)[0] if op == R_DATA else 0
        elif op == R_NAK:
            refused, code = payload[0], payload[1]
            self._pending.clear()
            raise LinkError(f"the board's UART bridge refused a frame (op 0x{refused:02x}, channel {ch}): "
                            f"{NAK_REASONS.get(code, f'error code {code}')}")
        elif op == R_RESET_DONE:
            self._done[-op] = ch
        elif op == R_INFO:
            self._info_payload = payload
            self._done[-op] = ch
        else:
            raise LinkError(f"unknown reply 0x{op:02x} from the board: is this a pearl_fpga bitstream of this release?")

    def _post(self, op: int, ch: int, payload: bytes, timeout_s: float) -> int:
        """Send one frame that takes a slot once the window has room; its sequence number."""
        deadline = time.monotonic() + timeout_s
        while len(self._pending) >= self.slots:
            if time.monotonic() >= deadline:
                raise KernelTimeout(f"the board on {self.port} answered none of the {len(self._pending)} frames in "
                                    f"flight within {timeout_s:g} s (channel {self._pending[0][2]} waits for its "
                                    "kernel to take stream words)")
            self._pump(deadline)
        self._seq += 1
        self._pending.append((self._seq, op, ch))
        self._serial.write(encode_frame(bytes([op, ch]) + payload))
        return self._seq

    def _wait(self, key: int, timeout_s: float, what: str) -> int:
        deadline = time.monotonic() + timeout_s
        while key not in self._done:
            if time.monotonic() >= deadline:
                raise KernelTimeout(f"the board on {self.port} did not answer {what} within {timeout_s:g} s: is the "
                                    "bitstream loaded and the board powered? (a kernel that never takes its stream "
                                    "words holds the frames behind it: reset it)")
            self._pump(deadline)
        return self._done.pop(key)

    def _hello(self, timeout_s: float) -> tuple[int, int, int, list[Channel]]:
        self._serial.write(encode_frame(bytes([OP_INFO, 0xFF])))
        try:
            self._wait(-R_INFO, timeout_s, "INFO")
        except (KernelTimeout, LinkError) as exc:
            self._serial.close()
            raise BackendUnavailable(
                f"no pearl_fpga UART bridge answered on {self.port} within {timeout_s:g} s ({exc}). Is the board "
                "powered and its bitstream loaded (openFPGALoader -b ulx3s bitstreams/ulx3s/pearl_fpga.bit), "
                "is this the board's port, and is the baud rate the bitstream's?") from None
        info = self._info_payload
        version, n_ch, slots = info[0], info[1], info[2]
        if version != PROTOCOL_VERSION or len(info) != 5 + 3 * n_ch or slots < 1:
            self._serial.close()
            raise BackendUnavailable(f"the UART bridge on {self.port} speaks protocol version {version}, this "
                                     f"pearl_fpga speaks {PROTOCOL_VERSION}: load a bitstream of this release")
        names = {code: name for name, code in KERNEL_CODES.items()}
        channels = [Channel(i, names.get(info[5 + 3 * i]), info[6 + 3 * i], info[7 + 3 * i]) for i in range(n_ch)]
        return version, slots, int.from_bytes(info[3:5], "little"), channels

    # -- operations --------------------------------------------------------------------------

    def request(self, op: int, ch: int, payload: bytes, timeout_s: float | None = None) -> int:
        """One WRITE or READ, waited for: the reply's value (0 for an ACK)."""
        timeout_s = self.reply_timeout_s if timeout_s is None else timeout_s
        with self._lock:
            seq = self._post(op, ch, payload, timeout_s)
            return self._wait(seq, timeout_s, f"op 0x{op:02x} on channel {ch}")

    def stream(self, ch: int, words: bytes, word_bytes: int, timeout_s: float | None = None) -> None:
        """Queue `words` on channel `ch`'s input stream, tlast on the last, in frames of whole words;
        returns once the last frame is sent (its ACK is collected later)."""
        per_frame = (self.slot_bytes - 5) // word_bytes * word_bytes
        timeout_s = self.reply_timeout_s if timeout_s is None else timeout_s
        with self._lock:
            for at in range(0, len(words), per_frame):
                chunk = words[at:at + per_frame]
                flags = FLAG_LAST if at + per_frame >= len(words) else 0
                self._post(OP_STREAM, ch, bytes([flags]) + chunk, timeout_s)

    def take_output(self, ch: int, nbytes: int, timeout_s: float) -> bytes | None:
        """The next `nbytes` of channel `ch`'s output stream, or None if they do not all arrive within
        `timeout_s` (what came is kept)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            buf = self._out.setdefault(ch, bytearray())
            while len(buf) < nbytes:
                if time.monotonic() >= deadline:
                    return None
                self._pump(deadline)
            data = bytes(buf[:nbytes])
            del buf[:nbytes]
            return data

    def output_pending(self, ch: int) -> int:
        """Bytes of channel `ch`'s output received and not taken."""
        return len(self._out.get(ch, b""))

    def reset_channel(self, ch: int, timeout_s: float | None = None) -> None:
        """Reset channel `ch`'s kernel; the bridge drops every frame it has not executed, so whatever
        was in flight is forgotten here too."""
        timeout_s = self.reply_timeout_s if timeout_s is None else timeout_s
        with self._lock:
            self._serial.write(encode_frame(bytes([OP_RESET, ch])))
            deadline = time.monotonic() + timeout_s
            while self._done.get(-R_RESET_DONE) != ch:
                if time.monotonic() >= deadline:
                    raise KernelTimeout(f"the board on {self.port} did not confirm the reset of channel {ch} within "
                                        f"{timeout_s:g} s")
                try:
                    self._pump(deadline)
                except LinkError:
                    pass  # replies of dropped frames, or a NAK of one: all forgotten below
            self._done.clear()
            self._pending.clear()
            self._out.pop(ch, None)

    def channel_of(self, kernel: str) -> Channel:
        for c in self.channels:
            if c.kernel == kernel:
                return c
        held = ", ".join(c.kernel for c in self.channels if c.kernel) or "no kernel"
        raise BackendUnavailable(f"the bitstream on {self.port} holds {held}, not the {kernel} kernel: rebuild it with "
                                 "`make bitstream BOARD=ulx3s` once that kernel synthesizes")

    def close(self) -> None:
        self._serial.close()


_links: dict[str, SerialLink] = {}
_links_lock = threading.Lock()


def open_link(port: str, baudrate: int = DEFAULT_BAUD, reply_timeout_s: float = REPLY_TIMEOUT_S) -> SerialLink:
    """The link of `port`, opened on first use and shared by the transports of its kernels (which then
    share its reply timeout: the longest any of them asked for)."""
    with _links_lock:
        link = _links.get(port)
        if link is None:
            link = _links[port] = SerialLink(port, baudrate, max(OPEN_TIMEOUT_S, reply_timeout_s), reply_timeout_s)
        link.reply_timeout_s = max(link.reply_timeout_s, reply_timeout_s)
        link.users += 1
        return link


def release_link(link: SerialLink) -> None:
    """One transport of `link` is done with it; the last closes the port."""
    with _links_lock:
        link.users -= 1
        if link.users <= 0:
            link.close()
            if _links.get(link.port) is link:
                del _links[link.port]


class SerialTransport(Transport):
    """One kernel of a UART board (its bridge channel) behind the Transport interface; times are wall
    time. `port` is a device path (/dev/ttyUSB0) or an open SerialLink; `reply_timeout_s` bounds each
    register access (a board answers in about a millisecond; a simulated one under load takes longer)."""

    poll_interval_s = 0.0  # every poll is a round trip on the line already

    def __init__(self, port: str | SerialLink, kernel: str, baudrate: int = DEFAULT_BAUD,
                 reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}; known: {sorted(KERNELS)}")
        self._link: SerialLink | None = None
        if isinstance(port, SerialLink):
            port.users += 1
            self._link = port
        else:
            self._link = open_link(port, baudrate, reply_timeout_s)
        try:
            ch = self._link.channel_of(kernel)
            ip = KERNELS[kernel]
            if (ch.in_bytes, ch.out_bytes) != (ip.in_word_bytes, ip.out_word_bytes):
                raise BackendUnavailable(
                    f"the {kernel} channel on {self._link.port} carries {ch.in_bytes}/{ch.out_bytes}-byte words, the "
                    f"{kernel} kernel {ip.in_word_bytes}/{ip.out_word_bytes}: load a bitstream of this release")
        except BackendUnavailable:
            self.close()
            raise
        self.kernel, self.channel = kernel, ch.index
        self.in_word_bytes, self.out_word_bytes = ch.in_bytes, ch.out_bytes
        self.description = f"serial {self._link.port} (UART bridge channel {ch.index}, {ip.top})"
        self._expected = 0

    @property
    def link(self) -> SerialLink:
        if self._link is None:
            raise LinkError(f"the serial transport of the {self.kernel} kernel was closed: open a new one")
        return self._link

    def read(self, offset: int) -> int:
        return self.link.request(OP_READ, self.channel, bytes([offset & 0xFF]))

    def write(self, offset: int, value: int) -> None:
        self.link.request(OP_WRITE, self.channel, struct.pack("<BI", offset & 0xFF, int(value) & 0xFFFFFFFF))

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8)
        if data.size % self.in_word_bytes:
            raise ValueError(f"{data.size} bytes is not a whole number of {self.in_word_bytes}-byte words")
        if data.size:
            self.link.stream(self.channel, data.tobytes(), self.in_word_bytes)

    def arm_receive(self, n_words: int) -> None:
        self._expected = int(n_words)

    def receive(self, timeout_s: float) -> np.ndarray:
        want = self._expected * self.out_word_bytes
        data = self.link.take_output(self.channel, want, timeout_s)
        if data is None:
            got = self.link.output_pending(self.channel) // self.out_word_bytes
            raise KernelTimeout(f"{got} of {self._expected} words arrived within {timeout_s:g} s")
        return np.frombuffer(data, dtype=np.uint8).copy()

    def reset(self) -> None:
        """Reset the kernel (its registers and memories, as after power-up); frames in flight are dropped."""
        self.link.reset_channel(self.channel)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()

    def close(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            release_link(link)

    def __del__(self) -> None:
        self.close()
