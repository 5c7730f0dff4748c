"""A hardware handoff (.hwh) of the block design hls/scripts/zynq_bd.tcl builds, for tests.

Vivado writes the .hwh of a real build; no Vivado runs here, so this writes one from the manifest
with what PYNQ reads from it: the PS (processing_system7 on a Zynq-7000, zynq_ultra_ps_e on a Zynq
UltraScale+, with its PL clock parameters and the address map of its general-purpose master port),
each kernel IP (the VLNV the Tcl instantiates and the HLS configuration exports,
pearl_fpga.board.zynq_design.ip_vlnv; its AXI4-Lite interface and address block with the
register map of its SPEC.md, named as Vitis HLS names them) and each AXI DMA (simple mode, PG021
parameters from pearl_fpga.board.zynq_design.axi_dma_config: the table hls/build.mk hands the Tcl), with
the bus nets between them. Addresses follow Vivado's defaults for the port, 64 KiB per block: on a Zynq-7000 kernels from 0x43C0_0000 and DMAs from 0x4040_0000 (M_AXI_GP0), on an
UltraScale+ kernels from 0xA000_0000 and DMAs from 0xA010_0000 (M_AXI_HPM0_FPD).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from pearl_fpga.board.zynq_design import axi_dma_config, ip_vlnv, is_zynq7
from pearl_fpga.board.manifest import Manifest
from pearl_fpga.spec import mlp, replay, tabular
from pearl_fpga.spec.kernels import KERNELS

SPAN = 0x1_0000


@dataclass(frozen=True)
class Family:
    """What differs between the two Zynq generations in the design's PS and address map."""

    ps_type: str
    ps_vlnv: str
    arch: str  # SYSTEMINFO ARCH, as Vivado writes it
    master: str  # the PS port the kernels and DMAs hang off
    ip_base: int
    dma_base: int


ZYNQ7 = Family("processing_system7", "xilinx.com:ip:processing_system7:5.5", "zynq", "M_AXI_GP0", 0x43C0_0000, 0x4040_0000)
ZYNQ_US = Family("zynq_ultra_ps_e", "xilinx.com:ip:zynq_ultra_ps_e:3.4", "zynquplus", "M_AXI_HPM0_FPD", 0xA000_0000,
                 0xA010_0000)


def family(part: str) -> Family:
    """The Zynq generation of an FPGA part (xc7z... Zynq-7000; xczu... and the K26 SOM's xck26 UltraScale+)."""
    if is_zynq7(part):
        return ZYNQ7
    if part.lower().startswith(("xczu", "xck26")):
        return ZYNQ_US
    raise ValueError(f"part {part} is not a Zynq")

# kernel -> [(register name as Vitis HLS names it, offset, access)] after the four control registers
REGISTERS = {
    "replay": [("n_cmds", replay.REG_N_CMDS, "read-write"), ("capacity", replay.REG_CAPACITY, "read-only"),
               ("fanout", replay.REG_FANOUT, "read-only"), ("total_1", replay.REG_TOTAL_LO, "read-only"),
               ("total_2", replay.REG_TOTAL_HI, "read-only")],
    "mlp": [("mode", mlp.REG_MODE, "read-write"), ("batch", mlp.REG_BATCH, "read-write"),
            ("lanes", mlp.REG_LANES, "read-only"), ("max_width", mlp.REG_MAX_WIDTH, "read-only"),
            ("max_layers", mlp.REG_MAX_LAYERS, "read-only"), ("error", mlp.REG_ERROR, "read-only")],
    "tabular": [("n_cmds", tabular.REG_N_CMDS, "read-write"), ("alpha", tabular.REG_ALPHA, "read-write"),
                ("gamma", tabular.REG_GAMMA, "read-write"), ("sarsa", tabular.REG_SARSA, "read-write"),
                ("n_actions", tabular.REG_N_ACTIONS, "read-write"), ("max_states", tabular.REG_MAX_STATES, "read-only"),
                ("max_actions", tabular.REG_MAX_ACTIONS, "read-only"), ("updates", tabular.REG_UPDATES, "read-only")],
}
# the ap_ctrl_hs block: (name, offset, access, [(field, bit, width, access)])
CONTROL = [("CTRL", 0x00, "read-write", [("AP_START", 0, 1, "read-write"), ("AP_DONE", 1, 1, "read-only"),
                                          ("AP_IDLE", 2, 1, "read-only"), ("AP_READY", 3, 1, "read-only")]),
           ("GIER", 0x04, "read-write", [("Enable", 0, 1, "read-write")]),
           ("IP_IER", 0x08, "read-write", [("CHAN0_INT_EN", 0, 1, "read-write"), ("CHAN1_INT_EN", 1, 1, "read-write")]),
           ("IP_ISR", 0x0C, "read-write", [("CHAN0_INT_ST", 0, 1, "read-write"), ("CHAN1_INT_ST", 1, 1, "read-write")])]


