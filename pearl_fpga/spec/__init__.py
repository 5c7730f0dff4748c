"""The bottom layer: each kernel's facts that every other layer shares (numpy only, no other
pearl_fpga import): number formats and their host-side conversions, limits, stream words, register
maps and the host-side checks that make every backend accept and reject the same inputs.
One module per kernel, named after its folder in hls/ (replay, mlp)."""
