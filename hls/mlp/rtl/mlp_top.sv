`default_nettype none
// Reference RTL of the MLP inference kernel: ports, streams, registers and arithmetic of
// hls/mlp/SPEC.md, bit-exact with the numpy reference and the HLS C++.
//
// Microarchitecture
// - Weights live on chip in LANES banks of 16-bit words; layer l owns the region
//   [l*REGION, (l+1)*REGION). At LOAD the kernel picks, per layer, how its LANES multipliers split into
//   R = LANES >> k output neurons times C = 1 << k inputs (the split with the fewest steps
//   ceil(m/R) * ceil(n/C)), and stores the weights in that order, one LANES-wide word per step.
// - Activations: an input buffer (filled from s_axis_in while the previous observation computes) and
//   a ping-pong pair X0/X1 between layers, each LANES banks wide; the last layer writes an output
//   buffer that streams out on m_axis_out while the next observation computes.
// - Pipeline per step: read weights, activations and biases (1) -> multiply (2) -> adder tree, row
//   sums (3) -> accumulate, bias on the first step (4) -> round, saturate, ReLU, write (5).
//   A layer starts when the previous layer's last write has landed: about 5 cycles per layer.
// - Output head: RAW values then their argmax (first maximum), or the 1025-entry tanh table with
//   linear interpolation, applied word by word as the output streams.
module mlp_top #(
    parameter int LANES = 16,            // parallel multiply-accumulate lanes (power of two, 2..64)
    parameter int MAX_LAYERS = 4,        // linear layers the weight memory holds
    parameter int MAX_WIDTH = 256,       // widest layer input or output (<= 4096)
    parameter int MAX_BATCH = 4096,      // most observations per INFER (larger batches are refused)
    parameter TANH_MEMH = "mlp_tanh.memh"  // tanh table T[0..1024] (4 hex digits a line), written by pearl_fpga.backends.mlp_rtl
) (
    input  wire         ap_clk,
    input  wire         ap_rst_n,

    input  wire  [15:0] s_axis_in_tdata,
    input  wire         s_axis_in_tvalid,
    output logic        s_axis_in_tready,
    input  wire         s_axis_in_tlast,

    output logic [15:0] m_axis_out_tdata,
    output logic        m_axis_out_tvalid,
    input  wire         m_axis_out_tready,
    output logic        m_axis_out_tlast,

    input  wire  [7:0]  s_axi_control_awaddr,
    input  wire         s_axi_control_awvalid,
    output logic        s_axi_control_awready,
    input  wire  [31:0] s_axi_control_wdata,
    input  wire  [3:0]  s_axi_control_wstrb,
    input  wire         s_axi_control_wvalid,
    output logic        s_axi_control_wready,
    output logic [1:0]  s_axi_control_bresp,
    output logic        s_axi_control_bvalid,
    input  wire         s_axi_control_bready,
    input  wire  [7:0]  s_axi_control_araddr,
    input  wire         s_axi_control_arvalid,
    output logic        s_axi_control_arready,
    output logic [31:0] s_axi_control_rdata,
    output logic [1:0]  s_axi_control_rresp,
    output logic        s_axi_control_rvalid,
    input  wire         s_axi_control_rready,
    /* verilator lint_off SYMRSVDWORD */  // Vitis names the interrupt pin so
    output logic        interrupt
    /* verilator lint_on SYMRSVDWORD */
);
    localparam int LOG2P = $clog2(LANES);
    localparam int KW = $clog2(LOG2P + 1) < 1 ? 1 : $clog2(LOG2P + 1);
    localparam int AW = (MAX_WIDTH + LANES - 1) / LANES;  // words of one activation buffer
    localparam int REGION = AW * MAX_WIDTH;               // weight words of one layer (worst split)
    localparam int WDEPTH = MAX_LAYERS * REGION;
    localparam int BDEPTH = MAX_LAYERS * AW;
    localparam int ACC_W = 48;  // |sum| < MAX_WIDTH * 2^30 + 2^31 plus the rounding term 2^39
    localparam int MAX_SHIFT = 40;
    localparam logic [2:0] FLAG_RELU = 3'b001, FLAG_TANH = 3'b010, FLAG_RAW = 3'b100;

`ifndef SYNTHESIS
    initial begin
        if (LANES < 2 || (1 << LOG2P) != LANES) $fatal(1, "LANES must be a power of two >= 2");
        if (MAX_WIDTH > 4096 || MAX_WIDTH < 1) $fatal(1, "MAX_WIDTH must be in 1..4096");
    end
