"""The tabular kernel's copies on a board: which IP, DMA or compute unit each instance opens (against
stand-ins of pynq and pyxrt that record the names asked for), and the partitioned mode spreading its
slices over the instances. The driver itself runs against the RTL in tests/test_board_sim.py."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

from pearl_fpga.backends.tabular_numpy import TabularNumpyBackend
from pearl_fpga.board import manifest as mf
from pearl_fpga.board import overlay
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.errors import ManifestError
from pearl_fpga.kernels import TabularQ
from pearl_fpga.spec.tabular import merge_partitions


def make_build(folder: Path, board: str) -> Path:
    """A bitstream folder as the build leaves it (placeholder .bit/.hwh/.xclbin: never loaded here)."""
    spec = load_catalog()[board]
    files = {"bit": "pearl_fpga.bit", "hwh": "pearl_fpga.hwh"} if spec.kind == "zynq" else {"xclbin": "pearl_fpga.xclbin"}
    mf.write_manifest(mf.build_manifest(board, files, {"vivado": "2024.2"}), folder / "manifest.json")
    for name in files.values():
        (folder / name).write_bytes(b"placeholder")
    return folder


def fake_pynq(monkeypatch) -> None:
    """pynq whose Overlay has any block asked for (the names are what the test checks)."""
    class Overlay:
        def __init__(self, path):
            self.path = path

        def __getattr__(self, name):
            return types.SimpleNamespace(name=name)

    monkeypatch.setitem(sys.modules, "pynq", types.SimpleNamespace(Overlay=Overlay, allocate=None))
    monkeypatch.setattr(overlay, "_loaded", {})


def fake_pyxrt(monkeypatch) -> list[str]:
    """pyxrt that records the compute-unit names opened."""
    opened: list[str] = []

    class Device:
        def __init__(self, index):
            pass

        def load_xclbin(self, xclbin):
            return "uuid"

    def open_cu(device, uuid, name):
        opened.append(name)
        return types.SimpleNamespace(name=name)

    monkeypatch.setitem(sys.modules, "pyxrt", types.SimpleNamespace(device=Device, xclbin=lambda path: path,
                                                                     kernel=open_cu))
    monkeypatch.setattr(overlay, "_loaded", {})
    return opened


def test_each_instance_opens_its_own_ip_and_dma_on_pynq(tmp_path, monkeypatch):
    make_build(tmp_path, "zcu104")
    fake_pynq(monkeypatch)
    assert load_catalog()["zcu104"].kernels["tabular"]["instances"] == 2
    t0, entry = overlay.open_kernel("tabular", "pynq", directory=tmp_path)
    t1, _ = overlay.open_kernel("tabular", "pynq", directory=tmp_path, instance=1)
    assert entry.instances == 2
    assert (t0.ip.name, t0.dma.name) == ("tabular_top_0", "dma_tabular")
    assert (t1.ip.name, t1.dma.name) == ("tabular_top_1", "dma_tabular_1")
    with pytest.raises(ManifestError, match=r"holds 2 tabular kernel instance\(s\) \(0..1\), not instance 2"):
        overlay.open_kernel("tabular", "pynq", directory=tmp_path, instance=2)
    with pytest.raises(ManifestError, match=r"holds 1 replay kernel instance"):
        overlay.open_kernel("replay", "pynq", directory=tmp_path, instance=1)


def test_each_instance_opens_its_own_compute_units_on_xrt(tmp_path, monkeypatch):
    make_build(tmp_path, "alveo-u55c")
    opened = fake_pyxrt(monkeypatch)
    overlay.open_kernel("tabular", "xrt", directory=tmp_path, instance=1)
    assert opened == ["tabular_top:{tabular_top_2}", "mm2s_tabular:{mm2s_tabular_2}", "s2mm_tabular:{s2mm_tabular_2}"]
    opened.clear()
    overlay.open_kernel("replay", "xrt", directory=tmp_path)
    assert opened == ["replay_top:{replay_top_1}", "mm2s_replay:{mm2s_replay_1}", "s2mm_replay:{s2mm_replay_1}"]


class BoardStandIn(TabularNumpyBackend):
    """A board backend with two kernel instances, computing with the reference; logs who ran what."""

    instances = 2
    log: list[tuple[int, int]] = []  # (instance, rows updated)
    both_running = threading.Barrier(2, timeout=10)  # passed only if the two instances run at once

    def __init__(self, n_states, n_actions, transport="pynq", instance=0, **options):
        super().__init__(n_states, n_actions)
        self.instance = instance
        self.calls = 0

    def update(self, s, a, r, s2, a2, done):
        if self.calls == 0:
            self.both_running.wait()
        self.calls += 1
        self.log.append((self.instance, len(s)))
        super().update(s, a, r, s2, a2, done)


def test_partitioned_mode_runs_its_slices_on_every_instance(monkeypatch):
    import pearl_fpga.board.tabular_driver as driver

    monkeypatch.setattr(driver, "TabularBoardBackend", BoardStandIn)
    BoardStandIn.log = []
    rng = np.random.default_rng(0)
    n = 50
    b = dict(s=rng.integers(0, 6, n), a=rng.integers(0, 3, n), r=rng.normal(0, 3, n), s2=rng.integers(0, 6, n),
             done=rng.random(n) < 0.1)
    k = TabularQ(6, 3, alpha=0.5, gamma=0.9, backend="pynq")
    k.update_partitioned(**b, parts=5)
    tables = []
    for idx in np.array_split(np.arange(n), 5):
        one = TabularQ(6, 3, alpha=0.5, gamma=0.9, backend="numpy")
        one.update(**{key: v[idx] for key, v in b.items()})
        tables.append(one.table)
    np.testing.assert_array_equal(k.table, merge_partitions(tables))
    # slices 0, 2, 4 on instance 0 and 1, 3 on instance 1; the two instances ran at once (the barrier)
    assert [e for e in BoardStandIn.log if e[0] == 0] == [(0, 10), (0, 10), (0, 10)]
    assert [e for e in BoardStandIn.log if e[0] == 1] == [(1, 10), (1, 10)]
