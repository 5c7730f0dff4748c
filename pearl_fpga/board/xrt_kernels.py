"""The Alveo kernels as XRT sees them: each kernel's arguments in order, with their kind and
AXI4-Lite offset, and the compute units and stream connections of the xclbin.

One table for three readers: the XRT transport (the argument index of each register it is given),
the xclbin's kernel metadata that the tests generate (tests/xrt_stack/xclbin_writer.py), and the checks
that hls/<kernel>/*.cpp's INTERFACE pragmas and hls/scripts/alveo_connectivity.cfg say the same
(tests/xrt_stack/test_xrt_kernels.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl_fpga.spec.kernels import KERNELS

# Argument kinds, with the addressQualifier XRT's kernel metadata gives them.
SCALAR_IN = "scalar_in"
SCALAR_OUT = "scalar_out"  # an output register: XRT-managed kernels cannot read it back
POINTER = "pointer"  # an m_axi buffer: its 64-bit device address in the control block
STREAM = "stream"  # an AXI4-Stream port wired by the xclbin's connectivity, not set by the host
ADDRESS_QUALIFIER = {SCALAR_IN: 0, SCALAR_OUT: 0, POINTER: 1, STREAM: 4}


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str
    offset: int  # byte offset in the control block (0 for streams)
    size: int  # bytes in the control block (0 for streams)


# Block-level control protocols (the xclbin's IP_LAYOUT, xclbin.h IP_CONTROL): the kernel tops declare
# ap_ctrl_hs (the drivers' start/poll protocol); the data movers declare none and take the Vitis kernel
# flow's default, ap_ctrl_chain (UG1399, "Vitis Flow (Kernel Mode)": ap_ctrl_chain is the default).
AP_CTRL_HS, AP_CTRL_CHAIN = "ap_ctrl_hs", "ap_ctrl_chain"


@dataclass(frozen=True)
class XrtKernel:
    name: str  # the HLS top / xclbin kernel name
    args: tuple[Arg, ...]  # in the function's order: XRT's argument index is the position here
    control: str = AP_CTRL_HS  # its block-level control protocol

    def index_of(self, offset: int) -> int | None:
        """The argument index of the scalar input at control offset `offset`, or None."""
        for i, arg in enumerate(self.args):
            if arg.kind == SCALAR_IN and arg.offset == offset:
                return i
        return None

    def arg(self, name: str) -> Arg:
        return next(a for a in self.args if a.name == name)


def _scalars(*items: tuple[str, str, int]) -> tuple[Arg, ...]:
    return tuple(Arg(name, kind, offset, 4) for name, kind, offset in items)


def _mover(name: str, pointer: str, stream: str, pointer_first: bool) -> XrtKernel:
    # Vitis HLS places a 64-bit pointer at 0x10 and the next argument 12 bytes on (0x1c).
    ptr, strm = Arg(pointer, POINTER, 0x10, 8), Arg(stream, STREAM, 0, 0)
    return XrtKernel(name, ((ptr, strm) if pointer_first else (strm, ptr)) + (Arg("n", SCALAR_IN, 0x1C, 4),), AP_CTRL_CHAIN)


def _cmd_streams(kernel: str) -> tuple[Arg, ...]:
    ip = KERNELS[kernel]
    return (Arg(ip.in_stream, STREAM, 0, 0), Arg(ip.out_stream, STREAM, 0, 0))


TOPS: dict[str, XrtKernel] = {
    "replay": XrtKernel("replay_top", _cmd_streams("replay") + (
        Arg("n_cmds", SCALAR_IN, 0x10, 4), Arg("capacity", SCALAR_OUT, 0x18, 4), Arg("fanout", SCALAR_OUT, 0x20, 4),
        Arg("total", SCALAR_OUT, 0x28, 8))),
    "mlp": XrtKernel("mlp_top", _cmd_streams("mlp") + _scalars(
        ("mode", SCALAR_IN, 0x10), ("batch", SCALAR_IN, 0x18), ("lanes", SCALAR_OUT, 0x20),
        ("max_width", SCALAR_OUT, 0x28), ("max_layers", SCALAR_OUT, 0x30), ("error", SCALAR_OUT, 0x38))),
    "tabular": XrtKernel("tabular_top", _cmd_streams("tabular") + _scalars(
        ("n_cmds", SCALAR_IN, 0x10), ("alpha", SCALAR_IN, 0x18), ("gamma", SCALAR_IN, 0x20), ("sarsa", SCALAR_IN, 0x28),
        ("n_actions", SCALAR_IN, 0x30), ("max_states", SCALAR_OUT, 0x38), ("max_actions", SCALAR_OUT, 0x40),
        ("updates", SCALAR_OUT, 0x48))),
}
MOVERS: dict[str, tuple[XrtKernel, XrtKernel]] = {
    k: (_mover(f"mm2s_{k}", "in", "out", True), _mover(f"s2mm_{k}", "out", "in", False)) for k in TOPS
}


def all_kernels() -> list[XrtKernel]:
    return [k for name in TOPS for k in (TOPS[name], *MOVERS[name])]


def compute_units(kernel: str, instances: int = 1) -> list[tuple[str, str]]:
    """(xclbin kernel, compute unit) of `kernel`'s copies and their movers, numbered from 1 as the
    connectivity file names them (<name>_<i>)."""
    names = [TOPS[kernel].name, *(m.name for m in MOVERS[kernel])]
    return [(n, f"{n}_{i}") for i in range(1, instances + 1) for n in names]


def stream_connections(kernel: str, instances: int = 1) -> list[tuple[str, str]]:
    """(from cu.port, to cu.port) pairs: mm2s -> kernel input stream, kernel output stream -> s2mm."""
    ip = KERNELS[kernel]
    top = TOPS[kernel].name
    return [pair for i in range(1, instances + 1) for pair in (
        (f"mm2s_{kernel}_{i}.out", f"{top}_{i}.{ip.in_stream}"), (f"{top}_{i}.{ip.out_stream}", f"s2mm_{kernel}_{i}.in"))]


def cu_spec(kernel_name: str, instance: int = 0) -> str:
    """The name XRT opens a compute unit by: "<kernel>:{<kernel>_<instance + 1>}"."""
    return f"{kernel_name}:{{{kernel_name}_{instance + 1}}}"
