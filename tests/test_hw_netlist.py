"""Gate-level simulation: each kernel's synthesized ECP5 netlist (Yosys synth_ecp5, the cell models
Yosys ships) under the same cocotb testbench as its RTL, bit-exact against the numpy reference; and a
mutant netlist that the same testbench must reject (pearl_fpga/hw/netlist.py).

The netlists are synthesized into build/netlist/ and reused while the RTL and Yosys do not change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pearl_fpga.hw.netlist import public_signals, run_cocotb_netlist, synthesize_netlist, write_mutant

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[1]
COCOTB = Path(__file__).resolve().parent / "cocotb"

# kernel -> the small shape its netlist runs at: RTL parameters, the testbench, its environment, and a
# top other than the core's where the testbench drives one block.
NETLIST_CASES: dict[str, dict[str, Any]] = {
    "replay": {
        "parameters": {"CAPACITY": 13, "FANOUT": 2, "FREE_RUN": 1},
        "test_dir": COCOTB / "replay", "test_module": "test_replay_top",
        "env": {"REPLAY_CAPACITY": "13", "REPLAY_FANOUT": "2", "REPLAY_FREE_RUN": "1", "REPLAY_SEED": "15"},
    },
    # the table in DP16KD, the hazard window, the pipeline (its products in LUTs: -nodsp)
    "tabular": {
        "parameters": {"N_STATES": 13, "N_ACTIONS": 3},
        "test_dir": COCOTB / "tabular", "test_module": "test_tabular_core", "top": "tabular_core",
        "env": {"TABULAR_STATES": "13", "TABULAR_ACTIONS": "3", "TABULAR_SEED": "13"},
    },
}


def _build_dir(kernel: str, case: dict[str, Any]) -> Path:
    tag = "_".join(f"{k.lower()}{v}" for k, v in case["parameters"].items())
    return REPO / "build" / "netlist" / f"{kernel}_{tag}"


@pytest.mark.parametrize("kernel", sorted(NETLIST_CASES))
def test_netlist_passes_the_rtl_testbench(kernel: str) -> None:
    case = NETLIST_CASES[kernel]
    run_cocotb_netlist(kernel, case["parameters"], test_module=case["test_module"], test_dir=case["test_dir"],
                       build_dir=_build_dir(kernel, case), extra_env=case["env"], top=case.get("top"))


def test_mutant_netlist_fails_the_testbench() -> None:
    """One LUT4 reading the command's index bit 0 with its INIT complemented: the testbench must fail."""
    case = NETLIST_CASES["replay"]
    build = _build_dir("replay", case)
    netlist = synthesize_netlist("replay", case["parameters"], build / "netlist")
    mutant = build / "mutant" / "replay_top_mutant.v"
    mutant.parent.mkdir(parents=True, exist_ok=True)
    flipped = write_mutant(netlist, "s_axis_cmd_tdata[64]", mutant)
    assert flipped
    with pytest.raises(AssertionError, match="cocotb tests failed"):
        run_cocotb_netlist("replay", case["parameters"], test_module=case["test_module"], test_dir=case["test_dir"],
                           build_dir=build, extra_env=case["env"], netlist=mutant,
                           testcase="test_same_index_and_shared_ancestors")


def test_testbench_probes_are_kept() -> None:
    """replay_top's `busy` (read by the cycle test) is marked public, so the netlist keeps it by name."""
    from pearl_fpga.hw.cores import read_core

    core = read_core("replay")
    assert public_signals(list(core.files), "replay_top") == ["busy"]
    case = NETLIST_CASES["replay"]
    netlist = synthesize_netlist("replay", case["parameters"], _build_dir("replay", case) / "netlist")
    assert "busy" in netlist.read_text().split("module replay_top", 1)[1].split(");", 1)[1]
