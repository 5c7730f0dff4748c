"""The file fuzz suite (pearl_fpga/bench/fuzz.py) in `make test`: a few hundred seeded inputs of every
kind of file users hand the package, each loaded in a worker process with a timeout. No traceback, no
hang, no refusal that does not name the file, no corrupted dump that loads changed content; and
docs/figures/fuzz.json, behind docs/reliability.md's table, counts the same inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pearl_fpga.bench.fuzz import MUST_BE_ZERO, FuzzBench, measure

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fuzz_results():
    return measure(FuzzBench())


def test_no_traceback_hang_unclear_error_or_changed_load(fuzz_results):
    lines = [f"{f['kind']} {f['label']}: {f['column']} {f.get('type', '')} {f.get('message', '')[:300]}"
             for f in fuzz_results["failures"]]
    assert not lines, "\n".join(lines)
    assert all(fuzz_results["total"][c] == 0 for c in MUST_BE_ZERO)


def test_every_kind_gets_its_inputs_and_most_are_refused(fuzz_results):
    for kind, counts in fuzz_results["kinds"].items():
        assert counts["inputs"] == FuzzBench.per_kind, kind
        assert counts["clear_errors"] > counts["inputs"] // 2, kind  # corruptions, not only harmless edits
        assert "special" in counts["mutations"], kind  # FIFO, /dev/zero, directory, sparse file...


def test_the_documented_figures_count_the_same_inputs(fuzz_results):
    """The record behind docs/reliability.md was written by this suite's configuration (regenerate it
    with `pearl-fpga bench fuzz --json docs/figures/fuzz.json`, then `python docs/render.py`)."""
    record = json.loads((ROOT / "docs" / "figures" / "fuzz.json").read_text())["results"]
    assert record["seed"] == FuzzBench.seed and record["per_kind"] == FuzzBench.per_kind
    assert {k: v["inputs"] for k, v in record["kinds"].items()} == {k: v["inputs"]
                                                                      for k, v in fuzz_results["kinds"].items()}
    assert all(record["total"][c] == 0 for c in MUST_BE_ZERO)
