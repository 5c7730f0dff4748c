`default_nettype none
// LANES signed 16x16 multipliers feeding a masked adder tree that yields the row sums of any
// row/column split of the lanes. Lanes are interleaved by row: for a split into R = LANES >> k rows
// of C = 1 << k columns, lane l holds row l % R, column l / R. Level lv of the tree adds node
// r + (LANES >> lv) into node r when lv <= k (and passes node r on otherwise), so after the last
// level node r (r < R) is the sum of row r: no mux picks a level, the mask rides in the adders.
// Registers: the products (one multiplier each, mapped onto a hard multiplier by synthesis), then
// one after every TREE_PER_STAGE levels; latency 1 + STAGES cycles (STAGES below).
// Vectors are packed (lane l in bits [l*W +: W]) so that Yosys reads the ports too.
module mlp_mac_array #(
    parameter int LANES = 16,          // multipliers (power of two, >= 2)
    parameter int KW = 3,              // width of in_k
    parameter int TREE_PER_STAGE = 2,  // adder levels between two registers
    localparam int LOG2P = $clog2(LANES),
    localparam int SUM_W = 32 + LOG2P, // width of a row sum (no sum of LANES products overflows it)
    localparam int STAGES = (LOG2P + TREE_PER_STAGE - 1) / TREE_PER_STAGE  // tree register stages
) (
    input  wire                      clk,
    input  wire  [LANES*16-1:0]      in_w,      // lane l: signed weight in bits [16l +: 16]
    input  wire  [LANES*16-1:0]      in_a,      // lane l: signed activation (0 where the column does not exist)
    input  wire  [KW-1:0]            in_k,      // log2 of the columns per row
    output logic [LANES*SUM_W-1:0]   out_sum    // row r < (LANES >> k): signed sum in [r*SUM_W +: SUM_W], 1 + STAGES cycles later
);
    // st[0]: the products; st[s]: after s register stages of TREE_PER_STAGE levels each
    logic [STAGES:0][LANES*SUM_W-1:0] st;
    logic [STAGES:0][KW-1:0] st_k;
    always_ff @(posedge clk) begin
        st_k[0] <= in_k;
        for (int l = 0; l < LANES; l++)
            st[0][SUM_W*l +: SUM_W] <= SUM_W'($signed(in_w[16*l +: 16]) * $signed(in_a[16*l +: 16]));
    end

    for (genvar s = 0; s < STAGES; s++) begin : g_stage
        always_ff @(posedge clk) begin
            logic [LANES*SUM_W-1:0] v;
            v = st[s];
            for (int lv = s * TREE_PER_STAGE + 1; lv <= (s + 1) * TREE_PER_STAGE && lv <= LOG2P; lv++)
                for (int r = 0; r < (LANES >> lv); r++)  // the mask gates an operand, ahead of the carry chain
                    v[SUM_W*r +: SUM_W] = v[SUM_W*r +: SUM_W]
                                        + (KW'(lv) <= st_k[s] ? v[SUM_W*(r + (LANES >> lv)) +: SUM_W] : '0);
            st[s+1] <= v;
            st_k[s+1] <= st_k[s];
        end
    end
    assign out_sum = st[STAGES];
endmodule
`default_nettype wire
