`default_nettype none
// UART transmitter, 8N1, LSB first, with the phase-accumulator bit clock of uart_rx: each bit lasts
// floor or ceil(CLK_HZ / BAUD) clocks, CLK_HZ / BAUD on average.
module uart_tx #(
    parameter int CLK_HZ = 100_000_000,  // clock frequency
    parameter int BAUD   = 3_000_000     // line rate, bits per second
) (
    input  wire        clk,
    input  wire        rst_n,
    input  wire  [7:0] data,   // the byte to send, taken with valid && ready
    input  wire        valid,
    output logic       ready,  // idle: the next byte is taken at once
    output logic       tx      // the line, idle high
);
    localparam int ACC_W = $clog2(CLK_HZ + BAUD) + 1;

    logic [ACC_W-1:0] acc;
    logic [3:0]       bits_left;  // bits still to send, the current one included
    logic [8:0]       shift;      // stop bit and data, sent from bit 0 after the start bit

    wire tick = acc + ACC_W'(BAUD) >= ACC_W'(CLK_HZ);
    assign ready = bits_left == 4'd0;

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            tx        <= 1'b1;
            bits_left <= '0;
            acc       <= '0;
        end else if (ready) begin
            if (valid) begin
                shift     <= {1'b1, data};
                tx        <= 1'b0;
                bits_left <= 4'd10;
                acc       <= '0;
            end
        end else begin
            acc <= tick ? acc + ACC_W'(BAUD) - ACC_W'(CLK_HZ) : acc + ACC_W'(BAUD);
            if (tick) begin
                bits_left <= bits_left - 4'd1;
                shift     <= {1'b1, shift[8:1]};
                tx        <= bits_left == 4'd1 ? 1'b1 : shift[0];
            end
        end
    end
endmodule

`default_nettype wire
