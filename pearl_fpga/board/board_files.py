"""Vivado board files: is a catalog board's board part installed, and where? Checked before Vivado starts.

A Zynq block design applies the board's presets (DDR, MIO, clocks) from its board files, found by the
board part `vendor:name:component:file_version` (the catalog's board_part). Vivado reads them from its
install (`data/boards`, and `data/xhub/boards` where it ships a copy of the XilinxBoardStore), from the
board store a user installs through Vivado's Xhub (`~/.Xilinx/Vivado/<version>/xhub/board_store`), and
from folders named by the Tcl parameter `board.repoPaths`. The ZCU104's and KV260's files come with
Vivado; TUL's pynq-z2 files (`tul.com.tw:pynq-z2:part0:1.0`) do not: they are in the XilinxBoardStore
(github.com/Xilinx/XilinxBoardStore, boards/TUL/pynq-z2; Vivado: Tools > Vivado Store > Boards) and on
TUL's PYNQ-Z2 product page. `make bitstream` runs `python -m pearl_fpga.board.board_files check BOARD`
first; a folder named by $PEARL_FPGA_BOARD_REPO (several: separated by ':') is searched too and handed
to Vivado as board.repoPaths (hls/scripts/zynq_bd.tcl).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pearl_fpga.board.catalog import CatalogError, get_board, print_or_fail

REPO_ENV = "PEARL_FPGA_BOARD_REPO"
# Where each vendor's board files come from, for the message when they are missing.
SOURCES = {
    "tul.com.tw": ("TUL's board files are not installed with Vivado: install them from the Vivado Store (Tools > "
                   "Vivado Store > Boards > pynq-z2), or clone https://github.com/Xilinx/XilinxBoardStore (boards/TUL/"
                   "pynq-z2) or download them from TUL's PYNQ-Z2 page (https://www.tulembedded.com/FPGA/ProductsPYNQ-Z2.html) "
                   f"and set {REPO_ENV} to that folder"),
    "xilinx.com": ("AMD's evaluation boards ship with Vivado: repair the Vivado install (data/xhub/boards), or install "
                   "the board from the Vivado Store (Tools > Vivado Store > Boards)"),
}


@dataclass(frozen=True)
class BoardPart:
    """A Vivado board part, vendor:name:component:file_version."""

    vendor: str
    name: str
    component: str
    version: str

    @classmethod
    def parse(cls, text: str) -> BoardPart:
        fields = text.split(":")
        if len(fields) != 4 or not all(fields):
            raise CatalogError(f"board part {text!r} is not vendor:name:component:file_version")
        return cls(*fields)

    def __str__(self) -> str:
        return f"{self.vendor}:{self.name}:{self.component}:{self.version}"


def describes(board_xml: Path, part: BoardPart) -> bool:
    """Whether `board_xml` is the board file of `part`: its board's vendor, name and file_version, and a
    component of that name (Vivado's board part)."""
    try:
        root = ET.parse(board_xml).getroot()
    except (ET.ParseError, OSError):
        return False
    if root.tag != "board" or root.get("vendor") != part.vendor or root.get("name") != part.name:
        return False
    version = (root.findtext("file_version") or "").strip()
    components = {c.get("name") for c in root.iter("component")}
    return version == part.version and part.component in components


def default_roots(vivado: str | None = None, env: dict[str, str] | None = None) -> list[Path]:
    """The folders Vivado reads board files from: $PEARL_FPGA_BOARD_REPO, the install of `vivado` (the
    binary; else $XILINX_VIVADO) and the user's Xhub board store."""
    env = dict(os.environ) if env is None else env
    roots = [Path(p) for p in env.get(REPO_ENV, "").split(os.pathsep) if p]
    install = env.get("XILINX_VIVADO") or (str(Path(vivado).resolve().parent.parent) if vivado else "")
    if install:
        roots += [Path(install) / "data" / "boards", Path(install) / "data" / "xhub" / "boards"]
    home = env.get("HOME")
    if home:
        roots += sorted((Path(home) / ".Xilinx" / "Vivado").glob("*/xhub/board_store"))
    return roots


def find_board_files(part: BoardPart, roots: Iterable[Path]) -> Path | None:
    """The folder holding `part`'s board.xml under the first root that has it, or None."""
    for root in roots:
        if not root.is_dir():
            continue
        for board_xml in sorted(root.rglob("board.xml")):
            if describes(board_xml, part):
                return board_xml.parent
    return None


def check(board: str, vivado: str | None = None, env: dict[str, str] | None = None) -> str:
    """The board repository to hand Vivado for `board` ("" when its files are in Vivado's own folders),
    or CatalogError saying where to get them."""
    spec = get_board(board)
    if spec.board_part is None:
        return ""  # an Alveo card: a Vitis platform, no board files
    part = BoardPart.parse(spec.board_part)
    roots = default_roots(vivado, env)
    found = find_board_files(part, roots)
    if found is None:
        searched = ", ".join(str(r) for r in roots) or "nothing (neither XILINX_VIVADO nor vivado on PATH)"
        hint = SOURCES.get(part.vendor, f"install the board files of {part} from its vendor and set {REPO_ENV} to their folder")
        raise CatalogError(f"Vivado needs the board files of {part} ({board}) and they are not installed (searched: "
                           f"{searched}); {hint}")
    # a folder of $PEARL_FPGA_BOARD_REPO goes to Vivado's board.repoPaths; Vivado finds its own folders itself
    user = [r for r in default_roots(None, {REPO_ENV: (os.environ if env is None else env).get(REPO_ENV, "")})
            if found.is_relative_to(r)]
    return str(user[0]) if user else ""


def main(argv: list[str] | None = None) -> int:
    """`python -m pearl_fpga.board.board_files check BOARD [--vivado PATH]`: print the board repository
    for Vivado (empty: its own), or exit 2 saying where the board files come from."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.board.board_files", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="check that BOARD's Vivado board files are installed")
    c.add_argument("board")
    c.add_argument("--vivado", default=None, help="the vivado binary (its install is searched)")
    args = parser.parse_args(argv)
    return print_or_fail(lambda: check(args.board, args.vivado))


if __name__ == "__main__":
    raise SystemExit(main())
