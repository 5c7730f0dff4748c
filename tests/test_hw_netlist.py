"""Gate-level simulation: each kernel's synthesized ECP5 netlist (Yosys synth_ecp5, the cell models
Yosys ships) under the same cocotb testbench as its RTL, bit-exact against the numpy reference; and a
mutant netlist that the same testbench must reject (pearl_fpga/hw/netlist.py).

The netlists are synthesized into build/netlist/ and reused while the RTL and Yosys do not change.
"""

from __future__ import annotations

import functools
import re
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import hw_prefetch
import pytest

from pearl_fpga.hw.netlist import public_signals, run_cocotb_netlist, synthesize_netlist, write_mutant

pytestmark = [pytest.mark.sim, pytest.mark.timeout(3600)]  # synthesis and Verilator slow down a lot under load

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
    # two lanes, two layers of up to 4 neurons: every block of mlp_top, the tanh table in two DP16KD (the one
    # block RAM of these netlists, hls/common/sim/DP16KD.sv); the multipliers are LUT logic (-nodsp), so few lanes
    "mlp": {
        "parameters": {"LANES": 2, "MAX_WIDTH": 4, "MAX_LAYERS": 2},
        "test_dir": COCOTB / "mlp", "test_module": "test_mlp_top",
        "env": {"MLP_LANES": "2", "MLP_MAX_WIDTH": "4", "MLP_MAX_LAYERS": "2", "MLP_SEED": "7",
                "MLP_TB_RESULTS": str(REPO / "build" / "netlist" / "mlp_cycles.json")},
    },
    # the table (LUT RAM at 13 states), the hazard window, the pipeline (its products in LUTs: -nodsp)
    "tabular": {
        "parameters": {"N_STATES": 13, "N_ACTIONS": 3},
        "test_dir": COCOTB / "tabular", "test_module": "test_tabular_core", "top": "tabular_core",
        "env": {"TABULAR_STATES": "13", "TABULAR_ACTIONS": "3", "TABULAR_SEED": "13"},
    },
}


# The replay kernel at the smallest shape whose leaf slots are block RAM (33 words, more than replay_slot_ram's
# LUT-RAM limit): four 36-bit-wide DP16KD (Yosys's PDPW16KD mapping, the x36 mode of hls/common/sim/DP16KD.sv),
# the memories every catalog-size tree keeps its lower levels in. Minutes: `make test-hw`, not make test.
BRAM_CASE: dict[str, Any] = {
    "parameters": {"CAPACITY": 132, "FANOUT": 4, "FREE_RUN": 1},
    "test_dir": COCOTB / "replay", "test_module": "test_replay_top",
    "env": {"REPLAY_CAPACITY": "132", "REPLAY_FANOUT": "4", "REPLAY_FREE_RUN": "1", "REPLAY_SEED": "5"},
}


# The mutant runs on the smallest tree (one level): its netlist compiles in a fraction of the time.
MUTANT_CASE: dict[str, Any] = {
    "parameters": {"CAPACITY": 4, "FANOUT": 4, "FREE_RUN": 1},
    "test_dir": COCOTB / "replay", "test_module": "test_replay_top",
    "env": {"REPLAY_CAPACITY": "4", "REPLAY_FANOUT": "4", "REPLAY_FREE_RUN": "1", "REPLAY_SEED": "8"},
}


def _build_dir(kernel: str, case: dict[str, Any]) -> Path:
    tag = "_".join(f"{k.lower()}{v}" for k, v in case["parameters"].items())
    return REPO / "build" / "netlist" / f"{kernel}_{tag}"


def prefetch() -> list[Future[Path]]:
    """The netlists of make test's cases, synthesized in the background from the session's start
    (tests/hw_prefetch.py): Yosys is most of these tests' time, on one thread."""
    cases = [(kernel, case) for kernel, case in NETLIST_CASES.items()] + [("replay", MUTANT_CASE)]
    return [hw_prefetch.submit(f"netlist:{_build_dir(kernel, case)}",
                               functools.partial(synthesize_netlist, kernel, case["parameters"],
                                                 _build_dir(kernel, case) / "netlist", case.get("top")))
            for kernel, case in cases]


