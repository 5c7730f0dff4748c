"""The block-RAM model of the HLS designs (pearl_fpga/board/hls_budget.py) and the catalog's sizes
checked against it: every board's kernels fit its part with 10% free."""

from __future__ import annotations

import pytest

from pearl_fpga.board import hls_budget as hb
from pearl_fpga.board.catalog import load_catalog


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
    assert hb._replay(65536, 16) == 144
    assert hb._replay(16384, 16) == 32  # 16 x 1 + 16 (level 3, 64 deep: LUT RAM)


def test_mlp_and_tabular_models_by_hand():
    # weights 8 lanes x (4 x 128 x 128 / 8 = 8192 int16: 4) = 32, biases 512 x 32 bit: 1, tanh ROM 1025 x 16: 1,
    # activations: the 16-deep lane banks in LUT RAM, the two 128 x 16 ping-pong buffers 1 each
    assert hb._mlp(8, 128, 4) == 36
    assert hb._tabular(1024, 8, 2) == 2 * 2 * 8 * 1


@pytest.mark.parametrize("board", sorted(load_catalog()))
def test_every_board_fits_its_part_with_margin(board):
    b = hb.budget(load_catalog()[board])
    assert b.fits, (f"{board}: the HLS design needs {b.used} BRAM36 ({b.kernels}) of {b.available}; shrink "
                    "its kernel sizes in bitstreams/catalog.json")


def test_the_cli_prints_every_board(capsys):
    assert hb.main([]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in load_catalog()) and "NO" not in out
