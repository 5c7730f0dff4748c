"""The benchmarks behind `pearl-fpga bench <name>`, one module each; meta: what every JSON record carries."""
