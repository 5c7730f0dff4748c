"""Load a pearl_fpga bitstream on a board after validating its manifest, and open its kernels.

    transport, entry = open_kernel("replay", "pynq")          # Zynq board with PYNQ
    transport, entry = open_kernel("mlp", "xrt", board="alveo-u55c")
    transport, entry = open_kernel("tabular", "serial", board="ulx3s")  # ULX3S: $PEARL_FPGA_SERIAL_PORT

Which bitstream: `directory` if given, else bitstreams/<board>/ (or $PEARL_FPGA_BITSTREAMS/<board>/),
where the board is `board`, else $PEARL_FPGA_BOARD, else (PYNQ) the board the image reports in
$BOARD, else the only folder of bitstreams/ whose manifest fits the backend.

Everything that can be checked without the board is checked first, in this order: the manifest
(present, valid, built for a board of the backend's kind, interface versions equal to the
drivers', timing met), the files it names (.bit with its .hwh next to it, or .xclbin); only then is
pynq or pyxrt imported and the device opened. An ECP5 board (backend "serial") is programmed out of band
(openFPGALoader -b ulx3s bitstreams/ulx3s/pearl_fpga.bit): its serial port ($PEARL_FPGA_SERIAL_PORT,
default /dev/ttyUSB0) is opened and the kernels its UART bridge reports are checked against the manifest. Each failure is a ManifestError or BackendUnavailable
that says what is wrong and how to fix it.

A build whose manifest records that routed timing was not met (timing.met false) is refused: such a
bitstream computes wrong results without any error. `allow_timing_failure=True` (open_kernel,
open_board) loads it anyway, for a user who wants to look at it knowingly.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from pearl_fpga.data import data_path
from pearl_fpga.board.manifest import INTERFACE_VERSIONS, MANIFEST_NAME, KernelEntry, Manifest, load_manifest
from pearl_fpga.board.transport import Transport
from pearl_fpga.errors import BackendUnavailable, ManifestError
from pearl_fpga.spec.kernels import KERNELS

BACKEND_KIND = {"pynq": "zynq", "xrt": "alveo", "serial": "ecp5"}
DEFAULT_SERIAL_PORT = "/dev/ttyUSB0"  # the ULX3S's FTDI on Linux, when PEARL_FPGA_SERIAL_PORT is not set
# Stream word sizes (input, output) in bytes of each kernel (SPEC.md).
WORD_BYTES = {k: (ip.in_word_bytes, ip.out_word_bytes) for k, ip in KERNELS.items()}
# $BOARD on the official PYNQ images -> catalog name.
PYNQ_BOARDS = {"pynq-z2": "pynq-z2", "zcu104": "zcu104", "kv260": "kv260"}

_loaded: dict[Path, Any] = {}  # bitstream folder -> pynq Overlay or XrtDevice, once per process


def bitstreams_root() -> Path:
    return Path(os.environ.get("PEARL_FPGA_BITSTREAMS") or data_path("bitstreams"))


def find_bitstream_dir(backend: str, board: str | None = None) -> Path:
    """The folder holding the bitstream to load for `backend` (see the module docstring)."""
    if backend not in BACKEND_KIND:
        raise ValueError(f"backend must be one of {sorted(BACKEND_KIND)}, got {backend!r}")
    root = bitstreams_root()
    board = board or os.environ.get("PEARL_FPGA_BOARD")
    if not board and backend == "pynq":
        board = PYNQ_BOARDS.get(os.environ.get("BOARD", "").lower())
    if board:
        return root / board
    fitting = []
    for manifest_path in sorted(root.glob(f"*/{MANIFEST_NAME}")):
        try:
            if load_manifest(manifest_path).kind == BACKEND_KIND[backend]:
                fitting.append(manifest_path.parent)
        except ManifestError as exc:  # one broken folder must not hide the good ones
            warnings.warn(f"skipping bitstream folder {manifest_path.parent}: {exc}", RuntimeWarning, stacklevel=2)
    if len(fitting) == 1:
        return fitting[0]
    kind = BACKEND_KIND[backend]
    if not fitting:
        raise BackendUnavailable(
            f"no {kind} bitstream in {root} (a folder with {MANIFEST_NAME}): build one with "
            + {"zynq": "`make bitstream BOARD=pynq-z2|zcu104|kv260`", "alveo": "`make xclbin PLATFORM=<platform>`",
               "ecp5": "`make bitstream BOARD=ulx3s`"}[kind]
            + " and copy bitstreams/<board>/ to this machine, or set PEARL_FPGA_BITSTREAMS"
        )
    raise BackendUnavailable(
        f"several {kind} bitstreams in {root} ({', '.join(p.name for p in fitting)}): choose one with board=... "
        "or PEARL_FPGA_BOARD"
    )


def check_timing(manifest: Manifest, allow_timing_failure: bool = False) -> None:
    """Refuse a build whose routed timing was not met (manifest timing.met false), unless the caller
    passed allow_timing_failure=True. A manifest without a timing summary is not refused."""
    timing = manifest.timing
    if timing.get("met", True) is not False or allow_timing_failure:
        return
    wns = timing.get("wns_ns")
    achieved = timing.get("achieved_mhz")
    rebuild = (f"make xclbin PLATFORM={manifest.platform}" if manifest.kind == "alveo" else f"make bitstream BOARD={manifest.board}")
    raise ManifestError(
        f"{manifest.path}: this build missed timing at {manifest.clock_mhz:g} MHz"
        + (f" (WNS {wns:g} ns" + (f", it would close at about {achieved:g} MHz)" if achieved else ")") if wns is not None else "")
        + ": its kernels would return wrong results without any error, so it is not loaded. Rebuild it "
        f"(`{rebuild}`, with a lower clock_mhz or smaller kernels in bitstreams/catalog.json if it keeps failing), "
        "or pass allow_timing_failure=True to open_kernel / open_board to load it anyway"
    )


def check_bitstream(directory: Path, backend: str, allow_timing_failure: bool = False) -> Manifest:
    """Validate the manifest and files of a bitstream folder for `backend` without touching a device."""
    manifest = load_manifest(directory)
    kind = BACKEND_KIND[backend]
    if manifest.kind != kind:
        raise ManifestError(
            f"{manifest.path} is a {manifest.kind} build for {manifest.board}; backend {backend!r} loads {kind} builds: "
            f"use backend={ {v: k for k, v in BACKEND_KIND.items()}[manifest.kind]!r} or another bitstream"
        )
    check_timing(manifest, allow_timing_failure)
    for kernel in manifest.kernels:
        manifest.check_kernel(kernel)
    if kind == "zynq":
        bit, hwh = manifest.file("bit"), manifest.file("hwh")
        if not bit.is_file():
            raise ManifestError(f"bitstream {bit} named by {manifest.path} is missing: rebuild with `make bitstream BOARD={manifest.board}`")
        if hwh != bit.with_suffix(".hwh"):
            raise ManifestError(f"{manifest.path}: the .hwh must have the .bit's name ({bit.with_suffix('.hwh').name}), PYNQ looks for it there")
        if not hwh.is_file():
            raise ManifestError(
                f"{hwh.name} is missing next to {bit}: PYNQ needs the hardware handoff file (.hwh) of the same build "
                f"to find the kernels; copy it from the build (`make bitstream BOARD={manifest.board}` writes both)"
            )
    elif kind == "ecp5":
        if not manifest.file("bit").is_file():
            raise ManifestError(f"bitstream {manifest.file('bit')} named by {manifest.path} is missing: rebuild with "
                                f"`make bitstream BOARD={manifest.board}`")
    else:
        xclbin = manifest.file("xclbin")
        if not xclbin.is_file():
            raise ManifestError(f"xclbin {xclbin} named by {manifest.path} is missing: rebuild with `make xclbin PLATFORM={manifest.platform}`")
    return manifest


def load_bitstream(directory: Path, backend: str, allow_timing_failure: bool = False) -> tuple[Manifest, Any]:
    """Check, then load (once per process) the bitstream of `directory` on the device."""
    manifest = check_bitstream(directory, backend, allow_timing_failure)
    key = directory.resolve()
    if key not in _loaded:
        if backend == "serial":  # programmed out of band; the handle is the board's serial port
            _loaded[key] = os.environ.get("PEARL_FPGA_SERIAL_PORT") or DEFAULT_SERIAL_PORT
        elif backend == "pynq":
            from pearl_fpga.board.pynq_transport import import_pynq

            pynq = import_pynq()
            _loaded[key] = pynq.Overlay(str(manifest.file("bit")))
        else:
            from pearl_fpga.board.xrt_transport import XrtDevice

            _loaded[key] = XrtDevice(manifest.file("xclbin"))
    return manifest, _loaded[key]


def open_kernel(kernel: str, backend: str, board: str | None = None, directory: str | Path | None = None,
                instance: int = 0, allow_timing_failure: bool = False) -> tuple[Transport, KernelEntry]:
    """A transport to copy `instance` of `kernel` ("replay", "mlp" or "tabular") in the bitstream for
    `backend`, and its manifest entry (entry.instances says how many copies there are).
    allow_timing_failure: load a build whose manifest says timing was not met (refused otherwise)."""
    if kernel not in INTERFACE_VERSIONS:
        raise ValueError(f"unknown kernel {kernel!r}; known: {sorted(INTERFACE_VERSIONS)}")
    folder = Path(directory) if directory is not None else find_bitstream_dir(backend, board)
    manifest, handle = load_bitstream(folder, backend, allow_timing_failure)
    entry = manifest.check_kernel(kernel)
    ip_name, dma_name = entry.instance_names(instance)
    in_bytes, out_bytes = WORD_BYTES[kernel]
    if backend == "serial":
        from pearl_fpga.board.serial_transport import SerialTransport

        transport = SerialTransport(handle, kernel)
        held = sorted(c.kernel for c in transport.link.channels if c.kernel)
        if held != sorted(manifest.kernels):
            transport.close()
            raise ManifestError(f"the board on {handle} holds {held}, its manifest {manifest.path} lists "
                                f"{sorted(manifest.kernels)}: load this folder's bitstream on the board "
                                f"(openFPGALoader -b {manifest.board} {manifest.file('bit')})")
        return transport, entry
    if backend == "pynq":
        from pearl_fpga.board.pynq_transport import PynqTransport

        if dma_name is None:
            raise ManifestError(f"{manifest.path}: kernel {kernel} has no dma_name; a Zynq build needs one")
        return PynqTransport(handle, ip_name, dma_name, in_bytes, out_bytes), entry
    from pearl_fpga.board.xrt_transport import XrtTransport

    return XrtTransport(handle, kernel, in_bytes, out_bytes, instance=instance), entry


def open_board(backend: str, board: str | None = None, directory: str | Path | None = None,
               allow_timing_failure: bool = False) -> Manifest:
    """Load the bitstream for `backend` and return its manifest (kernels are opened with open_kernel).
    allow_timing_failure: load a build whose manifest says timing was not met (refused otherwise)."""
    folder = Path(directory) if directory is not None else find_bitstream_dir(backend, board)
    return load_bitstream(folder, backend, allow_timing_failure)[0]