@dataclass(frozen=True)
class Block:
    """One addressable block of the design: a kernel instance or its DMA."""

    kernel: str
    name: str
    base: int
    is_dma: bool


def blocks(manifest: Manifest) -> list[Block]:
    """Every kernel instance and DMA of the build, with its address."""
    fam, out, i = family(manifest.part), [], 0
    for kernel in manifest.kernels:
        entry = manifest.check_kernel(kernel)
        for instance in range(entry.instances):
            ip, dma = entry.instance_names(instance)
            out.append(Block(kernel, ip, fam.ip_base + SPAN * i, False))
            out.append(Block(kernel, dma, fam.dma_base + SPAN * i, True))
            i += 1
    return out


def _params(parent: ET.Element, values: dict[str, object]) -> None:
    params = ET.SubElement(parent, "PARAMETERS")
    for name, value in values.items():
        ET.SubElement(params, "PARAMETER", NAME=name, VALUE=str(value))


def _bus(parent: ET.Element, name: str, kind: str, role: str, busname: str) -> None:
    vlnv = "xilinx.com:interface:aximm:1.0" if kind == "aximm" else "xilinx.com:interface:axis:1.0"
    ET.SubElement(parent, "BUSINTERFACE", BUSNAME=busname, NAME=name, TYPE=role, VLNV=vlnv)


def _register(parent: ET.Element, name: str, offset: int, access: str, fields: list[tuple[str, int, int, str]]) -> None:
    reg = ET.SubElement(parent, "REGISTER", NAME=name)
    for prop, value in (("DESCRIPTION", name), ("ADDRESS_OFFSET", offset), ("SIZE", 32), ("ACCESS", access)):
        ET.SubElement(reg, "PROPERTY", NAME=prop, VALUE=str(value))
    fs = ET.SubElement(reg, "FIELDS")
    for fname, bit, width, faccess in fields:
        field = ET.SubElement(fs, "FIELD", NAME=fname)
        for prop, value in (("DESCRIPTION", fname), ("ACCESS", faccess), ("BIT_OFFSET", bit), ("BIT_WIDTH", width)):
            ET.SubElement(field, "PROPERTY", NAME=prop, VALUE=str(value))


def _kernel_module(modules: ET.Element, b: Block) -> None:
    ip = KERNELS[b.kernel]
    m = ET.SubElement(modules, "MODULE", FULLNAME=f"/{b.name}", INSTANCE=b.name, IPTYPE="PERIPHERAL",
                      MODCLASS="PERIPHERAL", MODTYPE=ip.top, VLNV=ip_vlnv(ip.top))
    blocks_ = ET.SubElement(m, "ADDRESSBLOCKS")
    ab = ET.SubElement(blocks_, "ADDRESSBLOCK", ACCESS="read-write", INTERFACE="s_axi_control", NAME="Reg",
                       RANGE=str(SPAN), USAGE="register")
    regs = ET.SubElement(ab, "REGISTERS")
    for name, offset, access, fields in CONTROL:
        _register(regs, name, offset, access, fields)
    for name, offset, access in REGISTERS[b.kernel]:
        _register(regs, name, offset, access, [(name, 0, 32, access)])
    _params(m, {"C_S_AXI_CONTROL_BASEADDR": hex(b.base), "C_S_AXI_CONTROL_HIGHADDR": hex(b.base + SPAN - 1)})
    ET.SubElement(m, "PORTS")
    bis = ET.SubElement(m, "BUSINTERFACES")
    _bus(bis, "s_axi_control", "aximm", "SLAVE", f"ps_gp0_{b.name}")
    _bus(bis, ip.in_stream, "axis", "SLAVE", f"{b.name}_in")
    _bus(bis, ip.out_stream, "axis", "MASTER", f"{b.name}_out")


