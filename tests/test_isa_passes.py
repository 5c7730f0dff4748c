"""tests/isa_passes.py, the runner of `make test-isa`: a failed pass fails the run, and each pass's output is printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import isa_passes

CONFIG_TESTS = str(Path(__file__).parent / "test_config.py")


def test_a_failed_pass_fails_the_run(capsys):
    args = ["-q", "-p", "no:cacheprovider", "-k", "test_the_isa_runner_finds_no_such_test", CONFIG_TESTS]
    assert isa_passes.main(["PEARL_FPGA_NATIVE_ISA=scalar", "--", *args]) == 1  # no test ran: pytest's exit 5
    assert "ISA passes failed: PEARL_FPGA_NATIVE_ISA=scalar" in capsys.readouterr().out


def test_passing_passes_pass_and_print_their_output(capsys):
    args = ["-q", "-p", "no:cacheprovider", CONFIG_TESTS]
    assert isa_passes.main(["PEARL_FPGA_NATIVE_ISA=scalar", "PEARL_FPGA_NATIVE_ISA=avx2", "--", *args]) == 0
    out = capsys.readouterr().out
    assert out.index("tests under PEARL_FPGA_NATIVE_ISA=scalar") < out.index("tests under PEARL_FPGA_NATIVE_ISA=avx2")
    assert out.count(" passed") == 2


def test_arguments_without_the_separator_are_refused():
    with pytest.raises(SystemExit, match="usage"):
        isa_passes.main(["PEARL_FPGA_NATIVE_ISA=scalar"])
