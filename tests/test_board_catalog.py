"""The board catalog (bitstreams/catalog.json) and its loader: every board valid, bad files rejected clearly."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from pearl_fpga.board import catalog as cat
from pearl_fpga.board.catalog import CatalogError, load_catalog

REPO = Path(__file__).resolve().parents[1]
BOARDS = ("pynq-z2", "zcu104", "kv260", "alveo-u250", "alveo-u280", "alveo-u55c")


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads((REPO / "bitstreams" / "catalog.json").read_text())


def write(tmp_path: Path, doc: dict | str) -> Path:
    path = tmp_path / "catalog.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def test_every_board_loads_with_its_kind_and_sources():
    boards = load_catalog()
    assert set(BOARDS) <= set(boards)
    for name in BOARDS:
        spec = boards[name]
        assert spec.name == name
        assert (spec.kind == "zynq") == (spec.board_part is not None) == (spec.platform is None)
        assert spec.power_source == "nominal" and spec.power_active_w >= spec.power_idle_w
        assert "not measured" in spec.notes, f"{name}: the notes must say the figures are nominal"
        # every kernel size fits the SPEC limits and the board's MLP is at most the board width of SPEC.md
        assert spec.kernels["mlp"]["max_width"] <= 256 and spec.kernels["replay"]["capacity"] <= 1 << 20


def test_transfer_model_is_latency_plus_bytes_over_bandwidth():
    spec = load_catalog()["pynq-z2"]
    t0, t1 = spec.transfer_seconds(0), spec.transfer_seconds(1_000_000)
    assert t0 == pytest.approx(spec.link_latency_us * 1e-6)
    assert t1 - t0 == pytest.approx(1e6 / (spec.link_bandwidth_gbps * 1e9))
    assert spec.kernel_seconds(spec.clock_mhz * 1e6) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        spec.transfer_seconds(-1)


def test_boardspec_is_frozen():
    spec = load_catalog()["kv260"]
    with pytest.raises(AttributeError):
        spec.clock_mhz = 1  # type: ignore[misc]


def test_corrupt_json_names_the_file(tmp_path):
    path = write(tmp_path, '{"schema": 1, "boards": {')
    with pytest.raises(CatalogError, match=r"catalog\.json is not valid JSON"):
        load_catalog(path)


def test_missing_file(tmp_path):
    with pytest.raises(CatalogError, match="not found"):
        load_catalog(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["boards"]["pynq-z2"].pop("part"), r"boards\.pynq-z2: missing field 'part'"),
        (lambda d: d["boards"]["pynq-z2"].update(kind="asic"), r"kind must be one of"),
        (lambda d: d["boards"]["alveo-u250"].update(board_part="x:y:z"), r"alveo card needs 'platform'"),
        (lambda d: d["boards"]["zcu104"]["kernels"]["replay"].update(fanout=3), r"fanout must be one of"),
        (lambda d: d["boards"]["zcu104"]["kernels"]["replay"].update(capacity=1 << 21), r"capacity must be an integer in"),
        (lambda d: d["boards"]["kv260"]["kernels"]["mlp"].update(max_layers=5), r"max_layers must be an integer in \[1, 4\]"),
        (lambda d: d["boards"]["kv260"]["power_w"].update(active=1.0), r"active power .* below idle"),
        (lambda d: d["boards"]["kv260"]["link"].update(kind="pcie"), r"link\.kind must be 'axi-hp'"),
        (lambda d: d["boards"]["kv260"]["link"].update(bandwidth_gbps="fast"), r"bandwidth_gbps must be a number"),
        (lambda d: d["boards"]["kv260"]["resources"].update(lut=True), r"resources\.lut must be an integer"),
        (lambda d: d["boards"]["kv260"]["kernels"].update(fft={}), r"unknown kernel"),
        (lambda d: d["boards"]["alveo-u280"].pop("slrs"), r"alveo card needs 'slrs'"),
        (lambda d: d["boards"]["alveo-u280"]["slrs"]["kernels"].update(mlp=3), r"slrs\.kernels\.mlp must be an integer in \[0, 2\]"),
        (lambda d: d["boards"]["alveo-u280"]["slrs"]["kernels"].pop("tabular"), r"slrs\.kernels: missing field 'tabular'"),
        (lambda d: d["boards"]["pynq-z2"].update(replay_leaf_memory="uram"), r"no UltraRAM"),
        (lambda d: d["boards"]["kv260"].update(replay_leaf_memory="sram"), r"replay_leaf_memory must be one of"),
        (lambda d: d.update(schema=2), r"schema is 2"),
        (lambda d: d.update(boards={}), r"non-empty object"),
    ],
)
def test_invalid_entries_are_rejected_naming_the_field(tmp_path, raw, edit, message):
    doc = copy.deepcopy(raw)
    edit(doc)
    with pytest.raises(CatalogError, match=message):
        load_catalog(write(tmp_path, doc))


def test_hls_macros_exist_in_the_kernel_headers():
    """The build passes catalog sizes as -D macros: each must be one the kernel's generated config header
    (included by its HLS header) reads."""
    for kernel, macros in cat.HLS_MACROS.items():
        assert f'#include "{kernel}_config.h"' in (REPO / "hls" / kernel / f"{kernel}.h").read_text()
        header = (REPO / "hls" / kernel / f"{kernel}_config.h").read_text()
        for macro in macros.values():
            assert re.search(rf"#ifndef {macro}\b", header), f"hls/{kernel}/{kernel}_config.h does not read -D{macro}"
    spec = load_catalog()["zcu104"]
    assert cat.hls_defines(spec, "replay") == (
        f"-DREPLAY_CAPACITY={spec.kernels['replay']['capacity']} -DREPLAY_FANOUT={spec.kernels['replay']['fanout']}"
    )


def test_build_helper_cli(capsys):
    spec = load_catalog()["alveo-u55c"]
    assert cat.main(["get", "alveo-u55c", "part"]) == 0
    assert capsys.readouterr().out.strip() == spec.part
    assert cat.main(["get", "alveo-u55c", "period_ns"]) == 0
    assert float(capsys.readouterr().out) == pytest.approx(1000 / spec.clock_mhz, rel=1e-5)
    assert cat.main(["board-of", spec.platform]) == 0
    assert capsys.readouterr().out.strip() == "alveo-u55c"
    assert cat.main(["get", "no-such-board", "part"]) == 2
    assert "unknown board 'no-such-board'" in capsys.readouterr().err
    assert cat.main(["get", "pynq-z2", "colour"]) == 2
    assert cat.main(["board-of", "xilinx_nothing"]) == 2


@pytest.mark.parametrize("board", sorted(load_catalog()))
def test_notes_state_no_kernel_size_and_describe_states_the_parameters(board):
    """The notes once described kernel sizes in prose that drifted from the parameters (zcu104 "4096 x 8"
    against 1024 states, Alveo "16384 x 16, 2 x 512 BRAM36" against 4096 x 16): they now name only the
    sources of the figures, and describe() writes the sizes from the parameters."""
    spec = load_catalog()[board]
    assert not re.search(r"(?i)\b(replay|mlp|tabular|q table|instances?)\b|BRAM36 by", spec.notes), spec.notes
    text = spec.describe()
    assert text.startswith(spec.notes)
    t = spec.kernels["tabular"]
    assert f"{t['states']} x {t['actions']} Q table" in text and f"tabular: {t['instances']} instance" in text
    r, m = spec.kernels["replay"], spec.kernels["mlp"]
    assert f"replay: {r['capacity']} leaves, fan-out {r['fanout']}" in text
    assert f"mlp: {m['lanes']} MAC lanes, up to {m['max_layers']} layers of width {m['max_width']}" in text
    for figure in re.findall(r"\b(\d+) x (\d+)\b", text):
        assert tuple(map(int, figure)) == (t["states"], t["actions"]), figure
