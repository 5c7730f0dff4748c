"""MLP kernel HLS source: the committed tanh ROM header matches its generator, the C++ (cpu build) uses
it, its ARRAY_PARTITION pragmas name arrays in scope, and the C simulation passes at other synthesis
parameters (LANES, MAX_WIDTH) than the cpu extension's. (Constructs Vitis HLS cannot synthesize are
checked for every kernel in tests/test_hls_sources.py.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pearl_fpga.spec import mlp as mlp_format

ROOT = Path(__file__).resolve().parents[1]
MLP_DIR = ROOT / "hls" / "mlp"


def _code(path: Path) -> str:
    """The source without comments and string literals (so that prose never trips a check)."""
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def test_committed_tanh_header_matches_generator():
    committed = (ROOT / mlp_format.TANH_HEADER_PATH).read_text()
    assert committed == mlp_format.tanh_header_text(), (
        f"{mlp_format.TANH_HEADER_PATH} differs from its generator; regenerate it with "
        f"`python -m pearl_fpga.spec.mlp --write-tanh-header {mlp_format.TANH_HEADER_PATH}`"
    )


def test_header_values_are_the_formula_table():
    text = _code(MLP_DIR / "mlp_tanh_table.h")
    body = re.search(r"TANH_TABLE\[(\d+)\]\s*=\s*\{([^}]*)\}", text)
    assert body is not None, "TANH_TABLE initializer not found"
    values = np.array([int(v) for v in body.group(2).replace(",", " ").split()], dtype=np.int64)
    assert int(body.group(1)) == len(values) == 1025
    np.testing.assert_array_equal(values, mlp_format.tanh_table())


def test_generator_cli_writes_the_header(tmp_path):
    out = tmp_path / "mlp_tanh_table.h"
    subprocess.run(
        [sys.executable, "-m", "pearl_fpga.spec.mlp", "--write-tanh-header", str(out)],
        check=True, cwd=ROOT, capture_output=True,
    )
    assert out.read_text() == mlp_format.tanh_header_text()


def test_cpu_build_uses_the_committed_table():
    from pearl_fpga import _mlp_native

    np.testing.assert_array_equal(_mlp_native.tanh_table(), mlp_format.tanh_table())
    # The head through the kernel's own code on every int16 input equals the table interpolation.
    y = np.arange(-32768, 32768, dtype=np.int16)
    from pearl_fpga.backends.mlp_numpy import tanh_pwl

    np.testing.assert_array_equal(_mlp_native.tanh_pwl(y), tanh_pwl(y))


def test_array_partitions_name_arrays_declared_in_scope():
    """Vitis HLS applies ARRAY_PARTITION to a variable declared in the pragma's function: never a
    struct member (model.weight), a parameter or a name declared elsewhere."""
    code = _code(MLP_DIR / "mlp.cpp")
    pragmas = list(re.finditer(r"#pragma HLS ARRAY_PARTITION variable\s*=\s*([\w.\[\]]+)", code))
    assert {"weight", "act"} <= {m.group(1) for m in pragmas}, [m.group(1) for m in pragmas]
    for m in pragmas:
        name = m.group(1)
        assert re.fullmatch(r"\w+", name), f"ARRAY_PARTITION on {name!r}: partition a plain array, not a member"
        before = code[: m.start()]
        scope = before[before.rfind(") {") :]  # from the enclosing function's opening brace
        decl = rf"\b(?:int16_t|int32_t|LayerDesc)\s+{name}\s*(?:\[[^\]]*\])+\s*;"
        assert re.search(decl, scope), f"{name}: no local/static array declaration before its ARRAY_PARTITION"


def _csim(tmp_path: Path, defines: list[str]) -> str:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.fail("g++ not found: install a C++ compiler (apt-get install g++) to run the C simulation")
    exe = tmp_path / "mlp_tb"
    subprocess.run(
        [cxx, "-std=c++17", "-O1", "-Wall", "-Wno-unknown-pragmas", *defines, f"-I{ROOT / 'hls'}", f"-I{MLP_DIR}",
         str(MLP_DIR / "mlp.cpp"), str(MLP_DIR / "mlp_tb.cpp"), "-o", str(exe)],
        check=True, capture_output=True, text=True,
    )
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.mark.parametrize(
    "lanes, max_width",
    [(32, 512), (4, 256)],  # 32: 8 chunks per MAC block, rows of 2 blocks; 4: the board width, 64 chunks per block
)
def test_csim_at_other_synthesis_parameters(tmp_path, lanes, max_width):
    out = _csim(tmp_path, [f"-DMLP_LANES={lanes}", f"-DMLP_MAX_WIDTH={max_width}"])
    assert f"LANES={lanes}, MAX_WIDTH={max_width}" in out
