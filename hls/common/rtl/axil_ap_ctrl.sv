`default_nettype none
// AXI4-Lite control slave with the Vitis ap_ctrl_hs register core, shared by the kernels' RTL
// (their SPEC.md register maps):
//   0x00 control: bit0 ap_start (set by writing 1, cleared by the kernel's ap_done), bit1 ap_done
//        (clear on read), bit2 ap_idle, bit3 ap_ready (set with ap_done, clear on read)
//   0x04 GIE, 0x08 IER (bit0 done, bit1 ready), 0x0c ISR (set on the event when enabled, toggle on write)
//   0x10 and up: the kernel's own registers, through the usr_* ports
// Write address and data may arrive in either order; one write and one read in flight at a time.
module axil_ap_ctrl (
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

    output logic        ap_start,     // held from the host's start until ap_done
    input  wire         ap_idle,
    input  wire         ap_done,      // one-cycle pulse: the run finished

    output logic        usr_wr,       // one-cycle pulse: a write to a kernel register (0x10 and up)
    output logic [7:0]  usr_wr_addr,
    output logic [31:0] usr_wr_data,
    output logic [3:0]  usr_wr_strb,
    output logic [7:0]  usr_rd_addr,  // the address being read (valid with arvalid)
    input  wire  [31:0] usr_rd_data   // the kernel's register at usr_rd_addr, combinational
);
    localparam logic [7:0] REG_CTRL = 8'h00, REG_GIE = 8'h04, REG_IER = 8'h08, REG_ISR = 8'h0c;

    logic       done_flag, ready_flag, gie;
    logic [1:0] ier, isr;
    logic       aw_held, w_held;

    assign s_axi_control_awready = !aw_held;
    assign s_axi_control_wready  = !w_held;
    assign s_axi_control_bresp   = 2'b00;
    assign s_axi_control_rresp   = 2'b00;
    assign s_axi_control_arready = !s_axi_control_rvalid;
    assign interrupt             = gie && |(isr & ier);
    assign usr_rd_addr           = s_axi_control_araddr;

    wire write_now = aw_held && w_held && !s_axi_control_bvalid;
    wire read_now  = s_axi_control_arvalid && s_axi_control_arready;
    assign usr_wr  = write_now && usr_wr_addr >= 8'h10;

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            aw_held              <= 1'b0;
            w_held               <= 1'b0;
            s_axi_control_bvalid <= 1'b0;
            s_axi_control_rvalid <= 1'b0;
            s_axi_control_rdata  <= '0;
            ap_start             <= 1'b0;
            done_flag            <= 1'b0;
            ready_flag           <= 1'b0;
            gie                  <= 1'b0;
            ier                  <= '0;
            isr                  <= '0;
        end else begin
            // write channel: address and data held until both are there
            if (s_axi_control_awvalid && s_axi_control_awready) begin
                usr_wr_addr <= s_axi_control_awaddr;
                aw_held     <= 1'b1;
            end
            if (s_axi_control_wvalid && s_axi_control_wready) begin
                usr_wr_data <= s_axi_control_wdata;
                usr_wr_strb <= s_axi_control_wstrb;
                w_held      <= 1'b1;
            end
            if (s_axi_control_bvalid && s_axi_control_bready) s_axi_control_bvalid <= 1'b0;
            if (write_now) begin
                aw_held              <= 1'b0;
                w_held               <= 1'b0;
                s_axi_control_bvalid <= 1'b1;
                case (usr_wr_addr)
                    REG_CTRL: if (usr_wr_strb[0] && usr_wr_data[0]) ap_start <= 1'b1;
                    REG_GIE:  if (usr_wr_strb[0]) gie <= usr_wr_data[0];
                    REG_IER:  if (usr_wr_strb[0]) ier <= usr_wr_data[1:0];
                    REG_ISR:  if (usr_wr_strb[0]) isr <= isr ^ usr_wr_data[1:0];
                    default: ;  // kernel registers: usr_wr; unmapped ones are ignored, as Vitis does
                endcase
            end

            // read channel; the clear-on-read comes before the kernel's events below, so that a
            // read of 0x00 in the cycle of ap_done still leaves the flags set for the next read
            if (s_axi_control_rvalid && s_axi_control_rready) s_axi_control_rvalid <= 1'b0;
            if (read_now) begin
                s_axi_control_rvalid <= 1'b1;
                case (s_axi_control_araddr)
                    REG_CTRL: s_axi_control_rdata <= {28'b0, ready_flag, ap_idle, done_flag, ap_start};
                    REG_GIE:  s_axi_control_rdata <= {31'b0, gie};
                    REG_IER:  s_axi_control_rdata <= {30'b0, ier};
                    REG_ISR:  s_axi_control_rdata <= {30'b0, isr};
                    default:  s_axi_control_rdata <= s_axi_control_araddr >= 8'h10 ? usr_rd_data : '0;
                endcase
                if (s_axi_control_araddr == REG_CTRL) begin
                    done_flag  <= 1'b0;
                    ready_flag <= 1'b0;
                end
            end

            if (ap_done) begin
                ap_start   <= 1'b0;
                done_flag  <= 1'b1;
                ready_flag <= 1'b1;
                if (ier[0]) isr[0] <= 1'b1;
                if (ier[1]) isr[1] <= 1'b1;
            end
        end
    end
endmodule

`default_nettype wire
