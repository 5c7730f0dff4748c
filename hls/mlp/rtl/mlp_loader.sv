`default_nettype none
// The LOAD side of mlp_top (hls/mlp/SPEC.md): receives a LOAD frame, checks its header against the
// LOAD rules, commits the network configuration, and places each weight and bias word in its bank
// and address. It tells the operation FSM what each word did (reject, fail, complete, overrun, the
// end of a skipped frame); the weight memories themselves stay in mlp_top, next to their readers.
//
// Placement (mlp_top reads it back step by step): layer l splits the lanes into R = LANES >> k rows
// of C = 1 << k columns, lane = column * R + row (mlp_mac_array's interleaving). Weight W[i][j] goes
// to bank ((j % C) << (LOG2P - k)) | (i % R), address l * REGION + (i / R) * H + j / C, where
// H = ceil(n / C) is the steps of one group of R output neurons; bias b[i] goes to bank i % R,
// address l * MAX_WIDTH + i / R. Addresses advance by counters, so no multiplier sits on the path.
// After a header validates, the kernel holds the stream (`ready` low) for a few cycles per layer
// while one shared multiplier prices each split (steps = ceil(n / C) * ceil(m / R)).
module mlp_loader #(
    parameter int LANES = 16,
    parameter int MAX_LAYERS = 4,
    parameter int MAX_WIDTH = 256,
    localparam int LOG2P = $clog2(LANES),
    localparam int KW = $clog2(LOG2P + 1) < 1 ? 1 : $clog2(LOG2P + 1),
    localparam int AW = (MAX_WIDTH + LANES - 1) / LANES,   // words of one activation buffer
    localparam int REGION = AW * MAX_WIDTH,                // weight words of one layer (worst split)
    localparam int WAW = $clog2(MAX_LAYERS * REGION),      // weight address bits
    localparam int BAW = $clog2(MAX_LAYERS * MAX_WIDTH)    // bias address bits
) (
    input  wire                ap_clk,
    input  wire                ap_rst_n,
    input  wire                load_start,  // a LOAD begins (ap_start with MODE 0)
    input  wire                active,      // the kernel is in a LOAD
    input  wire                in_fire,     // a word of the input stream is taken this cycle
    input  wire  [15:0]        in_word,
    input  wire                in_last,
    output logic               ready,       // the loader takes a word this cycle (tready while active)

    // what this cycle's word does to the operation
    output logic               ld_reject,    // a rejected header: the old network stays (no weight was written yet)
    output logic               ld_fail,      // the frame ended while weights were being written: no valid network
    output logic               ld_complete,  // the last word of the network, carrying tlast
    output logic               ld_overrun,   // the network is complete but the frame goes on
    output logic               ld_skipped,   // the end of a rejected frame

    // where this cycle's weight or bias word goes
    output logic               ld_w_we,
    output logic [WAW-1:0]     ld_w_addr,
    output logic [LOG2P-1:0]   ld_w_bank,
    output logic               ld_b_we,
    output logic [BAW-1:0]     ld_b_addr,
    output logic [LOG2P-1:0]   ld_b_bank,
    output logic [31:0]        ld_b_data,

    // the network configuration, committed when a header validates
    output logic [MAX_LAYERS-1:0][15:0] cfg_n,      // inputs of layer l
    output logic [MAX_LAYERS-1:0][15:0] cfg_m,      // outputs of layer l
    output logic [MAX_LAYERS-1:0][5:0] cfg_shift,
    output logic [MAX_LAYERS-1:0] cfg_relu,
    output logic [MAX_LAYERS-1:0][KW-1:0] cfg_k,      // log2 of the columns per row
    output logic [MAX_LAYERS-1:0][15:0] cfg_h,      // steps per output group = ceil(n / C)
    output logic [MAX_LAYERS-1:0][15:0] cfg_g,      // output groups = ceil(m / R)
    output logic [15:0]        cfg_nl,
    output logic               cfg_tanh
);
    localparam int MAX_SHIFT = 40;
    localparam logic [2:0] FLAG_TANH = 3'b010, FLAG_RAW = 3'b100;

    typedef enum logic [2:0] {LD_HDR, LD_CFG, LD_FIRST, LD_W, LD_BLO, LD_BHI, LD_SKIP} ld_state_t;
    ld_state_t ld_state;
    assign ready = ld_state != LD_CFG && ld_state != LD_FIRST;  // pricing the splits

    // LOAD header being received
    logic [15:0] hdr_nl, hdr_count;
    logic [15:0] hdr_n [MAX_LAYERS];
    logic [15:0] hdr_m [MAX_LAYERS];
    logic [15:0] hdr_shift [MAX_LAYERS];
    logic [15:0] hdr_flags [MAX_LAYERS];

    wire take = active && in_fire;
    wire last_hdr_word = (hdr_count == 16'(4 * hdr_nl));
    // The LOAD rules of SPEC.md (and of the HLS C++), checked on the last header word, which is
    // the flags word of the last layer.
    logic header_ok;
    always_comb begin : header_check
        logic [15:0] flags;
        logic last;
        header_ok = 1'b1;
        for (int l = 0; l < MAX_LAYERS; l++) begin
            last = (16'(l) == hdr_nl - 1);
            flags = last ? in_word : hdr_flags[l];
            if (16'(l) < hdr_nl) begin
                if (hdr_n[l] == 0 || hdr_n[l] > 16'(MAX_WIDTH)) header_ok = 1'b0;
                if (hdr_m[l] == 0 || hdr_m[l] > 16'(MAX_WIDTH)) header_ok = 1'b0;
                if (hdr_shift[l] > 16'(MAX_SHIFT)) header_ok = 1'b0;
                if (l > 0 && hdr_n[l] != hdr_m[(l > 0) ? l - 1 : 0]) header_ok = 1'b0;
                if (flags[15:3] != 0) header_ok = 1'b0;                        // unknown flag
                if (!last && flags[2:1] != 0) header_ok = 1'b0;                // a head on a hidden layer
                if (last && flags[2:0] != FLAG_TANH && flags[2:0] != FLAG_RAW) header_ok = 1'b0;  // one head, no ReLU
            end
        end
    end

    // ---------------------------------------------------------------- the split of each layer
    // For each layer and each k: ceil(n / C) and ceil(m / R) (cycle 1), their product (cycle 2),
    // then keep the cheapest (cycle 3; ties keep the smaller k, i.e. fewer columns).
    typedef enum logic [1:0] {CF_DIV, CF_MUL, CF_PICK} cf_phase_t;
    cf_phase_t   cf_phase;
    logic [15:0] cf_l;
    logic [KW-1:0] cf_k, cf_best_k;
    logic [15:0] cf_h, cf_g, cf_best_h, cf_best_g;
    logic [31:0] cf_cost, cf_best_cost;
    wire         cf_better = cf_k == 0 || cf_cost < cf_best_cost;

    // ---------------------------------------------------------------- placement counters
    logic [15:0]      ld_l, ld_i, ld_j;
    logic [15:0]      ld_bias_lo;
    logic [KW-1:0]    cur_k;           // the layer being loaded: its split and sizes
    logic [15:0]      cur_n, cur_m, cur_h;
    logic [WAW-1:0]   w_layer_base;    // l * REGION
    logic [WAW-1:0]   w_row_base;      // l * REGION + (i / R) * H
    logic [BAW-1:0]   b_layer_base;    // l * MAX_WIDTH
    wire  [15:0]      cur_rows = 16'(LANES) >> cur_k;
    wire  [15:0]      cur_cols = 16'd1 << cur_k;
    wire              row_group_end = ((ld_i + 1) & (cur_rows - 1)) == 0;  // i is the last row of its group

    always_comb begin : load_placement
        ld_w_addr = w_row_base + WAW'(ld_j >> cur_k);
        ld_w_bank = LOG2P'(((ld_j & (cur_cols - 1)) << (LOG2P - cur_k)) | (ld_i & (cur_rows - 1)));
        ld_w_we = take && ld_state == LD_W;
        ld_b_addr = b_layer_base + BAW'(ld_i >> (LOG2P - cur_k));
        ld_b_bank = LOG2P'(ld_i & (cur_rows - 1));
        ld_b_we = take && ld_state == LD_BHI;
        ld_b_data = {in_word, ld_bias_lo};
    end

    always_comb begin : load_outcome
        logic net_last;
        net_last = ld_i == cur_m - 1 && ld_l == cfg_nl - 1;
        {ld_reject, ld_fail, ld_complete, ld_overrun, ld_skipped} = '0;
        if (take) begin
            case (ld_state)
                LD_HDR: begin
                    if (hdr_count == 0) ld_reject = in_word == 0 || in_word > 16'(MAX_LAYERS);
                    else if (last_hdr_word) ld_reject = !header_ok || in_last;
                    else ld_reject = in_last;  // the frame ended inside the header
                end
                LD_W, LD_BLO: ld_fail = in_last;
                LD_BHI: begin
                    ld_complete = net_last && in_last;
                    ld_overrun = net_last && !in_last;
                    ld_fail = !net_last && in_last;
                end
                default: ld_skipped = in_last;  // LD_SKIP (LD_CFG takes no word)
            endcase
        end
    end

    // start placing layer l (its configuration is committed)
    task automatic begin_layer(input logic [15:0] l);
        logic [$clog2(MAX_LAYERS + 1)-1:0] li;
        li = l < 16'(MAX_LAYERS) ? $bits(li)'(l) : '0;  // past the last layer only an overrun follows
        cur_k <= cfg_k[li];
        cur_n <= cfg_n[li];
        cur_m <= cfg_m[li];
        cur_h <= cfg_h[li];
        ld_i <= '0;
        ld_j <= '0;
    endtask

    always_ff @(posedge ap_clk) begin : load_fsm
        if (!ap_rst_n) begin
            ld_state <= LD_HDR;
            cfg_nl <= '0;
            cfg_tanh <= 1'b0;
        end else if (load_start) begin
            ld_state <= LD_HDR;
            hdr_count <= '0;
        end else if (ld_state == LD_CFG) begin
            case (cf_phase)
                CF_DIV: begin
                    cf_h <= (cfg_n[cf_l] + (16'd1 << cf_k) - 1) >> cf_k;
                    cf_g <= (cfg_m[cf_l] + (16'(LANES) >> cf_k) - 1) >> (LOG2P - cf_k);
                    cf_phase <= CF_MUL;
                end
                CF_MUL: begin
                    cf_cost <= 32'(cf_h) * 32'(cf_g);
                    cf_phase <= CF_PICK;
                end
                default: begin  // CF_PICK
                    if (cf_better) begin
                        cf_best_cost <= cf_cost;
                        cf_best_k <= cf_k;
                        cf_best_h <= cf_h;
                        cf_best_g <= cf_g;
                    end
                    cf_phase <= CF_DIV;
                    if (cf_k == KW'(LOG2P)) begin  // this layer priced: commit its split
                        cfg_k[cf_l] <= cf_better ? cf_k : cf_best_k;
                        cfg_h[cf_l] <= cf_better ? cf_h : cf_best_h;
                        cfg_g[cf_l] <= cf_better ? cf_g : cf_best_g;
                        cf_k <= '0;
                        cf_l <= cf_l + 1;
                        if (cf_l == cfg_nl - 1) ld_state <= LD_FIRST;
                    end else cf_k <= cf_k + 1;
                end
            endcase
        end else if (ld_state == LD_FIRST) begin
            begin_layer(16'd0);
            ld_l <= '0;
            w_layer_base <= '0;
            w_row_base <= '0;
            b_layer_base <= '0;
            ld_state <= LD_W;
        end else if (take) begin
            case (ld_state)
                LD_HDR: begin
                    hdr_count <= hdr_count + 1;
                    if (hdr_count == 0) begin
                        hdr_nl <= in_word;
                    end else begin
                        case ((hdr_count - 1) & 3)
                            0: hdr_n[(hdr_count - 1) >> 2] <= in_word;
                            1: hdr_m[(hdr_count - 1) >> 2] <= in_word;
                            2: hdr_shift[(hdr_count - 1) >> 2] <= in_word;
                            default: hdr_flags[(hdr_count - 1) >> 2] <= in_word;
                        endcase
                        if (last_hdr_word && !ld_reject) begin
                            cfg_nl <= hdr_nl;
                            for (int l = 0; l < MAX_LAYERS; l++) begin
                                cfg_n[l] <= hdr_n[l];
                                cfg_m[l] <= hdr_m[l];
                                cfg_shift[l] <= 6'(hdr_shift[l]);
                                cfg_relu[l] <= (16'(l) == hdr_nl - 1) ? in_word[0] : hdr_flags[l][0];
                            end
                            cfg_tanh <= in_word[1];
                            ld_state <= LD_CFG;
                            cf_phase <= CF_DIV;
                            cf_l <= '0;
                            cf_k <= '0;
                        end
                    end
                    if (ld_reject && !in_last) ld_state <= LD_SKIP;  // drop the rest of the frame
                end
                LD_W: begin
                    if (ld_j == cur_n - 1) begin
                        ld_j <= '0;
                        if (row_group_end) w_row_base <= w_row_base + WAW'(cur_h);
                        if (ld_i == cur_m - 1) begin
                            ld_i <= '0;
                            ld_state <= LD_BLO;
                        end else ld_i <= ld_i + 1;
                    end else ld_j <= ld_j + 1;
                end
                LD_BLO: begin
                    ld_bias_lo <= in_word;
                    ld_state <= LD_BHI;
                end
                LD_BHI: begin
                    if (ld_i == cur_m - 1) begin
                        ld_l <= ld_l + 1;
                        begin_layer(ld_l + 1);
                        w_layer_base <= w_layer_base + WAW'(REGION);
                        w_row_base <= w_layer_base + WAW'(REGION);
                        b_layer_base <= b_layer_base + BAW'(MAX_WIDTH);
                        ld_state <= ld_overrun ? LD_SKIP : LD_W;
                    end else begin
                        ld_i <= ld_i + 1;
                        ld_state <= LD_BLO;
                    end
                end
                default: ;  // LD_SKIP: the words of a rejected frame are dropped
            endcase
        end
    end

endmodule
`default_nettype wire
