"""Transport over the HLS C++ top compiled by g++: the board drivers, unchanged, against the design that
ships (the RTL has its own transport, sim_transport.py).

`CSimTransport("tabular", defines={"TABULAR_STATES": 32})` compiles hls/<kernel>/<kernel>.cpp with
its driver testbench (<kernel>_driver_tb.cpp, the C ABI of hls/common/driver_tb.h) into a shared
library (cached by content under the cache root, like the RTL builds) and loads it. It behaves as an
HLS IP does, which the RTL cannot show:

- each transport is a kernel instance of its own (its own copy of the library, so of the top's
  static memories), as the instances of a bitstream are;
- the register file holds what the host wrote; the top's output registers (identity, totals,
  counters) change only when a call ends, so they read 0 until the first ap_done;
- ap_start runs the top once the call's input words have been sent (at `receive`, or at the first
  poll of the control register for a call without output); ap_done is then set, and cleared on read;
- a top that waits for input words it was never sent is a kernel that never finishes: `receive`
  and `wait_done` time out with the drivers' usual KernelTimeout (the C model's state is then
  undefined, as a hung kernel's: make a new transport).

Time is wall time; no cycles are counted (`cycles()` is None), as on a board. `drain` hands out the
output as one S2MM transfer of an AXI DMA would (up to the next tlast), for the mock Zynq board of
tests/pynq_stack.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from pearl_fpga.board.transport import CTRL_DONE, CTRL_IDLE, CTRL_READY, CTRL_START, Transport
from pearl_fpga.data import cache_root, data_path
from pearl_fpga.errors import BackendUnavailable, KernelTimeout, PearlError
from pearl_fpga.spec.kernels import KERNELS

# kernel -> (bytes per input word, bytes per output word), as the IPs' streams (SPEC.md)
WORD_BYTES = {k: (ip.in_word_bytes, ip.out_word_bytes) for k, ip in KERNELS.items()}
REGISTER_WORDS = 64  # 0x00 .. 0xfc
OUT_CAPACITY = 1 << 24  # bytes of output one call may produce


def build_library(kernel: str, defines: Mapping[str, int] | None = None) -> Path:
    """The shared library of `kernel`'s HLS top and driver testbench at the given synthesis macros."""
    hls = data_path("hls")
    sources = [hls / kernel / f"{kernel}.cpp", hls / kernel / f"{kernel}_driver_tb.cpp"]
    headers = sorted((hls / kernel).glob("*.h")) + sorted((hls / "common").glob("*.h"))
    flags = ["-std=c++17", "-O1", "-shared", "-fPIC", "-DPEARL_STREAM_THROWS", "-Wno-unknown-pragmas",
             "-Wno-unused-label", f"-I{hls}", f"-I{hls / kernel}"]
    flags += [f"-D{name}={int(value)}" for name, value in sorted((defines or {}).items())]
    h = hashlib.sha256(" ".join(flags).encode())
    for path in sources + headers:
        h.update(path.name.encode() + path.read_bytes())
    out = cache_root() / "csim" / f"{kernel}_{h.hexdigest()[:16]}.so"
    if out.exists():
        return out
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise BackendUnavailable(f"the C-simulation transport compiles the HLS C++ with {cxx}, which is not on PATH: "
                                 "install a C++ compiler (apt-get install g++) or set CXX")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    r = subprocess.run([cxx, *flags, *map(str, sources), "-o", str(tmp)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise PearlError(f"compiling the {kernel} HLS top for C simulation failed:\n{r.stderr[-3000:]}")
    tmp.replace(out)  # atomic: parallel builders never see half a library
    return out


def _private_copy(library: Path) -> ctypes.CDLL:
    """`library` loaded from a copy of its own: the dynamic loader shares one set of a library's
    statics (the HLS top's memories) per file, and every transport is a kernel instance of its own."""
    fd, name = tempfile.mkstemp(suffix=".so", prefix=library.stem + ".", dir=library.parent)
    os.close(fd)
    try:
        shutil.copyfile(library, name)
        return ctypes.CDLL(name)
    finally:
        os.unlink(name)  # the mapping stays until the process ends


class CSimTransport(Transport):
    """One HLS top compiled by g++, behind the Transport interface (see the module docstring)."""

    poll_interval_s = 0.0

    def __init__(self, kernel: str, defines: Mapping[str, int] | None = None):
        if kernel not in WORD_BYTES:
            raise ValueError(f"unknown kernel {kernel!r}; known: {sorted(WORD_BYTES)}")
        self.in_word_bytes, self.out_word_bytes = WORD_BYTES[kernel]
        shown = ", ".join(f"{k}={v}" for k, v in sorted((defines or {}).items()))
        self.description = f"C simulation of {kernel}_top" + (f" ({shown})" if shown else "")
        self._lib = _private_copy(build_library(kernel, defines))
        self._call = self._lib.pearl_csim_call
        self._call.restype = ctypes.c_int
        self._call.argtypes = [ctypes.POINTER(ctypes.c_uint32), ctypes.c_char_p, ctypes.c_size_t,
                               ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p]
        self._regs = (ctypes.c_uint32 * REGISTER_WORDS)()
        self._out = ctypes.create_string_buffer(OUT_CAPACITY)  # one buffer for every call's output
        self._out_last = ctypes.create_string_buffer(OUT_CAPACITY // self.out_word_bytes)  # tlast per output word
        self._started = False  # ap_start written, the call not yet run
        self._done = False  # ap_done: set when a call ends, cleared on read
        self._hung = False  # the last call starved: it never finishes
        self._input = bytearray()
        self._output = bytearray()
        self.output_last = bytearray()  # tlast of each word in the output not yet received
        self._expected = 0

    def _run(self) -> None:
        """Run the started call on the words sent so far (the drivers send all of a call at once)."""
        if not self._started:
            return
        self._started = False
        n_out = ctypes.c_size_t(0)
        status = self._call(self._regs, bytes(self._input), len(self._input), self._out, OUT_CAPACITY,
                            ctypes.byref(n_out), self._out_last)
        self._input.clear()
        if status == 1:
            self._hung = True
            return
        if status != 0:
            raise PearlError(f"{self.description}: the call's output is over {OUT_CAPACITY} bytes")
        self._output += ctypes.string_at(self._out, n_out.value)
        self.output_last += ctypes.string_at(self._out_last, n_out.value // self.out_word_bytes)
        self._done = True

    def read(self, offset: int) -> int:
        if offset == 0x00:
            self._run()
            ctrl = (CTRL_START if self._hung else 0) | (CTRL_IDLE if not self._hung else 0)
            if self._done:
                ctrl |= CTRL_DONE | CTRL_READY
                self._done = False  # clear on read
            return ctrl
        return int(self._regs[offset // 4])

    def write(self, offset: int, value: int) -> None:
        if offset == 0x00:
            if value & CTRL_START and not self._hung:
                self._started = True
            return
        self._regs[offset // 4] = int(value) & 0xFFFFFFFF

    def send(self, words: np.ndarray) -> None:
        data = np.ascontiguousarray(words, dtype=np.uint8).tobytes()
        if len(data) % self.in_word_bytes:
            raise ValueError(f"{len(data)} bytes is not a whole number of {self.in_word_bytes}-byte words")
        self._input += data

    def arm_receive(self, n_words: int) -> None:
        self._expected = int(n_words)

    def receive(self, timeout_s: float) -> np.ndarray:
        self._run()
        nbytes = self._expected * self.out_word_bytes
        if len(self._output) < nbytes:
            got = len(self._output) // self.out_word_bytes
            if self._hung:
                raise KernelTimeout(f"{got} of {self._expected} words arrived")
            raise KernelTimeout(f"{got} of {self._expected} words arrived; the call ended without the rest")
        return np.frombuffer(self._take(self._expected), dtype=np.uint8).copy()

    def drain(self, max_words: int) -> bytes:
        """Run a started call, then take up to `max_words` output words, ending after the first whose
        tlast is set: what one S2MM transfer of an AXI DMA takes (the mock Zynq board of tests/pynq_stack
        moves the kernel's output with it)."""
        self._run()
        n = min(int(max_words), len(self.output_last))
        last = self.output_last.find(1, 0, n)
        if last >= 0:
            n = last + 1
        return self._take(n)

    def _take(self, n_words: int) -> bytes:
        """The next `n_words` output words, removed with their tlast flags."""
        nbytes = n_words * self.out_word_bytes
        data = bytes(self._output[:nbytes])
        del self._output[:nbytes]
        del self.output_last[:n_words]
        return data

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()
