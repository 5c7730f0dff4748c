`default_nettype none
// UART receiver, 8N1, LSB first. The bit clock is a phase accumulator (BAUD added each clock, a bit
// every CLK_HZ), so any ratio CLK_HZ / BAUD >= 4 works without a rounding error that adds up over a
// byte: the sampling point of every bit stays within one clock of its middle.
//   - rx is synchronized by two flip-flops; a falling edge starts a byte, sampled half a bit later
//     (a start bit that is high again there was a glitch, ignored);
//   - a byte whose stop bit is low is dropped and counted as a framing error (frame_error pulse).
module uart_rx #(
    parameter int CLK_HZ = 100_000_000,  // clock frequency
    parameter int BAUD   = 3_000_000     // line rate, bits per second (CLK_HZ / BAUD >= 4)
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire        rx,           // the line, idle high
    output logic [7:0] data,         // the byte, valid with `valid`
    output logic       valid,        // one-cycle pulse per byte received
    output logic       frame_error,  // one-cycle pulse: a byte with a low stop bit was dropped
    output logic       busy          // a byte is being received
);
    localparam int ACC_W = $clog2(CLK_HZ + BAUD) + 1;
`ifndef SYNTHESIS
    initial if (CLK_HZ < 4 * BAUD) $fatal(1, "uart_rx: CLK_HZ must be at least 4 x BAUD");
`endif

    logic [2:0]       sync;    // two synchronizer stages and the previous value
    logic [ACC_W-1:0] acc;
    logic [3:0]       bit_no;  // 0: start bit, 1..8: data, 9: stop bit
    logic [7:0]       shift;

    wire line = sync[1];
    wire tick = busy && (acc + ACC_W'(BAUD) >= ACC_W'(CLK_HZ));

    always_ff @(posedge clk) begin
        sync        <= {sync[1:0], rx};
        valid       <= 1'b0;
        frame_error <= 1'b0;
        if (!rst_n) begin
            sync   <= 3'b111;
            busy   <= 1'b0;
            acc    <= '0;
            bit_no <= '0;
        end else if (!busy) begin
            if (sync[2] && !line) begin  // falling edge: the start bit; first sample half a bit on
                busy   <= 1'b1;
                acc    <= ACC_W'(CLK_HZ / 2);
                bit_no <= '0;
            end
        end else begin
            acc <= tick ? acc + ACC_W'(BAUD) - ACC_W'(CLK_HZ) : acc + ACC_W'(BAUD);
            if (tick) begin
                bit_no <= bit_no + 4'd1;
                if (bit_no == 4'd0) begin
                    if (line) busy <= 1'b0;  // a glitch, not a start bit
                end else if (bit_no <= 4'd8) begin
                    shift <= {line, shift[7:1]};
                end else begin
                    busy <= 1'b0;
                    if (line) begin
                        data  <= shift;
                        valid <= 1'b1;
                    end else begin
                        frame_error <= 1'b1;
                    end
                end
            end
        end
    end
endmodule

`default_nettype wire
