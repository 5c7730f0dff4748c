// Behavioural simulation model of the Lattice ECP5 DP16KD block RAM (16 Kbit, true dual port) for the
// gate-level simulation of the kernels' netlists (pearl_fpga/hw/netlist.py). Yosys ships DP16KD only as a
// black box (share/ecp5/cells_sim.v: parameters, no behaviour, its outputs undriven), so a netlist simulated
// with it reads zeros from every block RAM. Written from Lattice's ECP5 memory usage guide (TN1264) and
// the way Yosys maps memories onto DP16KD (share/lattice/brams_map_16kd.v, brams_16kd.txt):
// - the array is 1024 rows of 18 bits; INITVAL_xx holds rows 16*xx .. 16*xx+15, row i in bits [20*i +: 18];
// - a x18 port addresses a row with AD[13:4] and writes the bytes [8:0] / [17:9] that AD[0] / AD[1] enable;
//   a x9 port addresses a 9-bit word with AD[13:3] (row AD[13:4], upper half when AD[3]);
// - x36 is the pseudo-dual-port mode (Yosys's $__PDPW16KD_, a DP16KD with a width of 36): a 36-bit word is
//   the row pair AD[13:5],0 (bits [17:0]) and AD[13:5],1 (bits [35:18]). Port A is then the write port: its
//   data is DIA (low) and DIB (high), its byte enables AD[3:0]. Port B is the read port: a x36 read puts
//   the low row on DOA and the high row on DOB, a narrower one reads on DOB as in true dual port;
// - CE and a matching CS[2:0] (CSDECODE) enable the port; a read (or a write, per WRITEMODE: NORMAL keeps
//   the read latch, WRITETHROUGH shows the new word, READBEFOREWRITE the old one) lands in the read latch
//   at the clock edge; REGMODE OUTREG adds the output register (OCE); RST clears both (RESETMODE).
// Widths 1, 2 and 4 (whose packing into a row this model does not know) are refused at elaboration, and so
// is a x36 read on port A or a x36 write on port B, so a netlist that uses them fails loudly instead of
// reading wrong bits.
`default_nettype none
/* verilator lint_off WIDTHEXPAND */  // parameters are strings of the vendor's spellings
module DP16KD (
    input  wire DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0,
    input  wire ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0,
    input  wire CEA, OCEA, CLKA, WEA, RSTA,
    input  wire CSA2, CSA1, CSA0,
    output wire DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0,
    input  wire DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0,
    input  wire ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0,
    input  wire CEB, OCEB, CLKB, WEB, RSTB,
    input  wire CSB2, CSB1, CSB0,
    output wire DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0
);
    parameter DATA_WIDTH_A = 18;
    parameter DATA_WIDTH_B = 18;
    parameter REGMODE_A = "NOREG";
    parameter REGMODE_B = "NOREG";
    parameter RESETMODE = "SYNC";
    parameter ASYNC_RESET_RELEASE = "SYNC";
    parameter CSDECODE_A = "0b000";
    parameter CSDECODE_B = "0b000";
    parameter WRITEMODE_A = "NORMAL";
    parameter WRITEMODE_B = "NORMAL";
    parameter CLKAMUX = "CLKA";
    parameter CLKBMUX = "CLKB";
    parameter GSR = "ENABLED";
    parameter INIT_DATA = "STATIC";
    parameter WID = 0;
    parameter [319:0] INITVAL_00 = 320'h0;
    parameter [319:0] INITVAL_01 = 320'h0;
    parameter [319:0] INITVAL_02 = 320'h0;
    parameter [319:0] INITVAL_03 = 320'h0;
    parameter [319:0] INITVAL_04 = 320'h0;
    parameter [319:0] INITVAL_05 = 320'h0;
    parameter [319:0] INITVAL_06 = 320'h0;
    parameter [319:0] INITVAL_07 = 320'h0;
    parameter [319:0] INITVAL_08 = 320'h0;
    parameter [319:0] INITVAL_09 = 320'h0;
    parameter [319:0] INITVAL_0A = 320'h0;
    parameter [319:0] INITVAL_0B = 320'h0;
    parameter [319:0] INITVAL_0C = 320'h0;
    parameter [319:0] INITVAL_0D = 320'h0;
    parameter [319:0] INITVAL_0E = 320'h0;
    parameter [319:0] INITVAL_0F = 320'h0;
    parameter [319:0] INITVAL_10 = 320'h0;
    parameter [319:0] INITVAL_11 = 320'h0;
    parameter [319:0] INITVAL_12 = 320'h0;
    parameter [319:0] INITVAL_13 = 320'h0;
    parameter [319:0] INITVAL_14 = 320'h0;
    parameter [319:0] INITVAL_15 = 320'h0;
    parameter [319:0] INITVAL_16 = 320'h0;
    parameter [319:0] INITVAL_17 = 320'h0;
    parameter [319:0] INITVAL_18 = 320'h0;
    parameter [319:0] INITVAL_19 = 320'h0;
    parameter [319:0] INITVAL_1A = 320'h0;
    parameter [319:0] INITVAL_1B = 320'h0;
    parameter [319:0] INITVAL_1C = 320'h0;
    parameter [319:0] INITVAL_1D = 320'h0;
    parameter [319:0] INITVAL_1E = 320'h0;
    parameter [319:0] INITVAL_1F = 320'h0;
    parameter [319:0] INITVAL_20 = 320'h0;
    parameter [319:0] INITVAL_21 = 320'h0;
    parameter [319:0] INITVAL_22 = 320'h0;
    parameter [319:0] INITVAL_23 = 320'h0;
    parameter [319:0] INITVAL_24 = 320'h0;
    parameter [319:0] INITVAL_25 = 320'h0;
    parameter [319:0] INITVAL_26 = 320'h0;
    parameter [319:0] INITVAL_27 = 320'h0;
    parameter [319:0] INITVAL_28 = 320'h0;
    parameter [319:0] INITVAL_29 = 320'h0;
    parameter [319:0] INITVAL_2A = 320'h0;
    parameter [319:0] INITVAL_2B = 320'h0;
    parameter [319:0] INITVAL_2C = 320'h0;
    parameter [319:0] INITVAL_2D = 320'h0;
    parameter [319:0] INITVAL_2E = 320'h0;
    parameter [319:0] INITVAL_2F = 320'h0;
    parameter [319:0] INITVAL_30 = 320'h0;
    parameter [319:0] INITVAL_31 = 320'h0;
    parameter [319:0] INITVAL_32 = 320'h0;
    parameter [319:0] INITVAL_33 = 320'h0;
    parameter [319:0] INITVAL_34 = 320'h0;
    parameter [319:0] INITVAL_35 = 320'h0;
    parameter [319:0] INITVAL_36 = 320'h0;
    parameter [319:0] INITVAL_37 = 320'h0;
    parameter [319:0] INITVAL_38 = 320'h0;
    parameter [319:0] INITVAL_39 = 320'h0;
    parameter [319:0] INITVAL_3A = 320'h0;
    parameter [319:0] INITVAL_3B = 320'h0;
    parameter [319:0] INITVAL_3C = 320'h0;
    parameter [319:0] INITVAL_3D = 320'h0;
    parameter [319:0] INITVAL_3E = 320'h0;
    parameter [319:0] INITVAL_3F = 320'h0;

    // CSDECODE is a string "0bXYZ": the CS[2:0] value that selects the port
    function automatic [2:0] cs_code(input [39:0] text);
        cs_code = {text[23:16] == "1", text[15:8] == "1", text[7:0] == "1"};
    endfunction

    localparam [64*320-1:0] INIT_ALL = {INITVAL_3F, INITVAL_3E, INITVAL_3D, INITVAL_3C, INITVAL_3B, INITVAL_3A, INITVAL_39, INITVAL_38, INITVAL_37, INITVAL_36, INITVAL_35, INITVAL_34, INITVAL_33, INITVAL_32, INITVAL_31, INITVAL_30, INITVAL_2F, INITVAL_2E, INITVAL_2D, INITVAL_2C, INITVAL_2B, INITVAL_2A, INITVAL_29, INITVAL_28, INITVAL_27, INITVAL_26, INITVAL_25, INITVAL_24, INITVAL_23, INITVAL_22, INITVAL_21, INITVAL_20, INITVAL_1F, INITVAL_1E, INITVAL_1D, INITVAL_1C, INITVAL_1B, INITVAL_1A, INITVAL_19, INITVAL_18, INITVAL_17, INITVAL_16, INITVAL_15, INITVAL_14, INITVAL_13, INITVAL_12, INITVAL_11, INITVAL_10, INITVAL_0F, INITVAL_0E, INITVAL_0D, INITVAL_0C, INITVAL_0B, INITVAL_0A, INITVAL_09, INITVAL_08, INITVAL_07, INITVAL_06, INITVAL_05, INITVAL_04, INITVAL_03, INITVAL_02, INITVAL_01, INITVAL_00};
    reg [17:0] mem [0:1023];
    integer r;
    initial begin
        if ((DATA_WIDTH_A != 9 && DATA_WIDTH_A != 18 && DATA_WIDTH_A != 36) ||
            (DATA_WIDTH_B != 9 && DATA_WIDTH_B != 18 && DATA_WIDTH_B != 36))
            $fatal(1, "DP16KD model: DATA_WIDTH_A=%0d, DATA_WIDTH_B=%0d; only widths 9, 18 and 36 are modelled", DATA_WIDTH_A, DATA_WIDTH_B);
        for (r = 0; r < 1024; r = r + 1) mem[r] = INIT_ALL[320 * (r / 16) + 20 * (r % 16) +: 18];
    end

    // ---------------------------------------------------------------- the two ports, [0] A and [1] B
    wire [1:0][13:0] ad = {{ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0},
                           {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0}};
    wire [1:0][17:0] di = {{DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0},
                           {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0}};
    wire [1:0] clk = {CLKBMUX == "INV" ? ~CLKB : CLKB, CLKAMUX == "INV" ? ~CLKA : CLKA};
    wire [1:0] on = {CEB && {CSB2, CSB1, CSB0} == cs_code(CSDECODE_B), CEA && {CSA2, CSA1, CSA0} == cs_code(CSDECODE_A)};
    wire [1:0] we = {WEB, WEA}, oce = {OCEB, OCEA}, rst = {RSTB, RSTA};
    localparam [1:0] X18 = {DATA_WIDTH_B == 18, DATA_WIDTH_A == 18};
    localparam [1:0] X36 = {DATA_WIDTH_B == 36, DATA_WIDTH_A == 36};
    localparam [1:0] OUTREG = {REGMODE_B == "OUTREG", REGMODE_A == "OUTREG"};
    localparam [1:0] THROUGH = {WRITEMODE_B == "WRITETHROUGH", WRITEMODE_A == "WRITETHROUGH"};
    localparam [1:0] BEFORE = {WRITEMODE_B == "READBEFOREWRITE", WRITEMODE_A == "READBEFOREWRITE"};
    wire [1:0][35:0] port_out;                             // each port's word, 36 bits wide in x36
    // x36 on port B: DOA carries the low row of B's word; else each port drives its own pins
    wire [1:0][17:0] out = X36[1] ? {port_out[1][35:18], port_out[1][17:0]} : {port_out[1][17:0], port_out[0][17:0]};
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = out[0];
    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = out[1];

    for (genvar p = 0; p < 2; p = p + 1) begin : g_port
        // x36: the word's low row (its high row is row | 1); x18: the row; x9: the row of the 9-bit word
        wire [9:0]  row = X36[p] ? {ad[p][13:5], 1'b0} : ad[p][13:4];
        wire [9:0]  row_hi = row | 10'd1;
        wire        half = !X18[p] && !X36[p] && ad[p][3];  // x9: the upper 9 bits of the row
        wire [1:0]  be = X18[p] || X36[p] ? ad[p][1:0] : {half, !half};  // byte enables of (the low) row
        wire [1:0]  be_hi = ad[p][3:2];                    // x36: the high row's byte enables
        wire [17:0] wdata = X36[p] ? di[0] : X18[p] ? di[p] : {di[p][8:0], di[p][8:0]};
        wire [17:0] merged = {be[1] ? wdata[17:9] : mem[row][17:9], be[0] ? wdata[8:0] : mem[row][8:0]};
        wire [17:0] merged_hi = {be_hi[1] ? di[1][17:9] : mem[row_hi][17:9], be_hi[0] ? di[1][8:0] : mem[row_hi][8:0]};
        wire [35:0] stored = {X36[p] ? mem[row_hi] : 18'd0, mem[row]};
        wire [35:0] written = {X36[p] ? merged_hi : 18'd0, merged};
        reg  [35:0] latch = 36'd0, oreg = 36'd0;           // the read latch and the optional output register
        reg         half_q = 1'b0;                         // x9: the half the latch's word is in
        wire [35:0] word = X36[p] || X18[p] ? latch : {27'd0, half_q ? latch[17:9] : latch[8:0]};
        assign port_out[p] = OUTREG[p] ? oreg : word;

        task automatic clock_edge;
            if (on[p]) begin
                if (X36[p] && (p == 0) != we[p])
                    $fatal(1, "DP16KD model: a x36 port A only writes and a x36 port B only reads (PDPW16KD)");
                if (we[p]) begin
                    if (THROUGH[p]) latch <= written;
                    else if (BEFORE[p]) latch <= stored;
                    mem[row] <= merged;                    // NORMAL: the read latch keeps its word
                    if (X36[p]) mem[row_hi] <= merged_hi;
                end else latch <= stored;
                half_q <= half;
            end
            if (oce[p]) oreg <= word;
        endtask
        if (RESETMODE == "ASYNC") begin : g_async
            always @(posedge clk[p] or posedge rst[p])
                if (rst[p]) begin latch <= 36'd0; oreg <= 36'd0; end
                else clock_edge();
        end else begin : g_sync
            always @(posedge clk[p])                       // a synchronous reset blocks the port's write
                if (rst[p]) begin latch <= 36'd0; oreg <= 36'd0; end
                else clock_edge();
        end
    end
endmodule
`default_nettype wire
