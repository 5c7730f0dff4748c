`default_nettype none
// One level of the K-ary sum tree (hls/replay/SPEC.md): a memory of parent words, each holding the K
// child sums of one parent side by side, so one read gives all K children.
//
// Shared read port, registered read (block-RAM style), one write port:
//   sample: cycle 0 presents the parent index (s_in_*); the word arrives in cycle 1; a parallel prefix
//           (two stages), the K comparisons (one) and the selection (one) register the chosen child
//           (s_out_*) in cycle 5: 5 cycles per level, one sample per clock (see "sampling" below).
//   update: cycle 0 presents the ancestor's parent word address (u_a_*); cycle 1 takes the word
//           (forwarding the write of two updates back) and exposes the old slot value (u_b_old);
//           cycle 2 forwards the previous update's write, adds u_c_delta to the slot and writes the
//           word back (see "updates" below): one update per clock.
// The top guarantees that samples and updates never use the read port in the same cycle.
module replay_level #(
    parameter int FANOUT = 16,  // children per node (power of two)
    parameter int LOGK   = 4,   // log2(FANOUT)
    parameter int WORDS  = 1,   // parent words stored at this level (padding words are never stored)
    parameter int SLOT_W = 64,  // bits per child sum: 64 for internal sums, 32 for leaf priorities
    parameter int IDX_W  = 8,   // width of node and leaf indices
    parameter int SHIFT  = 0    // leaf index >> SHIFT = this level's node index (LOGK * levels below)
) (
    input  wire logic               ap_clk,
    input  wire logic               ap_rst_n,
    // clear sweep: zero the word at clear_addr
    input  wire logic               clear_en,
    input  wire logic [IDX_W-1:0]   clear_addr,
    // sample stage input: parent node index at the level above, remaining target
    input  wire logic               s_in_valid,
    input  wire logic [63:0]        s_in_target,
    input  wire logic [IDX_W-1:0]   s_in_node,
    input  wire logic               s_in_last,
    // sample stage output: chosen child at this level, target relative to it, its sum
    output logic                    s_out_valid,
    output logic [63:0]             s_out_target,
    output logic [IDX_W-1:0]        s_out_node,
    output logic                    s_out_last,
    output logic [63:0]             s_out_value,
    // update, stage A: leaf index whose ancestor at this level changes
    input  wire logic               u_a_valid,
    input  wire logic [IDX_W-1:0]   u_a_index,
    // update, stage B: the old value of the ancestor's slot (without the update one ahead, in C)
    output logic [63:0]             u_b_old,
    // update, stage C: add the delta to the slot and write the word back
    input  wire logic               u_c_valid,
    input  wire logic [63:0]        u_c_delta
);
    localparam int WORD_W = FANOUT * SLOT_W;
    localparam int ADDR_W = WORDS > 1 ? $clog2(WORDS) : 1;  // memory address bits

    logic [WORD_W-1:0] mem [WORDS];
    logic [WORD_W-1:0] rd_word;

    // Read port: the update's word when an update is in stage A, else the sample's parent.
    logic [IDX_W-1:0] u_a_node, u_a_addr, rd_addr;
    assign u_a_node = IDX_W'(u_a_index >> SHIFT);
    assign u_a_addr = IDX_W'(u_a_node >> LOGK);
    assign rd_addr  = u_a_valid ? u_a_addr : s_in_node;

    always_ff @(posedge ap_clk) begin
        // Addresses past the stored words only occur for out-of-contract targets (target >= total).
        rd_word <= (rd_addr < IDX_W'(WORDS)) ? mem[rd_addr[ADDR_W-1:0]] : '0;
    end

    // ---------------------------------------------------------------- sampling
    // Five stages, each at most one 64-bit carry chain deep:
    //   R  the registered read (rd_word, aligned with sb_*);
    //   P1 prefix sums, Kogge-Stone levels 0-1 (distances 1, 2);
    //   P2 levels 2-3 (distances 4, 8): the K inclusive prefix sums c_0 + ... + c_j;
    //   C  for every child j at once, lt_j = target < prefix_j and d_j = target - prefix_(j-1);
    //   S  the first j with lt_j (the last child if none: only reachable with target >= total, which
    //      the host never sends), its d_j as the next target and its child sum.
    // Five cycles from s_in to s_out for every FANOUT up to 16 (replay_top's LEVEL_CYCLES).

    logic               sb_valid, sb_last;
    logic [63:0]        sb_target;
    logic [IDX_W-1:0]   sb_node;

    always_ff @(posedge ap_clk) begin
        sb_valid  <= ap_rst_n && s_in_valid;
        sb_target <= s_in_target;
        sb_node   <= s_in_node;
        sb_last   <= s_in_last;
    end

    // One Kogge-Stone level: x_j + x_(j - span) for j >= span.
    typedef logic [FANOUT-1:0][63:0] sums_t;
    function automatic sums_t ks_level(input sums_t x, input int span);
        for (int j = 0; j < FANOUT; j++) ks_level[j] = j >= span ? x[j] + x[j - span] : x[j];
    endfunction

    logic [FANOUT-1:0][63:0] children, p1_next;
    always_comb begin
        for (int j = 0; j < FANOUT; j++) children[j] = 64'(rd_word[j*SLOT_W +: SLOT_W]);
        p1_next = children;
        for (int lv = 0; lv < 2 && lv < LOGK; lv++) p1_next = ks_level(p1_next, 1 << lv);
    end

    // stage P1
    logic                    p1_valid, p1_last;
    logic [63:0]             p1_target;
    logic [IDX_W-1:0]        p1_node;
    logic [FANOUT-1:0][63:0] p1_sum, p1_child;
    always_ff @(posedge ap_clk) begin
        p1_valid  <= ap_rst_n && sb_valid;
        p1_last   <= sb_last;
        p1_target <= sb_target;
        p1_node   <= sb_node;
        p1_sum    <= p1_next;
        p1_child  <= children;
    end

    logic [FANOUT-1:0][63:0] p2_next;
    always_comb begin
        p2_next = p1_sum;
        for (int lv = 2; lv < LOGK; lv++) p2_next = ks_level(p2_next, 1 << lv);
    end

    // stage P2: inclusive prefix sums
    logic                    p2_valid, p2_last;
    logic [63:0]             p2_target;
    logic [IDX_W-1:0]        p2_node;
    logic [FANOUT-1:0][63:0] p2_prefix, p2_child;
    always_ff @(posedge ap_clk) begin
        p2_valid  <= ap_rst_n && p1_valid;
        p2_last   <= p1_last;
        p2_target <= p1_target;
        p2_node   <= p1_node;
        p2_prefix <= p2_next;
        p2_child  <= p1_child;
    end

    // stage C: every comparison and every candidate next target in parallel
    logic                    c_valid, c_last;
    logic [IDX_W-1:0]        c_node;
    logic [FANOUT-1:0]       c_lt;
    logic [FANOUT-1:0][63:0] c_rest, c_child;
    always_ff @(posedge ap_clk) begin
        c_valid <= ap_rst_n && p2_valid;
        c_last  <= p2_last;
        c_node  <= p2_node;
        c_child <= p2_child;
        for (int j = 0; j < FANOUT; j++) begin
            c_lt[j]   <= p2_target < p2_prefix[j] || j == FANOUT - 1;
            c_rest[j] <= j == 0 ? p2_target : p2_target - p2_prefix[j-1];
        end
    end

    // stage S: the first child whose prefix exceeds the target
    logic [LOGK-1:0] pick;
    always_comb begin
        pick = LOGK'(FANOUT - 1);
        for (int j = FANOUT - 1; j >= 0; j--)
            if (c_lt[j]) pick = LOGK'(j);
    end

    always_ff @(posedge ap_clk) begin
        s_out_valid  <= ap_rst_n && c_valid;
        s_out_last   <= c_last;
        s_out_target <= c_rest[pick];
        s_out_node   <= IDX_W'({c_node, pick});
        s_out_value  <= c_child[pick];
    end

    // ---------------------------------------------------------------- updates
    // Three stages, each at most one 64-bit carry chain deep (the leaf's delta is the top's, in B):
    //   A  the read of the ancestor's word (all levels at once);
    //   B  the word, with the write of two updates back forwarded (the read missed it: read-first
    //      memory); its slot's value goes out (u_b_old) and both are registered;
    //   C  the write of the previous update (lw, one back) forwarded: the whole word when it is
    //      the same one, its new slot value when it is the same slot; slot + delta written back.
    logic [IDX_W-1:0]  ub_addr, uc_addr, lw_addr;
    logic [LOGK-1:0]   ub_slot, uc_slot, lw_slot;
    logic              lw_valid;
    logic [WORD_W-1:0] lw_data, ub_word, uc_word, uc_base, uc_new;
    logic [63:0]       uc_old, lw_slot_new, uc_sum;
    logic [SLOT_W-1:0] uc_slot_new;

    always_ff @(posedge ap_clk) begin
        ub_addr <= u_a_addr;
        ub_slot <= u_a_node[LOGK-1:0];
    end

    assign ub_word = (lw_valid && lw_addr == ub_addr) ? lw_data : rd_word;
    assign u_b_old = 64'(ub_word[ub_slot*SLOT_W +: SLOT_W]);

    always_ff @(posedge ap_clk) begin
        uc_addr <= ub_addr;
        uc_slot <= ub_slot;
        uc_word <= ub_word;
        uc_old  <= u_b_old;
    end

    logic same_word;
    assign same_word   = lw_valid && lw_addr == uc_addr;
    assign uc_base     = same_word ? lw_data : uc_word;
    assign uc_sum      = (same_word && lw_slot == uc_slot ? lw_slot_new : uc_old) + u_c_delta;
    assign uc_slot_new = SLOT_W'(uc_sum);
    always_comb begin
        uc_new = uc_base;
        uc_new[uc_slot*SLOT_W +: SLOT_W] = uc_slot_new;
    end

    // One write port: the update's word, else the clear sweep's zero.
    logic               wr_en, uc_write;
    logic [IDX_W-1:0]   wr_addr;
    logic [WORD_W-1:0]  wr_data;
    assign uc_write = u_c_valid && ap_rst_n;
    assign wr_en    = uc_write || (clear_en && clear_addr < IDX_W'(WORDS));
    assign wr_addr  = uc_write ? uc_addr : clear_addr;
    assign wr_data  = uc_write ? uc_new : '0;

    always_ff @(posedge ap_clk) begin
        if (wr_en) mem[wr_addr[ADDR_W-1:0]] <= wr_data;
        lw_valid    <= uc_write;
        lw_addr     <= uc_addr;
        lw_slot     <= uc_slot;
        lw_data     <= uc_new;
        lw_slot_new <= 64'(uc_slot_new);
    end
endmodule

`default_nettype wire
