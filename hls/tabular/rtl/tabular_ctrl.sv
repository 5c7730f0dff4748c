`default_nettype none
// AXI4-Lite control slave of tabular_top (register map of hls/tabular/SPEC.md): the shared ap_ctrl_hs
// core (hls/common/rtl/axil_ap_ctrl.sv) plus this kernel's registers:
//   0x10 n_cmds, 0x18 alpha, 0x20 gamma, 0x28 sarsa (bit 0), 0x30 n_actions (W/R);
//   0x38 max_states, 0x40 max_actions (R, the synthesized table), 0x48 updates (R, of the last run)
module tabular_ctrl #(
    parameter int N_STATES  = 16,  // reported at 0x38
    parameter int N_ACTIONS = 4    // reported at 0x40
) (
    input  wire logic        ap_clk,
    input  wire logic        ap_rst_n,
    input  wire logic [7:0]  s_axi_control_awaddr,
    input  wire logic        s_axi_control_awvalid,
    output logic             s_axi_control_awready,
    input  wire logic [31:0] s_axi_control_wdata,
    input  wire logic [3:0]  s_axi_control_wstrb,
    input  wire logic        s_axi_control_wvalid,
    output logic             s_axi_control_wready,
    output logic [1:0]       s_axi_control_bresp,
    output logic             s_axi_control_bvalid,
    input  wire logic        s_axi_control_bready,
    input  wire logic [7:0]  s_axi_control_araddr,
    input  wire logic        s_axi_control_arvalid,
    output logic             s_axi_control_arready,
    output logic [31:0]      s_axi_control_rdata,
    output logic [1:0]       s_axi_control_rresp,
    output logic             s_axi_control_rvalid,
    input  wire logic        s_axi_control_rready,
    output logic             interrupt,
    // kernel side
    output logic             ctrl_start,     // ap_start register
    input  wire logic        ctrl_idle,      // ap_idle
    input  wire logic        ctrl_done,      // one-cycle pulse when a run finishes
    output logic [31:0]      ctrl_n_cmds,
    output logic [31:0]      ctrl_alpha,
    output logic [31:0]      ctrl_gamma,
    output logic [31:0]      ctrl_sarsa,
    output logic [31:0]      ctrl_n_actions,
    input  wire logic [31:0] ctrl_updates    // value shown at 0x48
);
    localparam logic [7:0] ADDR_N_CMDS = 8'h10, ADDR_ALPHA = 8'h18, ADDR_GAMMA = 8'h20, ADDR_SARSA = 8'h28,
                           ADDR_N_ACTIONS = 8'h30, ADDR_MAX_STATES = 8'h38, ADDR_MAX_ACTIONS = 8'h40,
                           ADDR_UPDATES = 8'h48;

    logic        usr_wr;
    logic [7:0]  usr_wr_addr, usr_rd_addr;
    logic [31:0] usr_wr_data, usr_rd_data;
    logic [3:0]  usr_wr_strb;

    axil_ap_ctrl u_axil (
        .ap_clk, .ap_rst_n,
        .s_axi_control_awaddr, .s_axi_control_awvalid, .s_axi_control_awready,
        .s_axi_control_wdata, .s_axi_control_wstrb, .s_axi_control_wvalid, .s_axi_control_wready,
        .s_axi_control_bresp, .s_axi_control_bvalid, .s_axi_control_bready,
        .s_axi_control_araddr, .s_axi_control_arvalid, .s_axi_control_arready,
        .s_axi_control_rdata, .s_axi_control_rresp, .s_axi_control_rvalid, .s_axi_control_rready,
        .interrupt,
        .ap_start(ctrl_start), .ap_idle(ctrl_idle), .ap_done(ctrl_done),
        .usr_wr, .usr_wr_addr, .usr_wr_data, .usr_wr_strb, .usr_rd_addr, .usr_rd_data
    );

    always_comb begin
        case (usr_rd_addr)
            ADDR_N_CMDS:      usr_rd_data = ctrl_n_cmds;
            ADDR_ALPHA:       usr_rd_data = ctrl_alpha;
            ADDR_GAMMA:       usr_rd_data = ctrl_gamma;
            ADDR_SARSA:       usr_rd_data = ctrl_sarsa;
            ADDR_N_ACTIONS:   usr_rd_data = ctrl_n_actions;
            ADDR_MAX_STATES:  usr_rd_data = 32'(N_STATES);
            ADDR_MAX_ACTIONS: usr_rd_data = 32'(N_ACTIONS);
            ADDR_UPDATES:     usr_rd_data = ctrl_updates;
            default:          usr_rd_data = '0;
        endcase
    end

    // A byte-masked write into one of the five writable registers (assigned to the function's name:
    // Yosys's SystemVerilog subset has no `return` with a value).
    function automatic logic [31:0] merged(input logic [31:0] prev, input logic [31:0] data, input logic [3:0] strb);
        merged = prev;
        for (int b = 0; b < 4; b++) if (strb[b]) merged[b*8 +: 8] = data[b*8 +: 8];
    endfunction

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            ctrl_n_cmds    <= '0;
            ctrl_alpha     <= '0;
            ctrl_gamma     <= '0;
            ctrl_sarsa     <= '0;
            ctrl_n_actions <= 32'(N_ACTIONS);
        end else if (usr_wr) begin
            case (usr_wr_addr)
                ADDR_N_CMDS:    ctrl_n_cmds    <= merged(ctrl_n_cmds, usr_wr_data, usr_wr_strb);
                ADDR_ALPHA:     ctrl_alpha     <= merged(ctrl_alpha, usr_wr_data, usr_wr_strb);
                ADDR_GAMMA:     ctrl_gamma     <= merged(ctrl_gamma, usr_wr_data, usr_wr_strb);
                ADDR_SARSA:     ctrl_sarsa     <= merged(ctrl_sarsa, usr_wr_data, usr_wr_strb);
                ADDR_N_ACTIONS: ctrl_n_actions <= merged(ctrl_n_actions, usr_wr_data, usr_wr_strb);
                default: ;
            endcase
        end
    end
endmodule

`default_nettype wire
