"""The one table of what every board needs to know about each kernel's IP (its SPEC.md, the build):
the HLS top and its stream ports, the stream word sizes, the interface version, the synthesis
parameters with their limits and their HLS macros, and the AXI DMA of its streams on a Zynq board.

The board modules (catalog, manifest, overlay, the simulation transports) derive their maps from it,
so adding a kernel means one entry here (and its entries in bitstreams/catalog.json, hls/build.mk's
HW_KERNELS and hls/scripts/zynq_bd.tcl, which are not Python).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelIP:
    """One kernel's IP, as its SPEC.md and the build define it."""

    top: str  # HLS top function / RTL module
    in_stream: str  # AXI4-Stream input port
    out_stream: str  # AXI4-Stream output port
    in_word_bytes: int
    out_word_bytes: int
    interface_version: int  # bump whenever the ports, stream words or register map change
    limits: dict[str, tuple[int, int]]  # synthesis parameter -> (min, max) a board may ask for
    hls_macros: dict[str, str]  # synthesis parameter -> the macro of hls/<kernel>/<kernel>.h that sets it

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


KERNELS: dict[str, KernelIP] = {
    "replay": KernelIP(  # interface 2: the IDENTITY command (0x05) on the stream
        "replay_top", "s_axis_cmd", "m_axis_resp", 16, 16, 2,
        {"capacity": (1, 1 << 20), "fanout": (2, 16), "max_batch": (1, 4096)},
        {"capacity": "REPLAY_CAPACITY", "fanout": "REPLAY_FANOUT"}),
    "mlp": KernelIP(  # interface 2: one output tlast per INFER batch
        "mlp_top", "s_axis_in", "m_axis_out", 2, 2, 2,
        {"lanes": (1, 256), "max_width": (1, 256), "max_layers": (1, 4), "max_batch": (1, 4096)},
        {"lanes": "MLP_LANES", "max_width": "MLP_MAX_WIDTH", "max_layers": "MLP_MAX_LAYERS", "max_batch": "MLP_MAX_BATCH"}),
    "tabular": KernelIP(  # interface 2: the IDENTITY command (0x05) on the stream
        "tabular_top", "s_axis_cmd", "m_axis_resp", 16, 16, 2,
        {"states": (1, 1 << 20), "actions": (1, 64), "max_batch": (1, 4096), "instances": (1, 16)},
        {"states": "TABULAR_STATES", "actions": "TABULAR_ACTIONS", "max_batch": "TABULAR_MAX_BATCH"}),
}