def _dma_module(modules: ET.Element, b: Block, kernel_ip: str, part: str) -> None:
    m = ET.SubElement(modules, "MODULE", FULLNAME=f"/{b.name}", INSTANCE=b.name, IPTYPE="PERIPHERAL",
                      MODCLASS="PERIPHERAL", MODTYPE="axi_dma", VLNV="xilinx.com:ip:axi_dma:7.1")
    # the parameters hls/scripts/zynq_bd.tcl sets, from the same table (pearl_fpga.board.zynq_design.axi_dma_config,
    # the address width of the part included), and the IP's defaults for the rest (both channels, no realignment engine)
    config = {"C_INCLUDE_MM2S": 1, "C_INCLUDE_S2MM": 1, "C_INCLUDE_MM2S_DRE": 0, "C_INCLUDE_S2MM_DRE": 0,
              "C_MICRO_DMA": 0, **{name.upper(): value for name, value in axi_dma_config(b.kernel, part).items()}}
    # Vivado writes each setting twice: as the HDL generic (C_...) and as the IP's user parameter
    # (c_...), which is the one pynq's DMA driver reads
    _params(m, {"C_BASEADDR": hex(b.base), "C_HIGHADDR": hex(b.base + SPAN - 1), **config,
                **{name.lower(): value for name, value in config.items()}})
    ET.SubElement(m, "PORTS")
    bis = ET.SubElement(m, "BUSINTERFACES")
    _bus(bis, "S_AXI_LITE", "aximm", "SLAVE", f"ps_gp0_{b.name}")
    _bus(bis, "M_AXIS_MM2S", "axis", "MASTER", f"{kernel_ip}_in")
    _bus(bis, "S_AXIS_S2MM", "axis", "SLAVE", f"{kernel_ip}_out")
    _bus(bis, "M_AXI_MM2S", "aximm", "MASTER", f"{b.name}_hp0")
    _bus(bis, "M_AXI_S2MM", "aximm", "MASTER", f"{b.name}_hp0")


