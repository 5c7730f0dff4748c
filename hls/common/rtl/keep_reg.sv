// A plain register that synthesis keeps as its own cells. Kernels register one copy of a signal per
// consumer so that no single flip-flop fans out across the die; Yosys's opt_merge would fold equal
// registers back into one, but it does not merge across a kept hierarchy boundary. The implementation
// flow flattens the netlist after synthesis (pearl_fpga/hw/ecp5.py), so the copies stay apart.
(* keep_hierarchy *)
module keep_reg #(
    parameter int WIDTH = 1
) (
    input  logic             clk,
    input  logic [WIDTH-1:0] d,
    output logic [WIDTH-1:0] q
);
    always_ff @(posedge clk) q <= d;
endmodule
