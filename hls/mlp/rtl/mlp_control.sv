`default_nettype none
// AXI4-Lite control block of the MLP kernel (register map of hls/mlp/SPEC.md, Vitis ap_ctrl_hs layout).
// Hands the core one operation at a time: `op_start` pulses with `op_mode`/`op_batch` stable until
// the core answers with `op_done`. One outstanding read and one outstanding write.
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
    localparam logic [7:0] REG_CTRL = 8'h00, REG_GIE = 8'h04, REG_IER = 8'h08, REG_ISR = 8'h0c;
    localparam logic [7:0] REG_MODE = 8'h10, REG_BATCH = 8'h18, REG_LANES = 8'h20;
    localparam logic [7:0] REG_MAX_WIDTH = 8'h28, REG_MAX_LAYERS = 8'h30, REG_ERROR = 8'h38;

    logic        ap_start, ap_done, ap_idle, ap_ready;
    logic        gie;
    logic [1:0]  ier, isr;
    logic [31:0] error_reg;
    logic [7:0]  aw_addr;
    logic [31:0] w_data;
    logic [3:0]  w_strb;
    logic        aw_held, w_held;

    assign s_axi_control_awready = !aw_held;
    assign s_axi_control_wready  = !w_held;
    assign s_axi_control_bresp   = 2'b00;
    assign s_axi_control_rresp   = 2'b00;
    assign s_axi_control_arready = !s_axi_control_rvalid;
    assign interrupt = gie && |(isr & ier);

    wire write_now = aw_held && w_held && !s_axi_control_bvalid;
    wire read_now = s_axi_control_arvalid && s_axi_control_arready;

    // A 32-bit register written with byte strobes.
    function automatic [31:0] merge(input [31:0] old, input [31:0] data, input [3:0] strb);
        merge = {strb[3] ? data[31:24] : old[31:24], strb[2] ? data[23:16] : old[23:16],
                 strb[1] ? data[15:8] : old[15:8], strb[0] ? data[7:0] : old[7:0]};
    endfunction

    always_ff @(posedge ap_clk) begin
        op_start <= 1'b0;
        if (!ap_rst_n) begin
            aw_held <= 1'b0;
            w_held <= 1'b0;
            s_axi_control_bvalid <= 1'b0;
            s_axi_control_rvalid <= 1'b0;
            s_axi_control_rdata <= '0;
            ap_start <= 1'b0;
            ap_done <= 1'b0;
            ap_idle <= 1'b1;
            ap_ready <= 1'b0;
            gie <= 1'b0;
            ier <= '0;
            isr <= '0;
            error_reg <= '0;
            op_mode <= '0;
            op_batch <= '0;
        end else begin
            // write channel: address and data may come in either order
            if (s_axi_control_awvalid && s_axi_control_awready) begin
                aw_addr <= s_axi_control_awaddr;
                aw_held <= 1'b1;
            end
            if (s_axi_control_wvalid && s_axi_control_wready) begin
                w_data <= s_axi_control_wdata;
                w_strb <= s_axi_control_wstrb;
                w_held <= 1'b1;
            end
            if (s_axi_control_bvalid && s_axi_control_bready) s_axi_control_bvalid <= 1'b0;
            if (write_now) begin
                aw_held <= 1'b0;
                w_held <= 1'b0;
                s_axi_control_bvalid <= 1'b1;
                case (aw_addr)
                    REG_CTRL: if (w_strb[0] && w_data[0] && ap_idle) ap_start <= 1'b1;
                    REG_GIE: if (w_strb[0]) gie <= w_data[0];
                    REG_IER: if (w_strb[0]) ier <= w_data[1:0];
                    REG_ISR: if (w_strb[0]) isr <= isr ^ w_data[1:0];  // toggle on write
                    REG_MODE: if (ap_idle) op_mode <= merge(op_mode, w_data, w_strb);
                    REG_BATCH: if (ap_idle) op_batch <= merge(op_batch, w_data, w_strb);
                    default: ;  // read-only or unmapped: ignored, as Vitis does
                endcase
            end

            // read channel
            if (s_axi_control_rvalid && s_axi_control_rready) s_axi_control_rvalid <= 1'b0;
            if (read_now) begin
                s_axi_control_rvalid <= 1'b1;
                case (s_axi_control_araddr)
                    REG_CTRL: s_axi_control_rdata <= {28'd0, ap_ready, ap_idle, ap_done, ap_start};
                    REG_GIE: s_axi_control_rdata <= {31'd0, gie};
                    REG_IER: s_axi_control_rdata <= {30'd0, ier};
                    REG_ISR: s_axi_control_rdata <= {30'd0, isr};
                    REG_MODE: s_axi_control_rdata <= op_mode;
                    REG_BATCH: s_axi_control_rdata <= op_batch;
                    REG_LANES: s_axi_control_rdata <= 32'(LANES);
                    REG_MAX_WIDTH: s_axi_control_rdata <= 32'(MAX_WIDTH);
                    REG_MAX_LAYERS: s_axi_control_rdata <= 32'(MAX_LAYERS);
                    REG_ERROR: s_axi_control_rdata <= error_reg;
                    default: s_axi_control_rdata <= '0;
                endcase
                if (s_axi_control_araddr == REG_CTRL) ap_done <= 1'b0;  // clear on read
            end

            // handshake with the core; ap_ready pulses when the operation is taken
            ap_ready <= 1'b0;
            if (ap_start && ap_idle) begin
                ap_start <= 1'b0;
                ap_idle <= 1'b0;
                ap_ready <= 1'b1;
                op_start <= 1'b1;
                error_reg <= '0;  // cleared at ap_start
                if (ier[1]) isr[1] <= 1'b1;
            end
            if (op_error) error_reg[0] <= 1'b1;
            if (op_done) begin
                ap_idle <= 1'b1;
                ap_done <= 1'b1;
                if (ier[0]) isr[0] <= 1'b1;
            end
        end
    end
endmodule
`default_nettype wire
