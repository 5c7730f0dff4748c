`default_nettype none
// Prioritized-replay sum tree: reference RTL of the replay kernel (contract: hls/replay/SPEC.md(md)).
//
// Microarchitecture
//   - One memory per tree level d = 1..DEPTH (replay_level), each word holding the K child sums of
//     one parent, so a node's children are read in parallel; the root sum is a register (total).
//   - Every stage is at most one carry chain deep after a registered block-RAM read (each level as
//     wide as its sums can grow: 32 + ceil(log2(leaves below)) bits; replay_level), and the
//     issue logic works on the head command's opcode decoded as it is taken and on issue conditions
//     registered a cycle ahead (no counter compare before the fire decision), and a two-entry
//     command queue makes s_axis_cmd_tready a function of registers and keeps the fire decision off
//     the command fields' enables, for 100 MHz on an
//     ECP5 -6 (make implement measures it; docs/hardware.md).
//   - SAMPLE: 8 cycles per level (block-RAM read, its output register, a four-stage parallel prefix
//     of the K child sums, the K comparisons, the selection; replay_level), pipelined across levels:
//     one sample accepted per clock; responses in command order.
//   - UPDATE: five stages, A R B D C, then the write W. Every level reads the ancestor's parent word
//     in A (registered in R); in B the leaf level picks the old priority, and the top picks the
//     latest of the five updates ahead that wrote the same leaf (their reads and writes overlap
//     this one's; the index comparisons are registered in R); in D delta = new - old is registered;
//     in C every level (and the root) adds delta to its slot, forwarding the writes its read missed
//     (replay_level), and W writes it.
//     Back-to-back updates (same index or shared ancestors) run at one per clock and give the tree
//     of sequential updates.
//   - Ordering: a SAMPLE waits until no update is in stages A to C (its level-1 read must follow
//     the write); an UPDATE, TOTAL or CLEAR waits until no sample is in flight; TOTAL and CLEAR
//     wait for updates to finish. Updates to indices >= CAPACITY and unknown opcodes are consumed
//     and ignored.
//   - Responses go through a FIFO; a SAMPLE/TOTAL is only issued while the FIFO has room for
//     everything in flight, so m_axis_resp_tready low stalls the command stream, never the tree.
//   - Reset and CLEAR zero the memories in a sweep of ceil(CAPACITY/K) cycles (tready low).
//   - FREE_RUN=0: ap_ctrl_hs through replay_ctrl: ap_start takes n_cmds commands, ap_done when
//     their responses have all been taken. FREE_RUN=1: commands are processed whenever they come.
module replay_top #(
    parameter int CAPACITY = 16,  // number of leaves (1 .. 2^20)
    parameter int FANOUT   = 16,  // children per node: 2, 4, 8 or 16
    parameter int FREE_RUN = 0    // 1: process commands whenever they arrive, without ap_start
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
    output logic              interrupt       // GIE and (ISR and IER), as a Vitis IP's
);
    // ------------------------------------------------------------------ derived parameters
    function automatic int tree_depth(input int capacity, input int fanout);
        int depth, span;
        depth = 1;
        span  = fanout;
        for (int i = 0; i < 20; i++) begin  // bounded loop (constant function)
            if (span < capacity) begin
                depth = depth + 1;
                span  = span * fanout;
            end
        end
        tree_depth = depth;
    endfunction

    function automatic int ipow(input int base, input int exp);
        int r;
        r = 1;
        for (int i = 0; i < exp; i++) r = r * base;
        ipow = r;
    endfunction

    localparam int LOGK        = $clog2(FANOUT);
    localparam int DEPTH       = tree_depth(CAPACITY, FANOUT);  // levels below the root
    localparam int IDX_W       = LOGK * DEPTH;                  // node indices up to K^DEPTH - 1
    localparam int CLEAR_WORDS = (CAPACITY + FANOUT - 1) / FANOUT;  // words of the widest level
    localparam int LEVEL_CYCLES = 8;  // sample cycles per replay_level (its eight stages)
    localparam int U_C = 4;           // update stages: 0 A, 1 R, 2 B, 3 D, 4 C (then the level's write)
    localparam int U_LAST = U_C + 3;  // the oldest update whose leaf write a read in A can miss
    localparam int FIFO_AW     = $clog2(LEVEL_CYCLES * DEPTH + 8);  // room for a full sample pipeline
    localparam int FIFO_N      = 1 << FIFO_AW;

    localparam logic [7:0] OP_UPDATE = 8'h01, OP_SAMPLE = 8'h02, OP_TOTAL = 8'h03, OP_CLEAR = 8'h04,
                           OP_IDENTITY = 8'h05;

    // ------------------------------------------------------------------ control
    logic        ctrl_start, ctrl_done, ctrl_idle;
    logic [31:0] ctrl_n_cmds;
    logic [63:0] total, total_shown;
    logic        running;
    logic [31:0] cmds_left;
    logic        cmds_more;   // cmds_left != 0, kept as a register (it gates s_axis_cmd_tready)
    logic        busy /* verilator public_flat_rd */;  // read by the simulation harness

    replay_ctrl #(.CAPACITY(CAPACITY), .FANOUT(FANOUT)) u_ctrl (
        .ap_clk(ap_clk),
        .ap_rst_n(ap_rst_n),
        .s_axi_control_awaddr(s_axi_control_awaddr),
        .s_axi_control_awvalid(s_axi_control_awvalid),
        .s_axi_control_awready(s_axi_control_awready),
        .s_axi_control_wdata(s_axi_control_wdata),
        .s_axi_control_wstrb(s_axi_control_wstrb),
        .s_axi_control_wvalid(s_axi_control_wvalid),
        .s_axi_control_wready(s_axi_control_wready),
        .s_axi_control_bresp(s_axi_control_bresp),
        .s_axi_control_bvalid(s_axi_control_bvalid),
        .s_axi_control_bready(s_axi_control_bready),
        .s_axi_control_araddr(s_axi_control_araddr),
        .s_axi_control_arvalid(s_axi_control_arvalid),
        .s_axi_control_arready(s_axi_control_arready),
        .s_axi_control_rdata(s_axi_control_rdata),
        .s_axi_control_rresp(s_axi_control_rresp),
        .s_axi_control_rvalid(s_axi_control_rvalid),
        .s_axi_control_rready(s_axi_control_rready),
        .interrupt(interrupt),
        .ctrl_start(ctrl_start),
        .ctrl_n_cmds(ctrl_n_cmds),
        .ctrl_idle(ctrl_idle),
        .ctrl_done(ctrl_done),
        .ctrl_total(total_shown)
    );

    // ------------------------------------------------------------------ state
    // The command queue: two entries, written at q_wr as commands are taken and read at q_rd (the
    // head). An entry's fields load whenever the queue can take a command (a cycle with tvalid low
    // loads nothing that is used), so their enable is a register; the fire decision only moves q_rd
    // and the count, a few flip-flops. s_axis_cmd_tready is a function of registers (fewer than two
    // held, running with commands left, no clear sweep).
    logic [1:0]             q_count;
    logic                   q_wr, q_rd;
    logic [1:0]             q_last, q_update, q_sample, q_answer, q_identity, q_clear, q_other, q_in_range;
    logic [1:0][IDX_W-1:0]  q_index;
    logic [1:0][63:0]       q_value;
    logic                   head_valid, head_last;
    logic [IDX_W-1:0]       head_index;
    // the head's opcode decoded (and its index checked) as it is taken, so that issue is a few gates
    logic                   head_update, head_sample, head_answer, head_identity, head_clear, head_other;
    logic                   head_in_range;
    logic [63:0]            head_value;
    assign head_valid    = q_count != 2'd0;
    assign head_last     = q_last[q_rd];
    assign head_index    = q_index[q_rd];
    assign head_update   = q_update[q_rd];
    assign head_sample   = q_sample[q_rd];
    assign head_answer   = q_answer[q_rd];
    assign head_identity = q_identity[q_rd];
    assign head_clear    = q_clear[q_rd];
    assign head_other    = q_other[q_rd];
    assign head_in_range = q_in_range[q_rd];
    assign head_value    = q_value[q_rd];
    logic                   in_update, in_sample, in_answer, in_identity, in_clear, in_other, in_in_range;
    logic [7:0]             in_op;
    assign in_op       = s_axis_cmd_tdata[127:120];
    assign in_update   = in_op == OP_UPDATE;
    assign in_sample   = in_op == OP_SAMPLE;
    assign in_answer   = in_op == OP_TOTAL || in_op == OP_IDENTITY;
    assign in_identity = in_op == OP_IDENTITY;
    assign in_clear    = in_op == OP_CLEAR;
    assign in_other    = in_op != OP_UPDATE && in_op != OP_SAMPLE && in_op != OP_TOTAL && in_op != OP_IDENTITY
                         && in_op != OP_CLEAR;
    assign in_in_range = s_axis_cmd_tdata[95:64] < 32'(CAPACITY);

    logic                   sd_valid, sd_last;      // sample dispatched into level 1
    logic [63:0]            sd_target;
    // the update pipeline by stage (index U_C is C; past it, updates whose writes a read can miss)
    logic [U_LAST:0]             u_valid;
    logic [U_LAST:0][IDX_W-1:0]  u_index;
    logic [U_LAST:0][31:0]       u_word;
    logic                        uc_valid, updating;
    logic [63:0]                 uc_delta;
    logic                        b_hit, leaf_hit;   // stage B's leaf forward, and registered for D
    logic [31:0]                 b_fwd, leaf_fwd;

    logic                   clearing;
    logic [IDX_W-1:0]       clear_addr;

    logic [FIFO_AW:0]       inflight;               // samples issued, not yet in the FIFO
    logic [FIFO_AW:0]       reserved;               // responses issued, not yet taken
    logic [FIFO_AW:0]       fifo_wr, fifo_rd;
    logic                   fifo_push, fifo_pop;
    // {last, opcode, index, value}. Read asynchronously (the head is on the stream at once), so LUT
    // RAM: mapped onto block RAM, Yosys moves fifo_rd into the RAM's read register, and the netlist
    // simulation showed the mapped FIFO returning other words than the RTL under response backpressure.
    (* ram_style = "distributed" *) logic [104:0] fifo_mem [FIFO_N];

    // level chain: index 0 is the dispatch register, index d the output of level d
    logic [DEPTH:0]             s_valid, s_last;
    logic [DEPTH:0][63:0]       s_target, s_base, s_value;
    logic [DEPTH:0][IDX_W-1:0]  s_node;
    logic [DEPTH:0][63:0]       u_old;
    logic [63:0]                delta;

    // ------------------------------------------------------------------ issue
    // The head fires when its kind's condition holds. The conditions come from registers computed a
    // cycle ahead (ok_*: the next cycle's inflight == 0, updates in A..C, response room, no clear
    // sweep), so that the fire decision is two LUT levels after the head's select.
    logic head_fire, fire_update, fire_sample, fire_total, fire_clear, fire_other;
    logic accept_ok, cmd_fire;
    logic ok_update, ok_sample, ok_answer, ok_clear, ok_any;   // registered issue conditions
    logic inflight_zero_n, updating_n, room_n, clearing_n;     // their inputs, next cycle's values
    logic [FIFO_AW:0] inflight_n, reserved_n;

    // One copy of the update's stage-A valid and index per level, registered beside u_valid[0]: each
    // drives only its own level's read-address select, so no one flip-flop reaches every level's
    // block RAMs (keep_reg: Yosys would merge equal registers back into one).
    logic [DEPTH:1]            ua_valid_l;
    logic [DEPTH:1][IDX_W-1:0] ua_index_l;
    assign uc_valid     = u_valid[U_C];
    assign updating     = |u_valid[U_C:0];
    assign fire_update  = head_valid && head_update && ok_update;
    assign fire_sample  = head_valid && head_sample && ok_sample;
    // TOTAL and IDENTITY answer in command order: after every response and update before them
    assign fire_total   = head_valid && head_answer && ok_answer;
    assign fire_clear   = head_valid && head_clear && ok_clear;
    assign fire_other   = head_valid && head_other && ok_any;
    assign head_fire    = fire_update || fire_sample || fire_total || fire_clear || fire_other;

    assign accept_ok         = (FREE_RUN != 0) || (running && cmds_more);
    assign s_axis_cmd_tready = ap_rst_n && !clearing && accept_ok && q_count != 2'd2;
    assign cmd_fire          = s_axis_cmd_tvalid && s_axis_cmd_tready;

    // next cycle's bookkeeping, and the issue conditions it gives
    assign inflight_n      = inflight + (FIFO_AW+1)'(fire_sample) - (FIFO_AW+1)'(s_valid[DEPTH]);
    assign reserved_n      = reserved + (FIFO_AW+1)'(fire_sample || fire_total) - (FIFO_AW+1)'(fifo_pop);
    assign inflight_zero_n = inflight_n == '0;
    assign room_n          = reserved_n < (FIFO_AW+1)'(FIFO_N);
    assign updating_n      = (fire_update && head_in_range) || |u_valid[U_C-1:0];
    assign clearing_n      = fire_clear || (clearing && clear_addr != IDX_W'(CLEAR_WORDS - 1));
    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            {ok_update, ok_sample, ok_answer, ok_clear, ok_any} <= '0;  // clearing after reset
        end else begin
            ok_any    <= !clearing_n;
            ok_update <= !clearing_n && inflight_zero_n;
            ok_sample <= !clearing_n && !updating_n && room_n;
            ok_answer <= !clearing_n && inflight_zero_n && !updating_n && room_n;
            ok_clear  <= !clearing_n && inflight_zero_n && !updating_n;
        end
    end

    assign busy      = head_valid || sd_valid || updating || u_valid[U_C+1] || inflight != '0 || reserved != '0
                       || clearing;
    assign ctrl_done = (FREE_RUN == 0) && running && !cmds_more && !busy;
    assign ctrl_idle = (FREE_RUN != 0) ? !busy : !running;

    // ------------------------------------------------------------------ response FIFO
    logic [104:0] fifo_in, fifo_head;
    assign fifo_push = s_valid[DEPTH] || fire_total;
    assign fifo_in   = s_valid[DEPTH] ? {s_last[DEPTH], OP_SAMPLE, 32'(s_node[DEPTH]), s_value[DEPTH]}
                                      : head_identity ? {head_last, OP_IDENTITY, 32'(FANOUT), 64'(CAPACITY)}
                                                               : {head_last, OP_TOTAL, 32'b0, total};
    assign fifo_head = fifo_mem[fifo_rd[FIFO_AW-1:0]];
    assign m_axis_resp_tvalid = fifo_wr != fifo_rd;
    assign m_axis_resp_tlast  = fifo_head[104];
    assign m_axis_resp_tdata  = {fifo_head[103:96], 24'b0, fifo_head[95:0]};
    assign fifo_pop = m_axis_resp_tvalid && m_axis_resp_tready;

    always_ff @(posedge ap_clk) begin
        if (fifo_push) fifo_mem[fifo_wr[FIFO_AW-1:0]] <= fifo_in;
    end

    // ------------------------------------------------------------------ sequential control
    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n) begin
            q_count    <= '0;
            q_wr       <= 1'b0;
            q_rd       <= 1'b0;
            sd_valid   <= 1'b0;
            u_valid    <= '0;
            clearing   <= 1'b1;   // zero the tree after reset
            clear_addr <= '0;
            inflight   <= '0;
            reserved   <= '0;
            fifo_wr    <= '0;
            fifo_rd    <= '0;
            total      <= '0;
            total_shown <= '0;
            running    <= 1'b0;
            cmds_left  <= '0;
            cmds_more  <= 1'b0;
        end else begin
            // command queue
            if (s_axis_cmd_tready) begin
                q_index[q_wr]    <= IDX_W'(s_axis_cmd_tdata[95:64]);
                q_update[q_wr]   <= in_update;
                q_sample[q_wr]   <= in_sample;
                q_answer[q_wr]   <= in_answer;
                q_identity[q_wr] <= in_identity;
                q_clear[q_wr]    <= in_clear;
                q_other[q_wr]    <= in_other;
                q_in_range[q_wr] <= in_in_range;
                q_value[q_wr]    <= s_axis_cmd_tdata[63:0];
                q_last[q_wr]     <= s_axis_cmd_tlast;
            end
            q_wr    <= q_wr ^ cmd_fire;
            q_rd    <= q_rd ^ head_fire;
            q_count <= q_count + 2'(cmd_fire) - 2'(head_fire);

            // dispatch
            sd_valid  <= fire_sample;
            sd_target <= head_value;
            sd_last   <= head_last;
            u_valid   <= {u_valid[U_LAST-1:0], fire_update && head_in_range};
            u_index   <= {u_index[U_LAST-1:0], head_index};
            u_word    <= {u_word[U_LAST-1:0], head_value[31:0]};
            leaf_hit  <= b_hit;
            leaf_fwd  <= b_fwd;
            uc_delta  <= delta;
            if (uc_valid) total <= total + uc_delta;

            // clear sweep (after reset or a CLEAR command)
            if (fire_clear) begin
                u_valid    <= '0;     // only the history past C can be valid here
                clearing   <= 1'b1;
                clear_addr <= '0;
                total      <= '0;
            end else if (clearing) begin
                if (clear_addr == IDX_W'(CLEAR_WORDS - 1)) clearing <= 1'b0;
                else clear_addr <= clear_addr + 1'b1;
            end

            // response bookkeeping
            inflight <= inflight_n;
            reserved <= reserved_n;
            if (fifo_push) fifo_wr <= fifo_wr + 1'b1;
            if (fifo_pop)  fifo_rd <= fifo_rd + 1'b1;

            // ap_ctrl_hs. A command is only taken while running with commands left (accept_ok), and
            // done needs none left, so the count's enable is cmd_fire alone (registers and tvalid).
            if (FREE_RUN == 0 && cmd_fire) begin
                cmds_left <= cmds_left - 1;
                cmds_more <= cmds_left != 32'd1;
            end
            if (FREE_RUN != 0) begin
                total_shown <= total;
            end else if (ctrl_done) begin
                running     <= 1'b0;
                total_shown <= total;
            end else if (!running && ctrl_start) begin
                running   <= 1'b1;
                cmds_left <= ctrl_n_cmds;
                cmds_more <= ctrl_n_cmds != '0;
            end
        end
    end

    // ------------------------------------------------------------------ tree levels
    assign s_valid[0]  = sd_valid;
    assign s_last[0]   = sd_last;
    assign s_target[0] = sd_target;
    assign s_base[0]   = '0;
    assign s_node[0]   = '0;
    assign s_value[0]  = '0;
    assign u_old[0]    = '0;
    // Stage B: the latest of the updates one to five ahead (stages D, C and the three after) with the
    // same leaf: the leaf level's read may have missed its write, so its word is the old leaf. The
    // index comparisons are made a stage earlier, in R, against the same updates one stage younger
    // (r_match[k]: the update now at k - 1 wrote this leaf); B only picks the first and its word.
    logic [U_LAST:3] r_match, b_first;
    always_ff @(posedge ap_clk) begin
        for (int k = 3; k <= U_LAST; k++)
            r_match[k] <= u_valid[k-1] && u_index[k-1] == u_index[1];
    end
    logic b_seen;  // a younger match than k (one to k - 1 ahead)
    always_comb begin
        b_seen = 1'b0;
        b_fwd  = '0;
        for (int k = 3; k <= U_LAST; k++) begin
            b_first[k] = r_match[k] && !b_seen;
            b_seen     = b_seen || r_match[k];
            b_fwd      = b_fwd | (u_word[k] & {32{b_first[k]}});
        end
        b_hit = b_seen;
    end
    // Stage D: delta = new leaf - old leaf (mod 2^64, added to every ancestor in stage C).
    logic [63:0] leaf_old;
    assign leaf_old = leaf_hit ? 64'(leaf_fwd) : u_old[DEPTH];
    assign delta    = 64'(u_word[3]) - leaf_old;

    for (genvar d = 1; d <= DEPTH; d++) begin : g_level
        localparam int BELOW = DEPTH - d;  // levels below this one
        localparam int SPAN  = ipow(FANOUT, BELOW + 1);  // leaves under one parent word
        // A sum of n leaves of 32 bits needs 32 + ceil(log2(n)) bits (n at most CAPACITY): the level's
        // child sums (SLOT_W) and its parents' sums, the prefix and the target it receives (SUM_W).
        localparam int CHILD_LEAVES  = SPAN / FANOUT < CAPACITY ? SPAN / FANOUT : CAPACITY;
        localparam int PARENT_LEAVES = SPAN < CAPACITY ? SPAN : CAPACITY;
        // this level's copy of u_valid[0] and u_index[0] (the same next values, reset included)
        keep_reg #(.WIDTH(1 + IDX_W)) u_a_copy (
            .clk(ap_clk),
            .d({ap_rst_n && fire_update && head_in_range, head_index}),
            .q({ua_valid_l[d], ua_index_l[d]})
        );
        replay_level #(
            .FANOUT(FANOUT),
            .LOGK(LOGK),
            .WORDS((CAPACITY + SPAN - 1) / SPAN),
            .SLOT_W(32 + $clog2(CHILD_LEAVES)),
            .SUM_W(32 + $clog2(PARENT_LEAVES)),
            .IDX_W(IDX_W),
            .SHIFT(LOGK * BELOW)
        ) u_level (
            .ap_clk(ap_clk),
            .ap_rst_n(ap_rst_n),
            .clear_en(clearing),
            .clear_addr(clear_addr),
            .s_in_valid(s_valid[d-1]),
            .s_in_target(s_target[d-1]),
            .s_in_base(s_base[d-1]),
            .s_in_node(s_node[d-1]),
            .s_in_last(s_last[d-1]),
            .s_out_valid(s_valid[d]),
            .s_out_target(s_target[d]),
            .s_out_base(s_base[d]),
            .s_out_node(s_node[d]),
            .s_out_last(s_last[d]),
            .s_out_value(s_value[d]),
            .u_a_valid(ua_valid_l[d]),
            .u_a_index(ua_index_l[d]),
            .u_b_old(u_old[d]),
            .u_c_valid(uc_valid),
            .u_c_delta(uc_delta)
        );
    end
endmodule

`default_nettype wire
