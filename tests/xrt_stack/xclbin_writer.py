"""Write an xclbin container (axlf) holding the metadata XRT needs to open our compute units.

Debian ships no working xclbinutil, so the tests write the binary format themselves, from the
layout of /usr/include/xrt/xclbin.h (XRT 2.13; sizes checked in test_xclbin_layout): an `axlf`
header and four sections generated from pearl_fpga/board/xrt_kernels.py, the table hls/build.mk's
connectivity and the HLS INTERFACE pragmas agree with:
- EMBEDDED_METADATA: the kernel XML (arguments with index, kind, offset, size; compute units);
- IP_LAYOUT: one ip_data per compute unit ("kernel:cu", base address, its control protocol: ap_ctrl_hs
  for the kernel tops, ap_ctrl_chain for the data movers, as xrt_kernels.XrtKernel.control says);
- CONNECTIVITY: each buffer argument of each compute unit to memory bank 0;
- MEM_TOPOLOGY: one DDR bank.
No bitstream: the noop shim loads nothing onto a device.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from xml.sax.saxutils import quoteattr

from pearl_fpga.board import xrt_kernels as xk

# xclbin.h: enum axlf_section_kind, MEM_TYPE, IP_TYPE and the struct sizes.
EMBEDDED_METADATA, MEM_TOPOLOGY, CONNECTIVITY, IP_LAYOUT = 2, 6, 7, 8
MEM_DDR4, IP_KERNEL = 1, 1
IP_CONTROL = {xk.AP_CTRL_HS: 0, xk.AP_CTRL_CHAIN: 1}  # enum IP_CONTROL, in bits 15:8 of an ip_data's properties
AXLF_SIZE, AXLF_HEADER_OFFSET, SECTION_HEADER_SIZE = 496, 304, 40
IP_DATA_SIZE, MEM_DATA_SIZE, CONNECTION_SIZE = 80, 40, 12
CU_STRIDE = 0x10000  # address range of each compute unit's control block
BANK_BASE, BANK_KB = 0x40_0000_0000, 16 * 1024 * 1024
VBNV = "pearl_fpga:noop:test:1.0"


def compute_units(instances: dict[str, int]) -> list[tuple[xk.XrtKernel, str]]:
    """Every (kernel, cu name) of the xclbin, in address order."""
    by_name = {k.name: k for k in xk.all_kernels()}
    return [(by_name[k], cu) for kernel, n in instances.items() for k, cu in xk.compute_units(kernel, n)]


def kernel_xml(cus: list[tuple[xk.XrtKernel, str]]) -> bytes:
    kernels: dict[str, list[tuple[str, int]]] = {}
    for i, (k, cu) in enumerate(cus):
        kernels.setdefault(k.name, []).append((cu, i * CU_STRIDE))
    by_name = {k.name: k for k, _ in cus}
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<project name="pearl_fpga">', '<platform vendor="pearl_fpga" '
             'boardid="noop" name="test" featureRomTime="0" version="1.0">', '<version major="1" minor="0"/>',
             '<device name="fpga0" fpgaDevice="noop" addrWidth="0">', '<core name="OCL_REGION_0" target="bitstream" '
             'type="clc_region" clockFreq="0MHz" numComputeUnits="%d">' % len(cus)]
    for name, instances in kernels.items():
        k = by_name[name]
        lines.append(f'<kernel name={quoteattr(name)} language="c" vlnv="pearl_fpga:kernel:{name}:1.0" '
                     f'preferredWorkGroupSizeMultiple="0" workGroupSize="1" interrupt="true" hwControlProtocol="{k.control}">')
        lines.append('<port name="S_AXI_CONTROL" mode="slave" range="0x1000" dataWidth="32" portType="addressable" base="0x0"/>')
        for arg in k.args:
            if arg.kind == xk.POINTER:
                lines.append(f'<port name="M_AXI_GMEM_{arg.name.upper()}" mode="master" range="0xFFFFFFFFFFFFFFFF" '
                             'dataWidth="128" portType="addressable" base="0x0"/>')
            elif arg.kind == xk.STREAM:
                lines.append(f'<port name={quoteattr(arg.name.upper())} mode="{"read_only" if arg.name.startswith(("s_", "in")) else "write_only"}" '
                             'dataWidth="128" portType="stream"/>')
        for index, arg in enumerate(k.args):
            port = {xk.POINTER: f"M_AXI_GMEM_{arg.name.upper()}", xk.STREAM: arg.name.upper()}.get(arg.kind, "S_AXI_CONTROL")
            ctype = {xk.POINTER: "void*", xk.STREAM: "stream<qdma_axis<128,0,0,0>,0>&"}.get(arg.kind, "unsigned int")
            lines.append(f'<arg name={quoteattr(arg.name)} addressQualifier="{xk.ADDRESS_QUALIFIER[arg.kind]}" id="{index}" '
                         f'port="{port}" size="0x{arg.size:x}" offset="0x{arg.offset:x}" hostOffset="0x0" '
                         f'hostSize="0x{arg.size:x}" type={quoteattr(ctype)}/>')
        for cu, base in instances:
            lines.append(f'<instance name={quoteattr(cu)}><addrRemap base="0x{base:x}" port="S_AXI_CONTROL"/></instance>')
        lines.append("</kernel>")
    lines += ["</core>", "</device>", "</platform>", "</project>"]
    return ("\n".join(lines) + "\n").encode()


def ip_layout(cus: list[tuple[xk.XrtKernel, str]]) -> bytes:
    out = struct.pack("<i4x", len(cus))
    for i, (k, cu) in enumerate(cus):
        props = 1 | (i << 1 & 0xFE) | IP_CONTROL[k.control] << 8  # interrupt enabled, interrupt id i, control in 15:8
        out += struct.pack("<IIQ64s", IP_KERNEL, props, i * CU_STRIDE, f"{k.name}:{cu}".encode())
    return out


def connectivity(cus: list[tuple[xk.XrtKernel, str]]) -> bytes:
    conns = [(index, ip, 0) for ip, (k, _) in enumerate(cus) for index, arg in enumerate(k.args) if arg.kind == xk.POINTER]
    return struct.pack("<i", len(conns)) + b"".join(struct.pack("<iii", *c) for c in conns)


def mem_topology() -> bytes:
    return struct.pack("<i4x", 1) + struct.pack("<BB6xQQ16s", MEM_DDR4, 1, BANK_KB, BANK_BASE, b"bank0")


def write_xclbin(path: Path, instances: dict[str, int] | None = None) -> bytes:
    """Write the xclbin for `instances` (kernel -> copies; default one of each) to `path`; returns its uuid."""
    cus = compute_units(instances or {k: 1 for k in xk.TOPS})
    sections = [(EMBEDDED_METADATA, "metadata", kernel_xml(cus)), (IP_LAYOUT, "ip_layout", ip_layout(cus)),
                (CONNECTIVITY, "connectivity", connectivity(cus)), (MEM_TOPOLOGY, "mem_topology", mem_topology())]
    # The header holds one section header; the others follow it.
    offset = AXLF_SIZE + SECTION_HEADER_SIZE * (len(sections) - 1)
    headers, payload = b"", b""
    for kind, name, data in sections:
        offset_aligned = (offset + 7) & ~7
        payload += b"\0" * (offset_aligned - offset) + data
        headers += struct.pack("<I16s4xQQ", kind, name.encode(), offset_aligned, len(data))
        offset = offset_aligned + len(data)
    uuid = hashlib.sha256(headers + payload).digest()[:16]  # the same content, the same uuid
    length = offset
    header = struct.pack("<QQQHBBHH16s64s16s16sI4x", length, 0, 0, 0, 2, 1, 0, 0, b"\0" * 16, VBNV.encode(), uuid, b"",
                         len(sections))
    top = struct.pack("<8si28s256sQ", b"xclbin2\0", -1, b"\xff" * 28, b"\0" * 256, 0) + header
    blob = top + headers + payload
    assert len(top) == AXLF_SIZE - SECTION_HEADER_SIZE and len(blob) == length
    path.write_bytes(blob)
    return uuid
