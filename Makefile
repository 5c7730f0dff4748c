# pearl_fpga: the one entry point. Every target sets up .venv itself on first use.
#   make train   train DQN on CartPole-v1 emulating the catalog's default board, pynq-z2 (the main job)
#   make test    every test: the C simulations (make csim), the import layers (lint-imports), the types
#                (mypy), pytest, then the board path through the real pynq package in its own environment
#                (make test-pynq) and the Alveo path on the real XRT library in noop mode (make test-xrt)
#   make test-isa  the ISA-sensitive tests again under each instruction-set switch (part of make test)
#   make test-hw   the tests that build a whole board bitstream with the open flow (minutes each; not in make test)
#   make test-board-numpy  the board side without torch, on the oldest numpy with a wheel here (PYNQ images: 1.21)
#   make test-armhf  the board side on a 32-bit ARM Python (Debian armhf, qemu-user), bit for bit against this host
#   make sim     only the cocotb testbenches of the reference RTL
#   make csim    build and run the C++ testbenches of hls/ with g++ (csim-vendor: again on the vendor HLS headers)
#   make bench   the kernel benchmarks (pearl-fpga bench replay / mlp) against the installed baselines
#   make figures every benchmark behind the docs' figures, as JSON in docs/figures/, rendered into docs/benchmarks.md
#   make implement  each kernel's RTL placed, routed and timed on an ECP5 (open tools, out of context) at the
#                catalog sizes; JSON records in docs/figures/, rendered into docs/hardware.md; fails on a missed clock
# Tool flows for bitstreams (hls, cosim, bitstream, xclbin, resources) live in hls/build.mk.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TORCH  := torch==2.13.0
CXX    ?= g++
# The kernels: the folders of hls/ with a descriptor (kernel.json). Their generated <kernel>_config.h, the
# csim shapes beyond the default top and setup.py's build come from it (pearl_fpga/spec/descriptor.py).
KERNELS := $(patsubst hls/%/kernel.json,%,$(wildcard hls/*/kernel.json))
CSIM_UNITS := $(KERNELS) datamover  # the Alveo memory<->stream movers have a testbench too
DESCRIPTORS = $(HW_PY) -m pearl_fpga.spec.descriptor
HLS_SOURCES := $(wildcard hls/*.h hls/*/*.h hls/*/*.cpp hls/*/kernel.json pearl_fpga/native/*.cpp pearl_fpga/native/*.h)
# pynq as a PYNQ-Z2 image ships it (3.1; it pins numpy<2, so it gets its own environment). pynq 3.1
# imports pycparser.plyparser, which pycparser 3 removed. gymnasium: the env of the board example (no torch here).
PYNQ_VENV := .venv-pynq
PYNQ_PINS := "pynq==3.1.2" "pycparser<3" "gymnasium>=1.0" "pytest>=8" "pytest-timeout>=2.3" "hypothesis>=6.100"

.PHONY: venv native test test-hw test-pynq test-board-numpy test-armhf test-xrt test-isa sim csim csim-vendor train bench figures implement clean help
.DEFAULT_GOAL := help

help:
	@sed -n '2,15p' Makefile

# The virtual environment: the CPU build of torch first (an unpinned torch would pull a CUDA build),
# then the package with its training, export, test and simulation extras, installed editable (a
# board installs the package alone, without torch: docs/hardware.md).
$(VENV)/.stamp-deps: pyproject.toml setup.py
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python >= 3.10 or run make PYTHON=/path/to/python3"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel "pybind11>=2.12"
	$(PIP) install -q $(TORCH)
	$(PIP) install -q --no-build-isolation -e ".[train,export,test,sim,synth,ray]"
	touch $@

venv: $(VENV)/.stamp-deps

# Rebuild the native extensions when the HLS C++ or the bindings change (serialized: several
# make runs may share the tree).
$(VENV)/.stamp-native: $(VENV)/.stamp-deps $(HLS_SOURCES)
	$(DESCRIPTORS) --write
	flock $(VENV)/.build-lock $(PY) setup.py -q build_ext --inplace
	touch $@

native: $(VENV)/.stamp-native

test: native csim csim-vendor
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) -m pytest --durations=25 -m "not board_build and not hw_long"
	$(MAKE) --no-print-directory test-isa
	$(MAKE) --no-print-directory test-pynq
	$(MAKE) --no-print-directory test-xrt

# Other CPUs on this host: the tests whose results could depend on the instruction set (float
# tolerances, the learner's bits per thread count, the native SIMD paths) under the switches the
# libraries honour: ATen's kernel dispatch, MKL's and oneDNN's code paths, and the package's own native
# paths (PEARL_FPGA_NATIVE_ISA). A switch naming a wider ISA than the CPU has falls back to what it has.
ISA_TESTS := tests/test_algos.py tests/test_fused_learner.py tests/test_learner_program.py tests/test_sac_fused.py tests/test_threads.py tests/test_inline_record.py tests/test_mlp_kernel.py \
	tests/test_tabular_kernel.py
ISA_SWITCHES := ATEN_CPU_CAPABILITY=default ATEN_CPU_CAPABILITY=avx2 ATEN_CPU_CAPABILITY=avx512 \
	MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 PEARL_FPGA_NATIVE_ISA=avx512 PEARL_FPGA_NATIVE_ISA=avx2 \
	PEARL_FPGA_NATIVE_ISA=scalar
# The RTL simulations (sim) and the benchmark commands' record tests in these files do not depend on the
# host's instruction set; they run once, in pytest above.
# An ATen switch that lands on the path ATen takes anyway (avx512 on an AVX-512 CPU) is the main run's: skipped.
# The passes run side by side, one per core (tests/isa_passes.py), each one's output printed whole.
test-isa: native
	$(PY) tests/isa_passes.py $(ISA_SWITCHES) -- -q -p no:cacheprovider -m "not sim" -k "not bench_learner" $(ISA_TESTS)

# Whole board bitstreams through the open flow (Yosys, nextpnr-ecp5, ecppack from the venv): `make bitstream
# BOARD=ulx3s` end to end on a small design, with its manifest and timing gate; and the replay netlist with
# its leaves in block RAM. Minutes each, so not in make test, which runs each kernel's small implementation
# and netlist simulation instead.
test-hw: native
	$(PY) -m pytest -m "board_build or hw_long" --durations=5

# The board drivers through the real pynq package (Overlay, DefaultIP, the AXI DMA driver) on a mock
# Zynq device whose kernels are the HLS C++ tops (tests/pynq_stack). The package is used from the source
# tree (PYTHONPATH), so nothing is compiled for this environment.
$(PYNQ_VENV)/.stamp: Makefile
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found"; exit 1; }
	test -x $(PYNQ_VENV)/bin/python || $(PYTHON) -m venv $(PYNQ_VENV)
	$(PYNQ_VENV)/bin/python -m pip install -q --upgrade pip
	$(PYNQ_VENV)/bin/python -m pip install -q $(PYNQ_PINS)
	touch $@

test-pynq: $(PYNQ_VENV)/.stamp
	PYTHONPATH=$(CURDIR) $(PYNQ_VENV)/bin/python -m pytest -q tests/pynq_stack

# The board side in an interpreter that cannot import torch (tests/no_torch), on the oldest numpy this
# host's Python has a wheel of: PYNQ 3.x images ship numpy 1.21.5, which has no wheel for Python >= 3.11
# (docs/hardware.md). Not part of make test (it downloads numpy); BOARD_NUMPY=... picks another.
BOARD_VENV := .venv-board
BOARD_NUMPY ?= 1.23.5
BOARD_TESTS := tests/test_board_install.py tests/test_board_driver.py tests/test_board_csim.py tests/test_tabular_kernel.py
test-board-numpy: native
	test -x $(BOARD_VENV)/bin/python || $(PYTHON) -m venv $(BOARD_VENV)
	$(BOARD_VENV)/bin/python -m pip install -q "numpy==$(BOARD_NUMPY)" "rich>=13" "gymnasium>=1.0" "pytest>=8" \
	  "pytest-timeout>=2.3" "hypothesis>=6.100"
	PYTHONPATH=$(CURDIR)/tests/no_torch:$(CURDIR) $(BOARD_VENV)/bin/python -m pytest -q -p no:cacheprovider \
	  $(BOARD_TESTS) -k "not requires_no_torch"

# The board side on a 32-bit ARM Python (Debian's armhf python3 and numpy under qemu-user), bit for bit
# against this host: tests/armhf/run.sh. Not part of make test (it downloads Debian packages).
test-armhf: native
	sh tests/armhf/run.sh

# The Alveo transport and drivers on the real XRT library (Debian's libxrt 2.13) in noop mode, through a
# test-only pyxrt built against it (tests/xrt_stack). The packages are installed where this runs as root
# with apt; elsewhere the tier is skipped with the reason printed.
XRT_DEBS := libxrt1 libxrt-dev uuid-dev
test-xrt: $(VENV)/.stamp-deps
	@if ! dpkg -s $(XRT_DEBS) >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "test-xrt: installing $(XRT_DEBS)"; \
	    { DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(XRT_DEBS) >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(XRT_DEBS) >/dev/null; }; } || \
	      { echo "test-xrt: SKIPPED: apt-get could not install $(XRT_DEBS)"; exit 0; }; \
	  else \
	    echo "test-xrt: SKIPPED: $(XRT_DEBS) are not installed and this is not root with apt-get; install them (Debian 12+: apt-get install $(XRT_DEBS)) to run the Alveo path on the real XRT library"; \
	    exit 0; \
	  fi; \
	fi; \
	PEARL_FPGA_XRT_TESTS=1 $(PY) -m pytest -q -rs -p no:cacheprovider tests/xrt_stack tests/test_xrt_kernels.py

sim: native
	$(PY) -m pytest -m sim

# C simulation: each kernel's testbench main() returns non-zero on a mismatch; then the tops again at
# each descriptor's csim_shapes (regenerating any <kernel>_config.h whose kernel.json changed first).
csim:
	@mkdir -p build/csim
	@$(DESCRIPTORS) --write csim-shapes > build/csim/shapes.txt
	@set -e; for k in $(CSIM_UNITS); do \
	  if [ -f hls/$$k/$${k}_tb.cpp ]; then \
	    echo "csim $$k"; \
	    $(CXX) -std=c++17 -O2 -Wall -Wno-unknown-pragmas -Wno-unused-label -Ihls -Ihls/$$k hls/$$k/$$k.cpp hls/$$k/$${k}_tb.cpp -o build/csim/$${k}_tb; \
	    ./build/csim/$${k}_tb; \
	  fi; \
	done
	@set -e; while read -r k shape defines; do \
	  echo "csim $$k top at $$defines"; \
	  $(CXX) -std=c++17 -O2 -Wall -Wno-unknown-pragmas -Wno-unused-label -Ihls -Ihls/$$k $$defines \
	    hls/$$k/$$k.cpp hls/$$k/$${k}_tb.cpp -o build/csim/$${k}_tb_$$shape; \
	  ./build/csim/$${k}_tb_$$shape; \
	done < build/csim/shapes.txt

# The same testbenches on the code Vitis HLS sees (-DPEARL_VENDOR_HLS, C++14): the real ap_int.h and
# hls_stream.h, the Apache-2.0 copies that the hls4ml wheel ships (installed without its Python
# dependencies, never imported, never copied here); PEARL_OPEN_HLS_HEADERS declares the two stream beat
# types of ap_axi_sdata.h, which no open package ships (hls/common/hls_compat.h).
HLS4ML := hls4ml==1.3.0
$(VENV)/.stamp-vendor-hls: $(VENV)/.stamp-deps
	$(PIP) install -q --no-deps "$(HLS4ML)"
	touch $@

csim-vendor: $(VENV)/.stamp-vendor-hls
	@mkdir -p build/csim-vendor
	@set -e; inc=$$($(PY) -c 'import importlib.util, pathlib; s = importlib.util.find_spec("hls4ml"); print(pathlib.Path(s.submodule_search_locations[0]) / "templates/vivado/ap_types" if s else "")'); \
	test -f "$$inc/ap_int.h" || { echo "error: the vendor HLS headers (ap_int.h of $(HLS4ML)) are missing; run $(PIP) install --no-deps '$(HLS4ML)'" >&2; exit 1; }; \
	for k in $(CSIM_UNITS); do \
	  echo "csim $$k on the vendor HLS headers"; \
	  $(CXX) -std=c++14 -O1 -w -DPEARL_VENDOR_HLS -DPEARL_OPEN_HLS_HEADERS -I"$$inc" -Ihls -Ihls/$$k hls/$$k/$$k.cpp hls/$$k/$${k}_tb.cpp -o build/csim-vendor/$${k}_tb; \
	  ./build/csim-vendor/$${k}_tb; \
	done

train: native
	$(VENV)/bin/pearl-fpga train --algo dqn --env CartPole-v1 --steps 50000 --seed 0 --placement fpga-emu

# The baselines the benchmarks compare against (cpprb, TorchRL, Stable-Baselines3).
$(VENV)/.stamp-bench: $(VENV)/.stamp-deps
	$(PIP) install -q --no-build-isolation -e ".[train,export,test,sim,synth,ray,bench]"
	touch $@

bench: native $(VENV)/.stamp-bench
	$(VENV)/bin/pearl-fpga bench replay
	$(VENV)/bin/pearl-fpga bench mlp

# Every figure of the docs: each benchmark writes its JSON record (command, commit, machine, load) into
# docs/figures/, then docs/render.py turns them into docs/benchmarks.md. Run it on a quiet machine.
FIG := docs/figures
BENCH := $(VENV)/bin/pearl-fpga bench
figures: native $(VENV)/.stamp-bench
	@mkdir -p $(FIG)
	$(BENCH) train --algo dqn --seeds 0 1 2 --json $(FIG)/train-dqn.json --plot $(FIG)/train-dqn.png
	$(BENCH) train --algo dqn --seeds 0 1 2 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --json $(FIG)/train-dqn-bf16.json
	$(BENCH) train --algo ddpg --seeds 0 1 2 --json $(FIG)/train-ddpg.json --plot $(FIG)/train-ddpg.png
	$(BENCH) train --algo td3 --seeds 0 1 2 --json $(FIG)/train-td3.json --plot $(FIG)/train-td3.png
	$(BENCH) train --algo ddpg --seeds 0 1 2 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --json $(FIG)/train-ddpg-bf16.json
	$(BENCH) train --algo td3 --seeds 0 1 2 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --json $(FIG)/train-td3-bf16.json
	$(BENCH) train --algo sac --seeds 0 1 2 --json $(FIG)/train-sac.json --plot $(FIG)/train-sac.png
	$(BENCH) train --algo sac --seeds 0 1 2 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --json $(FIG)/train-sac-bf16.json
	$(BENCH) learner --compile --sbx --profile --json $(FIG)/learner.json
	$(BENCH) train --algo dqn --steps 50000 --seeds 0 1 2 3 4 --no-sb3 --no-sbx --keep-best --eval-episodes 20 --json $(FIG)/quality-dqn.json
	$(BENCH) train --algo ddpg --steps 20000 --seeds 0 1 2 3 4 --no-sb3 --no-sbx --keep-best --eval-episodes 10 --json $(FIG)/quality-ddpg.json
	$(BENCH) train --algo td3 --steps 20000 --seeds 0 1 2 3 4 --no-sb3 --no-sbx --keep-best --eval-episodes 10 --json $(FIG)/quality-td3.json
	$(BENCH) train --algo sac --steps 20000 --seeds 0 1 2 3 4 --no-sb3 --no-sbx --keep-best --eval-episodes 10 --json $(FIG)/quality-sac.json
	$(BENCH) train --algo dqn --steps 50000 --seeds 0 1 2 3 4 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --no-sbx --keep-best --eval-episodes 20 --json $(FIG)/quality-dqn-bf16.json
	$(BENCH) train --algo ddpg --steps 20000 --seeds 0 1 2 3 4 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --no-sbx --keep-best --eval-episodes 10 --json $(FIG)/quality-ddpg-bf16.json
	$(BENCH) train --algo td3 --steps 20000 --seeds 0 1 2 3 4 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --no-sbx --keep-best --eval-episodes 10 --json $(FIG)/quality-td3-bf16.json
	$(BENCH) train --algo sac --steps 20000 --seeds 0 1 2 3 4 --placement act=cpu-kernel,learn=cpu-bf16 --no-sb3 --no-sbx --keep-best --eval-episodes 10 --json $(FIG)/quality-sac-bf16.json
	$(BENCH) replay --repeats 300 --json $(FIG)/replay.json
	$(BENCH) mlp --json $(FIG)/mlp.json
	$(BENCH) plan --steps 3000 --json $(FIG)/plan.json --plot $(FIG)/plan.png
	$(BENCH) tabular --json $(FIG)/tabular.json
	$(BENCH) tabular-policies --json $(FIG)/tabular-policies.json
	$(BENCH) ray --json $(FIG)/ray.json --plot $(FIG)/ray.png
	$(BENCH) fuzz --json $(FIG)/fuzz.json
	$(MAKE) --no-print-directory implement
	$(PY) docs/render.py

# The open implementation flow (pearl_fpga/hw, docs/hardware.md): Yosys synth_ecp5 and nextpnr-ecp5 from
# the YoWASP wheels of the synth extra, out of context on IMPL_PART at IMPL_BOARD's catalog sizes and clock.
# Each kernel takes minutes (tens at the catalog sizes); IMPL_SET="replay.capacity=300" overrides a size.
# IMPL_ROUTER=router2 picks nextpnr's negotiated-congestion router. Exit 1 (after writing every record)
# when a kernel misses its clock.
IMPL_PART    ?= LFE5U-85F-6BG381C
IMPL_BOARD   ?= pynq-z2
IMPL_KERNELS ?= replay mlp tabular
IMPL_SET     ?=
IMPL_ROUTER  ?= router1
implement: $(VENV)/.stamp-deps
	@mkdir -p $(FIG)
	nice -n 10 $(PY) -m pearl_fpga.hw.implement --kernels $(IMPL_KERNELS) --board $(IMPL_BOARD) --part $(IMPL_PART) \
		--router $(IMPL_ROUTER) --json-dir $(FIG) $(foreach s,$(IMPL_SET),--set $(s)); status=$$?; $(PY) docs/render.py; exit $$status

clean:
	rm -rf build sim_build pearl_fpga/*.so $(VENV)/.stamp-native

-include hls/build.mk
