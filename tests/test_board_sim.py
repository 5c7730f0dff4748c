"""The board drivers, exactly as they run on a PYNQ/XRT board, against the reference RTL in simulation.

Each test builds the RTL with small parameters (a separate build folder per parameter set) and runs
a cocotb module of tests/cocotb/board/ in which the synchronous driver code talks to the RTL through
pearl_fpga.board.sim_transport (AXI4-Lite and AXI4-Stream via cocotbext-axi).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pearl_fpga.sim.verilator import kernel_rtl

REPO = Path(__file__).resolve().parents[1]
TB_DIR = REPO / "tests" / "cocotb" / "board"


@pytest.mark.sim
@pytest.mark.parametrize("capacity, fanout", [(100, 4)])  # depth 4, not a power of K
def test_replay_driver_on_rtl(
    capacity: int, fanout: int, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    build_dir = tmp_path_factory.mktemp(f"board_replay_c{capacity}_k{fanout}")
    monkeypatch.syspath_prepend(str(TB_DIR))  # the simulator imports the test module from sys.path
    run_cocotb(
        top="replay_top",
        sources=kernel_rtl("replay"),
        test_module="board_replay_tb",
        test_dir=build_dir,  # results.xml lands here, not in the source tree
        build_dir=build_dir,
        parameters={"CAPACITY": capacity, "FANOUT": fanout, "FREE_RUN": 0},
        extra_env={"BOARD_TB_CAPACITY": str(capacity), "BOARD_TB_FANOUT": str(fanout)},
    )


@pytest.mark.sim
def test_mlp_driver_on_rtl(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from pearl_fpga.sim.verilator import tanh_parameter, write_tanh_memh
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    lanes, max_width, max_layers = 4, 16, 4
    build_dir = tmp_path_factory.mktemp("board_mlp")
    monkeypatch.syspath_prepend(str(TB_DIR))
    run_cocotb(
        top="mlp_top",
        sources=kernel_rtl("mlp"),
        test_module="board_mlp_tb",
        test_dir=build_dir,
        build_dir=build_dir,
        parameters={"LANES": lanes, "MAX_WIDTH": max_width, "MAX_LAYERS": max_layers},
        build_args=[tanh_parameter(write_tanh_memh(build_dir))],
        extra_env={"BOARD_TB_LANES": str(lanes), "BOARD_TB_MAX_WIDTH": str(max_width), "BOARD_TB_MAX_LAYERS": str(max_layers)},
    )


@pytest.mark.sim
def test_tabular_driver_on_rtl(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    from pearl_fpga.sim.cocotb_runner import run_cocotb

    states, actions = 32, 4
    build_dir = tmp_path_factory.mktemp("board_tabular")
    monkeypatch.syspath_prepend(str(TB_DIR))
    run_cocotb(
        top="tabular_top",
        sources=kernel_rtl("tabular"),
        test_module="board_tabular_tb",
        test_dir=build_dir,
        build_dir=build_dir,
        parameters={"N_STATES": states, "N_ACTIONS": actions},
        extra_env={"BOARD_TB_STATES": str(states), "BOARD_TB_ACTIONS": str(actions)},
    )
