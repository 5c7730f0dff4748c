"""The bottom layer: each kernel's facts that every other layer shares (numpy and the standard library,
no pearl_fpga import but the descriptors' reader): number formats and their host-side conversions,
limits, stream words, register maps and the host-side checks that make every backend accept and reject
the same inputs. One module per kernel, named after its folder in hls/ (replay, mlp, tabular); the
limits come from that folder's kernel.json (descriptor.py)."""