`endif

    // ---------------------------------------------------------------- control registers
    logic        op_start, op_done, op_error;
    logic [31:0] op_mode, op_batch;

    mlp_control #(.LANES(LANES), .MAX_WIDTH(MAX_WIDTH), .MAX_LAYERS(MAX_LAYERS)) u_control (
        .ap_clk, .ap_rst_n,
        .s_axi_control_awaddr, .s_axi_control_awvalid, .s_axi_control_awready,
        .s_axi_control_wdata, .s_axi_control_wstrb, .s_axi_control_wvalid, .s_axi_control_wready,
        .s_axi_control_bresp, .s_axi_control_bvalid, .s_axi_control_bready,
        .s_axi_control_araddr, .s_axi_control_arvalid, .s_axi_control_arready,
        .s_axi_control_rdata, .s_axi_control_rresp, .s_axi_control_rvalid, .s_axi_control_rready,
        .interrupt,
        .op_start, .op_mode, .op_batch, .op_done, .op_error
    );

    // ---------------------------------------------------------------- network configuration
    // Committed when a LOAD header validates; `loaded` once its last word arrived intact.
    logic [15:0]   cfg_n [MAX_LAYERS];      // inputs of layer l
    logic [15:0]   cfg_m [MAX_LAYERS];      // outputs of layer l
    logic [5:0]    cfg_shift [MAX_LAYERS];
    logic          cfg_relu [MAX_LAYERS];
    logic [KW-1:0] cfg_k [MAX_LAYERS];      // log2 of the columns per row
    logic [15:0]   cfg_h [MAX_LAYERS];      // steps per output group = ceil(n / C)
    logic [15:0]   cfg_g [MAX_LAYERS];      // output groups = ceil(m / R)
    logic [15:0]   cfg_nl;
    logic          cfg_tanh;
    logic          loaded;

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

    // ---------------------------------------------------------------- operation state
    typedef enum logic [1:0] {OP_IDLE, OP_LOAD, OP_INFER} op_state_t;
    typedef enum logic [2:0] {LD_HDR, LD_W, LD_BLO, LD_BHI, LD_SKIP} ld_state_t;
    typedef enum logic [1:0] {E_IDLE, E_START, E_RUN, E_FINISH} e_state_t;

    op_state_t op_state;
    ld_state_t ld_state;
    e_state_t  e_state;

    wire in_fire = s_axis_in_tvalid && s_axis_in_tready;
    wire [15:0] in_word = s_axis_in_tdata;

    // LOAD header being received
    logic [15:0] hdr_nl, hdr_count;
    logic [15:0] hdr_n [MAX_LAYERS];
    logic [15:0] hdr_m [MAX_LAYERS];
    logic [15:0] hdr_shift [MAX_LAYERS];
    logic [15:0] hdr_flags [MAX_LAYERS];
    logic [15:0] ld_l, ld_i, ld_j;
    logic [15:0] ld_bias_lo;

    // INFER bookkeeping
    logic [31:0] rx_obs;    // observations fully received
    logic [15:0] rx_elem;   // next element of the observation being received
    logic        ib_full;   // the input buffer holds an observation layer 0 has not read yet
    logic [31:0] out_obs;   // observations fully sent
    logic        ob_full;   // the output buffer holds results the stream has not sent yet
    logic [15:0] ob_m;

    // engine counters
    logic [15:0] e_l, e_g, e_h;
    logic [31:0] e_waddr;
    logic [31:0] e_done_obs;  // observations whose last layer finished

    assign s_axis_in_tready = (op_state == OP_LOAD) ||
                              (op_state == OP_INFER && !ib_full && rx_obs < op_batch);

    // ---------------------------------------------------------------- LOAD: where a word goes
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

    logic          ld_w_we, ld_b_we;
    logic [31:0]   ld_w_addr, ld_b_addr;
    logic [LOG2P-1:0] ld_w_bank, ld_b_bank;
    always_comb begin : load_placement
        logic [KW-1:0] k;
        logic [15:0] rows;  // R of the layer being loaded
        k = cfg_k[ld_l];
        rows = 16'(LANES) >> k;
        ld_w_addr = ld_l * REGION + 32'(ld_i >> (LOG2P - k)) * cfg_h[ld_l] + 32'(ld_j >> k);
        ld_w_bank = LOG2P'(((ld_i & (rows - 1)) << k) | (ld_j & ((16'd1 << k) - 1)));
        ld_w_we = op_state == OP_LOAD && ld_state == LD_W && in_fire;
        ld_b_addr = ld_l * AW + 32'(ld_i >> LOG2P);
        ld_b_bank = LOG2P'(ld_i);
        ld_b_we = op_state == OP_LOAD && ld_state == LD_BHI && in_fire;
    end

    // ---------------------------------------------------------------- engine, stage 0: issue
    wire            e_issue = (e_state == E_RUN);
    wire [KW-1:0]   cur_k = cfg_k[e_l];
    wire [15:0]     cur_rows = 16'(LANES) >> cur_k;
    wire [15:0]     cur_n = cfg_n[e_l];
    wire [15:0]     cur_m = cfg_m[e_l];
    wire            cur_last_layer = (e_l == cfg_nl - 1);
    wire [15:0]     e_col = e_h << cur_k;             // first input of this step
    wire [15:0]     e_row = e_g << (LOG2P - cur_k);   // first output neuron of this group
    wire            e_step_last = (e_h == cfg_h[e_l] - 1);
    wire            e_layer_last = e_step_last && (e_g == cfg_g[e_l] - 1);
    wire [31:0]     x_raddr = (e_l[0] ? 32'd0 : 32'(AW)) + 32'(e_col >> LOG2P);  // layer l reads X[(l-1)%2]
    wire [31:0]     i_raddr = 32'(e_col >> LOG2P);
    wire [31:0]     b_raddr = e_l * AW + 32'(e_row >> LOG2P);

    // pipeline bookkeeping, stage 1 (memory data) .. stage 4 (write); per-lane values are packed,
    // lane l in bits [l*W +: W]
    logic                    p1_valid, p1_first, p1_last, p1_src_ib;
    logic [15:0]             p1_col, p1_row;
    logic                    p2_valid, p2_first, p2_last;
    logic [15:0]             p2_row;
    logic                    p3_valid, p3_first, p3_last;
    logic [15:0]             p3_row;
    logic [LANES*32-1:0]     p2_bias, p3_bias;
    logic                    p4_valid;
    logic [15:0]             p4_row;
    logic [LANES*ACC_W-1:0]  p4_sum, acc;

    // memory read data (stage 1) and write ports
    logic [LANES*16-1:0]     w_rd, x_rd, i_rd;
    logic [LANES*32-1:0]     b_rd;
    logic [LANES-1:0]        x_we;
    logic [LANES*16-1:0]     x_wdata;
    logic [31:0]             x_waddr;
    wire                     i_we = (op_state == OP_INFER) && in_fire;
    wire  [31:0]             i_waddr = 32'(rx_elem >> LOG2P);
    wire  [LOG2P-1:0]        i_wbank = LOG2P'(rx_elem);

    for (genvar b = 0; b < LANES; b++) begin : g_bank
        logic [15:0] wmem [WDEPTH];   // weights
        logic [31:0] bmem [BDEPTH];   // biases
        logic [15:0] xmem [2 * AW];   // hidden activations X0, X1
        logic [15:0] imem [AW];       // the observation layer 0 reads
        always_ff @(posedge ap_clk) begin
            if (ld_w_we && ld_w_bank == LOG2P'(b)) wmem[ld_w_addr] <= in_word;
            if (ld_b_we && ld_b_bank == LOG2P'(b)) bmem[ld_b_addr] <= {in_word, ld_bias_lo};
            if (x_we[b]) xmem[x_waddr] <= x_wdata[16*b +: 16];
            if (i_we && i_wbank == LOG2P'(b)) imem[i_waddr] <= in_word;
            w_rd[16*b +: 16] <= wmem[e_waddr];
            b_rd[32*b +: 32] <= bmem[b_raddr];
            x_rd[16*b +: 16] <= xmem[x_raddr];
            i_rd[16*b +: 16] <= imem[i_raddr];
        end
    end

    // ---------------------------------------------------------------- stage 1: select, into the MAC array
    logic [LANES*16-1:0] mac_a;
    logic [LANES-1:0]    mac_mask;
    logic [LANES*32-1:0] bias_sel;
    always_comb begin : stage1_select
        logic [LOG2P-1:0] a_off, b_off, a_idx;
        logic [15:0] c;
        a_off = LOG2P'(p1_col);
        b_off = LOG2P'(p1_row);
        for (int l = 0; l < LANES; l++) begin
            c = 16'(l) & ((16'd1 << cur_k) - 1);  // this lane's column within the step
            a_idx = a_off + LOG2P'(c);
            mac_a[16*l +: 16] = p1_src_ib ? i_rd[16*a_idx +: 16] : x_rd[16*a_idx +: 16];
            mac_mask[l] = (p1_col + c) < cur_n;
            bias_sel[32*l +: 32] = (16'(l) < cur_rows) ? b_rd[32*(b_off + LOG2P'(l)) +: 32] : 32'd0;
        end
    end

    logic                   mac_valid;
    logic [LANES*ACC_W-1:0] mac_sum;
    mlp_mac_array #(.LANES(LANES), .ACC_W(ACC_W), .KW(KW)) u_mac (
        .clk(ap_clk), .in_valid(p1_valid), .in_w(w_rd), .in_a(mac_a), .in_mask(mac_mask),
        .in_k(cur_k), .out_valid(mac_valid), .out_sum(mac_sum)
    );

    always_ff @(posedge ap_clk) begin
        p1_valid <= e_issue && ap_rst_n;
        p1_first <= (e_h == 0);
        p1_last <= e_step_last;
        p1_src_ib <= (e_l == 0);
        p1_col <= e_col;
        p1_row <= e_row;
        p2_valid <= p1_valid && ap_rst_n;
        p2_first <= p1_first;
        p2_last <= p1_last;
        p2_row <= p1_row;
        p2_bias <= bias_sel;
        p3_valid <= p2_valid && ap_rst_n;
        p3_first <= p2_first;
        p3_last <= p2_last;
        p3_row <= p2_row;
        p3_bias <= p2_bias;
    end

    // ---------------------------------------------------------------- stage 3: accumulate
    // (the bias enters on a group's first step)
    always_ff @(posedge ap_clk) begin : stage3_accumulate
        logic [ACC_W-1:0] s;
        p4_valid <= 1'b0;
        if (p3_valid && ap_rst_n) begin
            for (int r = 0; r < LANES; r++) begin
                s = (p3_first ? ACC_W'($signed(p3_bias[32*r +: 32])) : acc[ACC_W*r +: ACC_W]) + mac_sum[ACC_W*r +: ACC_W];
                acc[ACC_W*r +: ACC_W] <= s;
                p4_sum[ACC_W*r +: ACC_W] <= s;
            end
            p4_valid <= p3_last;
            p4_row <= p3_row;
        end
    end

    // ---------------------------------------------------------------- stage 4: round, saturate, ReLU, write
    function automatic [15:0] requantize(input [ACC_W-1:0] acc_in, input [5:0] shift, input relu);
        logic signed [ACC_W-1:0] z;
        z = $signed(acc_in);
        if (shift != 0) z = (z + (ACC_W'(1) << (shift - 1))) >>> shift;  // round half up
        if (z > 32767) z = 32767;
        if (z < -32768) z = -32768;
        if (relu && z < 0) z = 0;
        requantize = z[15:0];
    endfunction

    logic [LANES*16-1:0] y;
    logic [15:0] ob [MAX_WIDTH];   // results of the last layer
    always_comb begin : stage4_requantize
        logic [LOG2P-1:0] off, rr;
        logic [15:0] r;
        off = LOG2P'(p4_row);
        x_waddr = (e_l[0] ? 32'(AW) : 32'd0) + 32'(p4_row >> LOG2P);  // layer l writes X[l%2]
        for (int l = 0; l < LANES; l++) y[16*l +: 16] = requantize(p4_sum[ACC_W*l +: ACC_W], cfg_shift[e_l], cfg_relu[e_l]);
        for (int b = 0; b < LANES; b++) begin
            rr = LOG2P'(b) - off;  // the row this bank takes
            r = 16'(rr);
            x_wdata[16*b +: 16] = y[16*rr +: 16];
            x_we[b] = p4_valid && !cur_last_layer && LOG2P'(b) >= off && r < cur_rows && (p4_row + r) < cur_m;
        end
    end

    always_ff @(posedge ap_clk) begin
        if (p4_valid && cur_last_layer)
            for (int r = 0; r < LANES; r++)
                if (16'(r) < cur_rows && (p4_row + 16'(r)) < cur_m && (p4_row + 16'(r)) < 16'(MAX_WIDTH))
                    ob[p4_row + 16'(r)] <= y[16*r +: 16];
    end

    // ---------------------------------------------------------------- output stream and head
    logic [15:0] tanh_lut [1025];
    initial $readmemh(TANH_MEMH, tanh_lut);

    logic [15:0]        o_idx;
    logic signed [15:0] o_max;
    logic [15:0]        o_arg;
    wire  [15:0]        o_words = ob_m + (cfg_tanh ? 16'd0 : 16'd1);
    wire  signed [15:0] o_val = ob[o_idx < 16'(MAX_WIDTH) ? o_idx : 16'd0];
    logic signed [15:0] o_tanh;
    always_comb begin : tanh_head
        logic [15:0] u;
        logic [10:0] seg;
        logic signed [16:0] t0, t1, slope;
        logic signed [23:0] frac;
        u = {~o_val[15], o_val[14:0]};  // y + 32768
        seg = {1'b0, u[15:6]};
        t0 = 17'($signed(tanh_lut[seg]));
        t1 = 17'($signed(tanh_lut[seg + 1]));
        slope = t1 - t0;
        frac = (24'(slope) * $signed({18'd0, u[5:0]}) + 24'sd32) >>> 6;
        o_tanh = 16'(t0 + 17'(frac));
    end
    wire o_fire = m_axis_out_tvalid && m_axis_out_tready;
    assign m_axis_out_tvalid = ob_full;
    assign m_axis_out_tlast = (o_idx == o_words - 1);
    assign m_axis_out_tdata = cfg_tanh ? o_tanh : (o_idx == ob_m ? o_arg : o_val);

    // ---------------------------------------------------------------- sequencing
    // Four blocks, each the only writer of its registers: the operation FSM (op_state, done/error,
    // `loaded`), the LOAD FSM (header, configuration, weight placement), the receiver and the layer
    // engine of an INFER, and the output stream. They talk through the one-cycle events below.
    wire load_start  = op_state == OP_IDLE && op_start && op_mode == 0;
    wire infer_start = op_state == OP_IDLE && op_start && op_mode == 1 && loaded && op_batch <= 32'(MAX_BATCH);
    wire infer_end   = op_state == OP_INFER && out_obs == op_batch;
    wire drained     = !p1_valid && !p2_valid && !p3_valid;  // the last write of a layer landed
    wire ib_drain    = op_state == OP_INFER && e_state == E_RUN && e_layer_last && e_l == 0;  // layer 0 issued its last read
    wire ob_fill     = op_state == OP_INFER && e_state == E_FINISH && drained && cur_last_layer;

    // What this cycle's LOAD word does to the operation (the LOAD rules of SPEC.md).
    logic ld_reject;    // a rejected header: the old network stays (no weight was written yet)
    logic ld_fail;      // the frame ended while weights were being written: no valid network any more
    logic ld_complete;  // the last word of the network, carrying tlast
    logic ld_overrun;   // the network is complete but the frame goes on
    logic ld_skipped;   // the end of a rejected frame
    always_comb begin : load_outcome
        logic net_last;
        net_last = ld_i == cfg_m[ld_l] - 1 && ld_l == cfg_nl - 1;
        {ld_reject, ld_fail, ld_complete, ld_overrun, ld_skipped} = '0;
        if (op_state == OP_LOAD && in_fire) begin
            case (ld_state)
                LD_HDR: begin
                    if (hdr_count == 0) ld_reject = in_word == 0 || in_word > 16'(MAX_LAYERS);
                    else if (last_hdr_word) ld_reject = !header_ok || s_axis_in_tlast;
                    else ld_reject = s_axis_in_tlast;  // the frame ended inside the header
                end
                LD_W, LD_BLO: ld_fail = s_axis_in_tlast;
                LD_BHI: begin
                    ld_complete = net_last && s_axis_in_tlast;
                    ld_overrun = net_last && !s_axis_in_tlast;
                    ld_fail = !net_last && s_axis_in_tlast;
                end
                default: ld_skipped = s_axis_in_tlast;  // LD_SKIP
            endcase
        end
    end

    logic op_loaded_before;  // `loaded` when the current LOAD began
    always_ff @(posedge ap_clk) begin : op_fsm
        op_done <= 1'b0;
        op_error <= 1'b0;
        if (!ap_rst_n) begin
            op_state <= OP_IDLE;
            loaded <= 1'b0;
        end else begin
            case (op_state)
                OP_IDLE: if (op_start) begin
                    if (load_start) begin
                        op_state <= OP_LOAD;
                        loaded <= 1'b0;  // until this LOAD either completes or is rejected
                        op_loaded_before <= loaded;
                    end else if (infer_start) begin
                        op_state <= OP_INFER;
                    end else begin
                        op_error <= 1'b1;  // unknown mode, INFER before a successful LOAD, batch over MAX_BATCH
                        op_done <= 1'b1;
                    end
                end
                OP_LOAD: begin
                    if (ld_complete) loaded <= 1'b1;
                    if (ld_complete || ld_skipped || (ld_reject && s_axis_in_tlast) || ld_fail) begin
                        op_state <= OP_IDLE;
                        op_done <= 1'b1;
                    end
                    if (ld_overrun || ld_reject || ld_fail) op_error <= 1'b1;
                    if (ld_reject) loaded <= op_loaded_before;
                    if (ld_fail) loaded <= 1'b0;
                end
                default: if (infer_end) begin  // OP_INFER
                    op_state <= OP_IDLE;
                    op_done <= 1'b1;
                end
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
        end else if (op_state == OP_LOAD && in_fire) begin
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
                    if (ld_reject && !s_axis_in_tlast) ld_state <= LD_SKIP;  // drop the rest of the frame
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

    // receive observations into the input buffer
    always_ff @(posedge ap_clk) begin : receiver
        if (!ap_rst_n) begin
            ib_full <= 1'b0;
        end else if (infer_start) begin
            rx_obs <= '0;
            rx_elem <= '0;
        end else if (op_state == OP_INFER) begin
            if (in_fire) begin
                if (rx_elem == cfg_n[0] - 1) begin
                    rx_elem <= '0;
                    rx_obs <= rx_obs + 1;
                    ib_full <= 1'b1;
                end else rx_elem <= rx_elem + 1;
            end
            if (ib_drain) ib_full <= 1'b0;
        end
    end

    // the engine walks layer by layer
    always_ff @(posedge ap_clk) begin : engine_fsm
        if (!ap_rst_n) begin
            e_state <= E_IDLE;
        end else if (infer_start) begin
            e_done_obs <= '0;
            e_l <= '0;
            e_state <= E_START;
        end else if (op_state == OP_INFER) begin
            case (e_state)
                E_START: begin
                    if ((e_l != 0 || ib_full) && (!cur_last_layer || !ob_full)) begin
                        e_state <= E_RUN;
                        e_g <= '0;
                        e_h <= '0;
                        e_waddr <= e_l * REGION;
                    end
                end
                E_RUN: begin
                    e_waddr <= e_waddr + 1;
                    if (e_step_last) begin
                        e_h <= '0;
                        e_g <= e_g + 1;
                    end else e_h <= e_h + 1;
                    if (e_layer_last) e_state <= E_FINISH;
                end
                E_FINISH: begin
                    if (drained) begin
                        if (cur_last_layer) begin
                            ob_m <= cur_m;
                            e_done_obs <= e_done_obs + 1;
                            e_l <= '0;
                            e_state <= (e_done_obs + 1 == op_batch) ? E_IDLE : E_START;
                        end else begin
                            e_l <= e_l + 1;
                            e_state <= E_START;
                        end
                    end
                end
                default: ;
            endcase
            if (infer_end) e_state <= E_IDLE;
        end
    end

    // send results; the argmax of a RAW head follows its values
    always_ff @(posedge ap_clk) begin : output_stream
        if (!ap_rst_n) begin
            ob_full <= 1'b0;
        end else if (infer_start) begin
            out_obs <= '0;
            o_idx <= '0;
        end else if (op_state == OP_INFER) begin
            if (ob_fill) ob_full <= 1'b1;
            if (o_fire) begin
                if (o_idx < ob_m && (o_idx == 0 || o_val > o_max)) begin
                    o_max <= o_val;
                    o_arg <= o_idx;
                end
                if (m_axis_out_tlast) begin
                    o_idx <= '0;
                    ob_full <= 1'b0;
                    out_obs <= out_obs + 1;
                end else o_idx <= o_idx + 1;
            end
        end
    end

endmodule
`default_nettype wire
