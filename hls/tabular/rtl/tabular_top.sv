`default_nettype none
// Tabular Q-learning / SARSA kernel: reference RTL of the board IP (contract: hls/tabular/SPEC.md),
// the same ports, registers and schedule as the HLS top (tabular.cpp: tabular_top).
//
//   - AXI4-Lite control (tabular_ctrl: ap_ctrl_hs, alpha, gamma, sarsa, n_actions, identity);
//     ap_start takes n_cmds 128-bit command words from s_axis_cmd; ap_done when every command has
//     taken effect and every response has been taken.
//   - One command issues per clock from the command head into tabular_core (the table in block RAM
//     and the update pipeline), in order; a command that reads a row written by one of the last
//     HAZARD_WINDOW - 1 issued commands waits there, as in the HLS top. CLEAR drains the pipeline and
//     zeroes the table one row per clock.
//   - READ and IDENTITY answer on m_axis_resp, in order, through a response queue; they issue only
//     while the queue has room for every answer in flight, so tready low stalls the command stream,
//     never the pipeline.
//   - Commands whose s, s2, a (or, for SARSA, a2) lie outside the synthesized table, and unknown
//     opcodes, are consumed and ignored (a READ outside answers 0), as in the HLS top.
module tabular_top #(
    parameter int N_STATES  = 16,  // synthesized rows (MAX_STATES)
    parameter int N_ACTIONS = 4,   // synthesized columns (MAX_ACTIONS), 1 .. 64
    parameter int HAZARD_WINDOW = 16  // as the HLS top (kernel.json)
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

    // ------------------------------------------------------------------ the core
    localparam logic [1:0] CORE_UPDATE = 2'd0, CORE_WRITE = 2'd1, CORE_READ = 2'd2, CORE_CLEAR = 2'd3;
    localparam int READ_LATENCY = 3;  // tabular_core: a READ's word READ_LATENCY clocks after its issue
    localparam int RESP_DEPTH = 8;    // answers in flight or queued: one READ per clock with tready high

    logic        core_in_ready, core_busy, core_rd_valid;
    logic [31:0] core_rd_data;
    logic [1:0]  core_op;
    logic        core_cmd;   // the head goes to the core
    always_comb begin
        core_cmd = 1'b0;
        core_op = CORE_UPDATE;
        case (head_op)
            OP_UPDATE: begin core_cmd = update_ok; core_op = CORE_UPDATE; end
            OP_WRITE:  begin core_cmd = sa_ok; core_op = CORE_WRITE; end
            OP_READ:   begin core_cmd = sa_ok; core_op = CORE_READ; end
            OP_CLEAR:  begin core_cmd = 1'b1; core_op = CORE_CLEAR; end
            default: ;
        endcase
    end

    // ------------------------------------------------------------------ responses
    logic [3:0]  resp_pending;   // answers issued and not yet taken from m_axis_resp
    wire answers   = head_op == OP_READ || head_op == OP_IDENTITY;
    wire resp_room = resp_pending < 4'(RESP_DEPTH);
    wire head_fire = head_valid && (!answers || resp_room) && (!core_cmd || core_in_ready);

    tabular_core #(.N_STATES(N_STATES), .N_ACTIONS(N_ACTIONS), .HAZARD_WINDOW(HAZARD_WINDOW)) u_core (
        .clk(ap_clk),
        .rst_n(ap_rst_n),
        .alpha(ctrl_alpha[16:0]),
        .gamma(ctrl_gamma[16:0]),
        .sarsa(sarsa),
        .n_actions(ctrl_n_actions > 32'(N_ACTIONS) ? (AW+1)'(N_ACTIONS) : ctrl_n_actions[AW:0]),
        .in_valid(head_valid && core_cmd && (!answers || resp_room)),
        .in_ready(core_in_ready),
        .in_op(core_op),
        .in_s(head_s[SW-1:0]),
        .in_a(head_a[AW-1:0]),
        .in_value(head_value),
        .in_s2(head_s2[SW-1:0]),
        .in_a2(head_a2[AW-1:0]),
        .in_done(head_done),
        .rd_valid(core_rd_valid),
        .rd_data(core_rd_data),
        .busy(core_busy)
    );

    // An answer's fields wait READ_LATENCY clocks beside the core's read, then join the queue.
    logic [READ_LATENCY:1]        ans_valid, ans_read, ans_last;
    logic [READ_LATENCY:1][7:0]   ans_op, ans_a;
    logic [READ_LATENCY:1][31:0]  ans_s, ans_value;
    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) ans_valid <= '0;
        else ans_valid <= {ans_valid[READ_LATENCY-1:1], head_fire && answers};
        ans_read  <= {ans_read[READ_LATENCY-1:1], head_op == OP_READ && sa_ok};
        ans_last  <= {ans_last[READ_LATENCY-1:1], head_last};
        ans_op    <= {ans_op[READ_LATENCY-1:1], head_op};
        ans_a     <= {ans_a[READ_LATENCY-1:1], head_a};
        ans_s     <= {ans_s[READ_LATENCY-1:1], head_op == OP_IDENTITY ? 32'(N_STATES) : head_s};
        // IDENTITY: the UPDATEs issued before it; a READ outside the table: 0
        ans_value <= {ans_value[READ_LATENCY-1:1], head_op == OP_IDENTITY ? updates_run : 32'd0};
    end
    wire [127:0] ans_word = ans_op[READ_LATENCY] == OP_IDENTITY
        ? {ans_op[READ_LATENCY], 24'b0, 32'(N_ACTIONS), ans_s[READ_LATENCY], ans_value[READ_LATENCY]}
        : {ans_op[READ_LATENCY], 16'b0, ans_a[READ_LATENCY], 32'b0, ans_s[READ_LATENCY],
           ans_read[READ_LATENCY] ? core_rd_data : ans_value[READ_LATENCY]};

    // The queue (RESP_DEPTH words): written when an answer arrives, read by m_axis_resp.
    logic [RESP_DEPTH-1:0][128:0] queue;
    logic [2:0]  q_head, q_tail;
    logic [3:0]  q_count;
    wire         q_pop = q_count != 0 && m_axis_resp_tready;
    wire         q_push = ans_valid[READ_LATENCY];
    assign m_axis_resp_tvalid = q_count != 0;
    assign {m_axis_resp_tlast, m_axis_resp_tdata} = queue[q_head];

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            q_head <= '0;
            q_tail <= '0;
            q_count <= '0;
            resp_pending <= '0;
        end else begin
            if (q_push) q_tail <= q_tail + 1'b1;
            if (q_pop) q_head <= q_head + 1'b1;
            q_count <= q_count + 4'(q_push) - 4'(q_pop);
            resp_pending <= resp_pending + 4'(head_fire && answers) - 4'(q_pop);
        end
        if (q_push) queue[q_tail] <= {ans_last[READ_LATENCY], ans_word};
    end
    wire unused_rd = &{1'b0, core_rd_valid};

    // ------------------------------------------------------------------ streams and control
    wire accept_ok = running && cmds_left != 0;
    assign s_axis_cmd_tready = ap_rst_n && accept_ok && (!head_valid || head_fire);
    wire cmd_fire = s_axis_cmd_tvalid && s_axis_cmd_tready;

    wire busy = head_valid || core_busy || resp_pending != 0;
    assign ctrl_done = running && cmds_left == 0 && !busy;
    assign ctrl_idle = !running;

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            head_valid    <= 1'b0;
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

            if (ctrl_done) begin
                running       <= 1'b0;
                updates_shown <= updates_run;
            end else if (running) begin
                if (cmd_fire) cmds_left <= cmds_left - 1;
                if (head_fire && head_op == OP_UPDATE && update_ok) updates_run <= updates_run + 1;
            end else if (ctrl_start) begin
                running     <= 1'b1;
                cmds_left   <= ctrl_n_cmds;
                updates_run <= '0;
            end
        end
    end
endmodule

`default_nettype wire
