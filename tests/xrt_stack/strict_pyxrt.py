"""A strict stand-in for the `pyxrt` module: it exposes only what XRT's own pyxrt binds, forwards to
the real (test-built) module, and records every call, so that a test can check both that the
transport stays inside pyxrt's surface and what it asked of XRT (names, argument indices, values).

PYXRT_SURFACE was read from XRT's src/python/pybind11/src/pyxrt.cpp at commit
00f9022bdff0a09a28a15870457053ab51a29fd8 (github.com/Xilinx/XRT, master of 2025; the 2.13-2.19
releases bind a subset of it, none of them `ip`).
"""

from __future__ import annotations

from typing import Any

XRT_SOURCE = "Xilinx/XRT src/python/pybind11/src/pyxrt.cpp @ 00f9022bdff0a09a28a15870457053ab51a29fd8"

# name -> attributes bound on it ("" is the module itself).
PYXRT_SURFACE: dict[str, frozenset[str]] = {
    "": frozenset({
        "XCL_BO_FLAGS_NONE", "xclBOSyncDirection", "ert_cmd_state", "xrt_info_device", "xrt_msg_level",
        "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug",
        "enumerate_devices", "log_message", "uuid", "hw_context", "device", "run", "kernel", "bo", "xclbin",
        "xclbinip_vector", "xclbinkernel_vector", "xclbinmem_vector", "elf", "program", "module", "ext", "runlist"}),
    "uuid": frozenset({"to_string"}),
    "hw_context": frozenset(),
    "device": frozenset({"load_xclbin", "register_xclbin", "get_xclbin_uuid", "get_info"}),
    "run": frozenset({"start", "set_arg", "wait", "wait2", "state", "add_callback"}),
    "kernel": frozenset({"cu_access_mode", "exclusive", "shared", "none", "group_id"}),
    "bo": frozenset({"flags", "normal", "cacheable", "device_only", "host_only", "p2p", "svm",
                     "write", "read", "sync", "map", "size", "address"}),
    "xclbin": frozenset({"xclbinip", "xclbinkernel", "xclbinmem", "get_kernels", "get_xsa_name", "get_uuid", "get_mems",
                         "get_axlf"}),
}
CLASSES = ("uuid", "hw_context", "device", "run", "kernel", "bo", "xclbin")


class SurfaceError(AssertionError):
    """The code under test used something pyxrt does not bind."""


def _unwrap(value: Any) -> Any:
    return value._obj if isinstance(value, _Instance) else value


class _Instance:
    """An object of one of pyxrt's classes: only its bound methods, each call recorded."""

    def __init__(self, owner: StrictPyxrt, cls: str, obj: Any):
        self._owner, self._cls, self._obj = owner, cls, obj

    def __getattr__(self, name: str) -> Any:
        if name not in PYXRT_SURFACE[self._cls]:
            raise SurfaceError(f"pyxrt.{self._cls} has no attribute {name!r} ({XRT_SOURCE})")
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr

        def call(*args: Any) -> Any:
            self._owner.calls.append((self._cls, name, args))
            hook = self._owner.hooks.get((self._cls, name))
            if hook is not None:
                return hook(self, *args)
            return self._owner.wrap(attr(*(_unwrap(a) for a in args)))

        return call


class _Class:
    """One of pyxrt's classes: constructing it records the call and wraps the object."""

    def __init__(self, owner: StrictPyxrt, name: str):
        self._owner, self._name = owner, name

    def __call__(self, *args: Any) -> _Instance:
        self._owner.calls.append((self._name, "__init__", args))
        return _Instance(self._owner, self._name, getattr(self._owner.real, self._name)(*(_unwrap(a) for a in args)))

    def __getattr__(self, name: str) -> Any:
        if name not in PYXRT_SURFACE[self._name]:
            raise SurfaceError(f"pyxrt.{self._name} has no attribute {name!r} ({XRT_SOURCE})")
        return getattr(getattr(self._owner.real, self._name), name)


class StrictPyxrt:
    """The module: `calls` lists (class, method, args) in order; `hooks[(class, method)]` replaces a
    method (to make a run time out, which the noop shim never does)."""

    def __init__(self, real: Any):
        self.real = real
        self.calls: list[tuple[str, str, tuple[Any, ...]]] = []
        self.hooks: dict[tuple[str, str], Any] = {}

    def wrap(self, value: Any) -> Any:
        for cls in CLASSES:
            if hasattr(self.real, cls) and isinstance(value, getattr(self.real, cls)):
                return _Instance(self, cls, value)
        return value

    def __getattr__(self, name: str) -> Any:
        if name not in PYXRT_SURFACE[""]:
            raise SurfaceError(f"pyxrt has no attribute {name!r} ({XRT_SOURCE})")
        if name in CLASSES:
            return _Class(self, name)
        return getattr(self.real, name)

    def called(self, cls: str, method: str) -> list[tuple[Any, ...]]:
        return [args for c, m, args in self.calls if (c, m) == (cls, method)]
