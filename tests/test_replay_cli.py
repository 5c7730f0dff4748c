"""`pearl-fpga bench replay` at a tiny size: the table prints and --json parses into the figures."""

from __future__ import annotations

import json

import pytest

from pearl_fpga.bench import replay as bench_replay
from pearl_fpga.cli import main
from pearl_fpga.errors import BackendUnavailable

TINY = ["--capacity", "300", "--batch", "16", "--repeats", "5", "--obs-dim", "2"]


def run(argv: list[str]) -> int:
    return main(["bench", "replay", *argv])


def test_bench_json_parses(capsys):
    assert run([*TINY, "--json", "--no-rtl", "--baselines", "cpprb"]) == 0
    report = json.loads(capsys.readouterr().out)["results"]
    assert report["config"]["capacity"] == 300 and report["config"]["batch"] == 16
    for key in ("pearl_fpga", "sampler_cpu", "sampler_numpy"):
        row = report["results"][key]
        assert row["sample_us"] > 0 and row["update_us"] > 0 and row["iteration_us"] > 0
    assert report["results"]["torchrl"] == {"error": "skipped (--baselines)"}
    cpprb = report["results"]["cpprb"]
    if "error" not in cpprb:  # installed with the bench extra
        best = report["best_baseline_iteration_us"]
        assert best == cpprb["iteration_us"]
        assert report["results"]["pearl_fpga"]["speedup_vs_best_baseline"] == pytest.approx(
            best / report["results"]["pearl_fpga"]["iteration_us"]
        )
    assert report["rtl"] == {"error": "skipped (--no-rtl)"}


def test_bench_table_and_missing_rtl(capsys, monkeypatch):
    def no_rtl(args):
        raise BackendUnavailable("Verilator is not installed")

    monkeypatch.setattr(bench_replay, "bench_rtl", no_rtl)
    assert run([*TINY, "--baselines", ""]) == 0
    out = capsys.readouterr().out
    assert "pearl_fpga buffer (cpu)" in out and "ReplaySampler numpy" in out
    assert "rtl backend: not available: Verilator is not installed" in out


def test_bench_reports_a_failing_baseline_instead_of_crashing(capsys, monkeypatch):
    def broken(args):
        raise RuntimeError("SumSegmentTreeFp32 is not available.")

    monkeypatch.setattr(bench_replay, "bench_torchrl", broken)
    assert run([*TINY, "--json", "--no-rtl", "--baselines", "torchrl"]) == 0
    report = json.loads(capsys.readouterr().out)["results"]
    assert report["results"]["torchrl"]["error"].startswith("failed to load: SumSegmentTreeFp32")


def test_bench_rejects_bad_arguments(capsys):
    assert run(["--capacity", "0"]) == 2
    assert run(["--baselines", "rllib"]) == 2
    assert "unknown baselines" in capsys.readouterr().err


def test_the_benchmark_runs_from_its_config():
    record = bench_replay.run(bench_replay.ReplayBench(capacity=300, batch=16, repeats=5, obs_dim=2, baselines=(),
                                                       rtl=False))
    assert record["benchmark"] == "replay" and record["results"]["results"]["pearl_fpga"]["iteration_us"] > 0
    with pytest.raises(ValueError, match="unknown baselines"):
        bench_replay.ReplayBench(baselines=("rllib",))


def test_through_the_pearl_fpga_entry_point(capsys):
    assert main(["bench", "replay", *TINY, "--json", "--no-rtl", "--baselines", ""]) == 0
    report = json.loads(capsys.readouterr().out)["results"]
    assert report["results"]["pearl_fpga"]["iteration_us"] > 0
    assert report["best_baseline_iteration_us"] is None


def test_bench_rtl_counts_cycles_within_the_spec_bound():
    """The rtl row of the record: one full batch of updates and of samples on the RTL, in cycles."""
    pytest.importorskip("cocotb")
    rtl = bench_replay.bench_rtl(bench_replay.ReplayBench(capacity=300, batch=16, rtl_capacity=300))
    assert rtl["capacity"] == 300 and rtl["batch"] == 16
    assert 16 <= rtl["update_cycles"] <= rtl["bound_cycles"]
    assert 16 <= rtl["sample_cycles"] <= rtl["bound_cycles"]
