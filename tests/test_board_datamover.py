"""C simulation of the Alveo data movers (hls/datamover/): memory -> stream -> memory round trip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")
def test_datamover_csim(tmp_path):
    exe = tmp_path / "datamover_tb"
    build = subprocess.run(
        [os.environ.get("CXX", "g++"), "-std=c++17", "-O1", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-label",
         f"-I{REPO / 'hls'}", f"-I{REPO / 'hls' / 'datamover'}",
         str(REPO / "hls/datamover/datamover.cpp"), str(REPO / "hls/datamover/datamover_tb.cpp"), "-o", str(exe)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "datamover: ok" in run.stdout, run.stdout + run.stderr
