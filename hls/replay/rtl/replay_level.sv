`default_nettype none
// One level of the K-ary sum tree (hls/replay/SPEC.md): the K child sums of every parent, one memory
// per child slot (replay_slot_ram) read at the same address, so one read gives all K children and
// an update writes only its own slot.
//
// Widths: a level holds what its sums can reach, not 64 bits. A child sum of n leaves of 32 bits needs
// SLOT_W = 32 + ceil(log2(n)) bits (n at most CAPACITY), the parent's sum, the prefix and the target
// into the level (< the parent's sum in the contract) SUM_W bits, and the target within the chosen
// child (< its sum) SLOT_W bits. Updates add the delta mod 2^SLOT_W: the new sum fits, so it is exact.
// Shared read port, block-RAM read plus an output register, one write port driven by registers;
// every stage is at most one carry chain of the level's width deep (with a LUT or two of one-hot
// selection around it), for 100 MHz on an ECP5 -6 (make implement measures it; docs/hardware.md):
//   sample (LEVEL_CYCLES = 8 cycles from s_in to s_out, one sample per clock):
//     cycle 0 presents the parent index; 1 the block RAM's output, registered; 2..5 the four levels
//     of a Sklansky prefix of the K children (levels past log2(K) only register); 6 the K
//     comparisons and the one-hot choice; 7 the selection (an AND-OR) of the chosen child's
//     prefix base, registered as s_out (the next level subtracts it from the target in its cycle 0).
//   update (one per clock; stage names are replay_top's: A R B D C, then the write W):
//     A  the ancestor's word address goes to the read port;      R  the block RAM's output, registered;
//     B  the slot's old value is picked (u_b_old, for the leaf's delta in the top);
//     D  which of the five writes the read could have missed (the updates one to five ahead of this
//        one) last wrote this slot, if any: chosen now, registered;
//     C  that write's value (else the read one; a one-hot AND-OR) plus the delta: the new slot value;
//     W  the write, registered (the write history h[1] below, and the write port's registers).
// The top guarantees that samples and updates never use the read port in the same cycle.
module replay_level #(
    parameter int FANOUT = 16,  // children per node (power of two, at most 16)
    parameter int LOGK   = 4,   // log2(FANOUT)
    parameter int WORDS  = 1,   // parent words stored at this level (padding words are never stored)
    parameter int SLOT_W = 64,  // bits per child sum: 32 + ceil(log2(leaves under one child)); 32 for leaves
    parameter int SUM_W  = 64,  // bits of a parent's sum (the prefix) and of the target into this level
    parameter int IDX_W  = 8,   // width of node and leaf indices
    parameter int SHIFT  = 0    // leaf index >> SHIFT = this level's node index (LOGK * levels below)
) (
    input  wire logic               ap_clk,
    input  wire logic               ap_rst_n,
    // clear sweep: zero the word at clear_addr
    input  wire logic               clear_en,
    input  wire logic [IDX_W-1:0]   clear_addr,
    // sample stage input: parent node index at the level above, remaining target: s_in_target -
    // s_in_base (the level above's choice leaves the subtraction to this level's first cycle)
    input  wire logic               s_in_valid,
    input  wire logic [63:0]        s_in_target,
    input  wire logic [63:0]        s_in_base,
    input  wire logic [IDX_W-1:0]   s_in_node,
    input  wire logic               s_in_last,
    // sample stage output: chosen child at this level, target relative to it (s_out_target -
    // s_out_base: the prefix before the child), its sum
    output logic                    s_out_valid,
    output logic [63:0]             s_out_target,
    output logic [63:0]             s_out_base,
    output logic [IDX_W-1:0]        s_out_node,
    output logic                    s_out_last,
    output logic [63:0]             s_out_value,
    // update, stage A: leaf index whose ancestor at this level changes
    input  wire logic               u_a_valid,
    input  wire logic [IDX_W-1:0]   u_a_index,
    // update, stage D: the slot's value as read (writes the read missed are not in it)
    output logic [63:0]             u_b_old,
    // update, stage C: add the delta to the slot
    input  wire logic               u_c_valid,
    input  wire logic [63:0]        u_c_delta
);
    localparam int ADDR_W = WORDS > 1 ? $clog2(WORDS) : 1;  // memory address bits
    localparam int PREFIX_STAGES = 4;                         // log2 of the largest FANOUT
    localparam int HIST = 5;                                  // writes a read can miss (A to W)

    // ---------------------------------------------------------------- memories
    logic [IDX_W-1:0]                u_a_node, u_a_addr, rd_addr;
    logic [FANOUT-1:0][SLOT_W-1:0]   rd_raw, rd_q, rd_children;
    logic                            rd_oob;
    logic [FANOUT-1:0]               wr_slot;   // write enable per slot
    logic [ADDR_W-1:0]               wr_addr;
    logic [SLOT_W-1:0]               wr_data;

    // Read port: the update's word when an update is in stage A, else the sample's parent.
    assign u_a_node = IDX_W'(u_a_index >> SHIFT);
    assign u_a_addr = IDX_W'(u_a_node >> LOGK);
    assign rd_addr  = u_a_valid ? u_a_addr : s_in_node;

    for (genvar j = 0; j < FANOUT; j++) begin : g_slot
        replay_slot_ram #(.WIDTH(SLOT_W), .WORDS(WORDS), .ADDR_W(ADDR_W)) u_ram (
            .clk(ap_clk),
            .rd_addr(rd_addr[ADDR_W-1:0]),
            .rd_data(rd_raw[j]),
            .wr_en(wr_slot[j]),
            .wr_addr(wr_addr),
            .wr_data(wr_data)
        );
    end

    // Output register, with no logic before it: addresses past the stored words only occur for
    // out-of-contract targets (target >= total), and the sample path reads them as 0 through the
    // register's synchronous reset (the flip-flops' own reset input, not a gate per bit).
    always_ff @(posedge ap_clk) begin
        rd_oob <= rd_addr >= IDX_W'(WORDS);
        if (rd_oob) rd_q <= '0;
        else        rd_q <= rd_raw;
    end
    assign rd_children = rd_q;

    // ---------------------------------------------------------------- sampling
    // side band of cycles 0 and 1 (the read and its output register)
    logic             sb_valid, sb_last, sq_valid, sq_last;
    logic [SUM_W-1:0] sb_target, sq_target;
    logic [IDX_W-1:0] sb_node, sq_node;
    always_ff @(posedge ap_clk) begin
        sb_valid  <= ap_rst_n && s_in_valid;
        // the target within this parent: < its sum in the contract, so mod 2^SUM_W is exact
        sb_target <= SUM_W'(s_in_target) - SUM_W'(s_in_base);
        sb_node   <= s_in_node;
        sb_last   <= s_in_last;
        sq_valid  <= ap_rst_n && sb_valid;
        sq_target <= sb_target;
        sq_node   <= sb_node;
        sq_last   <= sb_last;
    end

    // prefix stages: index 0 is the registered read, index p the output of Sklansky level p-1
    logic [PREFIX_STAGES:0]                         p_valid, p_last;
    logic [PREFIX_STAGES:0][SUM_W-1:0]              p_target;
    logic [PREFIX_STAGES:0][IDX_W-1:0]              p_node;
    logic [(PREFIX_STAGES+1)*FANOUT*SUM_W-1:0]      p_sum;    // stage p, lane j at (p*FANOUT + j)*SUM_W

    assign p_valid[0]  = sq_valid;
    assign p_last[0]   = sq_last;
    assign p_target[0] = sq_target;
    assign p_node[0]   = sq_node;
    for (genvar j = 0; j < FANOUT; j++) begin : g_lane0
        assign p_sum[j*SUM_W +: SUM_W] = SUM_W'(rd_children[j]);
    end
    // lane j of prefix stage p
    `define P_SUM(p, j) p_sum[((p) * FANOUT + (j)) * SUM_W +: SUM_W]

    // Sklansky level p: lanes with bit p of j set add the last lane of the lower half of their block
    // of 2^(p+1), lane (j >> p << p) - 1 (levels p >= LOGK only register). K/2 adders per level (32
    // at K = 16, where Kogge-Stone takes 49), the same depth; a sum fans out to at most 2^p lanes.
    for (genvar p = 0; p < PREFIX_STAGES; p++) begin : g_prefix
        for (genvar j = 0; j < FANOUT; j++) begin : g_lane
            if (p < LOGK && ((j >> p) & 1) == 1) begin : g_add
                always_ff @(posedge ap_clk) `P_SUM(p+1, j) <= `P_SUM(p, j) + `P_SUM(p, ((j >> p) << p) - 1);
            end else begin : g_pass
                always_ff @(posedge ap_clk) `P_SUM(p+1, j) <= `P_SUM(p, j);
            end
        end
        always_ff @(posedge ap_clk) begin
            p_valid[p+1]  <= ap_rst_n && p_valid[p];
            p_last[p+1]   <= p_last[p];
            p_target[p+1] <= p_target[p];
            p_node[p+1]   <= p_node[p];
        end
    end

    // cycle 6: every comparison in parallel, and the one-hot choice: the first child whose prefix
    // exceeds the target (the last child if none: only reachable with target >= total, which the
    // host never sends). The prefix sums never decrease, so the comparisons read 0...01...1 and the
    // first set one is where they rise (a carry chain and one LUT per child: no priority chain, and
    // cycle 7 is only the selection). The target within the chosen child, target - prefix_(j-1), is
    // left to the next level's first cycle: one subtraction of the chosen prefix instead of K.
    // Both are < the child's sum in the contract, so their low SLOT_W bits give it exactly.
    logic                          c_valid, c_last;
    logic [IDX_W-1:0]              c_node;
    logic [FANOUT-1:0]             c_first;
    logic [SLOT_W-1:0]             c_target;
    logic [FANOUT-1:0][SLOT_W-1:0] c_base;   // prefix_(j-1), 0 for the first child
    logic [FANOUT-1:0][SLOT_W-1:0] c_child;
    logic [FANOUT-1:0]             lt;
    always_comb begin
        for (int j = 0; j < FANOUT; j++)
            lt[j] = p_target[PREFIX_STAGES] < `P_SUM(PREFIX_STAGES, j) || j == FANOUT - 1;
    end
    always_ff @(posedge ap_clk) begin
        c_valid <= ap_rst_n && p_valid[PREFIX_STAGES];
        c_last  <= p_last[PREFIX_STAGES];
        c_node  <= p_node[PREFIX_STAGES];
        for (int j = 0; j < FANOUT; j++) begin
            // the child's own sum, back from the prefix (exact: the prefix of child sums never wraps);
            // only the leaf level's reach s_out_value, the others' are trimmed by synthesis
            c_child[j] <= SLOT_W'(j == 0 ? `P_SUM(PREFIX_STAGES, 0)
                                         : `P_SUM(PREFIX_STAGES, j) - `P_SUM(PREFIX_STAGES, j - 1));
            c_first[j] <= lt[j] && (j == 0 || !lt[j == 0 ? 0 : j - 1]);
            c_base[j]  <= j == 0 ? '0 : SLOT_W'(`P_SUM(PREFIX_STAGES, j == 0 ? 0 : j - 1));
        end
        c_target <= SLOT_W'(p_target[PREFIX_STAGES]);
    end

    // cycle 7: the selection, an AND-OR of the one-hot choice (c_first has exactly one bit set)
    logic [LOGK-1:0]         pick;
    logic [SLOT_W-1:0]       pick_base;
    logic [SLOT_W-1:0]       pick_child;
    always_comb begin
        pick       = '0;
        pick_base  = '0;
        pick_child = '0;
        for (int j = 0; j < FANOUT; j++) begin
            pick       = pick | (c_first[j] ? LOGK'(j) : '0);
            pick_base  = pick_base | (c_base[j] & {SLOT_W{c_first[j]}});
            pick_child = pick_child | (c_child[j] & {SLOT_W{c_first[j]}});
        end
    end

    always_ff @(posedge ap_clk) begin
        s_out_valid  <= ap_rst_n && c_valid;
        s_out_last   <= c_last;
        s_out_target <= 64'(c_target);
        s_out_base   <= 64'(pick_base);
        s_out_node   <= IDX_W'({c_node, pick});
        s_out_value  <= 64'(pick_child);
    end

    // ---------------------------------------------------------------- updates
    // Write history: h[1] is the write register (written this cycle), h[2..HIST] the writes of the
    // cycles before. A read in stage A sees every write older than h[HIST]; h[HIST] is written in the
    // same cycle as that read (a block RAM collision): forwarded too.
    logic [HIST:1]                  h_valid;
    logic [HIST:1][ADDR_W-1:0]      h_addr;   // stored words only: an update's word is < WORDS
    logic [HIST:1][LOGK-1:0]        h_slot;
    logic [HIST:1][SLOT_W-1:0]      h_value;
    logic [ADDR_W-1:0]              ur_addr, ub_addr, ud_addr, uc_addr;
    logic [LOGK-1:0]                ur_slot, ub_slot, ud_slot, uc_slot;
    logic [SLOT_W-1:0]              uc_old;
    logic [HIST:1]                  uc_hit;   // one-hot: the write this update's read missed (none: 0)
    logic                           uc_keep;  // no such write: the read value is current
    logic                           uc_write;
    logic [SLOT_W-1:0]              uc_new;

    always_ff @(posedge ap_clk) begin
        ur_addr <= u_a_addr[ADDR_W-1:0];
        ur_slot <= u_a_node[LOGK-1:0];
        ub_addr <= ur_addr;
        ub_slot <= ur_slot;
        ud_addr <= ub_addr;
        ud_slot <= ub_slot;
        u_b_old <= 64'(rd_q[ub_slot]);   // stage B
        uc_addr <= ud_addr;
        uc_slot <= ud_slot;
        uc_old  <= SLOT_W'(u_b_old);
    end

    // Stage D: the most recent of the writes that will be h[1..HIST] when this update is in C: the
    // update now in C (next cycle's h[1]) and h[1..HIST-1] (shifted by one by then).
    logic [HIST:1] ud_match, ud_hit;
    always_comb begin
        ud_match[1] = u_c_valid && uc_addr == ud_addr && uc_slot == ud_slot;
        for (int k = 2; k <= HIST; k++)
            ud_match[k] = h_valid[k-1] && h_addr[k-1] == ud_addr && h_slot[k-1] == ud_slot;
        ud_hit = '0;
        for (int k = HIST; k >= 1; k--)
            if (ud_match[k]) ud_hit = HIST'(1) << (k - 1);
    end
    always_ff @(posedge ap_clk) begin
        uc_hit  <= ud_hit;
        uc_keep <= ud_hit == '0;
    end

    // Stage C: the slot's current value plus the delta; the base is an AND-OR of one-hot choices
    // ({uc_hit, uc_keep} has exactly one bit set), two LUT levels before the carry chain.
    // The add is mod 2^SLOT_W: the new sum fits SLOT_W bits, so the delta's low bits give it exactly.
    logic [SLOT_W-1:0] uc_base;
    always_comb begin
        uc_base = uc_old & {SLOT_W{uc_keep}};
        for (int k = 1; k <= HIST; k++)
            uc_base = uc_base | (h_value[k] & {SLOT_W{uc_hit[k]}});
    end
    assign uc_new   = uc_base + SLOT_W'(u_c_delta);
    assign uc_write = u_c_valid && ap_rst_n;

    always_ff @(posedge ap_clk) begin
        if (!ap_rst_n || clear_en) begin
            h_valid <= '0;
        end else begin
            h_valid <= {h_valid[HIST-1:1], uc_write};
        end
        h_addr  <= {h_addr[HIST-1:1], uc_addr};
        h_slot  <= {h_slot[HIST-1:1], uc_slot};
        h_value[HIST:2] <= h_value[HIST-1:1];
        // 0 when no update writes (its value is only read when h_valid says so): the clear sweep's
        // zero, so that the memories' write data is this register with no gate after it
        if (!uc_write) h_value[1] <= '0;
        else           h_value[1] <= uc_new;
    end

    // One write port, driven by registers: the update write of stage C (h[1]), else the clear sweep's
    // zero to every slot of the word (a cycle after clear_addr; the top's first read after a sweep
    // comes two cycles after its last address).
    always_ff @(posedge ap_clk) begin
        for (int j = 0; j < FANOUT; j++)
            wr_slot[j] <= uc_write ? uc_slot == LOGK'(j) : clear_en && clear_addr < IDX_W'(WORDS);
        wr_addr <= uc_write ? uc_addr : clear_addr[ADDR_W-1:0];
    end
    assign wr_data = h_value[1];
endmodule

`undef P_SUM
`default_nettype wire
