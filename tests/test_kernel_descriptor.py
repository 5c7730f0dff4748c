"""Each kernel's descriptor (hls/<kernel>/kernel.json): a malformed one stops with the file, the field
and the rule; the committed <kernel>_config.h is its generator's output; and that header, not a copy
of its numbers, is what the C++ builds and the Python spec use."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pearl_fpga.spec import descriptor as desc
from pearl_fpga.spec import mlp as mlp_spec
from pearl_fpga.spec import replay as replay_spec
from pearl_fpga.spec import tabular as tabular_spec
from pearl_fpga.spec.kernels import KERNELS

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTORS = desc.load_descriptors(ROOT / "hls")


def test_the_kernels_are_the_folders_with_a_descriptor():
    folders = sorted(p.parent.name for p in (ROOT / "hls").glob("*/kernel.json"))
    assert list(DESCRIPTORS) == folders == list(KERNELS)
    assert {"replay", "mlp", "tabular"} <= set(folders)


@pytest.mark.parametrize("kernel", sorted(DESCRIPTORS))
def test_committed_config_header_matches_its_descriptor(kernel):
    d = DESCRIPTORS[kernel]
    assert d.header_path.read_text() == desc.config_header_text(d), (
        f"hls/{kernel}/{d.header_name} differs from hls/{kernel}/kernel.json; regenerate it with "
        "`python -m pearl_fpga.spec.descriptor --write`")


def _base() -> dict:
    return json.loads((ROOT / "hls" / "replay" / "kernel.json").read_text())


def _set(doc: dict, path: str, value) -> dict:
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize("path, value, message", [
    ("schema", 2, r"schema is 2; this pearl_fpga reads schema 1"),
    ("kernel", "replays", r"kernel 'replays' must be the name of its folder, 'replay'"),
    ("top", _DELETE, r": missing field 'top'"),
    ("streams.in.word_bytes", "16", r"streams.in.word_bytes must be an integer in \[1, 64\], got '16'"),
    ("parameters.capacity.default", 0, r"parameters.capacity.default 0 is outside the parameter's range \(1..1048576\)"),
    ("parameters.fanout.default", 3, r"parameters.fanout.default 3 is outside the parameter's range \(one of 2, 4, 8, 16\)"),
    ("parameters.capacity.min", 9000000, r"parameters.capacity: min 9000000 is above max 1048576"),
    ("parameters.capacity.macro", "CAPACITY", r"parameters.capacity.macro must be an upper-case C macro name starting with 'REPLAY_'"),
    ("parameters.fanout.macro", "REPLAY_CAPACITY", r"two parameters share a macro"),
    ("parameters.capacity.size", 4, r"parameters.capacity: unknown field\(s\) \['size'\]"),
    ("csim_shapes", [{"capacity": 1, "fanout": 3}], r"csim_shapes\[0\].fanout = 3 is outside the parameter's range"),
    ("csim_shapes", [{"max_batch": 7}], r"csim_shapes\[0\].max_batch: not a parameter with a macro"),
    ("native", {"parameters": {"depth": 2}, "why": "x"}, r"native.parameters.depth: not a parameter with a macro"),
    ("python_class", "replay_sampler", r"python_class must be a non-empty string matching"),
])
def test_a_descriptor_error_names_the_file_the_field_and_the_rule(tmp_path, path, value, message):
    folder = tmp_path / "hls" / "replay"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(_set(copy.deepcopy(_base()), path, value)))
    with pytest.raises(desc.DescriptorError, match=re.escape(str(folder / "kernel.json")) + r".*" + message):
        desc.load_descriptors(tmp_path / "hls")


def test_broken_json_and_cli_errors_are_clear(tmp_path):
    folder = tmp_path / "hls" / "replay"
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text('{"schema": 1,')
    with pytest.raises(desc.DescriptorError, match=r"replay/kernel.json is not valid JSON"):
        desc.load_descriptors(tmp_path / "hls")
    run = subprocess.run([sys.executable, "-m", "pearl_fpga.spec.descriptor", "--hls", str(tmp_path / "hls"), "kernels"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.startswith("error: ") and "not valid JSON" in run.stderr
    assert "Traceback" not in run.stderr


def test_check_names_a_stale_header_and_write_regenerates_it(tmp_path):
    hls = tmp_path / "hls"
    shutil.copytree(ROOT / "hls" / "tabular", hls / "tabular", ignore=shutil.ignore_patterns("rtl", "*.cpp"))
    doc = json.loads((hls / "tabular" / "kernel.json").read_text())
    doc["parameters"]["actions"]["default"] = 4
    (hls / "tabular" / "kernel.json").write_text(json.dumps(doc))
    cmd = [sys.executable, "-m", "pearl_fpga.spec.descriptor", "--hls", str(hls)]
    stale = subprocess.run([*cmd, "--check"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert stale.returncode == 1 and "tabular_config.h" in stale.stderr and "--write" in stale.stderr
    assert subprocess.run([*cmd, "--write"], cwd=ROOT, capture_output=True, timeout=60).returncode == 0
    assert "#define TABULAR_ACTIONS 4\n" in (hls / "tabular" / "tabular_config.h").read_text()
    assert subprocess.run([*cmd, "--check"], cwd=ROOT, capture_output=True, timeout=60).returncode == 0


@pytest.mark.parametrize("kernel", sorted(DESCRIPTORS))
def test_the_kernel_header_takes_its_parameters_from_the_generated_header(kernel):
    """No kernel header keeps its own default: each includes <kernel>_config.h, which alone defines them."""
    d = DESCRIPTORS[kernel]
    header = (ROOT / "hls" / kernel / f"{kernel}.h").read_text()
    assert f'#include "{d.header_name}"' in header
    for source in sorted((ROOT / "hls" / kernel).glob("*.[ch]*")):
        if source.name == d.header_name:
            continue
        for macro in d.macros.values():
            assert not re.search(rf"#\s*define\s+{macro}\b", source.read_text()), f"{source.name} defines {macro}"


def _compile_and_run(tmp_path: Path, kernel: str, program: str, *flags: str) -> str:
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        pytest.skip("no C++ compiler")
    src, exe = tmp_path / "probe.cpp", tmp_path / "probe"
    src.write_text(program)
    build = subprocess.run([cxx, "-std=c++14", "-Wno-unknown-pragmas", f"-I{ROOT / 'hls'}", f"-I{ROOT / 'hls' / kernel}",
                            *flags, str(src), "-o", str(exe)], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr[-2000:]
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.mark.parametrize("kernel", sorted(DESCRIPTORS))
def test_the_cpp_build_sees_the_descriptor_values_and_their_overrides(tmp_path, kernel):
    """The kernel's own header, compiled as the builds compile it, has the descriptor's defaults, and a -D
    macro of the descriptor (a board's size, a csim shape) changes the value the C++ sees."""
    d = DESCRIPTORS[kernel]
    names = [p.upper() for p in d.parameters] + list(d.constants)
    prints = "\n".join(f'    std::printf("{n} %u\\n", unsigned({kernel}::config::{n}));' for n in names)
    program = f'#include <cstdio>\n#include "{kernel}.h"\nint main() {{\n{prints}\n    return 0;\n}}\n'
    seen = dict(line.split() for line in _compile_and_run(tmp_path, kernel, program).splitlines())
    expected = {p.upper(): str(q.default) for p, q in d.parameters.items()}
    expected.update({k: str(v) for k, (v, _) in d.constants.items()})
    assert seen == expected
    name, parameter = next((n, p) for n, p in d.parameters.items() if p.macro)
    other = parameter.choices[0] if parameter.choices else parameter.min
    overridden = _compile_and_run(tmp_path, kernel, program, f"-D{parameter.macro}={other}")
    assert f"{name.upper()} {other}\n" in overridden


def test_the_cpu_extensions_are_built_with_the_descriptor_values():
    """setup.py compiles the generated header with each descriptor's "native" values."""
    native = pytest.importorskip("pearl_fpga._mlp_native")
    d = DESCRIPTORS["mlp"]
    assert native.MAX_WIDTH == d.native["max_width"] == mlp_spec.CPU_MAX_WIDTH
    assert native.MAX_LAYERS == d.parameter("max_layers").default == mlp_spec.MAX_LAYERS
    source = (ROOT / "setup.py").read_text().split("def _require_compiler")[0]  # its tables, not setup()
    namespace: dict = {"__file__": str(ROOT / "setup.py"), "__name__": "setup_tables"}
    exec(compile(source, "setup.py", "exec"), namespace)
    assert namespace["KERNELS"] == tuple(DESCRIPTORS)
    assert namespace["CPU_BUILD_MACROS"]["mlp"] == [("MLP_MAX_WIDTH", str(d.native["max_width"]))]


def test_the_python_spec_limits_are_the_descriptor_values():
    r, m, t = DESCRIPTORS["replay"], DESCRIPTORS["mlp"], DESCRIPTORS["tabular"]
    assert replay_spec.FANOUTS == r.parameter("fanout").choices
    assert (replay_spec.MAX_CAPACITY, replay_spec.MAX_BATCH) == (r.parameter("capacity").max, r.parameter("max_batch").max)
    assert (mlp_spec.MAX_LAYERS, mlp_spec.MAX_WIDTH, mlp_spec.MAX_SHIFT) == (
        m.parameter("max_layers").max, m.parameter("max_width").default, m.constant("MAX_SHIFT"))
    assert (tabular_spec.MAX_ACTIONS, tabular_spec.MAX_ENTRIES) == (t.parameter("actions").max, t.constant("MAX_ENTRIES"))
    for name, ip in KERNELS.items():
        assert ip.hls_macros == DESCRIPTORS[name].macros
        assert ip.limits == {p.name: (p.min, p.max) for p in DESCRIPTORS[name].parameters.values()}


def test_the_makefile_runs_the_descriptor_csim_shapes():
    make = shutil.which("make")
    if make is None:
        pytest.skip("GNU make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    r = subprocess.run([make, "--no-print-directory", "-n", "csim"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pearl_fpga.spec.descriptor --write csim-shapes" in r.stdout
    assert re.search(rf"for k in {' '.join(DESCRIPTORS)} datamover\s*;", r.stdout)  # the kernel list: hls/*/kernel.json
    lines = desc.csim_shape_lines(DESCRIPTORS)
    assert "replay 1_2 -DREPLAY_CAPACITY=1 -DREPLAY_FANOUT=2" in lines
    assert "tabular 64_64 -DTABULAR_STATES=64 -DTABULAR_ACTIONS=64" in lines
