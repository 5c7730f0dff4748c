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


_MODEL_MISUSE_TB = """
module tb;
  reg clk = 0;
  always #5 clk = ~clk;
  wire [17:0] doa, dob;
  // a x36 port B asked to write: the PDPW16KD mode only reads on B
  DP16KD #(.DATA_WIDTH_A(36), .DATA_WIDTH_B(36)) ram (
    .DIA17(1'b0), .DIA16(1'b0), .DIA15(1'b0), .DIA14(1'b0), .DIA13(1'b0), .DIA12(1'b0), .DIA11(1'b0), .DIA10(1'b0),
    .DIA9(1'b0), .DIA8(1'b0), .DIA7(1'b0), .DIA6(1'b0), .DIA5(1'b0), .DIA4(1'b0), .DIA3(1'b0), .DIA2(1'b0),
    .DIA1(1'b0), .DIA0(1'b0), .ADA13(1'b0), .ADA12(1'b0), .ADA11(1'b0), .ADA10(1'b0), .ADA9(1'b0), .ADA8(1'b0),
    .ADA7(1'b0), .ADA6(1'b0), .ADA5(1'b0), .ADA4(1'b0), .ADA3(1'b0), .ADA2(1'b0), .ADA1(1'b0), .ADA0(1'b0),
    .CEA(1'b0), .OCEA(1'b0), .CLKA(clk), .WEA(1'b0), .RSTA(1'b0), .CSA2(1'b0), .CSA1(1'b0), .CSA0(1'b0),
    .DIB17(1'b0), .DIB16(1'b0), .DIB15(1'b0), .DIB14(1'b0), .DIB13(1'b0), .DIB12(1'b0), .DIB11(1'b0), .DIB10(1'b0),
    .DIB9(1'b0), .DIB8(1'b0), .DIB7(1'b0), .DIB6(1'b0), .DIB5(1'b0), .DIB4(1'b0), .DIB3(1'b0), .DIB2(1'b0),
    .DIB1(1'b0), .DIB0(1'b0), .ADB13(1'b0), .ADB12(1'b0), .ADB11(1'b0), .ADB10(1'b0), .ADB9(1'b0), .ADB8(1'b0),
    .ADB7(1'b0), .ADB6(1'b0), .ADB5(1'b0), .ADB4(1'b0), .ADB3(1'b0), .ADB2(1'b0), .ADB1(1'b0), .ADB0(1'b0),
    .CEB(1'b1), .OCEB(1'b0), .CLKB(clk), .WEB(1'b1), .RSTB(1'b0), .CSB2(1'b0), .CSB1(1'b0), .CSB0(1'b0),
    .DOA17(doa[17]), .DOA16(doa[16]), .DOA15(doa[15]), .DOA14(doa[14]), .DOA13(doa[13]), .DOA12(doa[12]),
    .DOA11(doa[11]), .DOA10(doa[10]), .DOA9(doa[9]), .DOA8(doa[8]), .DOA7(doa[7]), .DOA6(doa[6]), .DOA5(doa[5]),
    .DOA4(doa[4]), .DOA3(doa[3]), .DOA2(doa[2]), .DOA1(doa[1]), .DOA0(doa[0]),
    .DOB17(dob[17]), .DOB16(dob[16]), .DOB15(dob[15]), .DOB14(dob[14]), .DOB13(dob[13]), .DOB12(dob[12]),
    .DOB11(dob[11]), .DOB10(dob[10]), .DOB9(dob[9]), .DOB8(dob[8]), .DOB7(dob[7]), .DOB6(dob[6]), .DOB5(dob[5]),
    .DOB4(dob[4]), .DOB3(dob[3]), .DOB2(dob[2]), .DOB1(dob[1]), .DOB0(dob[0]));
  initial begin #100 $display("NO REFUSAL"); $finish; end
endmodule
"""


def test_block_ram_model_refuses_a_x36_port_used_the_other_way(tmp_path: Path) -> None:
    """A x36 port B that writes (or a x36 port A that reads) stops the simulation with the reason, instead
    of simulating a mode the model does not know."""
    import subprocess

    from pearl_fpga.hw.netlist import BLOCK_RAM_MODELS
    from pearl_fpga.sim.verilator import tool_env, verilator_root

    (tmp_path / "tb.sv").write_text(_MODEL_MISUSE_TB)
    build = subprocess.run([str(verilator_root() / "bin" / "verilator"), "--binary", "--timing", "-Wno-fatal",
                            "-Wno-lint", "-CFLAGS", "-O0 -std=c++20", "--top-module", "tb", "--Mdir", str(tmp_path / "obj"),
                            str(tmp_path / "tb.sv"), str(BLOCK_RAM_MODELS["DP16KD"])],
                           capture_output=True, text=True, env=tool_env(), timeout=900, check=False)
    assert build.returncode == 0, build.stderr[-2000:]
    run = subprocess.run([str(tmp_path / "obj" / "Vtb")], capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode != 0 and "NO REFUSAL" not in run.stdout
    assert "a x36 port A only writes and a x36 port B only reads" in run.stdout + run.stderr


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
