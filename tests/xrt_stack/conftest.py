"""The Alveo transport on the real XRT library (Debian's libxrt, 2.13) in noop mode.

`make test-xrt` installs libxrt1, libxrt-dev and uuid-dev where it can and runs this folder; the main
pytest run does not collect it (tests/conftest.py). Here the test-only pyxrt binding
(pyxrt_binding.cpp) is compiled once per session against /usr/include/xrt, XRT is pointed at the
noop shim (XCL_EMULATION_MODE=noop, XILINX_XRT/lib -> the multiarch library folder), and an xclbin
is generated from pearl_fpga/board/xrt_kernels.py. Without the packages or a compiler, every test
here is skipped with the reason, never silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
XRT_INCLUDE = Path("/usr/include/xrt")
INSTALL_HINT = "apt-get install -y --no-install-recommends libxrt1 libxrt-dev uuid-dev (or run `make test-xrt` as root)"


def multiarch_libdir() -> Path | None:
    """The folder that holds libxrt_coreutil.so (Debian's multiarch library folder)."""
    for d in (Path("/usr/lib") / f"{os.uname().machine}-linux-gnu", Path("/usr/lib64"), Path("/usr/lib")):
        if (d / "libxrt_coreutil.so").exists() and list(d.glob("libxrt_noop.so*")):
            return d
    return None


def missing() -> str | None:
    """Why this tier cannot run here, or None."""
    if not (XRT_INCLUDE / "xrt" / "xrt_kernel.h").is_file():
        return f"XRT headers not found in {XRT_INCLUDE}: {INSTALL_HINT}"
    if not Path("/usr/include/uuid/uuid.h").is_file():
        return f"uuid-dev is missing (/usr/include/uuid/uuid.h): {INSTALL_HINT}"
    if multiarch_libdir() is None:
        return f"libxrt_coreutil / libxrt_noop not found: {INSTALL_HINT}"
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        return "no C++ compiler (g++) on PATH: apt-get install g++"
    return None


@pytest.fixture(scope="session")
def xrt_env(tmp_path_factory):
    """The noop XRT environment with the test-only pyxrt importable; yields its folder."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    import pybind11

    root = tmp_path_factory.mktemp("xrt")
    (root / "xrt").mkdir()
    (root / "xrt" / "lib").symlink_to(multiarch_libdir())
    so = root / f"pyxrt{sysconfig.get_config_var('EXT_SUFFIX')}"
    cmd = [os.environ.get("CXX", "g++"), "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{XRT_INCLUDE}",
           f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}", str(HERE / "pyxrt_binding.cpp"),
           "-o", str(so), "-lxrt_coreutil", "-luuid"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        pytest.fail(f"building the test pyxrt failed:\n{' '.join(cmd)}\n{done.stderr[-3000:]}")
    env = {"XCL_EMULATION_MODE": "noop", "XILINX_XRT": str(root / "xrt")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))
    sys.modules.pop("pyxrt", None)
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def xclbin_path(xrt_env):
    from xclbin_writer import write_xclbin

    path = xrt_env / "pearl_fpga_noop.xclbin"
    write_xclbin(path, {"replay": 1, "mlp": 1, "tabular": 2})
    return path
