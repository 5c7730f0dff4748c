"""Each kernel's one descriptor, hls/<kernel>/kernel.json: its HLS top and stream ports, interface
version, synthesis parameters (default, the range a board may ask for, the C++ macro that sets it),
the cpu extension's own values, the shared constants and the C simulation's extra shapes.

Everything else is derived from it: the Python spec's limits (spec/<kernel>.py, spec/kernels.py), the
generated C++ header hls/<kernel>/<kernel>_config.h (typed constexpr constants in namespace
<kernel>::config, used by the HLS sources, the C simulations and the cpu extension), setup.py's
kernel list and build macros, the Makefile's kernel list and csim shapes, and the catalog's
hls_defines. Standard library only: the Makefile and setup.py run it without the package's
dependencies.

    python -m pearl_fpga.spec.descriptor --write       regenerate every <kernel>_config.h that differs
    python -m pearl_fpga.spec.descriptor --check       exit 1 naming each header that is out of date
    python -m pearl_fpga.spec.descriptor kernels       the kernel names, in order
    python -m pearl_fpga.spec.descriptor csim-shapes   one line per extra C simulation: kernel tag -Dflags
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.data import data_path, load_json
from pearl_fpga.errors import PearlError

SCHEMA_VERSION = 1
DESCRIPTOR_NAME = "kernel.json"
C_TYPE = "uint32_t"  # every parameter and constant is a non-negative 32-bit count
U32_MAX = (1 << 32) - 1
_IDENT = re.compile(r"[a-z][a-z0-9_]*\Z")
_MACRO = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_TOP_KEYS = {"schema", "kernel", "title", "top", "interface_version", "streams", "parameters", "constants",
             "native", "csim_shapes", "python_class"}
_PARAMETER_KEYS = {"doc", "default", "min", "max", "choices", "macro"}


class DescriptorError(PearlError, ValueError):
    """A kernel descriptor (hls/<kernel>/kernel.json) is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class Parameter:
    """One synthesis parameter: its default, the range (or choices) a board may ask for, its macro."""

    name: str
    doc: str
    default: int
    min: int
    max: int
    choices: tuple[int, ...] | None  # the only values allowed, when the range is not enough
    macro: str | None  # the -D macro of the C++ (None: a board figure the C++ does not read)

    def allows(self, value: int) -> bool:
        return self.min <= value <= self.max and (self.choices is None or value in self.choices)

    def describe_range(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        return f"{self.min}..{self.max}"


@dataclass(frozen=True)
class Stream:
    port: str  # AXI4-Stream port of the HLS top / RTL module
    word_bytes: int


@dataclass(frozen=True)
class KernelDescriptor:
    """One kernel, as hls/<kernel>/kernel.json describes it (validated)."""

    name: str
    title: str
    top: str
    interface_version: int  # bump whenever the ports, stream words or register map change
    in_stream: Stream
    out_stream: Stream
    parameters: dict[str, Parameter]  # in the descriptor's order
    constants: dict[str, tuple[int, str]]  # NAME -> (value, doc), shared by the C++ and Python
    native: dict[str, int]  # parameter -> the cpu extension's value where it differs from the default
    native_why: str
    csim_shapes: tuple[dict[str, int], ...]  # parameter sets the C simulation also runs
    python_class: str  # the class of pearl_fpga.kernels.<kernel>
    path: Path

    def parameter(self, name: str) -> Parameter:
        try:
            return self.parameters[name]
        except KeyError:
            raise DescriptorError(f"{self.path}: no parameter {name!r}; it has {', '.join(self.parameters)}") from None

    def constant(self, name: str) -> int:
        try:
            return self.constants[name][0]
        except KeyError:
            raise DescriptorError(f"{self.path}: no constant {name!r}; it has {', '.join(self.constants) or 'none'}") from None

    @property
    def macros(self) -> dict[str, str]:
        """parameter -> macro, for the parameters the C++ reads."""
        return {p.name: p.macro for p in self.parameters.values() if p.macro is not None}

    def defines(self, values: dict[str, int]) -> list[str]:
        """-D flags setting `values` (parameter -> value) through their macros."""
        return [f"-D{self.parameters[k].macro}={v}" for k, v in values.items() if self.parameters[k].macro]

    def native_macros(self) -> list[tuple[str, str]]:
        """setup.py's define_macros of the cpu extension."""
        return [(self.parameters[k].macro or "", str(v)) for k, v in self.native.items()]

    @property
    def header_name(self) -> str:
        return f"{self.name}_config.h"

    @property
    def header_path(self) -> Path:
        return self.path.parent / self.header_name


# ----------------------------------------------------------------------------------------- loading
class _Object:
    """Typed access to one JSON object, with errors naming the file and the field's path."""

    def __init__(self, obj: Any, where: str, keys: set[str]):
        if not isinstance(obj, dict):
            raise DescriptorError(f"{where} must be a JSON object, got {type(obj).__name__}")
        unknown = sorted(set(obj) - keys)
        if unknown:
            raise DescriptorError(f"{where}: unknown field(s) {unknown}; the schema has {sorted(keys)}")
        self.obj, self.where = obj, where

    def get(self, key: str, default: Any = ...) -> Any:
        if key not in self.obj:
            if default is ...:
                raise DescriptorError(f"{self.where}: missing field '{key}'")
            return default
        return self.obj[key]

    def text(self, key: str, pattern: re.Pattern[str] | None = None, default: Any = ...) -> str:
        value = self.get(key, default)
        if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
            shape = f" matching {pattern.pattern}" if pattern is not None else ""
            raise DescriptorError(f"{self.where}.{key} must be a non-empty string{shape}, got {value!r}")
        return value

    def integer(self, key: str, lo: int = 0, hi: int = U32_MAX, default: Any = ...) -> int:
        value = self.get(key, default)
        _check_int(value, f"{self.where}.{key}", lo, hi)
        return int(value)


def _check_int(value: Any, where: str, lo: int = 0, hi: int = U32_MAX) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DescriptorError(f"{where} must be an integer in [{lo}, {hi}], got {value!r}")


def _parameter(name: str, obj: Any, where: str, prefix: str) -> Parameter:
    f = _Object(obj, where, _PARAMETER_KEYS)
    choices = f.get("choices", None)
    if choices is not None:
        if not isinstance(choices, list) or not choices:
            raise DescriptorError(f"{where}.choices must be a non-empty list of integers, got {choices!r}")
        for i, c in enumerate(choices):
            _check_int(c, f"{where}.choices[{i}]")
        if "min" in f.obj or "max" in f.obj:
            raise DescriptorError(f"{where}: give either 'choices' or 'min' and 'max', not both")
        lo, hi = min(choices), max(choices)
    else:
        lo, hi = f.integer("min"), f.integer("max")
        if lo > hi:
            raise DescriptorError(f"{where}: min {lo} is above max {hi}")
    macro = f.get("macro", None)
    if macro is not None and (not isinstance(macro, str) or not _MACRO.match(macro) or not macro.startswith(prefix)):
        raise DescriptorError(f"{where}.macro must be an upper-case C macro name starting with {prefix!r} "
                              f"(so that kernels never share one), got {macro!r}")
    p = Parameter(name, f.text("doc"), f.integer("default"), lo, hi,
                  tuple(choices) if choices is not None else None, macro)
    if not p.allows(p.default):
        raise DescriptorError(f"{where}.default {p.default} is outside the parameter's range ({p.describe_range()})")
    return p


def parse_descriptor(data: Any, path: Path) -> KernelDescriptor:
    """Validate one parsed descriptor; raises DescriptorError naming the file, the field and the rule."""
    where = str(path)
    f = _Object(data, where, _TOP_KEYS)
    if f.get("schema") != SCHEMA_VERSION:
        raise DescriptorError(f"{where}: schema is {f.get('schema')!r}; this pearl_fpga reads schema {SCHEMA_VERSION}")
    name = f.text("kernel", _IDENT)
    if name != path.parent.name:
        raise DescriptorError(f"{where}: kernel {name!r} must be the name of its folder, {path.parent.name!r}")
    prefix = name.upper() + "_"

    streams = _Object(f.get("streams"), f"{where}.streams", {"in", "out"})
    ports = [_Object(streams.get(d), f"{where}.streams.{d}", {"port", "word_bytes"}) for d in ("in", "out")]
    in_stream, out_stream = (Stream(p.text("port", _IDENT), p.integer("word_bytes", 1, 64)) for p in ports)

    raw = f.get("parameters")
    if not isinstance(raw, dict) or not raw:
        raise DescriptorError(f"{where}.parameters must be a non-empty object of parameter name -> description")
    parameters = {}
    for key, obj in raw.items():
        if not _IDENT.match(key):
            raise DescriptorError(f"{where}.parameters: name {key!r} must be lower case (letters, digits, _)")
        parameters[key] = _parameter(key, obj, f"{where}.parameters.{key}", prefix)
    macros = [p.macro for p in parameters.values() if p.macro]
    if len(set(macros)) != len(macros):
        raise DescriptorError(f"{where}.parameters: two parameters share a macro ({macros})")

    constants = {}
    for key, obj in f.get("constants", {}).items():
        c = _Object(obj, f"{where}.constants.{key}", {"value", "doc"})
        if not _MACRO.match(key) or key.lower() in parameters:
            raise DescriptorError(f"{where}.constants: name {key!r} must be upper case and no parameter's name")
        constants[key] = (c.integer("value"), c.text("doc"))

    native = _Object(f.get("native", {"parameters": {}, "why": "-"}), f"{where}.native", {"parameters", "why"})
    native_values = native.get("parameters")
    if not isinstance(native_values, dict):
        raise DescriptorError(f"{where}.native.parameters must be an object of parameter -> value")
    for key, value in native_values.items():
        if key not in parameters or parameters[key].macro is None:
            raise DescriptorError(f"{where}.native.parameters.{key}: not a parameter with a macro "
                                  f"({', '.join(k for k, p in parameters.items() if p.macro)})")
        _check_int(value, f"{where}.native.parameters.{key}", 1)

    shapes = f.get("csim_shapes", [])
    if not isinstance(shapes, list):
        raise DescriptorError(f"{where}.csim_shapes must be a list of parameter -> value objects")
    for i, shape in enumerate(shapes):
        if not isinstance(shape, dict) or not shape:
            raise DescriptorError(f"{where}.csim_shapes[{i}] must be a non-empty object of parameter -> value")
        for key, value in shape.items():
            if key not in parameters or parameters[key].macro is None:
                raise DescriptorError(f"{where}.csim_shapes[{i}].{key}: not a parameter with a macro")
            if not (isinstance(value, int) and not isinstance(value, bool) and parameters[key].allows(value)):
                raise DescriptorError(f"{where}.csim_shapes[{i}].{key} = {value!r} is outside the parameter's "
                                      f"range ({parameters[key].describe_range()})")

    return KernelDescriptor(
        name=name, title=f.text("title"), top=f.text("top", _IDENT), interface_version=f.integer("interface_version", 1),
        in_stream=in_stream, out_stream=out_stream, parameters=parameters, constants=constants,
        native=dict(native_values), native_why=native.text("why"), csim_shapes=tuple(dict(s) for s in shapes),
        python_class=f.text("python_class", re.compile(r"[A-Z][A-Za-z0-9]*\Z")), path=path)


def load_descriptor(path: str | Path) -> KernelDescriptor:
    """Read and validate one hls/<kernel>/kernel.json."""
    path = Path(path)
    return parse_descriptor(load_json(path, DescriptorError, "kernel descriptor"), path)


def load_descriptors(hls_root: str | Path | None = None) -> dict[str, KernelDescriptor]:
    """Every kernel: the folders of hls/ that hold a kernel.json, in name order."""
    root = Path(hls_root) if hls_root is not None else data_path("hls")
    found = {p.parent.name: load_descriptor(p) for p in sorted(root.glob(f"*/{DESCRIPTOR_NAME}"))}
    if not found:
        raise DescriptorError(f"no kernel descriptors ({DESCRIPTOR_NAME}) under {root}")
    return found


@functools.lru_cache(maxsize=None)
def descriptors() -> dict[str, KernelDescriptor]:
    """The shipped descriptors (read once per process)."""
    return load_descriptors()


def descriptor(kernel: str) -> KernelDescriptor:
    """The shipped descriptor of `kernel`."""
    known = descriptors()
    if kernel not in known:
        raise DescriptorError(f"unknown kernel {kernel!r}; the kernels are {', '.join(known)}")
    return known[kernel]


# -------------------------------------------------------------------------------- generated header
def config_header_text(d: KernelDescriptor) -> str:
    """hls/<kernel>/<kernel>_config.h: the macros' defaults (each overridable with -D) and, in namespace
    <kernel>::config, every parameter's value and range (pearl::Range) and every constant as typed constexpr."""
    rel = f"hls/{d.name}/{DESCRIPTOR_NAME}"
    lines = [
        f"// {d.header_name}: GENERATED from {rel} by `python -m pearl_fpga.spec.descriptor --write`;",
        "// do not edit by hand (tests/test_kernel_descriptor.py fails when it differs from the descriptor).",
        "//",
        f"// The {d.name} kernel's synthesis parameters: the descriptor's defaults, each overridable with -D<MACRO>",
        f"// (a board's sizes: `python -m pearl_fpga.board.catalog get BOARD hls_defines {d.name}`; the cpu",
        "// extension's: setup.py), the range a board may ask for, and the constants shared with Python.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        '#include "common/kernel_config.h"',
        "",
    ]
    for p in d.parameters.values():
        if p.macro:
            lines += [f"#ifndef {p.macro}", f"#define {p.macro} {p.default}", "#endif"]
    lines += ["", f"namespace {d.name} {{", "namespace config {", ""]
    for p in d.parameters.values():
        value = p.macro or str(p.default)
        lines += [f"constexpr {C_TYPE} {p.name.upper()} = {value};  // {p.doc}",
                  f"constexpr pearl::Range {p.name.upper()}_RANGE{{{p.min}, {p.max}}};"
                  + (f"  // {p.describe_range()}" if p.choices else "")]
    if d.constants:
        lines.append("")
    for key, (number, doc) in d.constants.items():
        lines.append(f"constexpr {C_TYPE} {key} = {number};  // {doc}")
    lines += ["", "}  // namespace config", f"}}  // namespace {d.name}", ""]
    return "\n".join(lines)


def stale_headers(kernels: dict[str, KernelDescriptor]) -> list[Path]:
    """The <kernel>_config.h files that differ from their descriptor (or are missing)."""
    return [d.header_path for d in kernels.values()
            if not d.header_path.is_file() or d.header_path.read_text(encoding="utf-8") != config_header_text(d)]


def csim_shape_lines(kernels: dict[str, KernelDescriptor]) -> list[str]:
    """`kernel tag -DMACRO=value ...` per extra C simulation (the Makefile's csim target reads them)."""
    return [f"{d.name} {'_'.join(str(v) for v in shape.values())} {' '.join(d.defines(shape))}"
            for d in kernels.values() for shape in d.csim_shapes]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m pearl_fpga.spec.descriptor",
                                     description="Validate the kernel descriptors (hls/*/kernel.json) and derive from them.")
    parser.add_argument("--hls", type=Path, default=None, help="the hls/ folder (default: the package's)")
    parser.add_argument("--write", action="store_true", help="regenerate every <kernel>_config.h that differs")
    parser.add_argument("--check", action="store_true", help="fail naming each <kernel>_config.h that is out of date")
    parser.add_argument("query", nargs="?", choices=("kernels", "csim-shapes"), help="print the kernel names or the csim shapes")
    args = parser.parse_args(argv)
    try:
        kernels = load_descriptors(args.hls)
    except DescriptorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stale = stale_headers(kernels)
    if args.write:
        for path in stale:
            path.write_text(config_header_text(kernels[path.parent.name]), encoding="utf-8")
            print(f"wrote {path}", file=sys.stderr)  # stdout carries the query
    elif args.check and stale:
        print("error: out of date with their kernel.json: " + ", ".join(map(str, stale)) +
              "; run `python -m pearl_fpga.spec.descriptor --write`", file=sys.stderr)
        return 1
    if args.query == "kernels":
        print(" ".join(kernels))
    elif args.query == "csim-shapes":
        print("\n".join(csim_shape_lines(kernels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
