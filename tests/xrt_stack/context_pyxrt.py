"""pyxrt as XRT 2.25 and later bind it, over the test-built 2.13 binding: an xclbin is registered with
the device and opened in a hardware context (`device.register_xclbin`, `pyxrt.hw_context(device, uuid)`),
kernels are made from the context (`pyxrt.kernel(context, name)`), and the calls 2.25 deprecates
(`device.load_xclbin`, `pyxrt.kernel(device, uuid, name)`) fail here, as they will once removed.

Debian's libxrt 2.13 has no hw_context, so the context only holds the device and the uuid and the kernel
is opened underneath the old way: what this checks is which calls the transport makes when pyxrt has
hw_context (XRT's src/python/pybind11/src/pyxrt.cpp: hw_context(device, uuid), kernel(hw_context, name),
device.register_xclbin(xclbin)), on the real library.
"""

from __future__ import annotations

from typing import Any


class Deprecated(RuntimeError):
    """A call XRT 2.25 deprecates."""


class _Device:
    def __init__(self, owner: ContextPyxrt, obj: Any):
        self._owner, self._obj = owner, obj

    def register_xclbin(self, xclbin: Any) -> Any:
        self._owner.calls.append("register_xclbin")
        return self._obj.load_xclbin(xclbin)  # 2.13 has no registration: loading stands in for it in noop mode

    def load_xclbin(self, *args: Any) -> Any:
        raise Deprecated("pyxrt.device.load_xclbin() is deprecated; use pyxrt.hw_context(device, xclbin)")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._obj, name)


class _Context:
    def __init__(self, device: _Device, uuid: Any):
        self.device, self.uuid = device, uuid


class _Bo:
    def __init__(self, real: Any):
        self._real = real

    def __call__(self, device: Any, *args: Any) -> Any:
        return self._real(device._obj if isinstance(device, _Device) else device, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class ContextPyxrt:
    """The module; `calls` lists the context calls made."""

    def __init__(self, real: Any):
        self.real = real
        self.calls: list[str] = []
        self.bo = _Bo(real.bo)

    def device(self, index: int = 0) -> _Device:
        return _Device(self, self.real.device(index))

    def hw_context(self, device: _Device, uuid: Any) -> _Context:
        self.calls.append("hw_context")
        return _Context(device, uuid)

    def kernel(self, *args: Any) -> Any:
        if len(args) != 2 or not isinstance(args[0], _Context):
            raise Deprecated("kernel(device, uuid, name) is deprecated; use kernel(hw_context, name)")
        context, name = args
        self.calls.append("kernel(hw_context, name)")
        return self.real.kernel(context.device._obj, context.uuid, name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
