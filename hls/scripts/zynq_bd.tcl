# zynq_bd.tcl: block design, bitstream and reports for a Zynq board (make bitstream BOARD=...).
#
#   vivado -mode batch -source hls/scripts/zynq_bd.tcl -tclargs <board> <part> <board_part> <clock_mhz> <build_dir> <out_prefix> <design> [<board_repo>]
#
# The design: the processing system (PS7 on Zynq-7000, PS8 on Zynq UltraScale+) with its PL clock
# at <clock_mhz>; the HLS kernels of <design>, <top>_0 each (IP exported into <build_dir>/hls/), with
# their AXI4-Lite control on the PS's general-purpose master port; one AXI
# DMA per kernel in simple mode whose MM2S channel feeds the kernel's input stream and whose S2MM
# channel takes its output stream, both DMA masters on one high-performance port into DDR through one
# interconnect. A kernel may come in several copies (<top>_<i>, DMA dma_<kernel> for copy 0 and
# dma_<kernel>_<i> for the others). These names are what the manifest records and what
# pearl_fpga/board/pynq_transport.py looks up in the .hwh.
# <design> is the Tcl list `python -m pearl_fpga.board.catalog zynq-design <board>` prints (hls/build.mk
# passes it, pearl_fpga/board/zynq_design.py): the kernels of hls/*/kernel.json (this script names none),
# per kernel its top, the VLNV its HLS configuration exports it under, stream ports, copies and AXI DMA
# parameters (address width of the part, stream widths of its
# SPEC.md words, memory-map widths max(64, stream width) as PG021 requires), the same table from which
# the tests write the .hwh of this design.
# The build fails (exit 1, no .bit copied) when routed timing is not met (setup WNS or hold WHS < 0):
# a Zynq bitstream that misses timing corrupts data silently.
# Board files: <board_part> must be known to Vivado. hls/build.mk checks for them before Vivado starts
# (python -m pearl_fpga.board.board_files) and passes the folder it found them in as <board_repo> when
# they are not in Vivado's own store; TUL's pynq-z2 files are not installed with Vivado (docs/hardware.md).
lassign $argv board part board_part clock_mhz build_dir out_prefix design board_repo

if {$board_repo ne ""} {
    set_param board.repoPaths [list $board_repo]
}
if {[llength [get_board_parts -quiet $board_part]] == 0} {
    puts stderr "error: Vivado does not know the board part $board_part: install its board files (docs/hardware.md, \"Board files\") and run again"
    exit 2
}
create_project -force pearl_fpga [file join $build_dir vivado] -part $part
set_property board_part $board_part [current_project]
set_property ip_repo_paths [list [file join $build_dir hls]] [current_project]
update_ip_catalog
create_bd_design pearl_fpga

if {[string match xc7z* $part]} {
    set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:processing_system7 ps]
    apply_bd_automation -rule xilinx.com:bd_rule:processing_system7 -config {make_external "FIXED_IO, DDR" apply_board_preset "1"} $ps
    set_property -dict [list CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ $clock_mhz CONFIG.PCW_USE_M_AXI_GP0 1 CONFIG.PCW_USE_S_AXI_HP0 1] $ps
    set master /ps/M_AXI_GP0
    set hp /ps/S_AXI_HP0
    set clk /ps/FCLK_CLK0
} else {
    set ps [create_bd_cell -type ip -vlnv xilinx.com:ip:zynq_ultra_ps_e ps]
    apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e -config {apply_board_preset "1"} $ps
    set_property -dict [list CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ $clock_mhz CONFIG.PSU__USE__M_AXI_GP0 1 \
        CONFIG.PSU__USE__M_AXI_GP1 0 CONFIG.PSU__USE__S_AXI_GP2 1] $ps
    set master /ps/M_AXI_HPM0_FPD
    set hp /ps/S_AXI_HP0_FPD
    set clk /ps/pl_clk0
}
set axi_cfg [list Clk_master $clk Clk_slave $clk Clk_xbar $clk]

