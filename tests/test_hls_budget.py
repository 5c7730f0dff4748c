"""The on-chip memory model of the HLS designs (pearl_fpga/board/hls_budget.py) and the catalog's sizes
checked against it: every board's kernels fit its part, and each SLR of an Alveo card, with 10% free."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from pearl_fpga.board import hls_budget as hb
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.board.hls_budget import Blocks

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("depth,width,expected", [
    (1024, 32, 1),   # 1K x 36
    (2048, 32, 2),
    (512, 64, 1),    # 512 x 72
    (1024, 64, 2),
    (4096, 16, 2),   # 2K x 18
    (8192, 16, 4),
    (64, 64, 0),     # shallow: LUT RAM
    (16, 32, 0),     # under 1 Kbit
    (65536, 32, 64),
])
def test_bram36_of_one_memory(depth, width, expected):
    assert hb.bram36(depth, width) == expected


def test_replay_model_by_hand():
    """65,536 leaves, K = 16 (4 levels): leaves 16 x 4096 x 32 bit = 64, their front copy 64, level 3
    16 x 256 x 64 bit = 16, level 2 (16 deep) in LUT RAM: 144 BRAM36, more than a PYNQ-Z2's 140."""
    assert hb._replay(65536, 16) == Blocks(bram36=144)
    assert hb._replay(16384, 16) == Blocks(bram36=32)  # 16 x 1 + 16 (level 3, 64 deep: LUT RAM)


def test_replay_leaves_in_uram_by_hand():
    """2^19 leaves, K = 16 (5 levels). In block RAM: leaves 16 x 32768 x 32 bit = 16 x 32, their front
    copy 512, level 4 16 x 2048 x 64 bit = 16 x 4, level 3 16 x 128 x 64 bit = 16: 1,104 BRAM36, more than
    one SLR of any Alveo card (672). With the leaves in URAM (4K x 72): 16 x 8 + 128 URAM, 80 BRAM36."""
    assert hb._replay(1 << 19, 16) == Blocks(bram36=1104)
    assert hb._replay(1 << 19, 16, leaves_in_uram=True) == Blocks(bram36=80, uram=256)
    assert hb.uram288(4096, 72) == 1 and hb.uram288(4097, 32) == 2 and hb.uram288(64, 72) == 0


def test_mlp_and_tabular_models_by_hand():
    # weights 8 lanes x (4 x 128 x 128 / 8 = 8192 int16: 4) = 32, biases 512 x 32 bit: 1, tanh ROM 1025 x 16: 1,
    # activations: the 16-deep lane banks in LUT RAM, the two 128 x 16 ping-pong buffers 1 each
    assert hb._mlp(8, 128, 4) == 36
    assert hb._tabular(1024, 8, 2) == 2 * 2 * 8 * 1


@pytest.mark.parametrize("board", sorted(load_catalog()))
def test_every_board_fits_its_part_with_margin(board):
    b = hb.budget(load_catalog()[board])
    assert b.fits, (f"{board}: {'; '.join(b.problems())} ({b.kernels}); shrink its kernel sizes in "
                    "bitstreams/catalog.json or move a kernel to another SLR")


@pytest.mark.parametrize("board", sorted(n for n, s in load_catalog().items() if s.kind == "alveo"))
def test_an_alveo_replay_in_block_ram_would_not_fit_its_slr(board):
    """The reason the leaves are bound to URAM: in block RAM the replay compute unit spans SLRs."""
    spec = load_catalog()[board]
    assert spec.replay_leaf_memory == "uram" and spec.slr_count >= 3
    in_bram = hb.budget(dataclasses.replace(spec, replay_leaf_memory="bram"))
    assert not in_bram.fits and any(f"SLR{spec.slr_of['replay']} needs" in p for p in in_bram.problems())
    kernels_per_slr = {spec.slr_of[k] for k in ("replay", "mlp", "tabular")}
    assert len(kernels_per_slr) == 3  # each kernel in an SLR of its own


def test_the_leaf_storage_pragmas_follow_the_build_define():
    """What Vitis HLS sees after preprocessing: leaf_level and front_leaves bound to URAM with
    REPLAY_LEAVES_URAM (the Alveo builds' hls_defines), to block RAM without it."""
    def pragmas(*defines: str) -> list[str]:
        out = subprocess.run(["g++", "-std=c++14", "-E", "-P", *defines, f"-I{ROOT / 'hls'}", f"-I{ROOT / 'hls' / 'replay'}",
                              str(ROOT / "hls" / "replay" / "replay.cpp")], capture_output=True, text=True, check=True).stdout
        return [line.strip() for line in out.splitlines() if "BIND_STORAGE" in line and ("leaf_level" in line or "front_leaves" in line)]
    uram, bram = pragmas("-DREPLAY_LEAVES_URAM"), pragmas()
    for var in ("leaf_level", "front_leaves"):
        assert any(f"variable = {var} " in p and "impl = uram" in p for p in uram), uram
        assert any(f"variable = {var} " in p and "impl = bram" in p for p in bram), bram
    assert not any("uram" in p for p in bram)


def test_the_cli_prints_every_board(capsys):
    assert hb.main([]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in load_catalog()) and "NO" not in out


def test_the_front_copy_in_uram_is_counted_in_banks():
    """replay.cpp splits the front copy of the leaves into banks of at most URAM_CASCADE_BLOCKS x 4K words
    (UG949's cascade height), each rounded up to whole blocks: 36,000 words are 2 banks of 18,000, 5 URAM
    each, where one cascade would take 9; the leaf level's 16 lanes of 2,250 words take 1 each."""
    assert hb.URAM_CASCADE == 8
    assert hb._replay(36000, 16, leaves_in_uram=True).uram == 16 + 10
