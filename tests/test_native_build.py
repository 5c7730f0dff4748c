"""The native extensions are built by the package build; a missing compiler is a clear error."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_missing_compiler_is_named_with_the_fix(tmp_path):
    env = dict(os.environ, CXX=str(tmp_path / "no-such-g++"))
    run = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-temp", str(tmp_path)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "no C++ compiler found" in run.stderr and "apt-get install g++" in run.stderr

