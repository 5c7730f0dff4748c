"""Board support: the catalog of FPGA targets, bitstream manifests, overlays and kernel drivers.

- catalog:   bitstreams/catalog.json -> BoardSpec (part, clock, link, power, kernel sizes)
- manifest:  bitstreams/<board>/manifest.json, written by the build, checked before loading
- transport: the one small interface the drivers speak (registers, streams, wait-for-done),
             implemented for PYNQ (pynq_transport), XRT (xrt_transport), cocotb simulation of the
             RTL (sim_transport), the RTL compiled by Verilator (verilator_transport) and C
             simulation of the HLS tops (csim_transport)
- replay_driver, mlp_driver, tabular_driver: one class per HLS IP, over any transport
- rtl:       the `rtl` backends: each kernel's driver over the Verilator transport
- overlay:   load a bitstream on a board after validating its manifest
- hls_budget: the block RAM the HLS designs take on each board (a model)

Nothing here imports pynq or pyxrt until a board is actually opened.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "BoardSpec": "pearl_fpga.board.catalog",
    "load_catalog": "pearl_fpga.board.catalog",
    "get_board": "pearl_fpga.board.catalog",
    "Manifest": "pearl_fpga.board.manifest",
    "load_manifest": "pearl_fpga.board.manifest",
    "INTERFACE_VERSIONS": "pearl_fpga.board.manifest",
    "Transport": "pearl_fpga.board.transport",
    "ReplayDriver": "pearl_fpga.board.replay_driver",
    "ReplayBoardBackend": "pearl_fpga.board.replay_driver",
    "MLPDriver": "pearl_fpga.board.mlp_driver",
    "MLPBoardBackend": "pearl_fpga.board.mlp_driver",
    "TabularDriver": "pearl_fpga.board.tabular_driver",
    "TabularBoardBackend": "pearl_fpga.board.tabular_driver",
    "CSimTransport": "pearl_fpga.board.csim_transport",
    "VerilatorTransport": "pearl_fpga.board.verilator_transport",
    "open_board": "pearl_fpga.board.overlay",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pearl_fpga.board' has no attribute {name!r}")
