`default_nettype none
// Tabular Q-learning / SARSA engine of tabular_top (contract: hls/tabular/SPEC.md): the Q table in
// block RAM and the update pipeline, with the HLS top's schedule and hazard rule.
//
// Issue: one command per clock, in order. A command that reads a row written by one of the last
// HAZARD_WINDOW - 1 issued commands waits (in_ready low) until that write has landed: an UPDATE reads
// rows s and s2, a READ row s; a WRITE never waits (every write lands at the same pipeline stage, so
// writes stay in order). Waits and idle clocks pass as empty slots, exactly as in the HLS top's
// COMMANDS loop, so n UPDATEs take spec.tabular.hls_issue_slots(s, s2) clocks plus LATENCY.
//
// Storage: the table twice, as in the HLS top: row_mem, read a whole row s2 per clock (the bootstrap),
// and word_mem, read row s per clock for the word Q[s][a]; both take every write. Each copy is one
// memory per column (N_STATES x 32 bits, a synchronous read and a write port: block RAM), read into
// a register before any logic, so no path starts at a block RAM output and goes on through logic.
//
// Pipeline, by the clock after the issue (clock 0: the memories take the read addresses) at which
// each register holds its value (L = levels of the row-max tree, log2 of the columns rounded up):
//   1         the two rows in the memories' read registers
//   2         the two rows in fabric registers (nothing but routing after a block RAM output)
//   3         Q[s][a] and Q[s2][a2] picked (a READ's answer); the first level of the row-max tree
//   3..L+2    the row-max tree, one level of 32-bit compares a clock
//   L+3       boot (0 if done, Q[s2][a2] for SARSA, the max for Q-learning); r - Q[s][a]
//   L+4       gamma * boot as two 18 x 18 products (one MULT18X18D each)
//   L+5       (gamma * boot + 2^15) >> 16
//   L+6       delta = target - Q[s][a]
//   L+7       alpha * delta as two 18 x 18 products
//   L+8       step = (alpha * delta + 2^15) >> 16
//   L+9       the new word, sat32(Q[s][a] + step) (or a WRITE's word); written into both copies
//             during this clock (LATENCY = L + 9)
// LATENCY must be at most HAZARD_WINDOW - 1 (64 columns: 15): then a read HAZARD_WINDOW slots after
// a write's issue comes at a later clock edge than the write.
//
// CLEAR waits for the pipeline to drain and zeroes one row of both copies per clock (N_STATES clocks,
// as the HLS top); reset does the same, so the table is zero after reset without memory init.
module tabular_core #(
    parameter int N_STATES      = 16,
    parameter int N_ACTIONS     = 4,
    parameter int HAZARD_WINDOW = 16,
    parameter int TAG_W         = 1,   // bits a command carries to its answer
    parameter int SW = (N_STATES > 1) ? $clog2(N_STATES) : 1,
    parameter int AW = (N_ACTIONS > 1) ? $clog2(N_ACTIONS) : 1
) (
    input  wire                  clk,
    input  wire                  rst_n,       // reset zeroes the table (N_STATES clocks)
    input  wire  [16:0]          alpha,       // 1 .. 65536 (65536 = 1.0)
    input  wire  [16:0]          gamma,       // 0 .. 65536
    input  wire                  sarsa,       // 0: max over row s2, 1: Q[s2][a2]
    input  wire  [AW:0]          n_actions,   // actions in use, 1 .. N_ACTIONS (the max runs over these)
    // commands, in order, into the issue register (valid/ready)
    input  wire                  in_valid,
    output logic                 in_ready,
    input  wire  [2:0]           in_op,       // OP_UPDATE, OP_WRITE, OP_READ, OP_CLEAR, OP_PASS below
    input  wire                  in_answer,   // the command answers: ans_valid READ_LATENCY clocks after its issue
    input  wire  [TAG_W-1:0]     in_tag,      // carried to the answer
    input  wire  [SW-1:0]        in_s,
    input  wire  [AW-1:0]        in_a,
    input  wire  [31:0]          in_value,    // the reward (UPDATE) or the word (WRITE)
    input  wire  [SW-1:0]        in_s2,
    input  wire  [AW-1:0]        in_a2,
    input  wire                  in_done,
    output logic                 issued,      // a command left the issue register this clock
    output logic                 ans_valid,   // an answer: its tag, and Q[s][a] for a READ
    output logic [TAG_W-1:0]     ans_tag,
    output logic [31:0]          rd_data,
    output logic                 busy         // a command waiting or in the pipeline, or a clear running
);
    localparam logic [2:0] OP_UPDATE = 3'd0, OP_WRITE = 3'd1, OP_READ = 3'd2, OP_CLEAR = 3'd3,
                           OP_PASS = 3'd4;   // no table access (an answer only, or nothing), in order
    localparam int WIDTH = (N_ACTIONS > 1) ? (1 << AW) : 1;  // the row-max tree's leaves
    localparam int LEVELS = (N_ACTIONS > 1) ? AW : 1;         // one pass-through stage for one column
    localparam int BOOT = LEVELS + 3;                         // clock of the bootstrap (header)
    localparam int LATENCY = LEVELS + 9;
    localparam int READ_LATENCY = 3;
    localparam int IN_FLIGHT = HAZARD_WINDOW - 1;

    generate
        if (LATENCY > HAZARD_WINDOW - 1) begin : g_latency_check
            $error("tabular_core: the pipeline (LATENCY) is longer than HAZARD_WINDOW - 1 slots");
        end
    endgenerate

    // ------------------------------------------------------------------ the issue registers
    // Two registers in order: n (next) takes a command from in_*, h (head) holds the one that issues
    // next. Each keeps which rows of the window below its command reads: *_hit[k] when the row written
    // k + 1 slots ago is its row s (UPDATE, READ) or s2 (UPDATE). The window is compared in full when
    // a command enters n; after that each clock adds one compare (with the row issuing now), so the
    // issue decision is an OR of registers and no path runs from the window through the compares to
    // the issue.
    logic                 n_valid, n_answer, n_done, h_valid, h_answer, h_done;
    logic [2:0]           n_op, h_op;
    logic [TAG_W-1:0]     n_tag, h_tag;
    logic [SW-1:0]        n_s, n_s2, h_s, h_s2;
    logic [AW-1:0]        n_a, n_a2, h_a, h_a2;
    logic [31:0]          n_value, h_value;
    logic [IN_FLIGHT-1:0] n_hit, h_hit;

    logic                         clearing;
    logic [SW-1:0]                clear_row;
    logic [IN_FLIGHT-1:0]         fl_valid;  // the rows written by the last IN_FLIGHT slots, newest first
    logic [IN_FLIGHT-1:0][SW-1:0] fl_row;
    logic [LATENCY:1]             p_valid;   // p_*[k]: the command issued k clocks ago

    wire issue = h_valid && !clearing && h_hit == '0 && (h_op != OP_CLEAR || p_valid == '0);
    wire issue_write = issue && (h_op == OP_UPDATE || h_op == OP_WRITE);
    wire issue_clear = issue && h_op == OP_CLEAR;  // the window empties (as the HLS top after a clear)
    wire h_load = n_valid && (!h_valid || issue);
    assign in_ready = !n_valid || h_load;
    wire n_load = in_valid && in_ready;
    assign issued = issue;
    assign busy = n_valid || h_valid || clearing || p_valid != '0;

    // Row `row` is one that a command of operation `op` on rows s, s2 reads.
    function automatic logic reads(input logic [2:0] op, input logic [SW-1:0] s, input logic [SW-1:0] s2,
                                   input logic [SW-1:0] row);
        reads = ((op == OP_UPDATE || op == OP_READ) && row == s) || (op == OP_UPDATE && row == s2);
    endfunction

    // The window as it will be next clock (the row issuing now first), seen by n's command and by in's.
    logic [IN_FLIGHT-1:0] n_hit_next, in_hit_next;
    always_comb begin
        n_hit_next = {n_hit[IN_FLIGHT-2:0], issue_write && reads(n_op, n_s, n_s2, h_s)};
        in_hit_next[0] = issue_write && reads(in_op, in_s, in_s2, h_s);
        for (int k = 1; k < IN_FLIGHT; k++) in_hit_next[k] = fl_valid[k-1] && reads(in_op, in_s, in_s2, fl_row[k-1]);
        if (issue_clear) begin
            n_hit_next = '0;
            in_hit_next = '0;
        end
    end

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            n_valid   <= 1'b0;
            h_valid   <= 1'b0;
            fl_valid  <= '0;
            clearing  <= 1'b1;
            clear_row <= '0;
        end else begin
            if (n_load) n_valid <= 1'b1;
            else if (h_load) n_valid <= 1'b0;
            if (h_load) h_valid <= 1'b1;
            else if (issue) h_valid <= 1'b0;
            fl_valid <= {fl_valid[IN_FLIGHT-2:0], issue_write};
            if (issue_clear) begin
                fl_valid  <= '0;
                clearing  <= 1'b1;
                clear_row <= '0;
            end else if (clearing) begin
                clearing  <= clear_row != SW'(N_STATES - 1);
                clear_row <= clear_row + 1'b1;
            end
        end
        fl_row <= {fl_row[IN_FLIGHT-2:0], h_s};
        if (n_load) begin
            n_op <= in_op; n_answer <= in_answer; n_tag <= in_tag; n_s <= in_s; n_a <= in_a;
            n_value <= in_value; n_s2 <= in_s2; n_a2 <= in_a2; n_done <= in_done;
        end
        n_hit <= n_load ? in_hit_next : n_hit_next;
        if (h_load) begin
            h_op <= n_op; h_answer <= n_answer; h_tag <= n_tag; h_s <= n_s; h_a <= n_a;
            h_value <= n_value; h_s2 <= n_s2; h_a2 <= n_a2; h_done <= n_done;
        end
        h_hit <= h_load ? n_hit_next : {h_hit[IN_FLIGHT-2:0], 1'b0};  // h stays: nothing issued
    end

    // ------------------------------------------------------------------ the table
    wire  [N_ACTIONS-1:0][31:0] row_q;        // row s2 of row_mem (the memories' read registers)
    wire  [N_ACTIONS-1:0][31:0] word_q;       // row s of word_mem
    logic            mem_we;                  // the write of the last stage, or the clear's
    logic [SW-1:0]   mem_waddr;
    logic [AW-1:0]   mem_wcol;
    logic            mem_wall;                // clear: every column
    logic [31:0]     mem_wdata;

    genvar col;
    generate
        for (col = 0; col < N_ACTIONS; col++) begin : g_column
            logic [31:0] row_mem [0:N_STATES-1];
            logic [31:0] word_mem [0:N_STATES-1];
            logic [31:0] row_rd, word_rd;
            wire we = mem_we && (mem_wall || mem_wcol == AW'(col));
            always_ff @(posedge clk) begin
                if (we) begin
                    row_mem[mem_waddr] <= mem_wdata;
                    word_mem[mem_waddr] <= mem_wdata;
                end
                row_rd <= row_mem[h_s2];
                word_rd <= word_mem[h_s];
            end
            assign row_q[col] = row_rd;
            assign word_q[col] = word_rd;
        end
    endgenerate

    // ------------------------------------------------------------------ the commands through the pipeline
    logic [LATENCY:1]          p_write;    // the command writes (UPDATE or WRITE)
    logic [LATENCY:1]          p_update;   // ... and computes (UPDATE)
    logic [READ_LATENCY:1]     p_answer;
    logic [READ_LATENCY:1][TAG_W-1:0] p_tag;
    logic [LATENCY:1][SW-1:0]  p_s;
    logic [LATENCY:1][AW-1:0]  p_a;
    logic [2:1][AW-1:0]        p_a2;
    logic [BOOT:1]             p_done;
    logic [LATENCY:1][31:0]    p_value;    // the reward, or the WRITE's word

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            p_valid  <= '0;
            p_answer <= '0;
        end else begin
            p_valid  <= {p_valid[LATENCY-1:1], issue && h_op != OP_CLEAR && h_op != OP_PASS};
            p_answer <= {p_answer[READ_LATENCY-1:1], issue && h_answer};
        end
        p_write  <= {p_write[LATENCY-1:1], issue_write};
        p_update <= {p_update[LATENCY-1:1], issue && h_op == OP_UPDATE};
        p_tag    <= {p_tag[READ_LATENCY-1:1], h_tag};
        p_s      <= {p_s[LATENCY-1:1], h_s};
        p_a      <= {p_a[LATENCY-1:1], h_a};
        p_a2     <= {p_a2[1], h_a2};
        p_done   <= {p_done[BOOT-1:1], h_done};
        p_value  <= {p_value[LATENCY-1:1], h_value};
    end
    assign ans_valid = p_answer[READ_LATENCY];
    assign ans_tag = p_tag[READ_LATENCY];

    // ------------------------------------------------------------------ clock 2: the rows, registered
    logic [N_ACTIONS-1:0][31:0] row1, word1;
    always_ff @(posedge clk) begin
        row1  <= row_q;
        word1 <= word_q;
    end

    // ------------------------------------------------------------------ clocks 3 .. LEVELS+2: the row max
    // A column past n_actions takes the value of column 0, so it never wins (as the HLS top's tree).
    // The columns in use, registered (n_actions changes only between calls).
    logic [WIDTH-1:0] in_use;
    always_ff @(posedge clk) begin
        for (int b = 0; b < WIDTH; b++) in_use[b] <= b < N_ACTIONS && b < int'(n_actions);
    end
    logic [WIDTH-1:0][31:0] leaf;
    always_comb begin
        for (int b = 0; b < WIDTH; b++)
            leaf[b] = in_use[b] ? row1[b % N_ACTIONS] : row1[0];
    end

    // tree[d] holds level d (WIDTH >> d values; one for a single column), at clock d + 2
    logic [LEVELS:1][WIDTH-1:0][31:0] tree;
    always_ff @(posedge clk) begin
        if (N_ACTIONS == 1) begin
            tree[1][0] <= leaf[0];
        end else begin
            for (int i = 0; i < WIDTH / 2; i++)
                tree[1][i] <= $signed(leaf[2*i+1]) > $signed(leaf[2*i]) ? leaf[2*i+1] : leaf[2*i];
            for (int d = 2; d <= LEVELS; d++)
                for (int i = 0; i < (WIDTH >> d); i++)
                    tree[d][i] <= $signed(tree[d-1][2*i+1]) > $signed(tree[d-1][2*i]) ? tree[d-1][2*i+1]
                                                                                     : tree[d-1][2*i];
        end
    end

    // ------------------------------------------------------------------ clock 3: Q[s][a], Q[s2][a2]; a READ's word
    logic [LATENCY-1:3][31:0] old_q;   // Q[s][a], carried to the sum
    logic [BOOT-1:3][31:0]    pick2;   // Q[s2][a2], carried to the boot stage
    always_ff @(posedge clk) begin
        old_q[3] <= word1[p_a[2]];
        pick2[3] <= row1[p_a2[2]];
        for (int k = 4; k <= LATENCY - 1; k++) old_q[k] <= old_q[k-1];
        for (int k = 4; k <= BOOT - 1; k++) pick2[k] <= pick2[k-1];
    end
    assign rd_data = old_q[3];

    // ------------------------------------------------------------------ BOOT: the bootstrap, r - Q[s][a]
    logic signed [31:0] boot;
    logic signed [32:0] r_minus_old;
    always_ff @(posedge clk) begin
        boot <= p_done[BOOT-1] ? 32'sd0 : sarsa ? $signed(pick2[BOOT-1]) : $signed(tree[LEVELS][0]);
        r_minus_old <= 33'($signed(p_value[BOOT-1])) - 33'($signed(old_q[BOOT-1]));
    end

    // ------------------------------------------------------------------ BOOT+1: gamma * boot in two products
    // boot = hi * 2^16 + lo (lo unsigned): gamma * boot = (gamma * hi) * 2^16 + gamma * lo.
    logic signed [33:0] g_hi;
    logic signed [35:0] g_lo;
    logic signed [32:0] r_minus_old_g;
    always_ff @(posedge clk) begin
        g_hi <= 34'($signed({1'b0, gamma}) * $signed(boot[31:16]));
        g_lo <= 36'($signed({1'b0, gamma}) * $signed({1'b0, boot[15:0]}));
        r_minus_old_g <= r_minus_old;
    end

    // ------------------------------------------------------------------ BOOT+2: (gamma * boot + 2^15) >> 16
    logic signed [33:0] g_term;
    logic signed [32:0] r_minus_old_t;
    always_ff @(posedge clk) begin
        g_term <= g_hi + 34'(g_lo >>> 16) + 34'(g_lo[15]);  // (x + 2^15) >> 16 = (x >> 16) + x[15]
        r_minus_old_t <= r_minus_old_g;
    end

    // ------------------------------------------------------------------ BOOT+3: delta = target - Q[s][a]
    logic signed [33:0] delta;
    always_ff @(posedge clk) delta <= g_term + 34'(r_minus_old_t);

    // ------------------------------------------------------------------ BOOT+4: alpha * delta in two products
    // delta = hi * 2^17 + lo (lo unsigned): alpha * delta = (alpha * hi) * 2^17 + alpha * lo.
    logic signed [35:0] a_hi, a_lo;
    always_ff @(posedge clk) begin
        a_hi <= 36'($signed({1'b0, alpha}) * $signed(delta[33:17]));
        a_lo <= 36'($signed({1'b0, alpha}) * $signed({1'b0, delta[16:0]}));
    end

    // ------------------------------------------------------------------ BOOT+5: step = (alpha * delta + 2^15) >> 16
    logic signed [35:0] step;
    always_ff @(posedge clk) step <= (a_hi <<< 1) + (a_lo >>> 16) + 36'(a_lo[15]);

    // ------------------------------------------------------------------ LATENCY: the new word (saturated), then its write
    wire signed [36:0] next = 37'($signed(old_q[LATENCY-1])) + 37'(step);
    wire               fits = next[36:31] == '0 || next[36:31] == '1;
    logic [31:0]       wval;
    always_ff @(posedge clk) begin
        if (!p_update[LATENCY-1]) wval <= p_value[LATENCY-1];
        else if (fits) wval <= next[31:0];
        else wval <= next[36] ? 32'h80000000 : 32'h7fffffff;
    end

    always_comb begin
        mem_we    = clearing || (p_valid[LATENCY] && p_write[LATENCY]);
        mem_wall  = clearing;
        mem_waddr = clearing ? clear_row : p_s[LATENCY];
        mem_wcol  = p_a[LATENCY];
        mem_wdata = clearing ? 32'd0 : wval;
    end
endmodule
`default_nettype wire
