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
    // A command word, decoded as it is taken from the stream (range checks, the core's operation).
    localparam logic [2:0] CORE_UPDATE = 3'd0, CORE_WRITE = 3'd1, CORE_READ = 3'd2, CORE_CLEAR = 3'd3,
                           CORE_PASS = 3'd4;
    localparam int RESP_DEPTH = 8;  // answers accepted and not yet taken: one READ per clock with tready high
    localparam int TAG_W = 1 + 8 + 8 + 32 + 32 + 1;  // tlast, opcode, a, s, value, "the word is the READ's"

    // A queue of CMD_DEPTH decoded commands between the stream and the core: tready comes from its
    // registered count, so no path runs from the core's issue decision to the stream.
    localparam int CMD_DEPTH = 4;
    localparam int CMD_W = 4 + 3 + 3 * 8 + 3 * 32;
    logic [CMD_DEPTH-1:0][CMD_W-1:0] cmd_queue;
    logic [1:0]  cq_head, cq_tail;
    logic [2:0]  cq_count;
    wire         head_valid = cq_count != 0;
    wire         head_last, head_done, head_answer, head_read_ok;
    wire [2:0]   head_core_op;
    wire [7:0]   head_op, head_a, head_a2;
    wire [31:0]  head_s, head_s2, head_value;
    assign {head_last, head_done, head_answer, head_read_ok, head_core_op, head_op, head_a, head_a2, head_s, head_s2,
            head_value} = cmd_queue[cq_head];

    wire sarsa = ctrl_sarsa[0];
    wire [7:0]  cmd_op = s_axis_cmd_tdata[127:120];
    wire [31:0] cmd_s = s_axis_cmd_tdata[63:32], cmd_s2 = s_axis_cmd_tdata[95:64];
    wire [7:0]  cmd_a = s_axis_cmd_tdata[103:96], cmd_a2 = s_axis_cmd_tdata[111:104];
    wire cmd_sa_ok = cmd_s < 32'(N_STATES) && 32'(cmd_a) < 32'(N_ACTIONS);
    wire cmd_update_ok = cmd_sa_ok && cmd_s2 < 32'(N_STATES) && (!sarsa || 32'(cmd_a2) < 32'(N_ACTIONS));
    logic [2:0] cmd_core_op;
    always_comb begin
        case (cmd_op)
            OP_UPDATE: cmd_core_op = cmd_update_ok ? CORE_UPDATE : CORE_PASS;
            OP_WRITE:  cmd_core_op = cmd_sa_ok ? CORE_WRITE : CORE_PASS;
            OP_READ:   cmd_core_op = cmd_sa_ok ? CORE_READ : CORE_PASS;  // outside the table: answers 0
            OP_CLEAR:  cmd_core_op = CORE_CLEAR;
            default:   cmd_core_op = CORE_PASS;                          // IDENTITY, unknown opcodes
        endcase
    end

    // ------------------------------------------------------------------ the core
    logic        core_in_ready, core_busy, core_ans_valid;
    logic [TAG_W-1:0] core_ans_tag;
    logic [31:0] core_rd_data;
    logic [AW:0] n_actions_used;   // the register, clamped to the table (registered: it changes between calls)
    logic [3:0]  resp_pending;
    wire resp_room = resp_pending < 4'(RESP_DEPTH);
    wire head_go = head_valid && (!head_answer || resp_room);
    wire head_fire = head_go && core_in_ready;
    // IDENTITY answers the UPDATEs handed to the core before it, with the table's shape
    wire [TAG_W-1:0] head_tag = {head_last, head_op, head_op == OP_IDENTITY ? 8'(N_ACTIONS) : head_a,
                                 head_op == OP_IDENTITY ? 32'(N_STATES) : head_s,
                                 head_op == OP_IDENTITY ? updates_run : 32'd0, head_read_ok};

    tabular_core #(.N_STATES(N_STATES), .N_ACTIONS(N_ACTIONS), .HAZARD_WINDOW(HAZARD_WINDOW), .TAG_W(TAG_W)) u_core (
        .clk(ap_clk),
        .rst_n(ap_rst_n),
        .alpha(ctrl_alpha[16:0]),
        .gamma(ctrl_gamma[16:0]),
        .sarsa(sarsa),
        .n_actions(n_actions_used),
        .in_valid(head_go),
        .in_ready(core_in_ready),
        .in_op(head_core_op),
        .in_answer(head_answer),
        .in_tag(head_tag),
        .in_s(head_s[SW-1:0]),
        .in_a(head_a[AW-1:0]),
        .in_value(head_value),
        .in_s2(head_s2[SW-1:0]),
        .in_a2(head_a2[AW-1:0]),
        .in_done(head_done),
        .issued(),
        .ans_valid(core_ans_valid),
        .ans_tag(core_ans_tag),
        .rd_data(core_rd_data),
        .busy(core_busy)
    );

    always_ff @(posedge ap_clk)
        n_actions_used <= ctrl_n_actions > 32'(N_ACTIONS) ? (AW+1)'(N_ACTIONS) : ctrl_n_actions[AW:0];

    // ------------------------------------------------------------------ responses
    // The answers, in order, into a queue of RESP_DEPTH words that m_axis_resp reads.
    wire [7:0]  ans_op = core_ans_tag[TAG_W-2 -: 8];
    wire [7:0]  ans_a = core_ans_tag[TAG_W-10 -: 8];
    wire [31:0] ans_s = core_ans_tag[TAG_W-18 -: 32];
    wire [31:0] ans_value = core_ans_tag[32:1];
    wire [127:0] ans_word = ans_op == OP_IDENTITY ? {ans_op, 24'b0, 24'b0, ans_a, ans_s, ans_value}
                                                  : {ans_op, 16'b0, ans_a, 32'b0, ans_s,
                                                     core_ans_tag[0] ? core_rd_data : ans_value};
    logic [RESP_DEPTH-1:0][128:0] queue;
    logic [2:0]  q_head, q_tail;
    logic [3:0]  q_count;
    wire         q_pop = q_count != 0 && m_axis_resp_tready;
    wire         q_push = core_ans_valid;
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
            resp_pending <= resp_pending + 4'(head_fire && head_answer) - 4'(q_pop);
        end
        if (q_push) queue[q_tail] <= {core_ans_tag[TAG_W-1], ans_word};
    end

    // ------------------------------------------------------------------ streams and control
    wire accept_ok = running && cmds_left != 0;
    assign s_axis_cmd_tready = ap_rst_n && accept_ok && cq_count < 3'(CMD_DEPTH - 1);
    wire cmd_fire = s_axis_cmd_tvalid && s_axis_cmd_tready;

    wire busy = head_valid || core_busy || resp_pending != 0;
    assign ctrl_done = running && cmds_left == 0 && !busy;
    assign ctrl_idle = !running;

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            cq_head       <= '0;
            cq_tail       <= '0;
            cq_count      <= '0;
            running       <= 1'b0;
            cmds_left     <= '0;
            updates_run   <= '0;
            updates_shown <= '0;
        end else begin
            if (cmd_fire) cq_tail <= cq_tail + 1'b1;
            if (head_fire) cq_head <= cq_head + 1'b1;
            cq_count <= cq_count + 3'(cmd_fire) - 3'(head_fire);

            if (ctrl_done) begin
                running       <= 1'b0;
                updates_shown <= updates_run;
            end else if (running) begin
                if (cmd_fire) cmds_left <= cmds_left - 1;
                if (head_fire && head_core_op == CORE_UPDATE) updates_run <= updates_run + 1;
            end else if (ctrl_start) begin
                running     <= 1'b1;
                cmds_left   <= ctrl_n_cmds;
                updates_run <= '0;
            end
        end
        if (cmd_fire)
            cmd_queue[cq_tail] <= {s_axis_cmd_tlast, s_axis_cmd_tdata[112], cmd_op == OP_READ || cmd_op == OP_IDENTITY,
                                   cmd_op == OP_READ && cmd_sa_ok, cmd_core_op, cmd_op, cmd_a, cmd_a2, cmd_s, cmd_s2,
                                   s_axis_cmd_tdata[31:0]};
    end

endmodule

`default_nettype wire