# The interconnect in front of the HP port, made by the first DMA master's automation; every later
# master's automation targets that master's own (unconnected) pin and joins this interconnect, as
# Vivado's journal does: the HP port is connected once, so it cannot be the target again.
set hp_intc ""
foreach {kernel top vlnv in_stream out_stream copies dma_config} $design {
    set dma_props {}
    foreach {name value} $dma_config {
        lappend dma_props CONFIG.$name $value
    }
    for {set i 0} {$i < $copies} {incr i} {
        set ip ${top}_$i
        set dma_name [expr {$i == 0 ? "dma_$kernel" : "dma_${kernel}_$i"}]
        create_bd_cell -type ip -vlnv $vlnv $ip
        set dma [create_bd_cell -type ip -vlnv xilinx.com:ip:axi_dma $dma_name]
        set_property -dict $dma_props $dma
        connect_bd_intf_net [get_bd_intf_pins $dma_name/M_AXIS_MM2S] [get_bd_intf_pins $ip/$in_stream]
        connect_bd_intf_net [get_bd_intf_pins $ip/$out_stream] [get_bd_intf_pins $dma_name/S_AXIS_S2MM]
        apply_bd_automation -rule xilinx.com:bd_rule:axi4 -config [concat [list Master $master] $axi_cfg] [get_bd_intf_pins $ip/s_axi_control]
        apply_bd_automation -rule xilinx.com:bd_rule:axi4 -config [concat [list Master $master] $axi_cfg] [get_bd_intf_pins $dma_name/S_AXI_LITE]
        foreach port {M_AXI_MM2S M_AXI_S2MM} {
            if {$hp_intc eq ""} {
                apply_bd_automation -rule xilinx.com:bd_rule:axi4 \
                    -config [concat [list Master /$dma_name/$port Slave $hp intc_ip {New AXI Interconnect}] $axi_cfg] [get_bd_intf_pins $hp]
                set hp_intc [get_bd_cells -of_objects [get_bd_intf_pins -of_objects [get_bd_intf_nets -of_objects [get_bd_intf_pins $hp]] -filter {MODE == Master}]]
            } else {
                apply_bd_automation -rule xilinx.com:bd_rule:axi4 \
                    -config [concat [list Master /$dma_name/$port Slave $hp intc_ip $hp_intc] $axi_cfg] [get_bd_intf_pins $dma_name/$port]
            }
        }
    }
}

assign_bd_address
validate_bd_design
save_bd_design
set bd [get_files pearl_fpga.bd]
make_wrapper -files $bd -top
add_files -norecurse [file join $build_dir vivado pearl_fpga.gen sources_1 bd pearl_fpga hdl pearl_fpga_wrapper.v]
set_property top pearl_fpga_wrapper [current_fileset]
generate_target all $bd

launch_runs impl_1 -to_step write_bitstream -jobs 2
wait_on_run impl_1
if {[get_property PROGRESS [get_runs impl_1]] ne "100%"} {
    puts stderr "error: implementation did not complete; see [file join $build_dir vivado pearl_fpga.runs impl_1 runme.log]"
    exit 1
}
open_run impl_1
file mkdir [file join $build_dir reports]
report_utilization -file [file join $build_dir reports utilization.rpt]
report_timing_summary -file [file join $build_dir reports timing_summary.rpt]
# The timing gate: worst setup slack (WNS) and worst hold slack (WHS) of the routed design.
set wns [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -setup]]
set whs [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -hold]]
if {$wns eq "" || $whs eq "" || $wns < 0 || $whs < 0} {
    puts stderr "error: timing not met at $clock_mhz MHz (WNS $wns ns, WHS $whs ns); no bitstream written. See [file join $build_dir reports timing_summary.rpt]; lower clock_mhz or the kernel sizes in bitstreams/catalog.json"
    exit 1
}
file mkdir [file dirname $out_prefix]
file copy -force [lindex [glob [file join $build_dir vivado pearl_fpga.runs impl_1 *.bit]] 0] ${out_prefix}.bit
file copy -force [file join $build_dir vivado pearl_fpga.gen sources_1 bd pearl_fpga hw_handoff pearl_fpga.hwh] ${out_prefix}.hwh
puts "wrote ${out_prefix}.bit and ${out_prefix}.hwh"
exit
