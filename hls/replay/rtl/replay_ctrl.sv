`default_nettype none
// AXI4-Lite control slave of replay_top: the Vitis ap_ctrl_hs register map of hls/replay/SPEC.md.
//   0x00 control: bit0 ap_start (set by writing 1, cleared by the kernel when it finishes),
//        bit1 ap_done (clear on read), bit2 ap_idle, bit3 ap_ready (set with ap_done, clear on read)
//   0x04 GIE, 0x08 IER (bit0 done, bit1 ready), 0x0c ISR (set on the event when enabled, toggle on write)
//   0x10 n_cmds, 0x18 capacity, 0x20 fanout, 0x28/0x2c total (low/high word)
// One write and one read in flight at a time (awready/wready together when both are valid).
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
    // kernel side
    output logic             ctrl_start,     // ap_start register
    output logic [31:0]      ctrl_n_cmds,
    input  wire logic        ctrl_idle,      // ap_idle
    input  wire logic        ctrl_done,      // one-cycle pulse when a run finishes
    input  wire logic [63:0] ctrl_total      // value shown at 0x28/0x2c
);
    localparam logic [7:0] ADDR_CTRL = 8'h00, ADDR_GIE = 8'h04, ADDR_IER = 8'h08, ADDR_ISR = 8'h0c,
                           ADDR_N_CMDS = 8'h10, ADDR_CAPACITY = 8'h18, ADDR_FANOUT = 8'h20,
                           ADDR_TOTAL_LO = 8'h28, ADDR_TOTAL_HI = 8'h2c;

    logic       done_flag, ready_flag, gie;
    logic [1:0] ier, isr;

    // ------------------------------------------------------------------ writes
    logic wr_fire;
    assign s_axi_control_awready = s_axi_control_awvalid && s_axi_control_wvalid && !s_axi_control_bvalid;
    assign s_axi_control_wready  = s_axi_control_awready;
    assign wr_fire               = s_axi_control_awready;
    assign s_axi_control_bresp   = 2'b00;

    function automatic logic [31:0] apply_strobe(input logic [31:0] old, input logic [31:0] data,
                                                 input logic [3:0] strb);
        logic [31:0] merged;
        for (int b = 0; b < 4; b++) merged[b*8 +: 8] = strb[b] ? data[b*8 +: 8] : old[b*8 +: 8];
        apply_strobe = merged;
    endfunction

    // ------------------------------------------------------------------ reads
    logic rd_fire, rd_ctrl;
    assign s_axi_control_arready = !s_axi_control_rvalid;
    assign rd_fire               = s_axi_control_arvalid && s_axi_control_arready;
    assign rd_ctrl               = rd_fire && s_axi_control_araddr == ADDR_CTRL;
    assign s_axi_control_rresp   = 2'b00;

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            s_axi_control_bvalid <= 1'b0;
            s_axi_control_rvalid <= 1'b0;
            s_axi_control_rdata  <= '0;
            ctrl_start           <= 1'b0;
            ctrl_n_cmds          <= '0;
            done_flag            <= 1'b0;
            ready_flag           <= 1'b0;
            gie                  <= 1'b0;
            ier                  <= '0;
            isr                  <= '0;
        end else begin
            if (s_axi_control_bvalid && s_axi_control_bready) s_axi_control_bvalid <= 1'b0;
            if (s_axi_control_rvalid && s_axi_control_rready) s_axi_control_rvalid <= 1'b0;

            // Read data first, so that a read of 0x00 in the cycle of ctrl_done still sees the flag
            // on the next read (set below wins over the clear-on-read).
            if (rd_fire) begin
                s_axi_control_rvalid <= 1'b1;
                case (s_axi_control_araddr)
                    ADDR_CTRL:     s_axi_control_rdata <= {28'b0, ready_flag, ctrl_idle, done_flag, ctrl_start};
                    ADDR_GIE:      s_axi_control_rdata <= {31'b0, gie};
                    ADDR_IER:      s_axi_control_rdata <= {30'b0, ier};
                    ADDR_ISR:      s_axi_control_rdata <= {30'b0, isr};
                    ADDR_N_CMDS:   s_axi_control_rdata <= ctrl_n_cmds;
                    ADDR_CAPACITY: s_axi_control_rdata <= 32'(CAPACITY);
                    ADDR_FANOUT:   s_axi_control_rdata <= 32'(FANOUT);
                    ADDR_TOTAL_LO: s_axi_control_rdata <= ctrl_total[31:0];
                    ADDR_TOTAL_HI: s_axi_control_rdata <= ctrl_total[63:32];
                    default:       s_axi_control_rdata <= '0;
                endcase
            end
            if (rd_ctrl) begin
                done_flag  <= 1'b0;
                ready_flag <= 1'b0;
            end

            if (wr_fire) begin
                s_axi_control_bvalid <= 1'b1;
                case (s_axi_control_awaddr)
                    ADDR_CTRL:   if (s_axi_control_wstrb[0] && s_axi_control_wdata[0]) ctrl_start <= 1'b1;
                    ADDR_GIE:    if (s_axi_control_wstrb[0]) gie <= s_axi_control_wdata[0];
                    ADDR_IER:    if (s_axi_control_wstrb[0]) ier <= s_axi_control_wdata[1:0];
                    ADDR_ISR:    if (s_axi_control_wstrb[0]) isr <= isr ^ s_axi_control_wdata[1:0];
                    ADDR_N_CMDS: ctrl_n_cmds <= apply_strobe(ctrl_n_cmds, s_axi_control_wdata, s_axi_control_wstrb);
                    default: ;
                endcase
            end

            if (ctrl_done) begin
                ctrl_start <= 1'b0;
                done_flag  <= 1'b1;
                ready_flag <= 1'b1;
                if (ier[0]) isr[0] <= 1'b1;
                if (ier[1]) isr[1] <= 1'b1;
            end
        end
    end
endmodule

`default_nettype wire
