`default_nettype none
// The LOAD side of mlp_top (hls/mlp/SPEC.md): receives a LOAD frame, checks its header against the
// LOAD rules, commits the network configuration, and places each weight and bias word in its bank
// and address. It tells the operation FSM what each word did (reject, fail, complete, overrun, the
// end of a skipped frame); the weight memories themselves stay in mlp_top, next to their readers.
module mlp_loader #(
    parameter int LANES = 16,
    parameter int MAX_LAYERS = 4,
    parameter int MAX_WIDTH = 256,
    localparam int LOG2P = $clog2(LANES),
    localparam int KW = $clog2(LOG2P + 1) < 1 ? 1 : $clog2(LOG2P + 1),
    localparam int AW = (MAX_WIDTH + LANES - 1) / LANES,  // words of one activation buffer
    localparam int REGION = AW * MAX_WIDTH                 // weight words of one layer (worst split)
) (
    input  wire                ap_clk,
    input  wire                ap_rst_n,
    input  wire                load_start,  // a LOAD begins (ap_start with MODE 0)
    input  wire                active,      // the kernel is in a LOAD
    input  wire                in_fire,     // a word of the input stream is taken this cycle
    input  wire  [15:0]        in_word,
    input  wire                in_last,

    // what this cycle's word does to the operation
    output logic               ld_reject,    // a rejected header: the old network stays (no weight was written yet)
    output logic               ld_fail,      // the frame ended while weights were being written: no valid network
    output logic               ld_complete,  // the last word of the network, carrying tlast
    output logic               ld_overrun,   // the network is complete but the frame goes on
    output logic               ld_skipped,   // the end of a rejected frame

    // where a weight or bias word goes
    output logic               ld_w_we,
    output logic [31:0]        ld_w_addr,
    output logic [LOG2P-1:0]   ld_w_bank,
    output logic               ld_b_we,
    output logic [31:0]        ld_b_addr,
    output logic [LOG2P-1:0]   ld_b_bank,
    output logic [31:0]        ld_b_data,

    // the network configuration, committed when a header validates
    output logic [15:0]        cfg_n [MAX_LAYERS],      // inputs of layer l
    output logic [15:0]        cfg_m [MAX_LAYERS],      // outputs of layer l
    output logic [5:0]         cfg_shift [MAX_LAYERS],
    output logic               cfg_relu [MAX_LAYERS],
    output logic [KW-1:0]      cfg_k [MAX_LAYERS],      // log2 of the columns per row
    output logic [15:0]        cfg_h [MAX_LAYERS],      // steps per output group = ceil(n / C)
    output logic [15:0]        cfg_g [MAX_LAYERS],      // output groups = ceil(m / R)
    output logic [15:0]        cfg_nl,
    output logic               cfg_tanh
);
    localparam int MAX_SHIFT = 40;
    localparam logic [2:0] FLAG_TANH = 3'b010, FLAG_RAW = 3'b100;

    // The split of the lanes with the fewest steps (ties: fewer columns).
    function automatic [KW-1:0] best_k(input [15:0] n, input [15:0] m);
        logic [31:0] cost, best_cost;
        best_k = '0;
        best_cost = '1;
        for (int kk = 0; kk <= LOG2P; kk++) begin
            cost = ((32'(n) + (32'd1 << kk) - 1) >> kk) * ((32'(m) + (32'(LANES) >> kk) - 1) >> (LOG2P - kk));
            if (cost < best_cost) begin
                best_cost = cost;
                best_k = KW'(kk);
            end
        end
    endfunction

    typedef enum logic [2:0] {LD_HDR, LD_W, LD_BLO, LD_BHI, LD_SKIP} ld_state_t;
    ld_state_t ld_state;

    // LOAD header being received
    logic [15:0] hdr_nl, hdr_count;
    logic [15:0] hdr_n [MAX_LAYERS];
    logic [15:0] hdr_m [MAX_LAYERS];
    logic [15:0] hdr_shift [MAX_LAYERS];
    logic [15:0] hdr_flags [MAX_LAYERS];
    logic [15:0] ld_l, ld_i, ld_j;
    logic [15:0] ld_bias_lo;

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

    always_comb begin : load_placement
        logic [KW-1:0] k;
        logic [15:0] rows;  // R of the layer being loaded
        k = cfg_k[ld_l];
        rows = 16'(LANES) >> k;
        ld_w_addr = ld_l * REGION + 32'(ld_i >> (LOG2P - k)) * cfg_h[ld_l] + 32'(ld_j >> k);
        ld_w_bank = LOG2P'(((ld_i & (rows - 1)) << k) | (ld_j & ((16'd1 << k) - 1)));
        ld_w_we = take && ld_state == LD_W;
        ld_b_addr = ld_l * AW + 32'(ld_i >> LOG2P);
        ld_b_bank = LOG2P'(ld_i);
        ld_b_we = take && ld_state == LD_BHI;
        ld_b_data = {in_word, ld_bias_lo};
    end

    always_comb begin : load_outcome
        logic net_last;
        net_last = ld_i == cfg_m[ld_l] - 1 && ld_l == cfg_nl - 1;
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
                default: ld_skipped = in_last;  // LD_SKIP
            endcase
        end
    end

    always_ff @(posedge ap_clk) begin : load_fsm
        if (!ap_rst_n) begin
            ld_state <= LD_HDR;
            cfg_nl <= '0;
            cfg_tanh <= 1'b0;
        end else if (load_start) begin
            ld_state <= LD_HDR;
            hdr_count <= '0;
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
                                cfg_k[l] <= best_k(hdr_n[l], hdr_m[l]);
                                cfg_h[l] <= (hdr_n[l] + (16'd1 << best_k(hdr_n[l], hdr_m[l])) - 1) >> best_k(hdr_n[l], hdr_m[l]);
                                cfg_g[l] <= (hdr_m[l] + (16'(LANES) >> best_k(hdr_n[l], hdr_m[l])) - 1) >> (LOG2P - best_k(hdr_n[l], hdr_m[l]));
                            end
                            cfg_tanh <= in_word[1];
                            ld_state <= LD_W;
                            ld_l <= '0;
                            ld_i <= '0;
                            ld_j <= '0;
                        end
                    end
                    if (ld_reject && !in_last) ld_state <= LD_SKIP;  // drop the rest of the frame
                end
                LD_W: begin
                    if (ld_j == cfg_n[ld_l] - 1) begin
                        ld_j <= '0;
                        if (ld_i == cfg_m[ld_l] - 1) begin
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
                    if (ld_i == cfg_m[ld_l] - 1) begin
                        ld_i <= '0;
                        ld_l <= ld_l + 1;
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
