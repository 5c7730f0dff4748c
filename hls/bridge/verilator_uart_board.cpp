// A UART board under Verilator, wired to a pseudo-terminal: the C++ harness of pearl_uart_top (the
// kernels behind the UART bridge) that pearl_fpga/board/uart_sim.py loads with ctypes. It plays what
// sits around the FPGA on a ULX3S: the clock, the reset, and the FTDI chip, which turns the bytes
// the host writes to its serial port into bits on the FPGA's receive line and the bits of the FPGA's
// transmit line back into bytes. Here the host's serial port is the slave side of a pty, and this
// harness holds the master side, so the host's driver code, its serial transport and pyserial run
// exactly as against a real board.
//
// One thread clocks the model. It runs the clock while anything is happening (a byte on either line,
// a frame in the bridge, a kernel started and its ap_done not yet read back) and for a short while
// after; otherwise it sleeps in poll() on the pty until the host writes. Pausing the clock of an idle
// design changes nothing the host can observe except wall time.
//
// The model is built with --prefix Vpearl_uart_board; PEARL_CYCLES_PER_BIT (-D) is the line's bit
// time in clocks, the design's CLK_HZ / BAUD.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <new>
#include <thread>
#include <vector>

#include "Vpearl_uart_board.h"
#include "verilated.h"

namespace {

constexpr int CYCLES_PER_BIT = PEARL_CYCLES_PER_BIT;
constexpr int QUIET_CYCLES = 64 * CYCLES_PER_BIT;  // clocks run after the last sign of activity
constexpr int BATCH = 256;                         // clocks between two looks at the pty

struct Board {
    VerilatedContext ctx;
    Vpearl_uart_board* top = nullptr;
    int fd = -1;
    std::thread thread;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> cycles{0};
    // host -> FPGA: bytes from the pty, the byte being shifted onto uart_rxd
    std::deque<uint8_t> to_fpga;
    uint16_t rx_frame = 0;
    int rx_bit = -1;  // bit being sent (0 start .. 9 stop), -1 idle
    int rx_left = 0;  // clocks left of it
    // FPGA -> host: uart_txd decoded into bytes
    int tx_bit = -1;  // -1 idle; 0 start .. 9 stop, sampled mid-bit
    int tx_left = 0;
    uint8_t tx_byte = 0;
    std::vector<uint8_t> to_host;
    int quiet_left = 0;
};

void clock(Board& b) {
    Vpearl_uart_board& t = *b.top;
    if (b.rx_bit < 0 && !b.to_fpga.empty()) {
        b.rx_frame = static_cast<uint16_t>(0x200 | (b.to_fpga.front() << 1));  // stop, data, start
        b.to_fpga.pop_front();
        b.rx_bit = 0;
        b.rx_left = CYCLES_PER_BIT;
    }
    t.uart_rxd = b.rx_bit < 0 ? 1 : (b.rx_frame >> b.rx_bit) & 1;
    t.clk = 0;
    t.eval();
    t.clk = 1;
    t.eval();
    ++b.cycles;
    if (b.rx_bit >= 0 && --b.rx_left == 0) {
        b.rx_left = CYCLES_PER_BIT;
        if (++b.rx_bit == 10) b.rx_bit = -1;
    }
    const int line = t.uart_txd;
    if (b.tx_bit < 0) {
        if (!line) {  // a start bit: sample each bit in its middle
            b.tx_bit = 0;
            b.tx_left = CYCLES_PER_BIT / 2;
        }
    } else if (--b.tx_left == 0) {
        b.tx_left = CYCLES_PER_BIT;
        if (b.tx_bit == 0 && line) {
            b.tx_bit = -1;  // a glitch
        } else if (b.tx_bit >= 1 && b.tx_bit <= 8) {
            b.tx_byte = static_cast<uint8_t>((b.tx_byte >> 1) | (line << 7));
            ++b.tx_bit;
        } else if (b.tx_bit == 9) {
            if (line) b.to_host.push_back(b.tx_byte);  // a low stop bit is a framing error: dropped
            b.tx_bit = -1;
        } else {
            ++b.tx_bit;
        }
    }
}

void run(Board* bp) {
    Board& b = *bp;
    uint8_t buf[4096];
    while (!b.stop.load(std::memory_order_relaxed)) {
        ssize_t n = read(b.fd, buf, sizeof buf);
        if (n > 0) b.to_fpga.insert(b.to_fpga.end(), buf, buf + n);
        if (!b.to_host.empty()) {
            ssize_t w = write(b.fd, b.to_host.data(), b.to_host.size());
            if (w > 0) b.to_host.erase(b.to_host.begin(), b.to_host.begin() + w);
        }
        const bool active = b.rx_bit >= 0 || !b.to_fpga.empty() || b.tx_bit >= 0 || b.top->busy;
        if (active) b.quiet_left = QUIET_CYCLES;
        if (!active && b.quiet_left <= 0) {
            pollfd p{b.fd, POLLIN, 0};
            if (b.to_host.empty() && (poll(&p, 1, 20) < 0 || (p.revents & (POLLHUP | POLLERR)))) usleep(20000);
            continue;
        }
        for (int i = 0; i < BATCH; ++i) clock(b);
        b.quiet_left -= BATCH;
    }
}

}  // namespace

extern "C" {

// Start the board on the pty master `fd` (made non-blocking): reset, then the clock thread.
void* pearl_ub_start(int fd) {
    Board* b = new (std::nothrow) Board();
    if (!b) return nullptr;
    b->ctx.randReset(0);
    b->top = new Vpearl_uart_board(&b->ctx, "board");
    b->fd = fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    b->top->uart_rxd = 1;
    b->top->rst_n = 0;
    for (int i = 0; i < 16; ++i) clock(*b);
    b->top->rst_n = 1;
    b->thread = std::thread(run, b);
    return b;
}

// Stop the clock thread and free the model (the pty is the caller's to close).
void pearl_ub_stop(void* h) {
    Board* b = static_cast<Board*>(h);
    if (!b) return;
    b->stop = true;
    b->thread.join();
    b->top->final();
    delete b->top;
    delete b;
}

uint64_t pearl_ub_cycles(void* h) { return static_cast<Board*>(h)->cycles.load(); }

}  // extern "C"
