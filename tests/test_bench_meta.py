"""The metadata every benchmark record carries, and how a run under load is told apart."""

import pytest

from pearl_fpga.bench import meta as bench_meta
from pearl_fpga.bench.meta import LoadProbe, with_metadata


def fake_machine(monkeypatch, cores: int, busy: list[float], own: list[float], clock: list[float],
                 loads: list[list[float]]) -> None:
    monkeypatch.setattr(bench_meta, "cores", lambda: cores)
    monkeypatch.setattr(bench_meta, "_busy_seconds", lambda: busy.pop(0))
    monkeypatch.setattr(bench_meta, "_own_seconds", lambda: own.pop(0))
    monkeypatch.setattr(bench_meta.time, "monotonic", lambda: clock.pop(0))
    monkeypatch.setattr(bench_meta, "load_average", lambda: loads.pop(0))


def test_own_threads_are_not_load(monkeypatch):
    # 10 s: the machine was busy 19.5 core-seconds, 19 of them this benchmark's own (a 2-thread learner)
    fake_machine(monkeypatch, 2, busy=[100.0, 119.5], own=[5.0, 24.0], clock=[0.0, 10.0],
                 loads=[[0.1, 0, 0], [1.9, 0, 0]])
    with LoadProbe() as probe:
        pass
    f = probe.figures()
    assert f["other_cores_busy"] == pytest.approx(0.05)
    assert f["under_load"] is False
    assert f["load_after"][0] == 1.9  # the load average, recorded as is, counts our own threads


def test_other_processes_make_a_run_under_load(monkeypatch):
    # another job kept 1.5 cores busy on a 2-core machine
    fake_machine(monkeypatch, 2, busy=[0.0, 25.0], own=[0.0, 10.0], clock=[0.0, 10.0], loads=[[1.5, 0, 0], [2.5, 0, 0]])
    with LoadProbe() as probe:
        pass
    assert probe.figures()["other_cores_busy"] == pytest.approx(1.5)
    assert probe.figures()["under_load"] is True


def test_without_proc_stat_the_load_average_before_decides(monkeypatch):
    fake_machine(monkeypatch, 2, busy=[None, None], own=[0.0, 1.0], clock=[0.0, 1.0], loads=[[1.4, 0, 0], [0.2, 0, 0]])
    with LoadProbe() as probe:
        pass
    assert probe.figures() == {"load_before": [1.4, 0, 0], "load_after": [0.2, 0, 0], "other_cores_busy": None,
                               "under_load": True}


def test_record_carries_command_commit_machine_and_load():
    with LoadProbe() as probe:
        sum(range(10000))
    record = with_metadata("replay", {"x": 1}, ["bench", "replay", "--repeats", "3"], probe)
    assert record["command"] == "pearl-fpga bench replay --repeats 3"
    assert record["benchmark"] == "replay" and record["results"] == {"x": 1}
    assert record["machine"]["cores"] >= 1 and record["machine"]["cpu"]
    assert len(record["load_average_before"]) == 3 and isinstance(record["under_load"], bool)
    assert record["date"].endswith("+00:00")
    # a record of per-run flags is under load when any run was
    assert with_metadata("train", {"runs_under_load": 2}, None, probe)["under_load"] is True
    assert with_metadata("train", {"runs_under_load": 0}, None, probe)["under_load"] is False


def test_processes_the_run_started_are_its_own(monkeypatch):
    # a local Ray instance: 10 s, the machine busy 20 core-seconds, 2 of them this process's, 17.5 its
    # raylet's and actors' (descendants, seen in /proc): other load 0.05 cores
    fake_machine(monkeypatch, 2, busy=[0.0, 20.0], own=[1.0, 3.0], clock=[0.0, 10.0], loads=[[0.1, 0, 0], [1.9, 0, 0]])
    samples = iter([{}, {101: 5.0, 102: 4.0}, {101: 9.0, 102: 8.5}])
    monkeypatch.setattr(bench_meta, "_descendant_seconds", lambda: next(samples, {101: 9.0, 102: 8.5}))
    monkeypatch.setattr(bench_meta, "_self_seconds", iter([0.0, 2.0]).__next__)
    with LoadProbe() as probe:
        probe._record()
    assert probe.figures()["other_cores_busy"] == pytest.approx(0.05)
    assert probe.figures()["under_load"] is False
