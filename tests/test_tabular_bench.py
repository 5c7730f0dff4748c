"""`pearl-fpga bench tabular`: the stream generator, and one tiny run with its JSON record."""

from __future__ import annotations

import importlib.util
import json

import numpy as np

from pearl_fpga.cli import main
from pearl_fpga.bench.tabular import hazard_rate, trajectories


def test_trajectories_chain_and_hazard_rate():
    d = trajectories(5000, 50, 4, seed=1)
    cont = ~d["done"][:-1]
    np.testing.assert_array_equal(d["s"][1:][cont], d["s2"][:-1][cont])  # each transition starts where the last ended
    assert d["s"].max() < 50 and d["a"].max() < 4 and 0.005 < d["done"].mean() < 0.02
    s = np.array([0, 1, 2, 3])
    assert hazard_rate(s, np.array([9, 0, 9, 9]), depth=1) == 0.25  # s2[1] == s[0]
    assert 0.3 < hazard_rate(d["s"], d["s2"]) < 0.8  # the random walk revisits recent rows often


def test_bench_tabular_json(capsys):
    assert main(["bench", "tabular", "--updates", "3000", "--numpy-updates", "2000", "--repeats", "1", "--no-rtl",
                 "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["benchmark"] == "tabular" and "under_load" in record and record["command"].startswith("pearl-fpga")
    rows = record["results"]["rows"]
    assert rows["numpy loop"]["vs_numpy_loop"] == 1.0 and rows["numpy loop"]["updates_per_s"] > 0
    for name in ("numba", "cpu backend"):
        has = importlib.util.find_spec("numba" if name == "numba" else "pearl_fpga.backends.tabular_cpu") is not None
        assert (name in rows) == has
        if has:
            assert rows[name]["exact"] is True and rows[name]["updates_per_s"] > 0


def test_bench_tabular_table_and_bad_option(capsys):
    assert main(["bench", "tabular", "--updates", "2000", "--numpy-updates", "1000", "--repeats", "1",
                 "--no-rtl"]) == 0
    out = capsys.readouterr().out
    assert "numpy loop" in out and "updates/s" in out and "machine:" in out
    assert main(["bench", "tabular", "--updates", "0"]) == 2


def test_bench_tabular_policies_json(capsys):
    """CliffWalking with the presets: Q-learning finds the shortest path (-13, the target), SARSA the safe one."""
    assert main(["bench", "tabular-policies", "--envs", "CliffWalking-v1", "--eval-episodes", "20", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["benchmark"] == "tabular-policies"
    rows = {r["algo"]: r for r in record["results"]["rows"]}
    assert rows["qlearning"]["exact_return"] == -13.0 and rows["qlearning"]["target_met"] is True
    assert rows["sarsa"]["target_met"] is None and rows["sarsa"]["exact_success"] == 1.0
    assert main(["bench", "tabular-policies", "--eval-episodes", "0"]) == 2


def test_policy_targets():
    from pearl_fpga.bench.tabular_policies import _met

    assert _met("Taxi-v4", 7.93, 1.0) and not _met("Taxi-v4", 7.857, 1.0) and not _met("Taxi-v4", 8.0, 0.99)
    assert _met("FrozenLake8x8-v1", 0.88, 0.884) and not _met("FrozenLake8x8-v1", 0.8, 0.84)
    assert _met("CliffWalking-v1", -13.0, 1.0) and not _met("CliffWalking-v1", -17.0, 1.0)
    assert _met("FrozenLake-v1", 0.7, 0.7) is None