def _clock_params(fam: Family, clock_mhz: float) -> dict[str, object]:
    """PL clock 0 at the kernel clock from the IO PLL (1 GHz on a Zynq-7000, 1.2 GHz here on an
    UltraScale+), the other three off, with the parameter names of each PS."""
    params: dict[str, object] = {}
    if fam is ZYNQ7:
        params.update({"PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ": f"{clock_mhz:.6f}", "PCW_FPGA0_PERIPHERAL_FREQMHZ": clock_mhz})
        for i in range(4):
            params[f"PCW_FPGA_FCLK{i}_ENABLE"] = 1 if i == 0 else 0
            params[f"PCW_FCLK{i}_PERIPHERAL_DIVISOR0"] = round(1000 / clock_mhz) if i == 0 else 1
            params[f"PCW_FCLK{i}_PERIPHERAL_DIVISOR1"] = 1
            params[f"PCW_FCLK{i}_PERIPHERAL_CLKSRC"] = "IO PLL"
            params[f"PCW_FCLK_CLK{i}_BUF"] = "TRUE" if i == 0 else "FALSE"
    else:
        for i in range(4):
            params[f"PSU__FPGA_PL{i}_ENABLE"] = 1 if i == 0 else 0
            params[f"PSU__CRL_APB__PL{i}_REF_CTRL__SRCSEL"] = "IOPLL"
            params[f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR0"] = round(1200 / clock_mhz) if i == 0 else 1
            params[f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR1"] = 1
            params[f"PSU__CRL_APB__PL{i}_REF_CTRL__FREQMHZ"] = clock_mhz if i == 0 else 100
            params[f"PSU__CRL_APB__PL{i}_REF_CTRL__ACT_FREQMHZ"] = f"{clock_mhz:.6f}" if i == 0 else "100.000000"
    return params


def _ps_module(modules: ET.Element, all_blocks: list[Block], fam: Family, clock_mhz: float) -> None:
    ps = f"{fam.ps_type}_0"
    m = ET.SubElement(modules, "MODULE", FULLNAME=f"/{ps}", INSTANCE=ps, IPTYPE="PERIPHERAL", IS_PL="FALSE",
                      MODTYPE=fam.ps_type, VLNV=fam.ps_vlnv)
    _params(m, _clock_params(fam, clock_mhz))
    mmap = ET.SubElement(m, "MEMORYMAP")
    ET.SubElement(mmap, "MEMRANGE", ADDRESSBLOCK="Reg", BASENAME="C_BASEADDR", BASEVALUE="0x00000000",
                  HIGHNAME="C_HIGHADDR", HIGHVALUE="0x1FFFFFFF", INSTANCE=ps, IS_DATA="TRUE",
                  IS_INSTRUCTION="TRUE", MASTERBUSINTERFACE=fam.master, MEMTYPE="MEMORY", SLAVEBUSINTERFACE="S_AXI_HP0")
    for b in all_blocks:
        ET.SubElement(mmap, "MEMRANGE", ADDRESSBLOCK="Reg", BASENAME="C_BASEADDR", BASEVALUE=f"0x{b.base:08X}",
                      HIGHNAME="C_HIGHADDR", HIGHVALUE=f"0x{b.base + SPAN - 1:08X}", INSTANCE=b.name, IS_DATA="TRUE",
                      IS_INSTRUCTION="TRUE", MASTERBUSINTERFACE=fam.master, MEMTYPE="REGISTER",
                      SLAVEBUSINTERFACE="S_AXI_LITE" if b.is_dma else "s_axi_control")
    ET.SubElement(m, "PORTS")
    bis = ET.SubElement(m, "BUSINTERFACES")
    ET.SubElement(bis, "BUSINTERFACE", BUSNAME="ps_gp0", NAME=fam.master, TYPE="MASTER",
                  VLNV="xilinx.com:interface:aximm:1.0")
    ET.SubElement(bis, "BUSINTERFACE", BUSNAME="ps_hp0", NAME="S_AXI_HP0", TYPE="SLAVE",
                  VLNV="xilinx.com:interface:aximm:1.0")


def write_hwh(manifest: Manifest, path: str | Path) -> list[Block]:
    """Write the .hwh of `manifest`'s build to `path`; returns the blocks with their addresses."""
    all_blocks, fam = blocks(manifest), family(manifest.part)
    root = ET.Element("EDKSYSTEM", EDWVERSION="1.2", TIMESTAMP="", VIVADOVERSION=manifest.tools.get("vivado", ""))
    ET.SubElement(root, "SYSTEMINFO", ARCH=fam.arch, DEVICE=manifest.part, NAME="pearl_fpga")
    ET.SubElement(root, "EXTERNALPORTS")
    ET.SubElement(root, "EXTERNALINTERFACES")
    modules = ET.SubElement(root, "MODULES")
    _ps_module(modules, all_blocks, fam, manifest.clock_mhz)
    for b, nxt in zip(all_blocks[::2], all_blocks[1::2], strict=True):
        _kernel_module(modules, b)
        _dma_module(modules, nxt, b.name, manifest.part)
    ET.ElementTree(root).write(path, encoding="UTF-8", xml_declaration=True)
    return all_blocks
