// Behavioural simulation model of the Lattice ECP5 DP16KD block RAM (16 Kbit, true dual port) for the
// gate-level simulation of the kernels' netlists (pearl_fpga/hw/netlist.py). Yosys ships DP16KD only as a
// black box (share/ecp5/cells_sim.v: parameters, no behaviour, its outputs undriven), so a netlist simulated
// with it reads zeros from every block RAM. Written from Lattice's ECP5 memory usage guide (TN1264) and
// the way Yosys maps memories onto DP16KD (share/lattice/brams_map_16kd.v, brams_16kd.txt):
// - the array is 1024 rows of 18 bits; INITVAL_xx holds rows 16*xx .. 16*xx+15, row i in bits [20*i +: 18];
// - a x18 port addresses a row with AD[13:4] and writes the bytes [8:0] / [17:9] that AD[0] / AD[1] enable;
//   a x9 port addresses a 9-bit word with AD[13:3] (row AD[13:4], upper half when AD[3]);
// - CE and a matching CS[2:0] (CSDECODE) enable the port; a read (or a write, per WRITEMODE: NORMAL keeps
//   the read latch, WRITETHROUGH shows the new word, READBEFOREWRITE the old one) lands in the read latch
//   at the clock edge; REGMODE OUTREG adds the output register (OCE); RST clears both (RESETMODE).
// Widths 1, 2 and 4 (whose packing into a row this model does not know) are refused at elaboration, so a
// netlist that uses them fails loudly instead of reading wrong bits.
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
        if ((DATA_WIDTH_A != 9 && DATA_WIDTH_A != 18) || (DATA_WIDTH_B != 9 && DATA_WIDTH_B != 18))
            $fatal(1, "DP16KD model: DATA_WIDTH_A=%0d, DATA_WIDTH_B=%0d; only widths 9 and 18 are modelled", DATA_WIDTH_A, DATA_WIDTH_B);
        for (r = 0; r < 1024; r = r + 1) mem[r] = INIT_ALL[320 * (r / 16) + 20 * (r % 16) +: 18];
    end

    // ---------------------------------------------------------------- port A
    wire [13:0] ada = {ADA13, ADA12, ADA11, ADA10, ADA9, ADA8, ADA7, ADA6, ADA5, ADA4, ADA3, ADA2, ADA1, ADA0};
    wire [17:0] dia = {DIA17, DIA16, DIA15, DIA14, DIA13, DIA12, DIA11, DIA10, DIA9, DIA8, DIA7, DIA6, DIA5, DIA4, DIA3, DIA2, DIA1, DIA0};
    wire        clka = CLKAMUX == "INV" ? ~CLKA : CLKA;
    wire        ona = CEA && {CSA2, CSA1, CSA0} == cs_code(CSDECODE_A);
    wire [9:0]  rowa = ada[13:4];                      // x18: the row; x9: the row of the 9-bit word
    wire        halfa = DATA_WIDTH_A == 9 && ada[3];   // x9: the upper 9 bits of the row
    wire [1:0]  bea = DATA_WIDTH_A == 18 ? ada[1:0] : {halfa, !halfa};  // x18: byte enables on AD[1:0]
    wire [17:0] wdataa = DATA_WIDTH_A == 18 ? dia : {dia[8:0], dia[8:0]};
    wire [17:0] mergeda = {bea[1] ? wdataa[17:9] : mem[rowa][17:9], bea[0] ? wdataa[8:0] : mem[rowa][8:0]};
    reg  [17:0] latcha = 18'd0, orega = 18'd0;
    reg         half_qa = 1'b0;                          // x9: the half the latch's word is in         // the read latch and the optional output register
    wire [17:0] worda = DATA_WIDTH_A == 18 ? latcha : {9'd0, half_qa ? latcha[17:9] : latcha[8:0]};
    wire [17:0] outa = REGMODE_A == "OUTREG" ? orega : worda;
    assign {DOA17, DOA16, DOA15, DOA14, DOA13, DOA12, DOA11, DOA10, DOA9, DOA8, DOA7, DOA6, DOA5, DOA4, DOA3, DOA2, DOA1, DOA0} = outa;

    task automatic clock_a;
        if (ona) begin
            if (WEA) begin
                if (WRITEMODE_A == "WRITETHROUGH") latcha <= mergeda;
                else if (WRITEMODE_A == "READBEFOREWRITE") latcha <= mem[rowa];
                mem[rowa] <= mergeda;                   // NORMAL: the read latch keeps its word
            end else latcha <= mem[rowa];
            half_qa <= halfa;
        end
        if (OCEA) orega <= worda;
    endtask
    generate if (RESETMODE == "ASYNC") begin : g_reset_a
        always @(posedge clka or posedge RSTA)
            if (RSTA) begin latcha <= 18'd0; orega <= 18'd0; end
            else clock_a();
    end else begin : g_reset_a
        always @(posedge clka)                          // a synchronous reset blocks the port's write
            if (RSTA) begin latcha <= 18'd0; orega <= 18'd0; end
            else clock_a();
    end endgenerate

    // ---------------------------------------------------------------- port B
    wire [13:0] adb = {ADB13, ADB12, ADB11, ADB10, ADB9, ADB8, ADB7, ADB6, ADB5, ADB4, ADB3, ADB2, ADB1, ADB0};
    wire [17:0] dib = {DIB17, DIB16, DIB15, DIB14, DIB13, DIB12, DIB11, DIB10, DIB9, DIB8, DIB7, DIB6, DIB5, DIB4, DIB3, DIB2, DIB1, DIB0};
    wire        clkb = CLKBMUX == "INV" ? ~CLKB : CLKB;
    wire        onb = CEB && {CSB2, CSB1, CSB0} == cs_code(CSDECODE_B);
    wire [9:0]  rowb = adb[13:4];                      // x18: the row; x9: the row of the 9-bit word
    wire        halfb = DATA_WIDTH_B == 9 && adb[3];   // x9: the upper 9 bits of the row
    wire [1:0]  beb = DATA_WIDTH_B == 18 ? adb[1:0] : {halfb, !halfb};  // x18: byte enables on AD[1:0]
    wire [17:0] wdatab = DATA_WIDTH_B == 18 ? dib : {dib[8:0], dib[8:0]};
    wire [17:0] mergedb = {beb[1] ? wdatab[17:9] : mem[rowb][17:9], beb[0] ? wdatab[8:0] : mem[rowb][8:0]};
    reg  [17:0] latchb = 18'd0, oregb = 18'd0;
    reg         half_qb = 1'b0;                          // x9: the half the latch's word is in         // the read latch and the optional output register
    wire [17:0] wordb = DATA_WIDTH_B == 18 ? latchb : {9'd0, half_qb ? latchb[17:9] : latchb[8:0]};
    wire [17:0] outb = REGMODE_B == "OUTREG" ? oregb : wordb;
    assign {DOB17, DOB16, DOB15, DOB14, DOB13, DOB12, DOB11, DOB10, DOB9, DOB8, DOB7, DOB6, DOB5, DOB4, DOB3, DOB2, DOB1, DOB0} = outb;

    task automatic clock_b;
        if (onb) begin
            if (WEB) begin
                if (WRITEMODE_B == "WRITETHROUGH") latchb <= mergedb;
                else if (WRITEMODE_B == "READBEFOREWRITE") latchb <= mem[rowb];
                mem[rowb] <= mergedb;                   // NORMAL: the read latch keeps its word
            end else latchb <= mem[rowb];
            half_qb <= halfb;
        end
        if (OCEB) oregb <= wordb;
    endtask
    generate if (RESETMODE == "ASYNC") begin : g_reset_b
        always @(posedge clkb or posedge RSTB)
            if (RSTB) begin latchb <= 18'd0; oregb <= 18'd0; end
            else clock_b();
    end else begin : g_reset_b
        always @(posedge clkb)                          // a synchronous reset blocks the port's write
            if (RSTB) begin latchb <= 18'd0; oregb <= 18'd0; end
            else clock_b();
    end endgenerate
endmodule
`default_nettype wire
