# run_hls.tcl: C synthesis + export, or C/RTL co-simulation, of one kernel with the classic
# vitis_hls command (2024.1 / 2024.2; v++ --mode hls is used instead where it is installed).
# Called by hls/build.mk, which takes every figure from bitstreams/catalog.json:
#   vitis_hls -f hls/scripts/run_hls.tcl -tclargs <csynth|cosim> <kernel> <part> <period_ns> <vivado|vitis> <work_dir> "<cflags>"
lassign $argv step kernel part period_ns flow work_dir cflags

open_project -reset [file join $work_dir proj]
set_top ${kernel}_top
add_files hls/$kernel/$kernel.cpp -cflags $cflags
add_files -tb hls/$kernel/${kernel}_tb.cpp -cflags $cflags
open_solution -reset sol -flow_target $flow
set_part $part
create_clock -period $period_ns -name default
set_clock_uncertainty 12%

csynth_design
if {$step eq "cosim"} {
    # the testbench's main() returns non-zero on a mismatch, which fails the co-simulation
    cosim_design -trace_level none
} elseif {$flow eq "vitis"} {
    export_design -format xo -output [file join $work_dir ${kernel}_top.xo]
} else {
    export_design -format ip_catalog -vendor pearl_fpga -library pearl_fpga -version 1.0 \
        -description "pearl_fpga $kernel kernel (hls/$kernel/SPEC.md)"
}
exit
