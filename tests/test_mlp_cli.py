"""`pearl-fpga bench mlp`: the table and the --json figures (no timing asserts: speed is judged by
reading the benchmark, not by tests)."""

from __future__ import annotations

import json

import pytest

from pearl_fpga.bench import mlp as bench_mlp
from pearl_fpga.cli import main
from pearl_fpga.commands import bench


def run_bench(argv: list[str]) -> int:
    return main(["bench", "mlp", *argv])


def test_cli_routes_bench_mlp_here():
    assert bench.BENCHES["mlp"].module == "mlp"
    assert callable(bench_mlp.run) and callable(bench_mlp.report)


def test_the_benchmark_runs_from_its_config():
    record = bench_mlp.run(bench_mlp.MlpBench(repeats=1, rtl=False))
    assert record["benchmark"] == "mlp" and record["command"] == "pearl-fpga bench mlp"
    assert [e["network"] for e in record["results"]["networks"]] == ["4-64-64-2", "3-256-256-1"]
    with pytest.raises(ValueError, match="repeats"):
        bench_mlp.MlpBench(repeats=0)


def test_bench_json_has_every_figure(capsys):
    assert run_bench(["--json", "--repeats", "1", "--no-rtl"]) == 0
    data = json.loads(capsys.readouterr().out)["results"]
    assert [e["network"] for e in data["networks"]] == ["4-64-64-2", "3-256-256-1"]
    for entry in data["networks"]:
        assert [r["batch"] for r in entry["rows"]] == [1, 32, 1024]
        assert entry["macs"] == {"4-64-64-2": 4 * 64 + 64 * 64 + 64 * 2, "3-256-256-1": 3 * 256 + 256 * 256 + 256}[entry["network"]]
        assert 0 <= entry["max_error"] < 0.05
        for row in entry["rows"]:
            for key in ("cpu_us", "torch_1thread_us", "torch_default_us"):
                assert row[key] > 0 and row[key] <= row[key.replace("_us", "_median_us")]
            assert row["speedup_vs_torch_1thread"] == pytest.approx(row["torch_1thread_us"] / row["cpu_us"])
            assert row["cpu_threads"] in ({1} if row["batch"] < 16 else {1, data["torch_default_threads"]})
        assert entry["rtl"] == {"available": False, "reason": "skipped (--no-rtl)"}
    from pearl_fpga import _mlp_native

    assert data["cpu_path"] in _mlp_native.PATHS and data["torch_default_threads"] >= 1


def test_bench_table(capsys):
    assert run_bench(["--repeats", "1", "--no-rtl"]) == 0
    out = capsys.readouterr().out
    assert "4-64-64-2" in out and "3-256-256-1" in out and "torch 1t" in out and "rtl unavailable" in out


def test_bench_rejects_zero_repeats(capsys):
    assert run_bench(["--repeats", "0"]) == 2
    assert "repeats must be at least 1" in capsys.readouterr().err


@pytest.mark.sim
def test_rtl_row_reports_cycles():
    import numpy as np

    from pearl_fpga.kernels import MLPInfer
    from test_mlp_quant import mlp  # tests/ is on sys.path under pytest

    policy = MLPInfer.from_torch(mlp([4, 16, 2]), calibration=np.zeros((4, 4)))
    row = bench_mlp._rtl_row(policy.layers, (4, 16, 2))
    assert row["available"], row
    assert row["cycles_per_inference"] > 0 and row["cycles_batch1"] > 0
    assert row["target_cycles_per_inference"] == pytest.approx((4 * 16 + 16 * 2) / row["lanes"] + 8 * 2 + 16)


def test_rtl_row_says_why_not_when_the_backend_cannot_run(monkeypatch):
    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.kernels import mlp as mlp_module

    def unavailable(name):
        raise BackendUnavailable("no Verilator here")

    monkeypatch.setattr(mlp_module, "make_backend", unavailable)
    row = bench_mlp._rtl_row([], (4, 16, 2))
    assert row == {"available": False, "reason": "BackendUnavailable: no Verilator here"}
