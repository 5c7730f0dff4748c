"""pearl_fpga/board/xrt_kernels.py (the table the XRT transport and the generated test xclbin use)
says what the HLS sources and the v++ link say: argument order = the top function's parameters,
offsets = the INTERFACE pragmas, streams = the axis ports, compute units and stream connections =
hls/scripts/alveo_connectivity.cfg and hls/build.mk's tabular copies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pearl_fpga.board import xrt_kernels as xk

ROOT = Path(__file__).resolve().parents[1]


def signature(source: str, function: str) -> list[str]:
    """Parameter names of `function`'s definition, in order."""
    m = re.search(rf"\bvoid\s+{function}\s*\(([^)]*)\)\s*{{", source)
    assert m, f"no definition of {function}"
    return [re.findall(r"\w+", p)[-1] for p in m.group(1).split(",")]


def pragmas(source: str, function: str) -> dict[str, tuple[str, int | None]]:
    """port -> (mode, offset) of the INTERFACE pragmas in `function`'s body."""
    body = source[source.index("{", re.search(rf"\bvoid\s+{function}\s*\(", source).end()):]
    body = body[: body.index("\n}")]
    out = {}
    for name, at in re.findall(r"PEARL_AXILITE_REGISTER\((\w+),\s*(0x[0-9a-fA-F]+)\)", body):
        out[name] = ("s_axilite", int(at, 16))  # hls/common/hls_compat.h: the offset in the Vivado IP flow
    for line in re.findall(r"#pragma HLS INTERFACE[^\n]*", body):
        mode = re.search(r"(?:mode\s*=\s*)?\b(axis|s_axilite|m_axi|ap_ctrl_hs)\b", line).group(1)
        port = re.search(r"port\s*=\s*(\w+)", line).group(1)
        offset = re.search(r"offset\s*=\s*(0x[0-9a-fA-F]+)", line)
        if port != "return":
            out[port] = (mode, int(offset.group(1), 16) if offset else None)
    return out


@pytest.mark.parametrize("kernel", sorted(xk.TOPS))
def test_tops_match_the_hls_interface(kernel):
    top = xk.TOPS[kernel]
    source = (ROOT / "hls" / kernel / f"{kernel}.cpp").read_text()
    assert [a.name for a in top.args] == signature(source, top.name)
    found = pragmas(source, top.name)
    for arg in top.args:
        mode, offset = found[arg.name]
        if arg.kind == xk.STREAM:
            assert mode == "axis", arg
        else:
            assert (mode, offset) == ("s_axilite", arg.offset), arg


@pytest.mark.parametrize("kernel", sorted(xk.MOVERS))
def test_data_movers_match_the_hls_interface(kernel):
    source = (ROOT / "hls" / "datamover" / "datamover.cpp").read_text()
    for mover in xk.MOVERS[kernel]:
        assert [a.name for a in mover.args] == signature(source, mover.name)
        found = pragmas(source, mover.name)
        for arg in mover.args:
            want = {xk.STREAM: "axis", xk.POINTER: "m_axi"}.get(arg.kind)
            if want:
                assert found[arg.name][0] == want, (mover.name, arg)
            else:
                assert arg.name not in found  # a plain scalar: Vitis places it after the 64-bit pointer


def test_connectivity_names_the_same_compute_units_and_streams():
    cfg = (ROOT / "hls" / "scripts" / "alveo_connectivity.cfg").read_text()
    nk = set(re.findall(r"^nk=(\w+):1:(\w+)$", cfg, re.M))
    sc = set(re.findall(r"^stream_connect=([\w.]+):([\w.]+)$", cfg, re.M))
    for kernel in ("replay", "mlp"):
        assert set(xk.compute_units(kernel)) <= nk
        assert set(xk.stream_connections(kernel)) <= sc
    assert len(nk) == 6 and len(sc) == 4  # nothing the table does not know
    # the tabular copies are linked from hls/build.mk with the copy number $(i)
    build = (ROOT / "hls" / "build.mk").read_text()
    for a, b in xk.stream_connections("tabular", 1):
        assert f"--connectivity.sc {a}:{b}".replace("_1.", "_$(i).") in build
    assert "tabular_top mm2s_tabular s2mm_tabular" in build
    assert [n for n, _ in xk.compute_units("tabular")] == ["tabular_top", "mm2s_tabular", "s2mm_tabular"]


def test_cu_spec_is_the_name_xrt_opens():
    assert xk.cu_spec("replay_top") == "replay_top:{replay_top_1}"
    assert xk.cu_spec("s2mm_tabular", 1) == "s2mm_tabular:{s2mm_tabular_2}"
