"""The Zynq block design as data: what hls/scripts/zynq_bd.tcl builds and what the tests' .hwh describes.

hls/build.mk passes `python -m pearl_fpga.board.catalog zynq-design <board>` (zynq_design_tcl) to the
Tcl, and tests/pynq_stack/zynq_hwh.py writes the hardware handoff of the same table, so the script
and the mock board cannot disagree: per kernel its HLS top, the VLNV under which Vitis HLS exports it
(the same values pearl_fpga.board.vitis_cfg writes into the HLS configuration), its stream ports, its
copies and the parameters of the AXI DMA of each copy. Re-exported by pearl_fpga.board.catalog, which
imports this module (so this one takes the board spec untyped and never imports the catalog).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pearl_fpga.errors import CatalogError
from pearl_fpga.spec.kernels import KERNELS

# The IP catalog identity of every exported kernel (Vitis HLS package.ip.vendor/library/version): the
# block design instantiates <vendor>:<library>:<top>:<version>.
IP_VENDOR, IP_LIBRARY, IP_VERSION = "pearl_fpga", "pearl_fpga", "1.0"

# AXI DMA v7.1 (PG021, "Memory Map Data Width" / "Stream Data Width"): the memory-map data width is one
# of these, and each channel's stream data width must not exceed its memory-map width, or the IP's
# parameter validation fails. At least 64 bits: the width of the PS's HP port the masters reach.
AXI_DMA_MM_WIDTHS = (32, 64, 128, 256, 512, 1024)
AXI_DMA_MIN_MM_WIDTH = 64


def ip_vlnv(top: str) -> str:
    """The VLNV of an HLS top exported as Vivado IP, e.g. pearl_fpga:pearl_fpga:replay_top:1.0."""
    return f"{IP_VENDOR}:{IP_LIBRARY}:{top}:{IP_VERSION}"


def is_zynq7(part: str) -> bool:
    """A Zynq-7000 part (xc7z...); the others of the catalog are Zynq UltraScale+ (xczu..., the K26's xck26)."""
    return part.lower().startswith("xc7z")


def dma_address_width(part: str) -> int:
    """The AXI DMA's c_addr_width (PG021, "Address Width", 32..64): 32 on a Zynq-7000, whose PS has a
    32-bit address map; 64 on a Zynq UltraScale+, whose DDR reaches above 4 GB (the ZCU104's second
    region starts at 0x8_0000_0000), so that a buffer pynq allocates there gets its upper address bits."""
    return 32 if is_zynq7(part) else 64


def axi_dma_config(kernel: str, part: str) -> dict[str, int]:
    """The AXI DMA user parameters (lower case, as CONFIG.<name> in Vivado and in the .hwh) of `kernel`'s
    streams on `part`: simple mode (no scatter-gather), stream widths of its SPEC.md words, memory-map
    widths max(64, stream width), the part's address width."""
    if kernel not in KERNELS:
        raise CatalogError(f"unknown kernel {kernel!r}; known: {sorted(KERNELS)}")
    ip = KERNELS[kernel]
    mm2s_stream, s2mm_stream = 8 * ip.in_word_bytes, 8 * ip.out_word_bytes
    return {
        "c_include_sg": 0,
        "c_sg_length_width": 26,  # 64 MiB - 1 per transfer
        "c_addr_width": dma_address_width(part),
        "c_m_axis_mm2s_tdata_width": mm2s_stream,
        "c_s_axis_s2mm_tdata_width": s2mm_stream,
        "c_m_axi_mm2s_data_width": max(AXI_DMA_MIN_MM_WIDTH, mm2s_stream),
        "c_m_axi_s2mm_data_width": max(AXI_DMA_MIN_MM_WIDTH, s2mm_stream),
        "c_mm2s_burst_size": 16,
        "c_s2mm_burst_size": 16,
    }


@dataclass(frozen=True)
class ZynqBlock:
    """One kernel of the Zynq block design: its HLS top and IP VLNV, stream ports, copies and DMA parameters."""

    kernel: str
    top: str
    vlnv: str
    in_stream: str
    out_stream: str
    copies: int
    dma: dict[str, int]


def zynq_design(spec: Any) -> list[ZynqBlock]:
    """The kernels of `spec`'s block design, in the order the Tcl instantiates them."""
    return [ZynqBlock(k, ip.top, ip_vlnv(ip.top), ip.in_stream, ip.out_stream, spec.kernels[k].get("instances", 1),
                      axi_dma_config(k, spec.part))
            for k, ip in KERNELS.items()]


def zynq_design_tcl(spec: Any) -> str:
    """zynq_design as one Tcl list: kernel top vlnv in_stream out_stream copies {name value ...} per kernel."""
    return " ".join(f"{b.kernel} {b.top} {b.vlnv} {b.in_stream} {b.out_stream} {b.copies} "
                    "{" + " ".join(f"{name} {value}" for name, value in b.dma.items()) + "}"
                    for b in zynq_design(spec))
