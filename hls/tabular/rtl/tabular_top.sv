`default_nettype none
// Tabular Q-learning / SARSA kernel: reference RTL of the board IP (contract: hls/tabular/SPEC.md),
// the same ports and registers as the HLS top (tabular.cpp: tabular_top).
//
//   - AXI4-Lite control (tabular_ctrl: ap_ctrl_hs, alpha, gamma, sarsa, n_actions, identity);
//     ap_start takes n_cmds 128-bit command words from s_axis_cmd; ap_done when every command has
//     taken effect and every response has been taken.
//   - UPDATE goes into the update pipeline (tabular_core: two stages with forwarding), one per clock;
//     WRITE (the host's table load), READ (read-back) and CLEAR wait until no update is in the
//     pipeline, so every command sees the table of the commands before it, in order.
//   - READ answers on m_axis_resp through one output register: one READ per clock while tready is
//     high; tready low stalls the command stream, never the pipeline.
//   - Commands whose s, s2, a (or, for SARSA, a2) lie outside the synthesized table, and unknown
//     opcodes, are consumed and ignored (a READ outside answers 0), as in the HLS top.
module tabular_top #(
    parameter int N_STATES  = 16,  // synthesized rows (MAX_STATES)
    parameter int N_ACTIONS = 4    // synthesized columns (MAX_ACTIONS), 1 .. 64
) (
    input  wire logic         ap_clk,
    input  wire logic         ap_rst_n,
    // command stream
    input  wire logic [127:0] s_axis_cmd_tdata,
    input  wire logic         s_axis_cmd_tvalid,
    output logic              s_axis_cmd_tready,
    input  wire logic         s_axis_cmd_tlast,
    // response stream
    output logic [127:0]      m_axis_resp_tdata,
    output logic              m_axis_resp_tvalid,
    input  wire logic         m_axis_resp_tready,
    output logic              m_axis_resp_tlast,
    // AXI4-Lite control
    input  wire logic [7:0]   s_axi_control_awaddr,
    input  wire logic         s_axi_control_awvalid,
    output logic              s_axi_control_awready,
    input  wire logic [31:0]  s_axi_control_wdata,
    input  wire logic [3:0]   s_axi_control_wstrb,
    input  wire logic         s_axi_control_wvalid,
    output logic              s_axi_control_wready,
    output logic [1:0]        s_axi_control_bresp,
    output logic              s_axi_control_bvalid,
    input  wire logic         s_axi_control_bready,
    input  wire logic [7:0]   s_axi_control_araddr,
    input  wire logic         s_axi_control_arvalid,
    output logic              s_axi_control_arready,
    output logic [31:0]       s_axi_control_rdata,
    output logic [1:0]        s_axi_control_rresp,
    output logic              s_axi_control_rvalid,
    input  wire logic         s_axi_control_rready,
    output logic              interrupt
);
    localparam int SW = (N_STATES > 1) ? $clog2(N_STATES) : 1;
    localparam int AW = (N_ACTIONS > 1) ? $clog2(N_ACTIONS) : 1;
    localparam logic [7:0] OP_UPDATE = 8'h01, OP_WRITE = 8'h02, OP_READ = 8'h03, OP_CLEAR = 8'h04,
                           OP_IDENTITY = 8'h05;

    // ------------------------------------------------------------------ control
    logic        ctrl_start, ctrl_done, ctrl_idle;
    logic [31:0] ctrl_n_cmds, ctrl_alpha, ctrl_gamma, ctrl_sarsa, ctrl_n_actions;
    logic [31:0] updates_run, updates_shown;
    logic        running;
    logic [31:0] cmds_left;

    tabular_ctrl #(.N_STATES(N_STATES), .N_ACTIONS(N_ACTIONS)) u_ctrl (
        .ap_clk, .ap_rst_n,
        .s_axi_control_awaddr, .s_axi_control_awvalid, .s_axi_control_awready,
        .s_axi_control_wdata, .s_axi_control_wstrb, .s_axi_control_wvalid, .s_axi_control_wready,
        .s_axi_control_bresp, .s_axi_control_bvalid, .s_axi_control_bready,
        .s_axi_control_araddr, .s_axi_control_arvalid, .s_axi_control_arready,
        .s_axi_control_rdata, .s_axi_control_rresp, .s_axi_control_rvalid, .s_axi_control_rready,
        .interrupt,
        .ctrl_start, .ctrl_idle, .ctrl_done,
        .ctrl_n_cmds, .ctrl_alpha, .ctrl_gamma, .ctrl_sarsa, .ctrl_n_actions,
        .ctrl_updates(updates_shown)
    );

    // ------------------------------------------------------------------ command head
    logic        head_valid, head_last, head_done;
    logic [7:0]  head_op;
    logic [31:0] head_s, head_s2, head_value;
    logic [7:0]  head_a, head_a2;

    wire sarsa = ctrl_sarsa[0];
    wire sa_ok = head_s < 32'(N_STATES) && 32'(head_a) < 32'(N_ACTIONS);
    wire update_ok = sa_ok && head_s2 < 32'(N_STATES) && (!sarsa || 32'(head_a2) < 32'(N_ACTIONS));

    // ------------------------------------------------------------------ update pipeline
    logic               core_in_ready, core_busy, core_clear, core_wr_en;
    logic [31:0]        core_updates;
    logic signed [31:0] core_rd_data;
    wire [SW+AW-1:0]    word_addr = (SW+AW)'(head_s[SW-1:0] * N_ACTIONS + head_a[AW-1:0]);

    logic resp_valid, resp_last;
    logic [127:0] resp_data;

    // A pipeline write lands one clock after its transition enters; WRITE/READ/CLEAR wait for it.
    wire quiet       = !core_busy;
    wire fire_update = head_valid && head_op == OP_UPDATE && core_in_ready;
    wire fire_write  = head_valid && head_op == OP_WRITE && quiet;
    wire fire_read   = head_valid && head_op == OP_READ && quiet && (!resp_valid || m_axis_resp_tready);
    wire fire_clear  = head_valid && head_op == OP_CLEAR && quiet;
    // IDENTITY counts the updates that entered the pipeline before it, so it need not wait for quiet.
    wire fire_ident  = head_valid && head_op == OP_IDENTITY && (!resp_valid || m_axis_resp_tready);
    wire fire_other  = head_valid && head_op != OP_UPDATE && head_op != OP_WRITE && head_op != OP_READ
                       && head_op != OP_CLEAR && head_op != OP_IDENTITY;
    wire head_fire   = fire_update || fire_write || fire_read || fire_clear || fire_ident || fire_other;

    assign core_clear = fire_clear;
    assign core_wr_en = fire_write && sa_ok;

    tabular_core #(.N_STATES(N_STATES), .N_ACTIONS(N_ACTIONS)) u_core (
        .clk(ap_clk),
        .rst_n(ap_rst_n),
        .clear(core_clear),
        .alpha(ctrl_alpha[16:0]),
        .gamma(ctrl_gamma[16:0]),
        .sarsa(sarsa),
        .n_actions(ctrl_n_actions > 32'(N_ACTIONS) ? (AW+1)'(N_ACTIONS) : ctrl_n_actions[AW:0]),
        .in_valid(fire_update && update_ok),
        .in_ready(core_in_ready),
        .in_s(head_s[SW-1:0]),
        .in_a(head_a[AW-1:0]),
        .in_r(head_value),
        .in_s2(head_s2[SW-1:0]),
        .in_a2(head_a2[AW-1:0]),
        .in_done(head_done),
        .busy(core_busy),
        .updates(core_updates),
        .rd_addr(word_addr),
        .rd_data(core_rd_data),
        .wr_en(core_wr_en),
        .wr_addr(word_addr),
        .wr_data(head_value)
    );

    // ------------------------------------------------------------------ streams and control
    wire accept_ok = running && cmds_left != 0;
    assign s_axis_cmd_tready = ap_rst_n && accept_ok && (!head_valid || head_fire);
    wire cmd_fire = s_axis_cmd_tvalid && s_axis_cmd_tready;

    assign m_axis_resp_tvalid = resp_valid;
    assign m_axis_resp_tdata  = resp_data;
    assign m_axis_resp_tlast  = resp_last;

    wire busy = head_valid || core_busy || resp_valid;
    assign ctrl_done = running && cmds_left == 0 && !busy;
    assign ctrl_idle = !running;

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            head_valid    <= 1'b0;
            resp_valid    <= 1'b0;
            running       <= 1'b0;
            cmds_left     <= '0;
            updates_run   <= '0;
            updates_shown <= '0;
        end else begin
            if (cmd_fire) begin
                head_valid <= 1'b1;
                head_value <= s_axis_cmd_tdata[31:0];
                head_s     <= s_axis_cmd_tdata[63:32];
                head_s2    <= s_axis_cmd_tdata[95:64];
                head_a     <= s_axis_cmd_tdata[103:96];
                head_a2    <= s_axis_cmd_tdata[111:104];
                head_done  <= s_axis_cmd_tdata[112];
                head_op    <= s_axis_cmd_tdata[127:120];
                head_last  <= s_axis_cmd_tlast;
            end else if (head_fire) begin
                head_valid <= 1'b0;
            end

            if (fire_read) begin
                resp_valid <= 1'b1;
                resp_last  <= head_last;
                resp_data  <= {head_op, 16'b0, head_a, 32'b0, head_s, sa_ok ? core_rd_data : 32'sd0};
            end else if (fire_ident) begin
                resp_valid <= 1'b1;
                resp_last  <= head_last;
                resp_data  <= {head_op, 24'b0, 32'(N_ACTIONS), 32'(N_STATES), updates_run};
            end else if (m_axis_resp_tready) begin
                resp_valid <= 1'b0;
            end

            if (ctrl_done) begin
                running       <= 1'b0;
                updates_shown <= updates_run;
            end else if (running) begin
                if (cmd_fire) cmds_left <= cmds_left - 1;
                if (fire_update && update_ok) updates_run <= updates_run + 1;
            end else if (ctrl_start) begin
                running     <= 1'b1;
                cmds_left   <= ctrl_n_cmds;
                updates_run <= '0;
            end
        end
    end

    wire unused = &{1'b0, core_updates};
endmodule

`default_nettype wire
