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
//   linear interpolation, applied word by word as the output streams, through three registered
//   stages (buffer read, table read, interpolation multiply) in front of m_axis_out.
module mlp_top #(
    parameter int LANES = 16,            // parallel multiply-accumulate lanes (power of two, 2..64)
    parameter int MAX_LAYERS = 4,        // linear layers the weight memory holds
    parameter int MAX_WIDTH = 256,       // widest layer input or output (<= 4096)
    parameter int MAX_BATCH = 4096,      // most observations per INFER (larger batches are refused)
    parameter TANH_MEMH = "mlp_tanh.memh"  // tanh table T[0..1024] (4 hex digits a line), written by pearl_fpga.sim.verilator.write_tanh_memh
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
    // Committed by mlp_loader when a LOAD header validates; `loaded` once its last word arrived intact.
    logic [MAX_LAYERS-1:0][15:0] cfg_n;      // inputs of layer l
    logic [MAX_LAYERS-1:0][15:0] cfg_m;      // outputs of layer l
    logic [MAX_LAYERS-1:0][5:0] cfg_shift;
    logic [MAX_LAYERS-1:0] cfg_relu;
    logic [MAX_LAYERS-1:0][KW-1:0] cfg_k;      // log2 of the columns per row
    logic [MAX_LAYERS-1:0][15:0] cfg_h;      // steps per output group = ceil(n / C)
    logic [MAX_LAYERS-1:0][15:0] cfg_g;      // output groups = ceil(m / R)
    logic [15:0]   cfg_nl;
    logic          cfg_tanh;
    logic          loaded;

    // ---------------------------------------------------------------- operation state
    typedef enum logic [1:0] {OP_IDLE, OP_LOAD, OP_INFER, OP_IDENT} op_state_t;
    typedef enum logic [1:0] {E_IDLE, E_START, E_RUN, E_FINISH} e_state_t;

    op_state_t op_state;
    e_state_t  e_state;

    wire in_fire = s_axis_in_tvalid && s_axis_in_tready;
    wire [15:0] in_word = s_axis_in_tdata;

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

    // ---------------------------------------------------------------- LOAD: header, configuration, placement
    wire load_start = op_state == OP_IDLE && op_start && op_mode == 0;
    logic ld_reject, ld_fail, ld_complete, ld_overrun, ld_skipped;  // what this cycle's LOAD word did
    logic             ld_w_we, ld_b_we;
    logic [31:0]      ld_w_addr, ld_b_addr, ld_b_data;
    logic [LOG2P-1:0] ld_w_bank, ld_b_bank;
    mlp_loader #(.LANES(LANES), .MAX_LAYERS(MAX_LAYERS), .MAX_WIDTH(MAX_WIDTH)) u_loader (
        .ap_clk, .ap_rst_n, .load_start, .active(op_state == OP_LOAD), .in_fire, .in_word,
        .in_last(s_axis_in_tlast),
        .ld_reject, .ld_fail, .ld_complete, .ld_overrun, .ld_skipped,
        .ld_w_we, .ld_w_addr, .ld_w_bank, .ld_b_we, .ld_b_addr, .ld_b_bank, .ld_b_data,
        .cfg_n, .cfg_m, .cfg_shift, .cfg_relu, .cfg_k, .cfg_h, .cfg_g, .cfg_nl, .cfg_tanh
    );

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
            if (ld_b_we && ld_b_bank == LOG2P'(b)) bmem[ld_b_addr] <= ld_b_data;
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
    // Three registered stages between the output buffer and the stream, so that no clock path runs
    // from the buffer's read through the tanh table and the interpolation multiply into tdata:
    //   q1: the word picked from the buffer (a value, or the argmax after a RAW head's values);
    //   q2: for a tanh head, the two table entries around it and the interpolation fraction;
    //   q3: the word on the stream (tdata/tlast).
    // The stages move together whenever the stream takes q3 or q3 is empty (`o_adv`).
    logic [15:0] tanh_lut [1025];
    initial $readmemh(TANH_MEMH, tanh_lut);

    logic [15:0]        o_idx;
    logic signed [15:0] o_max;
    logic [15:0]        o_arg;
    wire  [15:0]        o_words = ob_m + (cfg_tanh ? 16'd0 : 16'd1);
    wire  signed [15:0] o_val = ob[o_idx < 16'(MAX_WIDTH) ? o_idx : 16'd0];
    wire                o_last = (o_idx == o_words - 1);  // an observation's last word
    wire                o_tlast = o_last && out_obs == op_batch - 1;  // the batch's: one tlast per INFER

    logic               q1_valid, q1_last, q1_raw;
    logic signed [15:0] q1_word;
    logic               q2_valid, q2_last, q2_raw;
    logic signed [16:0] q2_t0, q2_t1;
    logic [5:0]         q2_frac;
    logic signed [15:0] q2_word;
    logic               q3_valid, q3_last;
    logic signed [15:0] q3_word;

    wire o_adv  = !q3_valid || m_axis_out_tready;
    wire o_fire = ob_full && o_adv;  // the buffer hands its next word to q1
    // IDENTITY (mode 2): four words past the tanh head: lanes, max_width, max_layers, loaded
    logic [2:0]         id_idx;
    wire                ident_start = op_state == OP_IDLE && op_start && op_mode == 2;
    wire                id_fire = op_state == OP_IDENT && id_idx < 3'd4 && o_adv;
    wire signed [15:0]  id_word = id_idx == 3'd0 ? 16'(LANES) : id_idx == 3'd1 ? 16'(MAX_WIDTH)
                                : id_idx == 3'd2 ? 16'(MAX_LAYERS) : {14'd0, load_rejected, loaded};
    wire o_busy = q1_valid || q2_valid || q3_valid;
    wire ident_end = op_state == OP_IDENT && id_idx == 3'd4 && !o_busy;

    // q2 -> q3: the interpolation of the tanh head (RAW words pass)
    logic signed [15:0] q2_tanh;
    always_comb begin : tanh_head
        logic signed [16:0] slope;
        logic signed [23:0] frac;
        slope = q2_t1 - q2_t0;
        frac = (24'(slope) * $signed({18'd0, q2_frac}) + 24'sd32) >>> 6;
        q2_tanh = 16'(q2_t0 + 17'(frac));
    end

    always_ff @(posedge ap_clk) begin : output_pipeline
        if (!ap_rst_n || infer_start || ident_start) begin
            q1_valid <= 1'b0;
            q2_valid <= 1'b0;
            q3_valid <= 1'b0;
        end else if (o_adv) begin
            q1_valid <= o_fire || id_fire;
            q1_last  <= id_fire ? id_idx == 3'd3 : o_tlast;
            q1_raw   <= id_fire;
            q1_word  <= id_fire ? id_word : (!cfg_tanh && o_idx == ob_m) ? $signed(o_arg) : o_val;
            q2_valid <= q1_valid;
            q2_last  <= q1_last;
            q2_raw   <= q1_raw;
            q2_word  <= q1_word;
            q2_t0    <= 17'($signed(tanh_lut[{1'b0, ~q1_word[15], q1_word[14:6]}]));       // segment of y + 32768
            q2_t1    <= 17'($signed(tanh_lut[{1'b0, ~q1_word[15], q1_word[14:6]} + 11'd1]));
            q2_frac  <= q1_word[5:0];
            q3_valid <= q2_valid;
            q3_last  <= q2_last;
            q3_word  <= cfg_tanh && !q2_raw ? q2_tanh : q2_word;
        end
    end
    assign m_axis_out_tvalid = q3_valid;
    assign m_axis_out_tlast  = q3_last;
    assign m_axis_out_tdata  = q3_word;

    // ---------------------------------------------------------------- sequencing
    // Blocks that are each the only writer of their registers: the operation FSM (op_state,
    // done/error, `loaded`), the LOAD FSM (mlp_loader), the receiver and the layer engine of an
    // INFER, and the output stream. They talk through the one-cycle events below and mlp_loader's.
    wire infer_start = op_state == OP_IDLE && op_start && op_mode == 1 && loaded && op_batch <= 32'(MAX_BATCH);
    wire infer_end   = op_state == OP_INFER && out_obs == op_batch && !o_busy;  // the last word left the pipeline
    wire drained     = !p1_valid && !p2_valid && !p3_valid;  // the last write of a layer landed
    wire ib_drain    = op_state == OP_INFER && e_state == E_RUN && e_layer_last && e_l == 0;  // layer 0 issued its last read
    wire ob_fill     = op_state == OP_INFER && e_state == E_FINISH && drained && cur_last_layer;

    logic op_loaded_before;  // `loaded` when the current LOAD began
    logic load_rejected;     // the last LOAD set the error register (IDENTITY's status bit1)
    always_ff @(posedge ap_clk) begin : op_fsm
        op_done <= 1'b0;
        op_error <= 1'b0;
        if (!ap_rst_n) begin
            op_state <= OP_IDLE;
            loaded <= 1'b0;
            load_rejected <= 1'b0;
        end else begin
            case (op_state)
                OP_IDLE: if (op_start) begin
                    if (load_start) begin
                        op_state <= OP_LOAD;
                        loaded <= 1'b0;  // until this LOAD either completes or is rejected
                        load_rejected <= 1'b0;
                        op_loaded_before <= loaded;
                    end else if (infer_start) begin
                        op_state <= OP_INFER;
                    end else if (ident_start) begin
                        op_state <= OP_IDENT;
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
                    if (ld_overrun || ld_reject || ld_fail) begin
                        op_error <= 1'b1;
                        load_rejected <= 1'b1;
                    end
                    if (ld_reject) loaded <= op_loaded_before;
                    if (ld_fail) loaded <= 1'b0;
                end
                OP_IDENT: if (ident_end) begin
                    op_state <= OP_IDLE;
                    op_done <= 1'b1;
                end
                default: if (infer_end) begin  // OP_INFER
                    op_state <= OP_IDLE;
                    op_done <= 1'b1;
                end
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

    // IDENTITY's words, one per stream advance
    always_ff @(posedge ap_clk) begin : identity_words
        if (!ap_rst_n || ident_start) id_idx <= '0;
        else if (id_fire) id_idx <= id_idx + 1;
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
                if (o_last) begin
                    o_idx <= '0;
                    ob_full <= 1'b0;
                    out_obs <= out_obs + 1;
                end else o_idx <= o_idx + 1;
            end
        end
    end

endmodule
`default_nettype wire
