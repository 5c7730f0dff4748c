"""Builds the native CPU backends: each kernel's HLS C++ (hls/<kernel>/<kernel>.cpp) compiled by g++
together with its pybind11 binding (pearl_fpga/native/<kernel>_ext.cpp) into pearl_fpga._<kernel>_native,
plus pearl_fpga._learner_native (pearl_fpga/native/learner_ext.cpp), the CPU learner's fused pieces.

The kernels are the folders of hls/ with a descriptor (kernel.json, pearl_fpga/spec/descriptor.py); its
generated hls/<kernel>/<kernel>_config.h gives the C++ its synthesis parameters, and the descriptor's
"native" values (e.g. the MLP's 512-wide layers) reach the cpu build as -D macros of that header.
The HLS sources are plain C++17; `#pragma HLS` lines are ignored by g++. Set PEARL_FPGA_MARCH_NATIVE=1
to build for the host CPU only (faster, not portable).
"""

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # the descriptors' reader (standard library only) from this source tree
from pearl_fpga.spec.descriptor import DescriptorError, load_descriptors, stale_headers  # noqa: E402

try:
    DESCRIPTORS = load_descriptors(ROOT / "hls")
except DescriptorError as exc:
    sys.exit(f"pearl_fpga: {exc}")
if stale_headers(DESCRIPTORS):
    sys.exit("pearl_fpga: out of date with their kernel.json: " + ", ".join(map(str, stale_headers(DESCRIPTORS))) +
             "; run `python -m pearl_fpga.spec.descriptor --write` (make native does)")
KERNELS = tuple(DESCRIPTORS)
# Synthesis parameters of the cpu extension where they differ from the boards' defaults (each descriptor's
# "native" values): the MLP holds 512-wide layers on the CPU (the rl-zoo DDPG actor, 400x300).
CPU_BUILD_MACROS = {name: d.native_macros() for name, d in DESCRIPTORS.items()}


def _require_compiler() -> None:
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx.split()[0]) is None:
        sys.exit(
            f"pearl_fpga: no C++ compiler found ({cxx!r} is not on PATH). The CPU backend compiles the "
            "HLS C++ kernels with g++ >= 9 (C++17). Install one (Debian/Ubuntu: apt-get install g++) "
            "or point CXX at it, then run the install again."
        )


def _extensions():
    from pybind11.setup_helpers import Pybind11Extension

    flags = ["-O3", "-ffp-contract=off", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-label"]  # loop labels are for HLS
    if os.environ.get("PEARL_FPGA_MARCH_NATIVE") == "1":
        flags.append("-march=native")
    exts = []
    for kernel in KERNELS:
        binding = Path("pearl_fpga") / "native" / f"{kernel}_ext.cpp"
        source = Path("hls") / kernel / f"{kernel}.cpp"
        if not (ROOT / binding).exists():
            continue
        exts.append(
            Pybind11Extension(
                f"pearl_fpga._{kernel}_native",
                [str(binding), str(source)],
                include_dirs=["hls", str(Path("hls") / kernel)],
                cxx_std=17,
                extra_compile_args=flags,
                define_macros=CPU_BUILD_MACROS.get(kernel, []),
                # rebuilt when a header changes too: the kernel's (its generated <kernel>_config.h included),
                # hls/common's and the bindings' (isa.h, the SIMD paths)
                depends=sorted(str(h.relative_to(ROOT)) for d in (f"hls/{kernel}", "hls/common", "pearl_fpga/native")
                               for h in (ROOT / d).glob("*.h")),
            )
        )
    # Not a kernel: the fused element-wise pieces of the CPU learner step (pearl_fpga/algos/fused.py).
    # -fno-math-errno lets sqrt vectorize; it changes no result.
    exts.append(
        Pybind11Extension(
            "pearl_fpga._learner_native",
            [str(Path("pearl_fpga") / "native" / "learner_ext.cpp")],
            cxx_std=17,
            extra_compile_args=flags + ["-fno-math-errno"],
            depends=sorted(str(h.relative_to(ROOT)) for h in (ROOT / "pearl_fpga" / "native").glob("*.h")),  # isa.h
        )
    )
    aten = _aten_gemm_extension(Pybind11Extension)
    return exts + ([aten] if aten is not None else [])


def _aten_gemm_extension(extension):
    """pearl_fpga._aten_gemm: torch's GEMM as a C routine for the learner's native programs (pearl_fpga/native/
    aten_gemm.cpp), compiled against the torch this build runs with; None without torch (a board install,
    which has no learner)."""
    try:
        import torch
        from torch.utils.cpp_extension import include_paths, library_paths
    except ImportError:
        return None
    return extension(
        "pearl_fpga._aten_gemm",
        [str(Path("pearl_fpga") / "native" / "aten_gemm.cpp")],
        include_dirs=include_paths(),
        library_dirs=library_paths(),
        libraries=["c10", "torch_cpu"],
        runtime_library_dirs=library_paths(),
        cxx_std=20,  # torch's headers'
        extra_compile_args=["-O2", "-Wall", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"],
    )


if any(cmd in sys.argv for cmd in ("build_ext", "bdist_wheel", "develop", "editable_wheel", "install")):
    _require_compiler()

class BuildPyWithData(build_py):
    """Also copy what the package reads at run time from outside its Python tree (pearl_fpga/data.py:
    the kernels' sources under hls/, the board catalog) into pearl_fpga/_data of the build, so that a
    non-editable install works outside the checkout. Editable installs read them in place."""

    SKIP = ("__pycache__", "csim", "build", "obj_dir", "sim_build")

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "pearl_fpga" / "_data"
        for rel in ("hls", "bitstreams/catalog.json", "bitstreams/README.md"):  # = pearl_fpga.data.SHIPPED
            src = ROOT / rel
            if src.is_dir():
                shutil.copytree(src, target / rel, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*self.SKIP))
            elif src.is_file():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target / rel)


setup(ext_modules=_extensions(), cmdclass={"build_py": BuildPyWithData})
