`default_nettype none
// Reference RTL of the MLP inference kernel: ports, streams, registers and arithmetic of
// hls/mlp/SPEC.md, bit-exact with the numpy reference and the HLS C++; written to map onto FPGA
// block RAM and hard multipliers with short register-to-register paths.
//
// Microarchitecture
// - Weights live on chip in LANES banks of 16-bit words; layer l owns the region
//   [l*REGION, (l+1)*REGION). At LOAD the kernel picks, per layer, how its LANES multipliers split into
//   R = LANES >> k output neurons times C = 1 << k inputs (the split with the fewest steps
//   ceil(m/R) * ceil(n/C)), and stores the weights in that order, one LANES-wide word per step
//   (mlp_loader). Biases sit in LANES banks too, one word per row of a group, so neither memory
//   needs a mux behind its read.
// - Activations: an input buffer (filled from s_axis_in while the previous observation computes) and
//   a ping-pong pair X0/X1 between layers, each LANES banks wide (neuron i in bank i % LANES); the
//   last layer writes an output buffer that streams out on m_axis_out while the next observation
//   computes. Every memory is a plain array with one write port and a synchronous read port, so
//   synthesis maps it onto block RAM (or LUT RAM when small); a fabric register follows each read.
// - Pipeline per step, one register between stages (shown for the read latency MEM_LATENCY = 2):
//   issue (0) -> memory (1) -> read register (2) -> activation select (3) -> multiply (4) ->
//   adder tree, TREE_PER_STAGE levels a stage -> accumulate with the bias (and the rounding
//   constant) on a group's first step -> shift by 8*s[5:3] -> shift by s[2:0] -> saturate and ReLU
//   -> rotate into the activation banks -> write. P_WRITE below is the depth.
// - Layers overlap: a step of layer l issues as soon as the neurons of layer l-1 it reads are
//   written (a count per ping-pong buffer), so a layer only waits for the pipeline where it needs the
//   previous layer's last outputs.
// - Output head: RAW values then their argmax (first maximum), or the 1025-entry tanh table (block
//   RAM, two read ports) with linear interpolation, applied word by word as the output streams,
//   through registered stages (buffer read, bank select, table read, table register, multiply,
//   add) in front of m_axis_out.
module mlp_top #(
    parameter int LANES = 16,            // parallel multiply-accumulate lanes (power of two, 2..64)
    parameter int MAX_LAYERS = 4,        // linear layers the weight memory holds
    parameter int MAX_WIDTH = 256,       // widest layer input or output (<= 4096)
    parameter int MAX_BATCH = 4096,      // most observations per INFER (larger batches are refused)
    // Cycles from a read address to the data in a register of the fabric, for the engine's memories
    // (weights, biases, activations): the memory's own read register, then MEM_LATENCY - 1 more
    // (>= 1; 2 keeps a block RAM's clock-to-output away from logic). The step pipeline grows with it.
    parameter int MEM_LATENCY = 2,
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
    localparam int AW = (MAX_WIDTH + LANES - 1) / LANES;  // words of one activation buffer bank
    localparam int IAW = AW > 1 ? $clog2(AW) : 1;          // address bits of a word in a buffer
    localparam int REGION = AW * MAX_WIDTH;                // weight words of one layer (worst split)
    localparam int WDEPTH = MAX_LAYERS * REGION;
    localparam int BDEPTH = MAX_LAYERS * MAX_WIDTH;        // a group has one row when R = 1
    localparam int WAW = $clog2(WDEPTH);
    localparam int BAW = $clog2(BDEPTH);
    localparam int LW = MAX_LAYERS > 1 ? $clog2(MAX_LAYERS) : 1;
    localparam int SUM_W = 32 + LOG2P;  // a row sum of the MAC array
    // |acc| < MAX_WIDTH * 2^30 + 2^31 plus the rounding term 2^39, signed
    localparam int ACC_W = (($clog2(MAX_WIDTH) + 30 > 39) ? $clog2(MAX_WIDTH) + 30 : 39) + 2;

    // Pipeline of a step: stage s is the cycle s clocks after its issue (see the header comment).
    localparam int TREE_PER_STAGE = 2;
    localparam int TREE_STAGES = (LOG2P + TREE_PER_STAGE - 1) / TREE_PER_STAGE;
    localparam int P_LANE = MEM_LATENCY - 1;       // per-lane bank and mask of the activation select
    localparam int P_SEL = MEM_LATENCY;            // the activation select (read data registered)
    localparam int P_MUL = P_SEL + 1;              // operands into the MAC array
    localparam int P_ACC = P_MUL + 1 + TREE_STAGES;  // row sums out of the array, accumulated
    localparam int P_BIAS = P_ACC - 1 - MEM_LATENCY;  // bias read address (memory, registers, + rounding)
    localparam int P_SH1 = P_ACC + 1;              // shift right by 8 * s[5:3]
    localparam int P_SH2 = P_SH1 + 1;              // shift right by s[2:0]
    localparam int P_SAT = P_SH2 + 1;              // saturate, ReLU
    localparam int P_ROT = P_SAT + 1;              // rotate the rows onto the banks of their neurons
    localparam int P_WRITE = P_ROT + 1;            // write ports driven; written at the end of the cycle

`ifndef SYNTHESIS
    initial begin
        if (LANES < 2 || (1 << LOG2P) != LANES) $fatal(1, "LANES must be a power of two >= 2");
        if (MAX_WIDTH > 4096 || MAX_WIDTH < 1) $fatal(1, "MAX_WIDTH must be in 1..4096");
        if (MEM_LATENCY < 1 || P_BIAS < 0) $fatal(1, "MEM_LATENCY must be >= 1");
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
    typedef enum logic [1:0] {E_IDLE, E_LAYER, E_RUN} e_state_t;

    op_state_t op_state;
    e_state_t  e_state;

    logic        ld_ready;
    logic        rx_full;   // the input buffer holds an observation layer 0 has not read yet
    logic        rx_more;   // observations of this INFER are still to be received
    assign s_axis_in_tready = (op_state == OP_LOAD && ld_ready) || (op_state == OP_INFER && !rx_full && rx_more);
    wire in_fire = s_axis_in_tvalid && s_axis_in_tready;
    wire [15:0] in_word = s_axis_in_tdata;

    // ---------------------------------------------------------------- LOAD: header, configuration, placement
    // What an ap_start would start, decided a cycle ahead (mode, batch and `loaded` were set by
    // earlier register writes or operations), so that the start fans out from a few registers.
    logic mode_load, mode_infer, mode_ident;
    always_ff @(posedge ap_clk) begin
        mode_load <= op_mode == 0;
        mode_infer <= op_mode == 1 && loaded && op_batch <= 32'(MAX_BATCH);
        mode_ident <= op_mode == 2;
    end
    wire load_start = op_state == OP_IDLE && op_start && mode_load;
    logic ld_reject, ld_fail, ld_complete, ld_overrun, ld_skipped;  // what this cycle's LOAD word did
    logic             ld_w_we, ld_b_we;
    logic [WAW-1:0]   ld_w_addr;
    logic [BAW-1:0]   ld_b_addr;
    logic [31:0]      ld_b_data;
    logic [LOG2P-1:0] ld_w_bank, ld_b_bank;
    mlp_loader #(.LANES(LANES), .MAX_LAYERS(MAX_LAYERS), .MAX_WIDTH(MAX_WIDTH)) u_loader (
        .ap_clk, .ap_rst_n, .load_start, .active(op_state == OP_LOAD), .in_fire, .in_word,
        .in_last(s_axis_in_tlast), .ready(ld_ready),
        .ld_reject, .ld_fail, .ld_complete, .ld_overrun, .ld_skipped,
        .ld_w_we, .ld_w_addr, .ld_w_bank, .ld_b_we, .ld_b_addr, .ld_b_bank, .ld_b_data,
        .cfg_n, .cfg_m, .cfg_shift, .cfg_relu, .cfg_k, .cfg_h, .cfg_g, .cfg_nl, .cfg_tanh
    );

    // LOAD writes, one register stage in front of the memories' write ports
    logic             ww_we, bw_we;
    logic [WAW-1:0]   ww_addr;
    logic [BAW-1:0]   bw_addr;
    logic [LOG2P-1:0] ww_bank, bw_bank;
    logic [15:0]      ww_data;
    logic [31:0]      bw_data;
    always_ff @(posedge ap_clk) begin
        ww_we <= ld_w_we && ap_rst_n;
        ww_addr <= ld_w_addr;
        ww_bank <= ld_w_bank;
        ww_data <= in_word;
        bw_we <= ld_b_we && ap_rst_n;
        bw_addr <= ld_b_addr;
        bw_bank <= ld_b_bank;
        bw_data <= ld_b_data;
    end

    // ---------------------------------------------------------------- engine, stage 0: issue
    // The current layer's parameters, loaded in E_LAYER.
    logic [LW-1:0]  e_l;
    logic [KW-1:0]  c_k;
    logic [15:0]    c_n, c_m, c_rows, c_cols, c_h_last, c_g_last;
    logic [5:0]     c_shift;
    logic           c_relu, c_first_layer, c_last_layer;
    // Step counters: group g (rows g*R ..), step h (inputs h*C ..) of it, and the memory addresses.
    logic [15:0]    e_g, e_h, e_col, e_col_end, e_row;
    logic [WAW-1:0] e_waddr, e_wbase;
    logic [BAW-1:0] e_baddr, e_bbase;
    logic [31:0]    e_obs_left;  // observations whose last layer has not issued yet
    // Neurons written so far into each ping-pong buffer X0/X1 by the layer that writes it.
    logic [1:0][15:0] x_count;
    logic           ob_busy;    // the output buffer belongs to an observation not yet fully streamed
    logic           ob_ready;   // ... and its last layer's results have all landed
    logic           ib_ready;   // the observation in the input buffer has landed

    // What layer l reads: X[(l-1) % 2]. The index is a 1-bit wire of its own: Yosys (0.70) widens
    // `~e_l[0]` inside an index to 32 bits, out of range (X) in synthesis, and the netlist then never
    // saw a second layer's inputs written (docs/hardware.md, "Netlist simulation").
    wire x_read_buf = ~e_l[0];
    wire [15:0] x_count_prev = x_count[x_read_buf];
    logic step_ready;  // the current step's inputs are written (registered: see engine_fsm)
    wire  fire = e_state == E_RUN && step_ready;
    logic step_first, step_last, group_last;  // the step is its group's first / last; the group the layer's last
    logic obs_last;                           // the observation is the INFER's last to issue
    wire  layer_last = step_last && group_last;
    logic [LW-1:0] l_last;  // the network's last layer (cfg_nl - 1), set at the INFER's start
    wire  is_last_layer = e_l == l_last;
    wire  layer_go = e_state == E_LAYER && (e_l != 0 || ib_ready) && (!is_last_layer || !ob_busy);
    wire  ib_drain = fire && layer_last && c_first_layer;  // layer 0 issued its last read

    // ---------------------------------------------------------------- step metadata, stages 0..P_WRITE
    logic [P_WRITE:0]                p_valid, p_first, p_last, p_lend, p_src_ib, p_out, p_relu;
    logic [P_WRITE:0][KW-1:0]        p_k;
    logic [P_WRITE:0][LOG2P-1:0]     p_abase;   // bank of the step's first input
    logic [P_WRITE:0][LOG2P:0]       p_rem;     // inputs of the step that exist (at most LANES)
    logic [P_WRITE:0][BAW-1:0]       p_baddr;
    logic [P_WRITE:0][5:0]           p_shift;
    logic [P_WRITE:0][LOG2P-1:0]     p_off;     // bank of the group's first output neuron
    logic [P_WRITE:0][IAW:0]         p_waddr;   // {buffer, word} the group's outputs go to
    logic [P_WRITE:0][LOG2P:0]       p_nrows;   // rows of the group that exist

    always_comb begin : stage0
        logic [15:0] left;
        p_valid[0] = fire;
        p_first[0] = step_first;
        p_last[0] = step_last;
        p_lend[0] = layer_last;
        p_src_ib[0] = c_first_layer;
        p_out[0] = c_last_layer;
        p_relu[0] = c_relu;
        p_k[0] = c_k;
        p_abase[0] = LOG2P'(e_col);
        left = c_n - e_col;
        p_rem[0] = left > 16'(LANES) ? (LOG2P+1)'(LANES) : (LOG2P+1)'(left);
        p_baddr[0] = e_baddr;
        p_shift[0] = c_shift;
        p_off[0] = LOG2P'(e_row);
        p_waddr[0] = {e_l[0], IAW'(e_row >> LOG2P)};
        left = c_m - e_row;
        p_nrows[0] = left > c_rows ? (LOG2P+1)'(c_rows) : (LOG2P+1)'(left);
    end

    always_ff @(posedge ap_clk) begin : step_pipeline
        p_valid[P_WRITE:1] <= ap_rst_n ? p_valid[P_WRITE-1:0] : '0;
        p_first[P_WRITE:1] <= p_first[P_WRITE-1:0];
        p_last[P_WRITE:1] <= p_last[P_WRITE-1:0];
        p_lend[P_WRITE:1] <= p_lend[P_WRITE-1:0];
        p_src_ib[P_WRITE:1] <= p_src_ib[P_WRITE-1:0];
        p_out[P_WRITE:1] <= p_out[P_WRITE-1:0];
        p_relu[P_WRITE:1] <= p_relu[P_WRITE-1:0];
        p_k[P_WRITE:1] <= p_k[P_WRITE-1:0];
        p_abase[P_WRITE:1] <= p_abase[P_WRITE-1:0];
        p_rem[P_WRITE:1] <= p_rem[P_WRITE-1:0];
        p_baddr[P_WRITE:1] <= p_baddr[P_WRITE-1:0];
        p_shift[P_WRITE:1] <= p_shift[P_WRITE-1:0];
        p_off[P_WRITE:1] <= p_off[P_WRITE-1:0];
        p_waddr[P_WRITE:1] <= p_waddr[P_WRITE-1:0];
        p_nrows[P_WRITE:1] <= p_nrows[P_WRITE-1:0];
    end

    // ---------------------------------------------------------------- memories
    // Each bank: one write port, one synchronous read port, a fabric register behind the read.
    logic             iw_we;                  // input buffer write (the receiver), registered
    logic [LOG2P-1:0] iw_bank;
    logic [IAW-1:0]   iw_addr;
    logic [15:0]      iw_data;
    logic [LANES-1:0] xw_we, obw_we;          // activation / output buffer writes (stage P_WRITE)
    logic [IAW:0]     xw_addr;
    logic [LANES*16-1:0] xw_data;
    logic             o_adv;                  // the output stream advances
    logic [IAW-1:0]   o_raddr;                // output buffer word the stream reads

    // Read data: [0] the memory's read register (stage 1; the bias's stage P_BIAS + 1), [d] d
    // fabric registers later.
    logic [MEM_LATENCY-1:0][LANES*16-1:0] w_rd, x_rd, i_rd;
    logic [MEM_LATENCY-1:0][LANES*32-1:0] b_rd;
    logic [LANES*16-1:0] o_mem;                       // output buffer read data (o1)
    wire  [IAW:0]   x_raddr = {~e_l[0], IAW'(e_col >> LOG2P)};
    wire  [IAW-1:0] i_raddr = IAW'(e_col >> LOG2P);
    for (genvar b = 0; b < LANES; b++) begin : g_bank
        logic [15:0] wmem [WDEPTH];           // weights
        logic [31:0] bmem [BDEPTH];           // biases
        logic [15:0] xmem [2 << IAW];         // hidden activations X0, X1
        logic [15:0] imem [1 << IAW];         // the observation layer 0 reads
        logic [15:0] omem [1 << IAW];         // the last layer's results
        always_ff @(posedge ap_clk) begin
            if (ww_we && ww_bank == LOG2P'(b)) wmem[ww_addr] <= ww_data;
            w_rd[0][16*b +: 16] <= wmem[e_waddr];
        end
        always_ff @(posedge ap_clk) begin
            if (bw_we && bw_bank == LOG2P'(b)) bmem[bw_addr] <= bw_data;
            b_rd[0][32*b +: 32] <= bmem[p_baddr[P_BIAS]];
        end
        always_ff @(posedge ap_clk) begin
            if (xw_we[b]) xmem[xw_addr] <= xw_data[16*b +: 16];
            x_rd[0][16*b +: 16] <= xmem[x_raddr];
        end
        always_ff @(posedge ap_clk) begin
            if (iw_we && iw_bank == LOG2P'(b)) imem[iw_addr] <= iw_data;
            i_rd[0][16*b +: 16] <= imem[i_raddr];
        end
        always_ff @(posedge ap_clk) begin
            if (obw_we[b]) omem[xw_addr[IAW-1:0]] <= xw_data[16*b +: 16];
            if (o_adv) o_mem[16*b +: 16] <= omem[o_raddr];
        end
    end

    for (genvar d = 1; d < MEM_LATENCY; d++) begin : g_read_delay
        always_ff @(posedge ap_clk) begin
            w_rd[d] <= w_rd[d-1];
            x_rd[d] <= x_rd[d-1];
            i_rd[d] <= i_rd[d-1];
            b_rd[d] <= b_rd[d-1];
        end
    end
    wire [LANES*16-1:0] w_q = w_rd[MEM_LATENCY-1], x_q = x_rd[MEM_LATENCY-1], i_q = i_rd[MEM_LATENCY-1];
    wire [LANES*32-1:0] b_q = b_rd[MEM_LATENCY-1];  // stage P_ACC - 1

    // ---------------------------------------------------------------- stages 1..P_MUL: operands
    logic [LANES-1:0][LOG2P-1:0] sel_bank;  // stage P_SEL: the bank each lane's input comes from
    logic [LANES-1:0]            sel_on;    // ... and whether that input exists
    logic [LANES*16-1:0]         w_op, a_op;
    always_ff @(posedge ap_clk) begin : operands
        logic [LOG2P-1:0] col;
        for (int l = 0; l < LANES; l++) begin  // stage P_LANE: lane l takes column l / R of the step
            col = LOG2P'(l >> (LOG2P - p_k[P_LANE]));
            sel_bank[l] <= p_abase[P_LANE] + col;
            sel_on[l] <= (LOG2P+1)'(col) < p_rem[P_LANE];
        end
        w_op <= w_q;   // stage P_SEL: select each lane's input
        for (int l = 0; l < LANES; l++)
            a_op[16*l +: 16] <= !sel_on[l] ? 16'd0 : p_src_ib[P_SEL] ? i_q[16*sel_bank[l] +: 16] : x_q[16*sel_bank[l] +: 16];
    end

    logic [LANES*SUM_W-1:0] row_sum;  // stage P_ACC
    mlp_mac_array #(.LANES(LANES), .KW(KW), .TREE_PER_STAGE(TREE_PER_STAGE)) u_mac (
        .clk(ap_clk), .in_w(w_op), .in_a(a_op), .in_k(p_k[P_MUL]), .out_sum(row_sum)
    );

    // ---------------------------------------------------------------- stage P_ACC: accumulate
    // The bias and the rounding term 2^(s-1) start a group's accumulator.
    logic [LANES*ACC_W-1:0] bias_round, acc;
    always_ff @(posedge ap_clk) begin : accumulate
        logic [ACC_W-1:0] round;
        round = p_shift[P_ACC-1] == 0 ? '0 : ACC_W'(1) << (p_shift[P_ACC-1] - 1);
        for (int r = 0; r < LANES; r++)  // stage P_ACC - 1
            bias_round[ACC_W*r +: ACC_W] <= ACC_W'($signed(b_q[32*r +: 32])) + round;
        if (p_valid[P_ACC])
            for (int r = 0; r < LANES; r++)
                acc[ACC_W*r +: ACC_W] <= (p_first[P_ACC] ? bias_round[ACC_W*r +: ACC_W] : acc[ACC_W*r +: ACC_W])
                                       + ACC_W'($signed(row_sum[SUM_W*r +: SUM_W]));
    end

    // ---------------------------------------------------------------- stages P_SH1..P_SAT: requantize
    logic [LANES*ACC_W-1:0] sh1, sh2;
    logic [LANES*16-1:0]    y;
    always_ff @(posedge ap_clk) begin : requantize
        logic signed [ACC_W-1:0] z;
        logic [15:0] v;
        for (int r = 0; r < LANES; r++) begin
            sh1[ACC_W*r +: ACC_W] <= $signed(acc[ACC_W*r +: ACC_W]) >>> {p_shift[P_SH1][5:3], 3'b000};
            sh2[ACC_W*r +: ACC_W] <= $signed(sh1[ACC_W*r +: ACC_W]) >>> p_shift[P_SH2][2:0];
            z = $signed(sh2[ACC_W*r +: ACC_W]);
            if (&z[ACC_W-1:15] || ~|z[ACC_W-1:15]) v = z[15:0];          // fits int16
            else v = z[ACC_W-1] ? 16'h8000 : 16'h7fff;                    // saturate
            if (p_relu[P_SAT] && v[15]) v = 16'd0;
            y[16*r +: 16] <= v;
        end
    end

    // ---------------------------------------------------------------- stage P_ROT: onto the banks
    // Row r of a group is neuron row + r, in bank (row + r) % LANES of the group's one word.
    always_ff @(posedge ap_clk) begin : rotate
        logic [LOG2P-1:0] rr;
        logic put;
        for (int b = 0; b < LANES; b++) begin
            rr = LOG2P'(b) - p_off[P_ROT];
            put = ap_rst_n && p_valid[P_ROT] && p_last[P_ROT] && (LOG2P+1)'(rr) < p_nrows[P_ROT];
            xw_we[b] <= put && !p_out[P_ROT];
            obw_we[b] <= put && p_out[P_ROT];
            xw_data[16*b +: 16] <= y[16*rr +: 16];
        end
        xw_addr <= p_waddr[P_ROT];
    end
    wire group_written = p_valid[P_WRITE] && p_last[P_WRITE];  // lands at the end of this cycle

    // ---------------------------------------------------------------- output stream and head
    // Stages, all moving together when the stream takes a word or the last stage is empty (o_adv):
    //   o1: the output buffer's banks read at the word's address (block or LUT RAM);
    //   o2: that read registered;  o3: the word (a value, the argmax after a RAW head's values, or an
    //   IDENTITY word);  o4: the two tanh table entries around it (block RAM);  o5: those registered;
    //   o6: the slope T[k+1] - T[k];  o7: the interpolation product;  o8: the word on the stream
    //   (tdata/tlast).
    logic [15:0] tanh_lut [1025];
    initial $readmemh(TANH_MEMH, tanh_lut);

    localparam logic [1:0] K_VALUE = 2'd0, K_ARGMAX = 2'd1, K_WORD = 2'd2;  // what a stream word is
    logic [15:0]        o_idx;       // next word of the observation being sent
    logic [15:0]        o_m;         // values per observation (the last layer's m)
    logic [15:0]        o_last_idx;  // index of an observation's last word (o_m - 1, or o_m with the argmax)
    logic [31:0]        out_left;    // observations not yet fully requested
    logic signed [15:0] o_max;       // running maximum of the values that have left o3, and its index
    logic [15:0]        o_arg;
    logic [2:0]         id_idx;      // IDENTITY (mode 2): lanes, max_width, max_layers, status

    logic [8:1]         o_valid;
    logic [3:1]         o_last;
    logic [3:1][1:0]    o_kind;
    logic [3:1][15:0]   o_pos;       // value index (o1..o3), or the IDENTITY word
    logic [3:1][LOG2P-1:0] o_bank;
    logic [LANES*16-1:0] o_vec;      // o2
    logic [8:4]         o_lastq;
    logic [7:4]         o_tanh;
    logic signed [15:0] o3_word;
    logic [8:4][15:0]   o_word;
    logic [15:0]        t0_mem, t1_mem;  // o4: table entries (memory outputs)
    logic signed [16:0] t0_q, t1_q;      // o5
    logic [6:5][5:0]    o_frac;
    logic [7:6][16:0]   o_t0;            // T[k], o6 and o7
    logic signed [16:0] o6_slope;
    logic signed [23:0] o7_prod;

    wire o_busy = |o_valid;
    assign o_adv = !o_valid[8] || m_axis_out_tready;
    wire ident_start = op_state == OP_IDLE && op_start && mode_ident;
    wire o_req  = ob_ready && o_adv;                                  // a word of an INFER's results
    wire id_req = op_state == OP_IDENT && id_idx < 3'd4 && o_adv;     // an IDENTITY word
    wire o_req_last = o_idx == o_last_idx;
    wire ident_end = op_state == OP_IDENT && id_idx == 3'd4 && !o_busy;
    assign o_raddr = IAW'(o_idx >> LOG2P);

    // the argmax including the value in o3 (an argmax word follows its observation's values)
    wire o3_value = o_valid[3] && o_kind[3] == K_VALUE;
    wire o3_better = o3_value && (o_pos[3] == 0 || o3_word > o_max);
    wire [15:0] arg_now = o3_better ? o_pos[3] : o_arg;

    always_ff @(posedge ap_clk) begin : output_pipeline
        if (!ap_rst_n || infer_start || ident_start) begin
            o_valid <= '0;
        end else if (o_adv) begin
            o_valid <= {o_valid[7:1], o_req || id_req};
            // o1
            o_last[1] <= id_req ? id_idx == 3'd3 : o_req_last && out_left == 1;
            o_kind[1] <= id_req ? K_WORD : o_idx < o_m ? K_VALUE : K_ARGMAX;
            o_pos[1] <= id_req ? (id_idx == 3'd0 ? 16'(LANES) : id_idx == 3'd1 ? 16'(MAX_WIDTH)
                                : id_idx == 3'd2 ? 16'(MAX_LAYERS) : {14'd0, load_rejected, loaded}) : o_idx;
            o_bank[1] <= LOG2P'(o_idx);
            // o2
            o_last[2] <= o_last[1];
            o_kind[2] <= o_kind[1];
            o_pos[2] <= o_pos[1];
            o_bank[2] <= o_bank[1];
            o_vec <= o_mem;
            // o3
            o_last[3] <= o_last[2];
            o_kind[3] <= o_kind[2];
            o_pos[3] <= o_pos[2];
            o3_word <= o_kind[2] == K_VALUE ? o_vec[16*o_bank[2] +: 16] : o_kind[2] == K_ARGMAX ? arg_now : o_pos[2];
            if (o3_better) begin
                o_max <= o3_word;
                o_arg <= o_pos[3];
            end
            // o4: segment k = (y + 32768) >> 6 of the table and the fraction (y + 32768) & 63
            o_lastq[4] <= o_last[3];
            o_tanh[4] <= cfg_tanh && o_kind[3] == K_VALUE;
            o_word[4] <= o3_word;
            // o5
            o_lastq[5] <= o_lastq[4];
            o_tanh[5] <= o_tanh[4];
            o_word[5] <= o_word[4];
            t0_q <= 17'($signed(t0_mem));
            t1_q <= 17'($signed(t1_mem));
            o_frac[5] <= o_word[4][5:0];
            // o6
            o_lastq[6] <= o_lastq[5];
            o_tanh[6] <= o_tanh[5];
            o_word[6] <= o_word[5];
            o_frac[6] <= o_frac[5];
            o_t0[6] <= t0_q;
            o6_slope <= t1_q - t0_q;
            // o7
            o_lastq[7] <= o_lastq[6];
            o_tanh[7] <= o_tanh[6];
            o_word[7] <= o_word[6];
            o_t0[7] <= o_t0[6];
            o7_prod <= 24'(o6_slope) * $signed({18'd0, o_frac[6]});
            // o8: t = T[k] + (((T[k+1] - T[k]) * r + 32) >> 6)
            o_lastq[8] <= o_lastq[7];
            o_word[8] <= o_tanh[7] ? 16'($signed(o_t0[7]) + 17'((o7_prod + 24'sd32) >>> 6)) : o_word[7];
        end
    end
    always_ff @(posedge ap_clk) begin : tanh_table_read  // o4, a read-enabled block RAM
        if (o_adv) begin
            t0_mem <= tanh_lut[{1'b0, ~o3_word[15], o3_word[14:6]}];
            t1_mem <= tanh_lut[{1'b0, ~o3_word[15], o3_word[14:6]} + 11'd1];
        end
    end
    assign m_axis_out_tvalid = o_valid[8];
    assign m_axis_out_tlast  = o_lastq[8];
    assign m_axis_out_tdata  = o_word[8];

    // ---------------------------------------------------------------- sequencing
    // Blocks that are each the only writer of their registers: the operation FSM (op_state,
    // done/error, `loaded`), the LOAD FSM (mlp_loader), the receiver and the layer engine of an
    // INFER, and the output stream. They talk through the one-cycle events below and mlp_loader's.
    wire infer_start = op_state == OP_IDLE && op_start && mode_infer;
    wire infer_end   = op_state == OP_INFER && out_left == 0 && !o_busy;  // the last word left the pipeline

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

    // receive observations into the input buffer (bank e % LANES, word e / LANES of element e)
    logic [15:0] rx_elem;   // next element of the observation being received
    logic [15:0] rx_elem_last;  // n_0 - 1
    logic [31:0] rx_left;   // observations still to be received
    always_ff @(posedge ap_clk) begin : receiver
        iw_we <= 1'b0;
        if (!ap_rst_n) begin
            rx_full <= 1'b0;
            rx_more <= 1'b0;
        end else if (infer_start) begin
            rx_left <= op_batch;
            rx_more <= op_batch != 0;
            rx_elem_last <= cfg_n[0] - 1;
            rx_elem <= '0;
            rx_full <= 1'b0;
        end else if (op_state == OP_INFER) begin
            if (in_fire) begin
                iw_we <= 1'b1;
                iw_bank <= LOG2P'(rx_elem);
                iw_addr <= IAW'(rx_elem >> LOG2P);
                iw_data <= in_word;
                if (rx_elem == rx_elem_last) begin
                    rx_elem <= '0;
                    rx_left <= rx_left - 1;
                    rx_more <= rx_left != 1;
                    rx_full <= 1'b1;
                end else rx_elem <= rx_elem + 1;
            end
            if (ib_drain) rx_full <= 1'b0;
        end
    end
    assign ib_ready = rx_full && !iw_we;  // the observation's last word has landed too

    // Whether the step of the next cycle may issue: the neurons it reads, up to e_col_end, are
    // written. Judged on this cycle's count, which only grows while a layer reads it (a buffer's
    // count restarts when the layer after next begins), so a write landing now costs at most one
    // cycle, and `fire` comes straight from registers.
    always_ff @(posedge ap_clk) begin : readiness
        logic [15:0] col_end_next;
        col_end_next = !fire ? e_col_end : step_last ? c_cols : e_col_end + c_cols;
        if (e_state == E_LAYER)
            step_ready <= e_l == 0 || x_count_prev >= (16'd1 << cfg_k[e_l]) || x_count_prev >= cfg_n[e_l];
        else
            step_ready <= c_first_layer || x_count_prev >= col_end_next || x_count_prev >= c_n;
    end

    // the engine walks layer by layer, observation after observation
    always_ff @(posedge ap_clk) begin : engine_fsm
        if (!ap_rst_n) begin
            e_state <= E_IDLE;
            ob_busy <= 1'b0;
        end else if (infer_start) begin
            e_l <= '0;
            l_last <= LW'(cfg_nl - 1);
            e_wbase <= '0;
            e_bbase <= '0;
            e_obs_left <= op_batch;
            obs_last <= op_batch == 1;
            e_state <= op_batch == 0 ? E_IDLE : E_LAYER;
            ob_busy <= 1'b0;
        end else if (op_state == OP_INFER) begin
            case (e_state)
                E_LAYER: begin
                    c_k <= cfg_k[e_l];
                    c_n <= cfg_n[e_l];
                    c_m <= cfg_m[e_l];
                    c_rows <= 16'(LANES) >> cfg_k[e_l];
                    c_cols <= 16'd1 << cfg_k[e_l];
                    c_h_last <= cfg_h[e_l] - 1;
                    c_g_last <= cfg_g[e_l] - 1;
                    c_shift <= cfg_shift[e_l];
                    c_relu <= cfg_relu[e_l];
                    c_first_layer <= e_l == 0;
                    c_last_layer <= is_last_layer;
                    e_g <= '0;
                    e_h <= '0;
                    step_first <= 1'b1;
                    step_last <= cfg_h[e_l] == 1;
                    group_last <= cfg_g[e_l] == 1;
                    e_col <= '0;
                    e_col_end <= 16'd1 << cfg_k[e_l];
                    e_row <= '0;
                    e_waddr <= e_wbase;
                    e_baddr <= e_bbase;
                    if (layer_go) begin
                        e_state <= E_RUN;
                        if (is_last_layer) ob_busy <= 1'b1;
                    end
                end
                E_RUN: if (fire) begin
                    e_waddr <= e_waddr + 1;
                    // the flags of the next step, from the counters' next values
                    if (step_last) begin
                        e_h <= '0;
                        step_first <= 1'b1;
                        step_last <= c_h_last == 0;
                        group_last <= e_g + 1 == c_g_last;
                        e_col <= '0;
                        e_col_end <= c_cols;
                        e_g <= e_g + 1;
                        e_row <= e_row + c_rows;
                        e_baddr <= e_baddr + 1;
                    end else begin
                        e_h <= e_h + 1;
                        step_first <= 1'b0;
                        step_last <= e_h + 1 == c_h_last;
                        e_col <= e_col_end;
                        e_col_end <= e_col_end + c_cols;
                    end
                    if (layer_last) begin
                        if (c_last_layer) begin
                            e_l <= '0;
                            e_wbase <= '0;
                            e_bbase <= '0;
                            e_obs_left <= e_obs_left - 1;
                            obs_last <= e_obs_left == 2;
                            e_state <= obs_last ? E_IDLE : E_LAYER;
                        end else begin
                            e_l <= e_l + 1;
                            e_wbase <= e_wbase + WAW'(REGION);
                            e_bbase <= e_bbase + BAW'(MAX_WIDTH);
                            e_state <= E_LAYER;
                        end
                    end
                end
                default: ;
            endcase
            if (o_req && o_req_last) ob_busy <= 1'b0;  // the stream has read the whole buffer
            if (infer_end) e_state <= E_IDLE;
        end
    end

    // what has been written: neurons per ping-pong buffer, and the output buffer complete
    always_ff @(posedge ap_clk) begin : written
        for (int p = 0; p < 2; p++) begin
            if (e_state == E_LAYER && e_l[0] == 1'(p)) x_count[p] <= '0;  // layer l starts writing X[l % 2]
            else if (group_written && !p_out[P_WRITE] && p_waddr[P_WRITE][IAW] == 1'(p))
                x_count[p] <= x_count[p] + 16'(p_nrows[P_WRITE]);
        end
        if (!ap_rst_n || infer_start) ob_ready <= 1'b0;
        else if (group_written && p_out[P_WRITE] && p_lend[P_WRITE]) ob_ready <= 1'b1;
        else if (o_req && o_req_last) ob_ready <= 1'b0;
    end

    // IDENTITY's words, one per stream advance
    always_ff @(posedge ap_clk) begin : identity_words
        if (!ap_rst_n || ident_start) id_idx <= '0;
        else if (id_req) id_idx <= id_idx + 1;
    end

    // the stream's position in the results
    always_ff @(posedge ap_clk) begin : output_stream
        if (infer_start) begin
            out_left <= op_batch;
            o_idx <= '0;
            o_m <= cfg_m[LW'(cfg_nl - 1)];
            o_last_idx <= cfg_tanh ? cfg_m[LW'(cfg_nl - 1)] - 16'd1 : cfg_m[LW'(cfg_nl - 1)];  // RAW: the argmax is word m
        end else if (o_req) begin
            if (o_req_last) begin
                o_idx <= '0;
                out_left <= out_left - 1;
            end else o_idx <= o_idx + 1;
        end
    end

endmodule
`default_nettype wire