@pytest.fixture(scope="module")
def netlists() -> None:
    """The background syntheses, finished before a test touches their folders."""
    for run in prefetch():
        run.result()


PREFETCH_FIXTURES = ("netlists",)


@pytest.mark.parametrize("kernel", sorted(NETLIST_CASES))
def test_netlist_passes_the_rtl_testbench(kernel: str, netlists: None) -> None:
    case = NETLIST_CASES[kernel]
    run_cocotb_netlist(kernel, case["parameters"], test_module=case["test_module"], test_dir=case["test_dir"],
                       build_dir=_build_dir(kernel, case), extra_env=case["env"], top=case.get("top"))


@pytest.mark.hw_long
def test_replay_netlist_with_block_ram_passes_the_rtl_testbench() -> None:
    case = BRAM_CASE
    build = _build_dir("replay", case)
    netlist = synthesize_netlist("replay", case["parameters"], build / "netlist")
    widths = re.findall(r"DP16KD #\((?:[^;]*?)\.DATA_WIDTH_A\(32'd(\d+)\),\s*\.DATA_WIDTH_B\(32'd(\d+)\)", netlist.read_text())
    assert widths == [("36", "36")] * 4, f"expected the four leaf slots in x36 block RAM, found {widths}"
    run_cocotb_netlist("replay", case["parameters"], test_module=case["test_module"], test_dir=case["test_dir"],
                       build_dir=build, extra_env=case["env"])


def test_mutant_netlist_fails_the_testbench(netlists: None) -> None:
    """The command's index bit 0 inverted where the netlist reads it: the testbench must fail (with
    wrong answers, not a hang: a gate-level hang would run to the testbench's timeout)."""
    case = MUTANT_CASE
    build = _build_dir("replay", case)
    netlist = synthesize_netlist("replay", case["parameters"], build / "netlist")
    mutant = build / "mutant" / "replay_top_mutant.v"
    mutant.parent.mkdir(parents=True, exist_ok=True)
    view, pins = write_mutant(netlist, "s_axis_cmd_tdata[64]", mutant, "replay_top")
    assert pins >= 1 and view.is_file()
    # cocotb's runner ends a failed run with SystemExit or our AssertionError; results.xml says which test failed
    with pytest.raises((AssertionError, SystemExit)):
        run_cocotb_netlist("replay", case["parameters"], test_module=case["test_module"], test_dir=case["test_dir"],
                           build_dir=build, extra_env=case["env"], netlist=view,
                           testcase="test_same_index_and_shared_ancestors")
    from cocotb_tools.check_results import get_results

    assert get_results(build / f"sim-{view.stem}" / "results.xml") == (1, 1), "the mutant's one test should run and fail"


def test_testbench_probes_are_kept(netlists: None) -> None:
    """replay_top's `busy` (read by the cycle test) is marked public, so the netlist keeps it by name."""
    from pearl_fpga.hw.cores import read_core

    core = read_core("replay")
    assert public_signals(list(core.files), "replay_top") == ["busy"]
    case = NETLIST_CASES["replay"]
    netlist = synthesize_netlist("replay", case["parameters"], _build_dir("replay", case) / "netlist")
    for view in (netlist, netlist.with_name("replay_top_sim.v")):
        assert "wire busy;" in view.read_text(), view


def test_invert_input_refuses_what_it_cannot_mutate() -> None:
    from pearl_fpga.hw.ecp5 import ImplementationError
    from pearl_fpga.hw.netlist import invert_input

    text = "module t(a, y);\n  input [1:0] a;\n  output y;\n  LUT4 #(.INIT(16'h0002)) c (.A(a[0]), .B(a[0]), .Z(y));\nendmodule\n"
    mutated, pins = invert_input(text, "a[0]")
    assert pins == 2 and ".A(~a[0])" in mutated and ".Z(y)" in mutated
    with pytest.raises(ImplementationError, match="no cell of the netlist reads a\\[1\\]"):
        invert_input(text, "a[1]")
    with pytest.raises(ImplementationError, match="y is not an input"):
        invert_input(text, "y")
