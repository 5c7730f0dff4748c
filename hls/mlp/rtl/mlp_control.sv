`default_nettype none
// AXI4-Lite control block of the MLP kernel (register map of hls/mlp/SPEC.md): the shared ap_ctrl_hs
// core (hls/common/rtl/axil_ap_ctrl.sv) plus this kernel's registers (mode 0x10, batch 0x18, lanes
// 0x20, max_width 0x28, max_layers 0x30, error 0x38). Hands the core one operation at a time:
// `op_start` pulses with `op_mode`/`op_batch` stable until the core answers with `op_done`.
module mlp_control #(
    parameter int LANES = 16,       // reported at 0x20
    parameter int MAX_WIDTH = 256,  // reported at 0x28
    parameter int MAX_LAYERS = 4    // reported at 0x30
) (
    input  wire         ap_clk,
    input  wire         ap_rst_n,

    input  wire  [7:0]  s_axi_control_awaddr,
    input  wire         s_axi_control_awvalid,
    output logic        s_axi_control_awready,
    input  wire  [31:0] s_axi_control_wdata,
    input  wire  [3:0]  s_axi_control_wstrb,
    input  wire         s_axi_control_wvalid,
    output logic        s_axi_control_wready,
    output logic [1:0]  s_axi_control_bresp,
    output logic        s_axi_control_bvalid,
    input  wire         s_axi_control_bready,
    input  wire  [7:0]  s_axi_control_araddr,
    input  wire         s_axi_control_arvalid,
    output logic        s_axi_control_arready,
    output logic [31:0] s_axi_control_rdata,
    output logic [1:0]  s_axi_control_rresp,
    output logic        s_axi_control_rvalid,
    input  wire         s_axi_control_rready,
    output logic        interrupt,

    output logic        op_start,   // one-cycle pulse: run one LOAD or INFER
    output logic [31:0] op_mode,    // 0 LOAD, 1 INFER (held while running)
    output logic [31:0] op_batch,   // observations of an INFER (held while running)
    input  wire         op_done,    // one-cycle pulse from the core
    input  wire         op_error    // one-cycle pulse: set bit0 of the error register
);
    localparam logic [7:0] REG_MODE = 8'h10, REG_BATCH = 8'h18, REG_LANES = 8'h20;
    localparam logic [7:0] REG_MAX_WIDTH = 8'h28, REG_MAX_LAYERS = 8'h30, REG_ERROR = 8'h38;

    logic        ap_start, running;
    logic [31:0] error_reg;
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
        .ap_start, .ap_idle(!running), .ap_done(op_done),
        .usr_wr, .usr_wr_addr, .usr_wr_data, .usr_wr_strb, .usr_rd_addr, .usr_rd_data
    );

    always_comb begin
        case (usr_rd_addr)
            REG_MODE:       usr_rd_data = op_mode;
            REG_BATCH:      usr_rd_data = op_batch;
            REG_LANES:      usr_rd_data = 32'(LANES);
            REG_MAX_WIDTH:  usr_rd_data = 32'(MAX_WIDTH);
            REG_MAX_LAYERS: usr_rd_data = 32'(MAX_LAYERS);
            REG_ERROR:      usr_rd_data = error_reg;
            default:        usr_rd_data = '0;
        endcase
    end

    // A 32-bit register written with byte strobes.
    function automatic [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
        merge = {strb[3] ? data[31:24] : old[31:24], strb[2] ? data[23:16] : old[23:16],
                 strb[1] ? data[15:8] : old[15:8], strb[0] ? data[7:0] : old[7:0]};
    endfunction

    always_ff @(posedge ap_clk) begin
        op_start <= 1'b0;
        if (!ap_rst_n) begin
            running   <= 1'b0;
            error_reg <= '0;
            op_mode   <= '0;
            op_batch  <= '0;
        end else begin
            // mode and batch hold still while an operation runs
            if (usr_wr && !running && usr_wr_addr == REG_MODE) op_mode <= merge(op_mode, usr_wr_data, usr_wr_strb);
            if (usr_wr && !running && usr_wr_addr == REG_BATCH) op_batch <= merge(op_batch, usr_wr_data, usr_wr_strb);
            if (ap_start && !running) begin  // take the start: one operation
                running   <= 1'b1;
                op_start  <= 1'b1;
                error_reg <= '0;  // cleared at ap_start
            end
            if (op_error) error_reg[0] <= 1'b1;
            if (op_done) running <= 1'b0;
        end
    end
endmodule
`default_nettype wire
