"""From a trained run to a board: `export_run` writes the run's policy as the torch-free quantized files
`MLPInfer.load` reads (kernel/), the float ONNX and the quantized QONNX (pearl_fpga.export.policy).
`pearl-fpga export RUN` is its command line."""

from __future__ import annotations

from pearl_fpga.export.policy import KINDS, ExportResult, export_run, run_policy

__all__ = ["KINDS", "ExportResult", "export_run", "run_policy"]
