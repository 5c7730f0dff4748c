"""The Zynq block design of a board (hls/scripts/zynq_bd.tcl builds it; tests/pynq_stack/zynq_hwh.py writes
the .hwh of the same design): one AXI DMA per kernel copy, configured from this table, passed to the Tcl
by hls/build.mk (`python -m pearl_fpga.board.catalog zynq-design BOARD`), so the script and the test's
hardware handoff cannot disagree. Re-exported by pearl_fpga.board.catalog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pearl_fpga.spec.kernels import KERNELS

# AXI DMA v7.1 (PG021, "Memory Map Data Width" / "Stream Data Width"): the memory-map data width is one
# of these, and each channel's stream data width must not exceed its memory-map width, or the IP's
# parameter validation fails. At least 64 bits: the width of the PS's HP port the masters reach.
AXI_DMA_MM_WIDTHS = (32, 64, 128, 256, 512, 1024)
AXI_DMA_MIN_MM_WIDTH = 64


def axi_dma_config(kernel: str) -> dict[str, int]:
    """The AXI DMA user parameters (lower case, as CONFIG.<name> in Vivado and in the .hwh) of `kernel`'s
    streams: simple mode (no scatter-gather), stream widths of its SPEC.md words, memory-map widths
    max(64, stream width)."""
    if kernel not in KERNELS:
        from pearl_fpga.board.catalog import CatalogError

        raise CatalogError(f"unknown kernel {kernel!r}; known: {sorted(KERNELS)}")
    ip = KERNELS[kernel]
    mm2s_stream, s2mm_stream = 8 * ip.in_word_bytes, 8 * ip.out_word_bytes
    return {
        "c_include_sg": 0,
        "c_sg_length_width": 26,  # 64 MiB - 1 per transfer
        "c_m_axis_mm2s_tdata_width": mm2s_stream,
        "c_s_axis_s2mm_tdata_width": s2mm_stream,
        "c_m_axi_mm2s_data_width": max(AXI_DMA_MIN_MM_WIDTH, mm2s_stream),
        "c_m_axi_s2mm_data_width": max(AXI_DMA_MIN_MM_WIDTH, s2mm_stream),
        "c_mm2s_burst_size": 16,
        "c_s2mm_burst_size": 16,
    }


@dataclass(frozen=True)
class ZynqBlock:
    """One kernel of the Zynq block design: its HLS top, stream ports, copies and DMA parameters."""

    kernel: str
    top: str
    in_stream: str
    out_stream: str
    copies: int
    dma: dict[str, int]


def zynq_design(spec: Any) -> list[ZynqBlock]:
    """The kernels of `spec`'s block design, in the order the Tcl instantiates them."""
    return [ZynqBlock(k, ip.top, ip.in_stream, ip.out_stream, spec.kernels[k].get("instances", 1), axi_dma_config(k))
            for k, ip in KERNELS.items()]


def zynq_design_tcl(spec: Any) -> str:
    """zynq_design as one Tcl list: kernel top in_stream out_stream copies {name value ...} per kernel."""
    return " ".join(f"{b.kernel} {b.top} {b.in_stream} {b.out_stream} {b.copies} "
                    "{" + " ".join(f"{name} {value}" for name, value in b.dma.items()) + "}"
                    for b in zynq_design(spec))
