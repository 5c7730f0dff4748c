"""Static checks of every kernel's HLS top that no C simulation can see."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# every kernel whose C++ has an HLS top
TOPS = {spec.parent.name: spec for spec in sorted(ROOT.glob("hls/*/SPEC.md"))
        if f"{spec.parent.name}_top(" in (spec.parent / f"{spec.parent.name}.cpp").read_text()}


@pytest.mark.parametrize("kernel", sorted(TOPS))
def test_top_declares_ap_ctrl_hs(kernel):
    """Vitis kernels default to ap_ctrl_chain, whose ap_done waits for an ap_continue that the drivers
    (pearl_fpga/board/driver.py, ap_ctrl_hs: start, poll done) never write: the top must say ap_ctrl_hs."""
    source = (ROOT / "hls" / kernel / f"{kernel}.cpp").read_text()
    pragmas = re.findall(r"#pragma HLS INTERFACE[^\n]*port\s*=\s*return[^\n]*", source)
    assert any("ap_ctrl_hs" in p for p in pragmas), f"{kernel}_top does not declare ap_ctrl_hs on its return port"
    assert not any("ap_ctrl_chain" in p or "ap_ctrl_none" in p for p in pragmas)


KERNEL_SOURCES = sorted(p for p in ROOT.glob("hls/*/*.cpp") if not p.name.endswith("_tb.cpp"))


def _variable_loops(source: str):
    """(line number, bound, next lines) of every for loop whose bound is not a compile-time constant."""
    lines = source.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"\bfor\s*\([^;]*;\s*[^;<]*<\s*([^;]+);", line)
        if not m:
            continue
        bound = m.group(1).strip()
        if re.fullmatch(r"[A-Z][A-Z0-9_]*|\d+[uU]?|[A-Z][A-Za-z0-9_]*(<\w+>)?::[A-Z0-9_]+", bound):
            continue  # a constant: Vitis knows the trip count
        yield i + 1, bound, "\n".join(lines[i + 1:i + 4])


@pytest.mark.parametrize("path", KERNEL_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_variable_loop_states_its_trip_count(path):
    """Without LOOP_TRIPCOUNT, Vitis reports a variable loop's latency as '?' and the planner's HLS
    model has nothing to check against."""
    missing = [f"line {n} (bound {bound})" for n, bound, after in _variable_loops(path.read_text())
               if "LOOP_TRIPCOUNT" not in after]
    assert not missing, f"{path.relative_to(ROOT)}: loops without LOOP_TRIPCOUNT: {', '.join(missing)}"


def test_the_trip_count_check_sees_a_missing_pragma():
    bad = "void f(int n) {\nL:\n    for (int i = 0; i < n; i++) {\n#pragma HLS PIPELINE II = 1\n    }\n}\n"
    good = bad.replace("#pragma HLS PIPELINE", "#pragma HLS LOOP_TRIPCOUNT max = 8\n#pragma HLS PIPELINE")
    assert [n for n, _, after in _variable_loops(bad) if "LOOP_TRIPCOUNT" not in after] == [3]
    assert not [n for n, _, after in _variable_loops(good) if "LOOP_TRIPCOUNT" not in after]


def _code(path: Path) -> str:
    """The source without comments and string literals (so that prose never trips a check); of
    hls_compat.h only the branch that Vitis HLS compiles (the rest is the g++ stand-in)."""
    text = path.read_text()
    if path.name == "hls_compat.h":
        text = text[: text.index("#else  // g++")]
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


# Everything Vitis HLS reads: every kernel's sources and headers (testbenches, *_tb.cpp / *_tb.h, aside).
SYNTH_SOURCES = sorted(p for p in ROOT.glob("hls/*/*") if p.suffix in (".h", ".cpp") and not p.stem.endswith("_tb"))


@pytest.mark.parametrize("path", SYNTH_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize(
    "pattern, why",
    [
        (r"std::tanh|\btanh\s*\(|<cmath>|<math\.h>", "run-time math: tables must be constant ROMs"),
        (r"\bnew\b|\bdelete\b|\bmalloc\s*\(|\bfree\s*\(", "dynamic allocation"),
        (r"std::(vector|deque|map|list|string|unique_ptr|shared_ptr|function)", "std:: containers / smart pointers"),
        (r"\w\s*\*\s*\*\s*\w|\w\s*\*\s*&", "pointer-to-pointer or reference-to-pointer"),
        (r"\bthrow\b|\btry\b|\bvirtual\b|\bdynamic_cast\b", "exceptions, virtual calls, RTTI"),
        (r"\bdouble\b|\bfloat\b", "floating point in an integer kernel"),
    ],
)
def test_kernel_source_avoids_unsynthesizable_constructs(path, pattern, why):
    hits = [m.group(0) for m in re.finditer(pattern, _code(path))]
    assert not hits, f"{path.relative_to(ROOT)}: {why}: {hits[:3]}"


def test_synthesizability_checks_cover_every_kernel():
    kernels = {p.parent.name for p in SYNTH_SOURCES}
    assert {"replay", "mlp", "tabular", "datamover", "common"} <= kernels, kernels


def _opening_brace(code: str, pos: int) -> int:
    """Offset of the innermost '{' still open at `pos`, or -1 at file scope."""
    depth = 0
    for i in range(pos - 1, -1, -1):
        if code[i] == "}":
            depth += 1
        elif code[i] == "{":
            if depth == 0:
                return i
            depth -= 1
    return -1


def _closing_brace(code: str, start: int) -> int:
    """Offset of the '}' that closes the '{' at `start`."""
    depth = 0
    for i in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return i
    raise AssertionError(f"unbalanced braces after offset {start}")


def _pipelined_bodies(code: str):
    """(line, body) of every block that holds a `#pragma HLS PIPELINE`: the innermost braces around it."""
    for m in re.finditer(r"#pragma HLS PIPELINE", code):
        start = _opening_brace(code, m.start())
        yield code.count("\n", 0, m.start()) + 1, code[start:_closing_brace(code, start) + 1]


@pytest.mark.parametrize("path", SYNTH_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_early_return_inside_a_pipelined_loop(path):
    """A return inside a pipelined loop gives it a data-dependent exit that Vitis cannot pipeline at
    its II (or flushes the pipeline): end such loops with flags instead."""
    bad = [line for line, body in _pipelined_bodies(_code(path)) if re.search(r"\breturn\b", body)]
    assert not bad, f"{path.relative_to(ROOT)}: return inside the pipelined loop of the pragma at line(s) {bad}"


def test_the_early_return_check_sees_one():
    bad = "void f(int n) {\n    for (int i = 0; i < n; i++) {\n#pragma HLS PIPELINE II = 1\n        if (i == 3) return;\n    }\n}\n"
    assert [b for _, b in _pipelined_bodies(bad) if "return" in b]
    assert not [b for _, b in _pipelined_bodies(bad.replace("return;", "continue;")) if re.search(r"\breturn\b", b)]


# Functions only the cpu build runs (the HLS tops never call them): no pipeline pragmas there.
CPU_ONLY = {"replay/replay.cpp": ("sample_k", "tree_clear", "tree_update", "tree_sample"),
            "tabular/tabular.cpp": ("update_batch",)}


def _function_body(code: str, name: str) -> str:
    m = re.search(rf"\b{name}\s*\([^;{{]*\)\s*\{{", code)
    assert m, f"no definition of {name}"
    return code[m.end():_closing_brace(code, m.end() - 1)]


@pytest.mark.parametrize("source,name", [(s, n) for s, names in CPU_ONLY.items() for n in names])
def test_cpu_only_functions_carry_no_pipeline_pragma(source, name):
    body = _function_body(_code(ROOT / "hls" / source), name)
    assert "#pragma HLS PIPELINE" not in body, f"{name} in hls/{source} runs on the CPU only; drop its PIPELINE pragma"


def _loop_body(code: str, label: str) -> str:
    """The braces of the loop that follows `label:`."""
    start = code.index("{", code.index(f"{label}:"))
    return code[start:_closing_brace(code, start) + 1]


def test_the_mlp_mac_multiplies_once_per_weight():
    """Each unrolled lane is one DSP: one 16x16 multiply into the wide accumulator. Splitting the
    activation into bytes (the CPU SIMD device of pearl_fpga/native/mlp_simd.h) would double them."""
    body = _loop_body(_code(ROOT / "hls/mlp/mlp.cpp"), "MAC_LANES")
    assert "#pragma HLS UNROLL" in body
    products = re.findall(r"\*\s*(?!LANES\b)\w", body)  # index arithmetic * LANES is a shift
    assert len(products) == 1, f"MAC_LANES multiplies {len(products)} times per lane: {body}"


STORAGE_PRAGMA = re.compile(r"#pragma HLS (?:ARRAY_PARTITION|ARRAY_RESHAPE|BIND_STORAGE|DEPENDENCE) variable\s*=\s*(\w+)")


def _enclosing_function(code: str, pos: int) -> tuple[str, int] | None:
    """(name, offset of its opening brace) of the function whose body holds `pos`, or None at file scope."""
    i = _opening_brace(code, pos)
    while i >= 0:
        head = re.search(r"(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?$", code[:i])
        if head and head.group(1) not in ("for", "if", "while", "switch"):
            return head.group(1), i
        i = _opening_brace(code, i)
    return None


def _misplaced_storage_pragmas(code: str) -> list[str]:
    """Storage pragmas whose array is not declared in the function that holds the pragma (UG1399:
    'within the boundaries of the function where the array variable is defined')."""
    bad = []
    for m in STORAGE_PRAGMA.finditer(code):
        var, where = m.group(1), _enclosing_function(code, m.start())
        declared = where and re.search(rf"[\w:<>]\s+{var}\s*(\[|=|;|,)|,\s*{var}\s*(\[|=|;)", code[where[1]:m.start()])
        if not declared:
            bad.append(f"{var} (pragma in {where[0] if where else 'file scope'})")
    return bad


@pytest.mark.parametrize("path", SYNTH_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_storage_pragmas_sit_in_the_function_that_defines_the_array(path):
    """A partition or storage pragma on a global or a static member, placed in another (inlined)
    function, is outside what Vitis HLS documents: declare the array in the function with its pragmas."""
    bad = _misplaced_storage_pragmas(_code(path))
    assert not bad, f"{path.relative_to(ROOT)}: storage pragmas away from the array's definition: {bad}"


def test_the_storage_pragma_check_sees_a_pragma_on_a_global():
    bad = "int g[8][4];\nint read(int i) {\n#pragma HLS INLINE\n#pragma HLS ARRAY_PARTITION variable = g dim = 2\n    return g[i][0];\n}\n"
    good = "int top(int i) {\n    static int g[8][4];\n#pragma HLS ARRAY_PARTITION variable = g dim = 2\n    for (int k = 0; k < 4; k++) {\n    }\n    return g[i][0];\n}\n"
    assert _misplaced_storage_pragmas(bad) == ["g (pragma in read)"]
    assert _misplaced_storage_pragmas(good) == []
