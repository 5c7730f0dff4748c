`default_nettype none
// The three kernels behind the UART bridge, on one clock: the part of a UART board's design that is
// the same on every such board (hls/boards/<board>/ adds the clock, the reset and the pins). Channel 0
// is the replay kernel, 1 the MLP kernel, 2 the tabular kernel (kernel codes 1, 2, 3 in the bridge's
// INFO reply); a kernel left out (HAS_<KERNEL> = 0) answers as absent, and frames for it are refused.
module pearl_uart_top #(
    parameter int CLK_HZ     = 100_000_000,  // the kernels' and the bridge's clock
    parameter int BAUD       = 3_000_000,    // UART line rate
    parameter int HAS_REPLAY = 1,            // 1: the replay kernel is built in
    parameter int HAS_MLP    = 1,            // 1: the MLP kernel is built in
    parameter int HAS_TABULAR = 1,           // 1: the tabular kernel is built in
    parameter int REPLAY_CAPACITY = 1024,    // replay_top CAPACITY
    parameter int REPLAY_FANOUT   = 16,      // replay_top FANOUT
    parameter int MLP_LANES       = 4,       // mlp_top LANES
    parameter int MLP_MAX_WIDTH   = 64,      // mlp_top MAX_WIDTH
    parameter int MLP_MAX_LAYERS  = 4,       // mlp_top MAX_LAYERS
    parameter int MLP_MAX_BATCH   = 1024,    // mlp_top MAX_BATCH
    parameter MLP_TANH_MEMH       = "mlp_tanh.memh",  // mlp_top TANH_MEMH
    parameter int TABULAR_STATES  = 64,      // tabular_top N_STATES
    parameter int TABULAR_ACTIONS = 4,       // tabular_top N_ACTIONS
    parameter int SLOT_BYTES = 1024          // the bridge's frame slots
) (
    input  wire        clk,
    input  wire        rst_n,     // synchronous, active low
    input  wire        uart_rxd,  // from the host
    output logic       uart_txd,  // to the host
    output logic [2:0] running,   // per kernel: started and ap_done not yet read
    output logic       busy,      // the bridge has a frame in flight
    output logic       error      // pulse: the bridge refused a frame
);
    localparam int N_CH = 3;
    localparam logic [23:0] KIND = {8'(HAS_TABULAR != 0 ? 3 : 0), 8'(HAS_MLP != 0 ? 2 : 0), 8'(HAS_REPLAY != 0 ? 1 : 0)};
    localparam logic [23:0] IN_BYTES = {8'd16, 8'd2, 8'd16};
    localparam logic [23:0] OUT_BYTES = {8'd16, 8'd2, 8'd16};

    logic [N_CH-1:0]     ch_rst_n;
    logic [7:0]          awaddr, araddr;
    logic [31:0]         wdata;
    logic [3:0]          wstrb;
    logic [N_CH-1:0]     awvalid, awready, wvalid, wready, bvalid, bready, arvalid, arready, rvalid, rready;
    logic [32*N_CH-1:0]  rdata;
    logic [127:0]        in_tdata;
    logic                in_tlast;
    logic [N_CH-1:0]     in_tvalid, in_tready;
    logic [128*N_CH-1:0] out_tdata;
    logic [N_CH-1:0]     out_tvalid, out_tready;

    uart_bridge #(
        .CLK_HZ(CLK_HZ), .BAUD(BAUD), .N_CH(N_CH), .CH_KIND(KIND), .CH_IN_BYTES(IN_BYTES),
        .CH_OUT_BYTES(OUT_BYTES), .SLOT_BYTES(SLOT_BYTES)
    ) u_bridge (
        .clk, .rst_n, .uart_rxd, .uart_txd, .ch_rst_n,
        .m_axil_awaddr(awaddr), .m_axil_awvalid(awvalid), .m_axil_awready(awready),
        .m_axil_wdata(wdata), .m_axil_wstrb(wstrb), .m_axil_wvalid(wvalid), .m_axil_wready(wready),
        .m_axil_bvalid(bvalid), .m_axil_bready(bready),
        .m_axil_araddr(araddr), .m_axil_arvalid(arvalid), .m_axil_arready(arready),
        .m_axil_rdata(rdata), .m_axil_rvalid(rvalid), .m_axil_rready(rready),
        .m_axis_tdata(in_tdata), .m_axis_tlast(in_tlast), .m_axis_tvalid(in_tvalid), .m_axis_tready(in_tready),
        .s_axis_tdata(out_tdata), .s_axis_tvalid(out_tvalid), .s_axis_tready(out_tready),
        .running, .busy, .error
    );

    // ------------------------------------------------------------------ channel 0: replay
    if (HAS_REPLAY != 0) begin : g_replay
        /* verilator lint_off UNUSEDSIGNAL */  // the bridge acknowledges every access; tlast and irq unneeded
        logic [1:0] bresp, rresp;
        logic       tlast, irq;
        /* verilator lint_on UNUSEDSIGNAL */
        replay_top #(.CAPACITY(REPLAY_CAPACITY), .FANOUT(REPLAY_FANOUT), .FREE_RUN(0)) u_replay (
            .ap_clk(clk), .ap_rst_n(ch_rst_n[0]),
            .s_axis_cmd_tdata(in_tdata), .s_axis_cmd_tvalid(in_tvalid[0]), .s_axis_cmd_tready(in_tready[0]),
            .s_axis_cmd_tlast(in_tlast),
            .m_axis_resp_tdata(out_tdata[0 +: 128]), .m_axis_resp_tvalid(out_tvalid[0]),
            .m_axis_resp_tready(out_tready[0]), .m_axis_resp_tlast(tlast),
            .s_axi_control_awaddr(awaddr), .s_axi_control_awvalid(awvalid[0]), .s_axi_control_awready(awready[0]),
            .s_axi_control_wdata(wdata), .s_axi_control_wstrb(wstrb), .s_axi_control_wvalid(wvalid[0]),
            .s_axi_control_wready(wready[0]), .s_axi_control_bresp(bresp), .s_axi_control_bvalid(bvalid[0]),
            .s_axi_control_bready(bready[0]), .s_axi_control_araddr(araddr), .s_axi_control_arvalid(arvalid[0]),
            .s_axi_control_arready(arready[0]), .s_axi_control_rdata(rdata[0 +: 32]), .s_axi_control_rresp(rresp),
            .s_axi_control_rvalid(rvalid[0]), .s_axi_control_rready(rready[0]), .interrupt(irq)
        );
    end else begin : g_no_replay
        assign {awready[0], wready[0], bvalid[0], arready[0], rvalid[0], in_tready[0], out_tvalid[0]} = '0;
        assign rdata[0 +: 32] = '0;
        assign out_tdata[0 +: 128] = '0;
    end

    // ------------------------------------------------------------------ channel 1: MLP (16-bit words)
    if (HAS_MLP != 0) begin : g_mlp
        /* verilator lint_off UNUSEDSIGNAL */
        logic [1:0]  bresp, rresp;
        logic        tlast, irq;
        /* verilator lint_on UNUSEDSIGNAL */
        logic [15:0] out_word;
        mlp_top #(.LANES(MLP_LANES), .MAX_LAYERS(MLP_MAX_LAYERS), .MAX_WIDTH(MLP_MAX_WIDTH),
                  .MAX_BATCH(MLP_MAX_BATCH), .TANH_MEMH(MLP_TANH_MEMH)) u_mlp (
            .ap_clk(clk), .ap_rst_n(ch_rst_n[1]),
            .s_axis_in_tdata(in_tdata[15:0]), .s_axis_in_tvalid(in_tvalid[1]), .s_axis_in_tready(in_tready[1]),
            .s_axis_in_tlast(in_tlast),
            .m_axis_out_tdata(out_word), .m_axis_out_tvalid(out_tvalid[1]), .m_axis_out_tready(out_tready[1]),
            .m_axis_out_tlast(tlast),
            .s_axi_control_awaddr(awaddr), .s_axi_control_awvalid(awvalid[1]), .s_axi_control_awready(awready[1]),
            .s_axi_control_wdata(wdata), .s_axi_control_wstrb(wstrb), .s_axi_control_wvalid(wvalid[1]),
            .s_axi_control_wready(wready[1]), .s_axi_control_bresp(bresp), .s_axi_control_bvalid(bvalid[1]),
            .s_axi_control_bready(bready[1]), .s_axi_control_araddr(araddr), .s_axi_control_arvalid(arvalid[1]),
            .s_axi_control_arready(arready[1]), .s_axi_control_rdata(rdata[32 +: 32]), .s_axi_control_rresp(rresp),
            .s_axi_control_rvalid(rvalid[1]), .s_axi_control_rready(rready[1]), .interrupt(irq)
        );
        assign out_tdata[128 +: 128] = {112'b0, out_word};
    end else begin : g_no_mlp
        assign {awready[1], wready[1], bvalid[1], arready[1], rvalid[1], in_tready[1], out_tvalid[1]} = '0;
        assign rdata[32 +: 32] = '0;
        assign out_tdata[128 +: 128] = '0;
    end

    // ------------------------------------------------------------------ channel 2: tabular
    if (HAS_TABULAR != 0) begin : g_tabular
        /* verilator lint_off UNUSEDSIGNAL */  // the bridge acknowledges every access; tlast and irq unneeded
        logic [1:0] bresp, rresp;
        logic       tlast, irq;
        /* verilator lint_on UNUSEDSIGNAL */
        tabular_top #(.N_STATES(TABULAR_STATES), .N_ACTIONS(TABULAR_ACTIONS)) u_tabular (
            .ap_clk(clk), .ap_rst_n(ch_rst_n[2]),
            .s_axis_cmd_tdata(in_tdata), .s_axis_cmd_tvalid(in_tvalid[2]), .s_axis_cmd_tready(in_tready[2]),
            .s_axis_cmd_tlast(in_tlast),
            .m_axis_resp_tdata(out_tdata[256 +: 128]), .m_axis_resp_tvalid(out_tvalid[2]),
            .m_axis_resp_tready(out_tready[2]), .m_axis_resp_tlast(tlast),
            .s_axi_control_awaddr(awaddr), .s_axi_control_awvalid(awvalid[2]), .s_axi_control_awready(awready[2]),
            .s_axi_control_wdata(wdata), .s_axi_control_wstrb(wstrb), .s_axi_control_wvalid(wvalid[2]),
            .s_axi_control_wready(wready[2]), .s_axi_control_bresp(bresp), .s_axi_control_bvalid(bvalid[2]),
            .s_axi_control_bready(bready[2]), .s_axi_control_araddr(araddr), .s_axi_control_arvalid(arvalid[2]),
            .s_axi_control_arready(arready[2]), .s_axi_control_rdata(rdata[64 +: 32]), .s_axi_control_rresp(rresp),
            .s_axi_control_rvalid(rvalid[2]), .s_axi_control_rready(rready[2]), .interrupt(irq)
        );
    end else begin : g_no_tabular
        assign {awready[2], wready[2], bvalid[2], arready[2], rvalid[2], in_tready[2], out_tvalid[2]} = '0;
        assign rdata[64 +: 32] = '0;
        assign out_tdata[256 +: 128] = '0;
    end
endmodule

`default_nettype wire
