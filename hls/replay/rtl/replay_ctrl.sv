`default_nettype none
// AXI4-Lite control slave of replay_top (register map of hls/replay/SPEC.md): the shared ap_ctrl_hs
// core (hls/common/rtl/axil_ap_ctrl.sv) plus this kernel's registers:
//   0x10 n_cmds (W/R), 0x18 capacity (R), 0x20 fanout (R), 0x28/0x2c total (R, low/high word)
module replay_ctrl #(
    parameter int CAPACITY = 16,  // reported at 0x18
    parameter int FANOUT   = 16   // reported at 0x20
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
    output logic [31:0]      ctrl_n_cmds,
    input  wire logic        ctrl_idle,      // ap_idle
    input  wire logic        ctrl_done,      // one-cycle pulse when a run finishes
    input  wire logic [63:0] ctrl_total      // value shown at 0x28/0x2c
);
    localparam logic [7:0] ADDR_N_CMDS = 8'h10, ADDR_CAPACITY = 8'h18, ADDR_FANOUT = 8'h20,
                           ADDR_TOTAL_LO = 8'h28, ADDR_TOTAL_HI = 8'h2c;

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
            ADDR_N_CMDS:   usr_rd_data = ctrl_n_cmds;
            ADDR_CAPACITY: usr_rd_data = 32'(CAPACITY);
            ADDR_FANOUT:   usr_rd_data = 32'(FANOUT);
            ADDR_TOTAL_LO: usr_rd_data = ctrl_total[31:0];
            ADDR_TOTAL_HI: usr_rd_data = ctrl_total[63:32];
            default:       usr_rd_data = '0;
        endcase
    end

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            ctrl_n_cmds <= '0;
        end else if (usr_wr && usr_wr_addr == ADDR_N_CMDS) begin
            for (int b = 0; b < 4; b++)
                if (usr_wr_strb[b]) ctrl_n_cmds[b*8 +: 8] <= usr_wr_data[b*8 +: 8];
        end
    end
endmodule

`default_nettype wire
