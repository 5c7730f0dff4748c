"""A non-editable install works outside the checkout: `pip install .` into a fresh virtual
environment, then the kernels run from there, reading their shipped files (RTL, catalog, the kernel
descriptors hls/<kernel>/kernel.json) from the installed package, in an interpreter that cannot import
torch (the board install: tests/no_torch)."""

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, pathlib, sys, numpy as np
import pearl_fpga
from pearl_fpga.data import data_path, checkout_root
from pearl_fpga.kernels import ReplaySampler
from pearl_fpga.board.catalog import DEFAULT_CATALOG
from pearl_fpga.sim.verilator import kernel_rtl
from pearl_fpga.spec.descriptor import descriptors
s = ReplaySampler(100, fanout=4, backend="cpu")
s.update(np.arange(10), np.linspace(0.5, 5, 10))
idx, _ = s.sample(32, np.random.default_rng(0))
print(json.dumps({"file": pearl_fpga.__file__, "checkout": checkout_root() is not None,
                  "catalog": DEFAULT_CATALOG.is_file(), "rtl": len(kernel_rtl("replay")),
                  "total": s.total, "indices_ok": bool((idx < 10).all()), "torch": "torch" in sys.modules,
                  "descriptors": {k: str(d.path) for k, d in descriptors().items()}}))
"""


@pytest.mark.slow
def test_pip_install_runs_outside_the_checkout(tmp_path):
    env_dir = tmp_path / "venv"
    # the project venv's packages (numpy, torch...) are visible; pearl_fpga itself is installed fresh,
    # without dependencies (no download) and without the build isolation (pybind11 is here)
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    site = next((env_dir / "lib").glob("python*/site-packages"))
    parent_site = [p for p in sys.path if p.endswith("site-packages")]
    (site / "parent.pth").write_text("\n".join(parent_site) + "\n")
    py = env_dir / "bin" / "python"
    target = tmp_path / "installed"
    build = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
                            "--target", str(target), str(ROOT)], capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-2000:]
    run_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT / "tests" / "no_torch")])}
    out = subprocess.run([str(py), "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path, env=run_env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["file"].startswith(str(target))  # the installed copy, not the checkout
    assert result["checkout"] is False and result["catalog"] is True and result["rtl"] >= 3
    assert result["indices_ok"] and result["total"] > 0 and result["torch"] is False
    # the kernels' descriptors ship as package data and are read from there
    assert sorted(result["descriptors"]) == sorted(p.parent.name for p in (ROOT / "hls").glob("*/kernel.json"))
    assert all(path.startswith(str(target)) for path in result["descriptors"].values()), result["descriptors"]
