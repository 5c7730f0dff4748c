"""The tabular kernel's reference RTL (hls/tabular/rtl/tabular_core.sv) under cocotb and Verilator:
bit-exact against the numpy reference on random and adversarial streams, on the HLS top's schedule
(spec.tabular.hls_issue_schedule, the last write spec.tabular.rtl_latency clocks after the last issue)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from pearl_fpga.sim.verilator import kernel_rtl
from pearl_fpga.spec.tabular import hls_issue_slots, rtl_latency

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[1]
COCOTB_DIR = Path(__file__).resolve().parent / "cocotb" / "tabular"


# (17, 33): a row-max tree of 6 levels, the longest pipeline (LATENCY = HAZARD_WINDOW - 1)
@pytest.mark.parametrize("states,actions", [(13, 3), (8, 6), (17, 33)], ids=lambda v: str(v))
def test_cocotb_tabular_core(states: int, actions: int) -> None:
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    build_dir = REPO / "build" / "sim" / f"tabular_core_s{states}_a{actions}"
    run_cocotb(
        top="tabular_core",
        sources=[p for p in kernel_rtl("tabular") if p.name == "tabular_core.sv"],
        test_module="test_tabular_core",
        test_dir=COCOTB_DIR,
        build_dir=build_dir,
        parameters={"N_STATES": states, "N_ACTIONS": actions},
        build_args=["-CFLAGS", "-O0"],
        extra_env={"TABULAR_STATES": str(states), "TABULAR_ACTIONS": str(actions), "TABULAR_SEED": str(states)},
    )
    figures = json.loads((build_dir / "tabular_cycles.json").read_text())
    print(f"tabular_core ({states} x {actions}): {figures}", file=sys.stderr)
    assert figures["clocks"] == figures["issue_slots"] + rtl_latency(actions)


def test_rtl_backend_cycles_and_shapes() -> None:
    from pearl_fpga.board.tabular_driver import MAX_RTL_ENTRIES, build_shape
    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.kernels import TabularQ

    assert build_shape(7, 3) == (16, 4) and build_shape(64, 6) == (64, 8) and build_shape(17, 1) == (32, 4)
    rng = np.random.default_rng(0)
    n = 500
    s = rng.integers(0, 7, n)
    batch = dict(s=s, a=rng.integers(0, 3, n), r=rng.normal(0, 3, n), s2=np.roll(s, -1), done=rng.random(n) < 0.05)
    rtl = TabularQ(7, 3, alpha=0.2, gamma=0.97, backend="rtl")
    ref = TabularQ(7, 3, alpha=0.2, gamma=0.97, backend="numpy")
    for k in (rtl, ref):
        k.update(**batch)
    np.testing.assert_array_equal(rtl.table, ref.table)
    # the HLS top's issue slots, plus the same fixed overhead (command head, pipeline, ap_done) for any batch
    assert rtl.last_cycles >= hls_issue_slots(batch["s"], batch["s2"]) + rtl_latency(4)
    overheads = {rtl.last_cycles - hls_issue_slots(batch["s"], batch["s2"])}
    for m in (1, 40, 300):
        rtl.update(**{name: column[:m] for name, column in batch.items()})
        overheads.add(rtl.last_cycles - hls_issue_slots(batch["s"][:m], batch["s2"][:m]))
    assert len(overheads) == 1, f"cycles minus issue slots differ with the batch: {overheads}"
    with pytest.raises(BackendUnavailable, match="use backend='cpu'"):
        TabularQ(MAX_RTL_ENTRIES, 8, backend="rtl")


def test_rtl_backend_timeout_resets_and_stays_usable() -> None:
    """A call over its cycle limit raises KernelTimeout naming the IP and the limit; the model is reset
    with its table cleared and its configuration kept, so a reload and more updates match numpy."""
    from pearl_fpga.errors import KernelTimeout
    from pearl_fpga.kernels import TabularQ

    rng = np.random.default_rng(3)
    n = 200
    s = rng.integers(0, 7, n)
    batch = dict(s=s, a=rng.integers(0, 3, n), r=rng.normal(0, 3, n), s2=np.roll(s, -1), done=rng.random(n) < 0.05,
                 a2=rng.integers(0, 3, n))
    # room for the first 20 updates on the HLS top's schedule (and a call's control), not for all 200
    limit = hls_issue_slots(s[:20], batch["s2"][:20]) + 100
    assert hls_issue_slots(s, batch["s2"]) > 2 * limit
    rtl = TabularQ(7, 3, alpha=0.2, gamma=0.97, algo="sarsa", backend="rtl", cycle_limit=limit)
    ref = TabularQ(7, 3, alpha=0.2, gamma=0.97, algo="sarsa", backend="numpy")
    half = {name: column[:20] for name, column in batch.items()}
    rtl.update(**half)
    ref.update(**half)
    with pytest.raises(KernelTimeout, match=rf"tabular kernel on Verilator simulation of tabular_top.*within {limit} clock cycles"
                                            r".*table cleared"):
        rtl.update(**batch)
    assert not rtl.table.any()
    rtl.load(ref.table)
    rtl.update(**half)
    ref.update(**half)
    np.testing.assert_array_equal(rtl.table, ref.table)
