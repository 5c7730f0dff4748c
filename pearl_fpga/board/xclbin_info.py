"""What an Alveo build really is, read from its outputs: the kernel clock in the xclbin and the timing
of the routed design.

When routed timing fails at the requested kernel frequency, v++ scales the kernel clock down and still
writes a usable xclbin (UG1315, "Kernel Clock Minimum Frequency"), so the catalog's clock_mhz is only
what was asked for. The clock the card will run is in the xclbin's CLOCK_FREQ_TOPOLOGY section
(XRT's xclbin.h: `clock_freq_topology`, an int16 count then 136-byte `clock_freq` entries of a uint16
frequency in MHz, a uint8 type and a name; the HLS kernels' ap_clk is the DATA clock, CT_DATA, the one
`v++ --kernel_frequency` sets). It is read here from the file itself (no xclbinutil needed).
"""

from __future__ import annotations

import struct
from pathlib import Path

from pearl_fpga.errors import ManifestError

MAGIC = b"xclbin2\0"
HEADER_OFFSET = 304  # offsetof(axlf, m_header)
NUM_SECTIONS_OFFSET = HEADER_OFFSET + 144  # offsetof(axlf_header, m_numSections)
SECTIONS_OFFSET = 456  # offsetof(axlf, m_sections)
SECTION_HEADER = struct.Struct("<I16s4xQQ")  # m_sectionKind, m_sectionName, m_sectionOffset, m_sectionSize
CLOCK_FREQ_TOPOLOGY = 11  # enum axlf_section_kind
CLOCK_FREQ = struct.Struct("<HB5x128s")  # m_freq_Mhz, m_type, m_unused, m_name
CLOCK_TYPES = {0: "UNUSED", 1: "DATA", 2: "KERNEL", 3: "SYSTEM"}  # enum CLOCK_TYPE


def clocks(blob: bytes, where: str = "xclbin") -> dict[str, int]:
    """Type ("DATA", "KERNEL", "SYSTEM") -> frequency in MHz of every clock the xclbin's CLOCK_FREQ_TOPOLOGY lists."""
    if blob[:8] != MAGIC or len(blob) < SECTIONS_OFFSET:
        raise ManifestError(f"{where} is not an xclbin (no 'xclbin2' header)")
    (count,) = struct.unpack_from("<I", blob, NUM_SECTIONS_OFFSET)
    for i in range(count):
        kind, _name, offset, size = SECTION_HEADER.unpack_from(blob, SECTIONS_OFFSET + i * SECTION_HEADER.size)
        if kind != CLOCK_FREQ_TOPOLOGY:
            continue
        if offset + size > len(blob) or size < 2:
            raise ManifestError(f"{where}: its CLOCK_FREQ_TOPOLOGY section lies outside the file")
        (n,) = struct.unpack_from("<h", blob, offset)
        out = {}
        for k in range(n):
            freq, ctype, _ = CLOCK_FREQ.unpack_from(blob, offset + 2 + k * CLOCK_FREQ.size)  # entries follow the int16 count
            out[CLOCK_TYPES.get(ctype, f"TYPE{ctype}")] = freq
        return out
    raise ManifestError(f"{where} has no CLOCK_FREQ_TOPOLOGY section: it was not linked by v++ for a card")


def kernel_clock_mhz(path: str | Path) -> float:
    """The clock the HLS kernels of the xclbin at `path` run at (its DATA clock), in MHz."""
    found = clocks(Path(path).read_bytes(), str(path))
    if "DATA" not in found:
        raise ManifestError(f"{path}: its clock topology has no DATA clock (the kernels' ap_clk): {found}")
    return float(found["DATA"])
