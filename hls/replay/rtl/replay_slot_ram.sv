`default_nettype none
// One child slot of a replay_level: WORDS x WIDTH bits, one synchronous read port, one write port.
// The read is a bare synchronous read so that synthesis maps it onto the block RAM's own read
// register (DP16KD on ECP5, RAMB on Xilinx); the level registers its output again before any logic
// (the block RAM's clock-to-out is most of a 10 ns cycle). Small levels (the root's children, the
// level below) would waste whole block RAMs: STYLE picks registers (one word: no address) or LUT RAM
// (up to 32 words; a few words of LUT RAM take far fewer cells than a register per bit and a mux).
module replay_slot_ram #(
    parameter int WIDTH  = 64,
    parameter int WORDS  = 1,
    parameter int ADDR_W = 1
) (
    input  wire logic              clk,
    input  wire logic [ADDR_W-1:0] rd_addr,
    output logic [WIDTH-1:0]       rd_data,
    input  wire logic              wr_en,
    input  wire logic [ADDR_W-1:0] wr_addr,
    input  wire logic [WIDTH-1:0]  wr_data
);
    if (WORDS == 1) begin : g_regs
        (* ram_style = "logic" *) logic [WIDTH-1:0] mem [WORDS];
        always_ff @(posedge clk) begin
            if (wr_en) mem[wr_addr] <= wr_data;
            rd_data <= mem[rd_addr];
        end
    end else if (WORDS <= 32) begin : g_lutram
        (* ram_style = "distributed" *) logic [WIDTH-1:0] mem [WORDS];
        always_ff @(posedge clk) begin
            if (wr_en) mem[wr_addr] <= wr_data;
            rd_data <= mem[rd_addr];
        end
    end else begin : g_bram
        (* ram_style = "block" *) logic [WIDTH-1:0] mem [WORDS];
        always_ff @(posedge clk) begin
            if (wr_en) mem[wr_addr] <= wr_data;
            rd_data <= mem[rd_addr];
        end
    end
endmodule

`default_nettype wire
