"""The one table of what every board needs to know about each kernel's IP, derived from the kernels'
descriptors (hls/<kernel>/kernel.json, pearl_fpga.spec.descriptor): the HLS top and its stream ports,
the stream word sizes, the interface version, the synthesis parameters with their limits and their
HLS macros, and the AXI DMA of its streams on a Zynq board.

The board modules (catalog, manifest, overlay, the simulation transports) derive their maps from it,
and hls/build.mk and hls/scripts/zynq_bd.tcl read it through `python -m pearl_fpga.board.catalog`;
adding a kernel adds its descriptor, nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from pearl_fpga.spec.descriptor import KernelDescriptor, descriptors


@dataclass(frozen=True)
class KernelIP:
    """One kernel's IP, as its descriptor (and SPEC.md) define it."""

    top: str  # HLS top function / RTL module
    in_stream: str  # AXI4-Stream input port
    out_stream: str  # AXI4-Stream output port
    in_word_bytes: int
    out_word_bytes: int
    interface_version: int  # bump whenever the ports, stream words or register map change
    limits: dict[str, tuple[int, int]]  # synthesis parameter -> (min, max) a board may ask for
    hls_macros: dict[str, str]  # synthesis parameter -> the macro of hls/<kernel>/<kernel>_config.h that sets it
    choices: dict[str, tuple[int, ...]]  # synthesis parameter -> its only allowed values, where the range is not enough

    @classmethod
    def from_descriptor(cls, d: KernelDescriptor) -> KernelIP:
        return cls(d.top, d.in_stream.port, d.out_stream.port, d.in_stream.word_bytes, d.out_stream.word_bytes,
                   d.interface_version, {p.name: (p.min, p.max) for p in d.parameters.values()}, d.macros,
                   {p.name: p.choices for p in d.parameters.values() if p.choices is not None})

    @property
    def parameters(self) -> tuple[str, ...]:
        """The synthesis parameters a catalog entry and a manifest hold, in order."""
        return tuple(self.limits)

    @property
    def ip_name(self) -> str:
        """The first instance's name in a Zynq block design (<top>_0)."""
        return f"{self.top}_0"

    @property
    def dma_name(self) -> str:
        """The AXI DMA of the first instance's streams in a Zynq block design."""
        return f"dma_{self.top.removesuffix('_top')}"


KERNELS: dict[str, KernelIP] = {name: KernelIP.from_descriptor(d) for name, d in descriptors().items()}


def commands_ii(kernel: str, clock_mhz: float) -> int:
    """The initiation interval of `kernel`'s HLS command loop at a kernel clock of `clock_mhz`: 1 up to its
    descriptor's II1_MAX_MHZ, 2 above it, where the loop's one-cycle recurrence (SPEC.md, "Initiation
    interval") does not fit a clock period; 1 for a kernel without such a loop (mlp)."""
    d = descriptors()[kernel]
    if "II1_MAX_MHZ" not in d.constants:
        return 1
    return 1 if clock_mhz <= d.constant("II1_MAX_MHZ") else 2
