`default_nettype none
// LANES signed 16x16 multipliers feeding a binary adder tree; two register stages.
// The lanes form R = LANES >> k rows of C = 1 << k columns (lane = row * C + column): the level-k
// nodes of the tree are the row sums, so one array serves every row/column split a layer picks.
// Vectors are packed (lane l in bits [l*W +: W]) so that Yosys reads the ports too.
module mlp_mac_array #(
    parameter int LANES = 16,  // multipliers (power of two)
    parameter int ACC_W = 48,  // width of the row sums
    parameter int KW = 3       // width of in_k
) (
    input  wire                      clk,
    input  wire                      in_valid,
    input  wire  [LANES*16-1:0]      in_w,      // lane l: signed weight in bits [16l +: 16]
    input  wire  [LANES*16-1:0]      in_a,      // lane l: signed activation in bits [16l +: 16]
    input  wire  [LANES-1:0]         in_mask,   // lane l contributes (its column exists)
    input  wire  [KW-1:0]            in_k,      // log2 of the columns per row
    output logic                     out_valid, // two cycles after in_valid
    output logic [LANES*ACC_W-1:0]   out_sum    // row r < (LANES >> k): signed sum in [r*ACC_W +: ACC_W]
);
    localparam int LOG2P = $clog2(LANES);

    logic [LANES*32-1:0] prod;
    logic [KW-1:0] k_q;
    logic valid_q;
    // tree level lv, node r (sum of lanes r * 2^lv .. r * 2^lv + 2^lv - 1) in [(lv*LANES + r)*ACC_W +: ACC_W]
    logic [(LOG2P+1)*LANES*ACC_W-1:0] tree;

    // stage 1: products (masked lanes give 0)
    always_ff @(posedge clk) begin
        k_q <= in_k;
        valid_q <= in_valid;
        out_valid <= valid_q;
        for (int l = 0; l < LANES; l++)
            prod[32*l +: 32] <= in_mask[l] ? 32'($signed(in_w[16*l +: 16]) * $signed(in_a[16*l +: 16])) : 32'd0;
    end

    always_comb begin
        tree = '0;
        for (int l = 0; l < LANES; l++) tree[l*ACC_W +: ACC_W] = ACC_W'($signed(prod[32*l +: 32]));
        for (int lv = 1; lv <= LOG2P; lv++)
            for (int r = 0; r < (LANES >> lv); r++)
                tree[(lv*LANES + r)*ACC_W +: ACC_W] = $signed(tree[((lv-1)*LANES + 2*r)*ACC_W +: ACC_W])
                                                    + $signed(tree[((lv-1)*LANES + 2*r + 1)*ACC_W +: ACC_W]);
    end

    // stage 2: the row sums of the level the layer uses
    always_ff @(posedge clk) begin
        out_sum <= '0;
        for (int lv = 0; lv <= LOG2P; lv++)
            if (KW'(lv) == k_q)
                for (int r = 0; r < (LANES >> lv); r++)
                    out_sum[r*ACC_W +: ACC_W] <= tree[(lv*LANES + r)*ACC_W +: ACC_W];
    end
endmodule
`default_nettype wire
