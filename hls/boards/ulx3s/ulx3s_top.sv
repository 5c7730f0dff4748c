`default_nettype none
// ULX3S (LFE5U-85F-6BG381C) board top: the 25 MHz oscillator through the ECP5 PLL (EHXPLLL) to the
// kernel clock, a power-on reset held until the PLL locks, the kernels behind the UART bridge on the
// FTDI FT231X's serial lines, and the LEDs. Pins: ulx3s.lpf. The clock, the PLL dividers and the
// kernel sizes are parameters that `make bitstream BOARD=ulx3s` sets from bitstreams/catalog.json
// (pearl_fpga/hw/bitstream.py); the defaults here are only for a quick look.
module ulx3s_top #(
    parameter int CLK_HZ           = 50_000_000,  // the kernel clock the PLL makes (the catalog's clock_mhz)
    parameter int BAUD             = 3_000_000,   // UART line rate (FT231X: up to 3 Mbaud)
    parameter int PLL_CLKI_DIV     = 1,           // EHXPLLL: 25 MHz / CLKI_DIV * CLKFB_DIV = CLK_HZ,
    parameter int PLL_CLKFB_DIV    = 2,           //   VCO = CLK_HZ * CLKOP_DIV in 400 .. 800 MHz
    parameter int PLL_CLKOP_DIV    = 12,
    parameter int PLL_CLKOP_CPHASE = 5,           //   (CLKOP_DIV - 1) / 2: no phase shift
    parameter int HAS_REPLAY       = 1,           // kernels built in (1) or left out (0)
    parameter int HAS_MLP          = 1,
    parameter int HAS_TABULAR      = 1,
    parameter int REPLAY_CAPACITY  = 1024,        // kernel sizes (pearl_uart_top's parameters)
    parameter int REPLAY_FANOUT    = 16,
    parameter int MLP_LANES        = 4,
    parameter int MLP_MAX_WIDTH    = 64,
    parameter int MLP_MAX_LAYERS   = 4,
    parameter int MLP_MAX_BATCH    = 1024,
    parameter MLP_TANH_MEMH        = "build/hw/mlp_tanh.memh",  // written by the build, read from the repository root
    parameter int TABULAR_STATES   = 64,
    parameter int TABULAR_ACTIONS  = 4
) (
    input  wire        clk_25mhz,   // on-board oscillator
    input  wire        ftdi_txd,    // FT231X TXD: host -> FPGA
    output logic       ftdi_rxd,    // FT231X RXD: FPGA -> host
    output logic [7:0] led,         // 0 heartbeat, 1 link busy, 2 frame refused, 3..5 kernel running, 7 PLL lock
    output logic       wifi_gpio0   // held high: the ESP32 must not reset the board
);
    assign wifi_gpio0 = 1'b1;

    logic clk, locked;
    (* FREQUENCY_PIN_CLKI="25" *)
    EHXPLLL #(
        .PLLRST_ENA("DISABLED"), .INTFB_WAKE("DISABLED"), .STDBY_ENABLE("DISABLED"), .DPHASE_SOURCE("DISABLED"),
        .OUTDIVIDER_MUXA("DIVA"), .OUTDIVIDER_MUXB("DIVB"), .OUTDIVIDER_MUXC("DIVC"), .OUTDIVIDER_MUXD("DIVD"),
        .CLKI_DIV(PLL_CLKI_DIV), .CLKOP_ENABLE("ENABLED"), .CLKOP_DIV(PLL_CLKOP_DIV),
        .CLKOP_CPHASE(PLL_CLKOP_CPHASE), .CLKOP_FPHASE(0), .FEEDBK_PATH("CLKOP"), .CLKFB_DIV(PLL_CLKFB_DIV)
    ) u_pll (
        .RST(1'b0), .STDBY(1'b0), .CLKI(clk_25mhz), .CLKOP(clk), .CLKFB(clk),
        .PHASESEL0(1'b0), .PHASESEL1(1'b0), .PHASEDIR(1'b1), .PHASESTEP(1'b1), .PHASELOADREG(1'b1),
        .PLLWAKESYNC(1'b0), .ENCLKOP(1'b0), .ENCLKOS(1'b0), .ENCLKOS2(1'b0), .ENCLKOS3(1'b0), .LOCK(locked),
        /* verilator lint_off PINCONNECTEMPTY */
        .CLKOS(), .CLKOS2(), .CLKOS3(), .CLKINTFB(), .INTLOCK(), .REFCLK()
        /* verilator lint_on PINCONNECTEMPTY */
    );

    // reset: held for 2^16 clocks after the PLL locks (and again whenever it loses lock)
    logic [1:0]  lock_sync;
    /* verilator lint_off PROCASSINIT */
    logic [16:0] por = '0;  // ECP5 flip-flops start at their initial value after configuration
    /* verilator lint_on PROCASSINIT */
    wire         rst_n = por[16];
    always_ff @(posedge clk) begin
        lock_sync <= {lock_sync[0], locked};
        if (!lock_sync[1]) por <= '0;
        else if (!por[16]) por <= por + 17'd1;
    end

    logic [2:0] running;
    logic       busy, error;
    pearl_uart_top #(
        .CLK_HZ(CLK_HZ), .BAUD(BAUD), .HAS_REPLAY(HAS_REPLAY), .HAS_MLP(HAS_MLP), .HAS_TABULAR(HAS_TABULAR),
        .REPLAY_CAPACITY(REPLAY_CAPACITY), .REPLAY_FANOUT(REPLAY_FANOUT), .MLP_LANES(MLP_LANES),
        .MLP_MAX_WIDTH(MLP_MAX_WIDTH), .MLP_MAX_LAYERS(MLP_MAX_LAYERS), .MLP_MAX_BATCH(MLP_MAX_BATCH),
        .MLP_TANH_MEMH(MLP_TANH_MEMH), .TABULAR_STATES(TABULAR_STATES), .TABULAR_ACTIONS(TABULAR_ACTIONS)
    ) u_pearl (
        .clk, .rst_n, .uart_rxd(ftdi_txd), .uart_txd(ftdi_rxd), .running, .busy, .error
    );

    // LEDs: a heartbeat, and the link's events stretched to about 80 ms so that they can be seen
    localparam int STRETCH_W = $clog2(CLK_HZ / 12);
    logic [25:0]          beat;
    logic [STRETCH_W-1:0] busy_left, error_left;
    always_ff @(posedge clk) begin
        beat       <= beat + 26'd1;
        busy_left  <= busy ? '1 : busy_left != 0 ? busy_left - 1'b1 : '0;
        error_left <= error ? '1 : error_left != 0 ? error_left - 1'b1 : '0;
    end
    assign led = {lock_sync[1], 1'b0, running, error_left != 0, busy_left != 0, beat[25]};
endmodule

`default_nettype wire
