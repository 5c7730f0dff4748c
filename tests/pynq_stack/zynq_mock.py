"""A Zynq board for the real pynq package, with the HLS C++ tops (compiled by g++) as its kernels.

`MockZynq` is a `pynq.Device`, as PYNQ's own tests build theirs: it has the REGISTER_RW capability,
so pynq's MMIO (used by DefaultIP and by the AXI DMA driver) calls `read_registers` /
`write_registers`, which this board forwards by address: a kernel IP's range goes to its
`CSimTransport` (the register file and ap_ctrl_hs of the HLS top), an AXI DMA's range to a model of
the DMA's simple mode (PG021) that moves bytes between the buffers `allocate` hands out (a
simulated DDR, addressed by physical address) and the kernel's streams. An S2MM transfer ends at the
kernel's tlast, as on the board. Overlay metadata comes from the .hwh by pynq's own parser
(pynqmetadata's RuntimeMetadataParser, what pynq's Zynq device uses for a full bitstream).
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path

import numpy as np
import pynq
from pynqmetadata.frontends import Metadata
from pynqmetadata.views.runtime import RuntimeMetadataParser

from pearl_fpga.board.csim_transport import CSimTransport
from pearl_fpga.board.manifest import load_manifest
from pearl_fpga.spec.kernels import KERNELS

from pearl_fpga.board.zynq_design import axi_dma_config
from zynq_hwh import SPAN, ZYNQ7, blocks, family

# Where pynq's allocator puts buffers: low DDR on a Zynq-7000; above 4 GB on a Zynq UltraScale+ (the
# ZCU104's second DDR region, 0x8_0000_0000), where only a 64-bit DMA reaches them.
DDR_BASE = {32: 0x1000_0000, 64: 0x8_0000_0000}

# AXI DMA registers (PG021, simple mode): offsets of the MM2S channel; S2MM is the same + 0x30
DMACR, DMASR, ADDR, ADDR_MSB, LENGTH = 0x00, 0x04, 0x18, 0x1C, 0x28
RUN, RESET = 0x1, 0x4
HALTED, IDLE, IOC_IRQ = 0x1, 0x2, 0x1000


class Ddr:
    """The board's DDR as the buffers allocated on it: physical address -> bytes. Allocation is
    thread-safe, as the board's allocator is (the tabular partitioned mode drives its kernel
    instances from several threads)."""

    def __init__(self, base: int = DDR_BASE[32]) -> None:
        self._next = base
        self._buffers: list[weakref.ref] = []
        self._lock = threading.Lock()

    def allocate(self, device: pynq.Device, shape, dtype) -> pynq.buffer.PynqBuffer:
        with self._lock:
            buf = pynq.buffer.PynqBuffer(shape, dtype, device=device, device_address=self._next,
                                         bo=len(self._buffers), coherent=False)
            self._next += -(-buf.nbytes // 4096) * 4096
            self._buffers.append(weakref.ref(buf))
        return buf

    def _view(self, address: int, nbytes: int) -> np.ndarray:
        with self._lock:
            live = [ref() for ref in self._buffers]
        for buf in live:
            if buf is not None and buf.device_address <= address and address + nbytes <= buf.device_address + buf.nbytes:
                start = address - buf.device_address
                return buf.view(np.uint8).reshape(-1)[start:start + nbytes]
        raise AssertionError(f"DMA access to {nbytes} bytes at {address:#x} outside every allocated buffer")

    def read(self, address: int, nbytes: int) -> bytes:
        return self._view(address, nbytes).tobytes()

    def write(self, address: int, data: bytes) -> None:
        self._view(address, len(data))[:] = np.frombuffer(data, dtype=np.uint8)


class AxiDma:
    """An AXI DMA in simple mode between the DDR and one kernel's streams.

    As on the board, a transfer is not done when its length is written: MM2S hands its bytes to the
    kernel and S2MM takes the kernel's output only after `polls` reads of the channel's status (the
    stream's back-pressure, as many status reads as the driver needs to see it), and an error set with
    `fail(channel, bits)` ends the next transfer on that channel with those DMASR error bits (PG021:
    DMAIntErr 0x10, DMASlvErr 0x20, DMADecErr 0x40), halting it until a reset. Addresses are
    `addr_width` bits (the c_addr_width of pearl_fpga.board.zynq_design.axi_dma_config, the .hwh's):
    a 32-bit DMA has no MSB address register, so an address above 4 GB cannot be reached."""

    def __init__(self, ddr: Ddr, kernel: CSimTransport, addr_width: int = 32, polls: int = 0) -> None:
        self.ddr, self.kernel, self.addr_width, self.polls = ddr, kernel, addr_width, polls
        self.log: list[tuple[str, int]] = []  # (channel, bytes) of every finished transfer
        self.failures: dict[int, int] = {}  # channel -> DMASR error bits of its next transfer
        self.resets = 0
        self._reset()

    def _reset(self) -> None:
        self.regs = {0x00: 0, 0x30: 0}  # DMACR of each channel
        self.status = {0x00: HALTED, 0x30: HALTED}
        self.addr = {0x00: 0, 0x30: 0}
        self.addr_msb = {0x00: 0, 0x30: 0}
        self.length = {0x00: 0, 0x30: 0}
        self.pending = {0x00: -1, 0x30: -1}  # status reads left before the open transfer moves; -1: none open

    def fail(self, channel: str, bits: int) -> None:
        self.failures[0x00 if channel == "mm2s" else 0x30] = bits

    def write(self, offset: int, value: int) -> None:
        ch, reg = (0x30, offset - 0x30) if offset >= 0x30 else (0x00, offset)
        if reg == DMACR:
            if value & RESET:  # PG021: a soft reset of either channel resets the whole DMA; the bit clears itself
                self._reset()
                self.resets += 1
                return
            self.regs[ch] = value
            if value & RUN:
                self.status[ch] &= ~HALTED
            else:
                self.status[ch] |= HALTED
        elif reg == DMASR:
            self.status[ch] &= ~(value & IOC_IRQ)  # write 1 to clear
        elif reg == ADDR:
            self.addr[ch] = value
        elif reg == ADDR_MSB:
            self.addr_msb[ch] = value if self.addr_width > 32 else 0  # no such register on a 32-bit DMA
        elif reg == LENGTH:
            assert not self.status[ch] & HALTED, "a transfer on a halted channel"
            assert self.pending[ch] < 0, "a transfer on a busy channel"
            self.length[ch] = value
            self.status[ch] &= ~IDLE
            self.pending[ch] = self.polls
            if ch == 0x00:
                self._progress(ch)

    def _address(self, ch: int) -> int:
        address = self.addr[ch] | (self.addr_msb[ch] << 32)
        assert address >> self.addr_width == 0
        return address

    def _progress(self, ch: int) -> None:
        """One status read's worth of progress on the channel's open transfer."""
        if self.pending[ch] < 0:
            return
        if self.pending[ch] > 0:
            self.pending[ch] -= 1
            return
        if ch in self.failures:
            self.status[ch] |= self.failures.pop(ch) | HALTED  # PG021: an error halts the channel
            self.pending[ch] = -1
            return
        if ch == 0x00:  # MM2S: the kernel's input stream takes the buffer (tlast on its last word)
            self.kernel.send(np.frombuffer(self.ddr.read(self._address(ch), self.length[ch]), dtype=np.uint8))
            self._finish(0x00, self.length[ch])
        elif self.pending[0x00] < 0:  # S2MM, once the kernel has its input: what it has produced, up to the
            # transfer's length or its next tlast
            data = self.kernel.drain(self.length[ch] // self.kernel.out_word_bytes)
            if data:
                self.ddr.write(self._address(ch), data)
                self._finish(0x30, len(data))

    def _finish(self, ch: int, nbytes: int) -> None:
        self.length[ch] = nbytes
        self.pending[ch] = -1
        self.status[ch] |= IDLE | IOC_IRQ
        self.log.append(("mm2s" if ch == 0 else "s2mm", nbytes))

    def read(self, offset: int) -> int:
        ch, reg = (0x30, offset - 0x30) if offset >= 0x30 else (0x00, offset)
        if reg == DMASR:
            self._progress(ch)
        return {DMACR: self.regs[ch], DMASR: self.status[ch], ADDR: self.addr[ch], ADDR_MSB: self.addr_msb[ch],
                LENGTH: self.length[ch]}.get(reg, 0)


class RegisterBank:
    """Plain read/write registers of the PS (its clock control), with their power-up values."""

    def __init__(self, values: dict[int, int]) -> None:
        self.regs = dict(values)

    def read(self, offset: int) -> int:
        return self.regs.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        self.regs[offset] = value


class Zynq7Clocks:
    """The SLCR registers pynq's clock driver uses on a Zynq-7000, with a PYNQ-Z2's PLLs at power-up
    (50 MHz reference: IO PLL x20 = 1 GHz, ARM PLL x26, DDR PLL x21)."""

    arch = "armv7l"  # pynq.ps.ZYNQ_ARCH

    def __init__(self) -> None:
        self.slcr = RegisterBank({0x100: 26 << 12, 0x104: 21 << 12, 0x108: 20 << 12, 0x120: 2 << 8})
        self.banks = [(0xF800_0000, 0x200, self.slcr)]

    def fclk0_mhz(self) -> float:
        """FCLK0 as the registers set it: IO PLL / DIVISOR0 / DIVISOR1 (FPGA0_CLK_CTRL)."""
        ctrl = self.slcr.read(0x170)
        return 50.0 * ((self.slcr.read(0x108) >> 12) & 0x7F) / (((ctrl >> 8) & 0x3F) * ((ctrl >> 20) & 0x3F))


class ZynqUsClocks:
    """The CRL_APB / CRF_APB registers pynq's clock driver uses on a Zynq UltraScale+, with the PLLs at
    power-up from the 33.333 MHz reference: IO PLL x72 / 2 = 1.2 GHz, APU PLL x72 / 2, CPU at / 1."""

    arch = "aarch64"  # pynq.ps.ZU_ARCH
    PLL_1200 = (72 << 8) | (1 << 16)  # FBDIV 72, DIV2, source 0 (the reference)

    def __init__(self) -> None:
        self.crl = RegisterBank({0x20: self.PLL_1200, 0x30: self.PLL_1200})
        self.crf = RegisterBank({0x20: self.PLL_1200, 0x2C: self.PLL_1200, 0x38: self.PLL_1200, 0x60: 1 << 8})
        self.banks = [(0xFF5E_0000, 0x100, self.crl), (0xFD1A_0000, 0x100, self.crf)]

    def fclk0_mhz(self) -> float:
        """PL clock 0 as the registers set it: IO PLL / DIVISOR0 / DIVISOR1 (PL0_REF_CTRL)."""
        pll, ctrl = self.crl.read(0x20), self.crl.read(0xC0)
        pll_mhz = 33.333 * ((pll >> 8) & 0x7F) / (2 if pll >> 16 & 1 else 1)
        return pll_mhz / (((ctrl >> 8) & 0x3F) * ((ctrl >> 16) & 0x3F))


class MockZynq(pynq.Device):
    """The board of one build folder (manifest.json, the .bit placeholder and its .hwh)."""

    def __init__(self, folder: Path) -> None:
        super().__init__("mock_zynq")
        self.capabilities = {"REGISTER_RW": True}
        self.manifest = load_manifest(folder / "manifest.json")
        self.clocks = Zynq7Clocks() if family(self.manifest.part) is ZYNQ7 else ZynqUsClocks()
        self.arch = self.clocks.arch  # pynq's clock driver picks the PS by it
        widths = {axi_dma_config(k, self.manifest.part)["c_addr_width"] for k in self.manifest.kernels}
        self.addr_width = widths.pop()
        self.ddr = Ddr(DDR_BASE[self.addr_width])
        self.downloads: list[str] = []
        self._program()

    def _program(self) -> None:
        """The programmable logic as a download leaves it: every kernel and DMA fresh (idle, empty)."""
        self.kernels: dict[str, CSimTransport] = {}
        self.dmas: dict[str, AxiDma] = {}
        self.ranges: list[tuple[int, int, object]] = list(self.clocks.banks)
        pending = None
        for b in blocks(self.manifest):
            if not b.is_dma:
                params = self.manifest.kernels[b.kernel].parameters
                defines = {macro: params[p] for p, macro in KERNELS[b.kernel].hls_macros.items() if p in params}
                pending = self.kernels[b.name] = CSimTransport(b.kernel, defines)
                self.ranges.append((b.base, SPAN, pending))
            else:
                self.dmas[b.name] = AxiDma(self.ddr, pending, self.addr_width)
                self.ranges.append((b.base, SPAN, self.dmas[b.name]))

    # -- what pynq asks of a device
    def get_bitfile_metadata(self, bitfile_name: str, partial: bool = False):
        parser = RuntimeMetadataParser(Metadata(input=Path(bitfile_name).with_suffix(".hwh")))
        parser.refresh_hierarchy_dict()
        return parser

    def download(self, bitstream, parser=None) -> None:
        self.downloads.append(str(bitstream.bitfile_name))
        self._program()  # programming the PL resets every kernel and DMA

    def allocate(self, shape, dtype, **kwargs):
        return self.ddr.allocate(self, shape, dtype)

    def flush(self, bo, offset, vaddr, nbytes) -> None:
        pass  # the simulated DDR is the buffers themselves

    def invalidate(self, bo, offset, vaddr, nbytes) -> None:
        pass

    def _target(self, address: int, nbytes: int):
        for base, span, target in self.ranges:
            if base <= address < base + span:
                assert address + nbytes <= base + span and nbytes == 4, f"a {nbytes}-byte access at {address:#x}"
                return target, address - base
        raise AssertionError(f"no IP at {address:#x}")

    def read_registers(self, address: int, length: int) -> bytes:
        target, offset = self._target(address, length)
        return int(target.read(offset)).to_bytes(4, "little")

    def write_registers(self, address: int, data) -> None:
        target, offset = self._target(address, len(data))
        target.write(offset, int.from_bytes(bytes(data), "little"))
