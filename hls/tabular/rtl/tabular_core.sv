`default_nettype none
// Tabular Q-learning / SARSA update pipeline (hls/tabular/SPEC.md): one transition per clock after
// fill, strictly in order, no stall.
//
//   stage 1 (READ):   the table rows s2 and s are read (registered read, as a block RAM gives them);
//   stage 2 (UPDATE): the one write still in flight when stage 1 read (the previous transition's,
//                     written at that same clock edge) is forwarded into both rows; then the
//                     bootstrap (row max, or Q[s2][a2] for SARSA), the target, the saturated new
//                     Q[s][a], and its write.
// Every older write had reached the table before stage 1 read it, so one forwarding register covers
// all hazards (s2 == s, the same (s, a) many times in a row). A batch of n transitions takes n + 2
// clocks from its first accepted transition to its last write (PIPELINE_DEPTH = 2).
//
// The table lives in registers here (reference RTL, sized by N_STATES x N_ACTIONS, of which a run uses
// the first n_actions columns, so one build serves smaller tables); clear zeroes it
// in one clock and holds in_ready low meanwhile. rd_addr/rd_data read one word (state-major), and
// wr_en/wr_addr/wr_data write one (the host's table load; only while idle: a pipeline write in the
// same clock wins).
module tabular_core #(
    parameter int N_STATES  = 16,
    parameter int N_ACTIONS = 4,
    parameter int SW = (N_STATES > 1) ? $clog2(N_STATES) : 1,
    parameter int AW = (N_ACTIONS > 1) ? $clog2(N_ACTIONS) : 1
) (
    input  wire                  clk,
    input  wire                  rst_n,       // reset zeroes the table
    input  wire                  clear,       // one-cycle pulse: zero the table
    input  wire  [16:0]          alpha,       // 1 .. 65536 (65536 = 1.0)
    input  wire  [16:0]          gamma,       // 0 .. 65536
    input  wire                  sarsa,       // 0: max over row s2, 1: Q[s2][a2]
    input  wire  [AW:0]          n_actions,   // actions in use, 1 .. N_ACTIONS (the max runs over these)
    input  wire                  in_valid,
    output logic                 in_ready,
    input  wire  [SW-1:0]        in_s,
    input  wire  [AW-1:0]        in_a,
    input  wire  signed [31:0]   in_r,
    input  wire  [SW-1:0]        in_s2,
    input  wire  [AW-1:0]        in_a2,
    input  wire                  in_done,
    output logic                 busy,        // a transition is in the pipeline
    output logic [31:0]          updates,     // transitions written since reset/clear
    input  wire  [SW+AW-1:0]     rd_addr,     // s * N_ACTIONS + a
    output logic signed [31:0]   rd_data,
    input  wire                  wr_en,
    input  wire  [SW+AW-1:0]     wr_addr,
    input  wire  signed [31:0]   wr_data
);
    logic signed [31:0] q [N_STATES][N_ACTIONS];

    // ---- stage 1: registered read of rows s2 and s ----
    logic               v1;
    logic [SW-1:0]      s1, s2_1;
    logic [AW-1:0]      a1, a2_1;
    logic signed [31:0] r1;
    logic               done1;
    logic signed [31:0] row2_1 [N_ACTIONS];
    logic signed [31:0] old_1;

    // ---- the write of stage 2 (also the forwarding register for the next transition) ----
    logic               wv;
    logic [SW-1:0]      ws;
    logic [AW-1:0]      wa;
    logic signed [31:0] wval;

    assign in_ready = !clear;
    assign busy = v1;

    always_ff @(posedge clk) begin
        if (!rst_n || clear) begin
            v1 <= 1'b0;
        end else begin
            v1 <= in_valid && in_ready;
            if (in_valid && in_ready) begin
                s1 <= in_s; a1 <= in_a; r1 <= in_r; s2_1 <= in_s2; a2_1 <= in_a2; done1 <= in_done;
                for (int b = 0; b < N_ACTIONS; b++) row2_1[b] <= q[in_s2][b];
                old_1 <= q[in_s][in_a];
            end
        end
    end

    // ---- stage 2: forward, compute, write ----
    logic signed [31:0] row2 [N_ACTIONS];
    logic signed [31:0] old, best;
    logic signed [63:0] boot, target, delta, step, next;

    always_comb begin
        for (int b = 0; b < N_ACTIONS; b++)
            row2[b] = (wv && ws == s2_1 && wa == AW'(b)) ? wval : row2_1[b];
        old = (wv && ws == s1 && wa == a1) ? wval : old_1;
        best = row2[0];
        for (int b = 1; b < N_ACTIONS; b++)
            if (b < int'(n_actions) && row2[b] > best) best = row2[b];
        if (done1) boot = 64'sd0;
        else if (sarsa) boot = 64'(row2[a2_1]);
        else boot = 64'(best);
        target = 64'(r1) + ((64'($signed({1'b0, gamma})) * boot + 64'sd32768) >>> 16);
        delta  = target - 64'(old);
        step   = (64'($signed({1'b0, alpha})) * delta + 64'sd32768) >>> 16;
        next   = 64'(old) + step;
    end

    wire signed [31:0] saturated = (next > 64'sd2147483647) ? 32'sh7fffffff :
                                   (next < -64'sd2147483648) ? 32'sh80000000 : next[31:0];

    always_ff @(posedge clk) begin
        if (!rst_n || clear) begin
            wv <= 1'b0;
            updates <= 32'd0;
            for (int s = 0; s < N_STATES; s++)
                for (int b = 0; b < N_ACTIONS; b++) q[s][b] <= 32'sd0;
        end else begin
            wv <= v1;
            if (v1) begin
                q[s1][a1] <= saturated;
                ws <= s1; wa <= a1; wval <= saturated;
                updates <= updates + 32'd1;
            end else if (wr_en) begin
                q[wr_addr / N_ACTIONS][wr_addr % N_ACTIONS] <= wr_data;
            end
        end
    end

    assign rd_data = q[rd_addr / N_ACTIONS][rd_addr % N_ACTIONS];
endmodule
`default_nettype wire
