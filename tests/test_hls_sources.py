"""Static checks of every kernel's HLS top that no C simulation can see."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
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


def _is_hls(path: Path) -> bool:
    """A file Vitis HLS reads: not a testbench (*_tb) and not a Verilator harness of the RTL (verilator_*.cpp,
    e.g. hls/bridge's board model)."""
    return not path.stem.endswith("_tb") and not path.name.startswith("verilator_")


KERNEL_SOURCES = sorted(p for p in ROOT.glob("hls/*/*.cpp") if _is_hls(p))


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
    hls_compat.h only the branch that Vitis HLS compiles (the rest is the g++ stand-in), and without
    the C-simulation-only blocks (`#ifndef __SYNTHESIS__`, not nested), which Vitis does not see."""
    text = path.read_text()
    if path.name == "hls_compat.h":
        text = text[: text.index("#else  // g++")]
    text = re.sub(r"#ifndef __SYNTHESIS__\n.*?#endif", " ", text, flags=re.S)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


# Everything Vitis HLS reads: every kernel's sources and headers (testbenches, *_tb.cpp / *_tb.h, aside).
SYNTH_SOURCES = sorted(p for p in ROOT.glob("hls/*/*") if p.suffix in (".h", ".cpp") and _is_hls(p))


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


# (DEPENDENCE is not one of them: UG1399 places it in the loop where the dependence is, which may be in
# a function that receives the array as an argument; test_pragma_values_are_visible_... checks it.)
STORAGE_PRAGMA = re.compile(r"#pragma HLS (?:ARRAY_PARTITION|ARRAY_RESHAPE|BIND_STORAGE) variable\s*=\s*(\w+)")


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


# ---- Pragma expressions and placement, on the code Vitis HLS reads (after the preprocessor) ----------
# Vitis HLS evaluates a pragma's values in the scope where the pragma stands (UG1399, "Using Constants
# with Pragmas": #define macros, const and constexpr variables); g++ ignores HLS pragmas, so a name that
# is not visible there (a constant of another namespace) only fails in csynth. Loop pragmas
# (LOOP_TRIPCOUNT, PIPELINE, DEPENDENCE, UNROLL, ...) go inside the body of the loop they describe, at
# its top (UG1399, each pragma's "Syntax": "Place the pragma in the C/C++ source within the boundaries
# of the required location"); after a loop without braces one lands in the enclosing scope instead.

LOOP_PRAGMAS = ("LOOP_TRIPCOUNT", "PIPELINE", "DEPENDENCE", "UNROLL", "LOOP_FLATTEN", "LOOP_MERGE")
NAME_OPTIONS = ("variable", "port")  # options whose value names a variable or argument
NUMBER_OPTIONS = ("min", "max", "avg", "factor", "II", "distance", "depth", "dim", "latency")
DECL_FOLLOW = r"(?:=(?!=)|;|\[|,|\)|\{|>|\()"
NOT_A_TYPE = r"(?!(?:return|case|else|goto|delete|new|throw|sizeof|co_return)\b)"


def _preprocess(path: Path, defines: tuple[str, ...] = ()) -> tuple[str, list[tuple[str, int]], set[str]]:
    """(code, where, macros): the translation unit of `path` as g++ preprocesses it, kept only for the
    files under hls/ (system headers dropped), pragma lines included; where[i] is the (file, line) of
    code line i; macros are the names #defined at its end."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        pytest.skip("no C++ compiler for the preprocessor")
    args = [cxx, "-std=c++17", "-E", f"-I{ROOT / 'hls'}", f"-I{path.parent}", *defines, str(path)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout
    macros = set(re.findall(r"^#define (\w+)", subprocess.run(args[:3] + ["-dM"] + args[3:], capture_output=True,
                                                                   text=True, check=True, timeout=120).stdout, re.M))
    lines, where, current, number = [], [], "", 0
    for raw in out.splitlines():
        marker = re.match(r'# (\d+) "([^"]*)"', raw)
        if marker:
            number, current = int(marker.group(1)), marker.group(2)
            continue
        inside = (ROOT / current).resolve().is_relative_to(ROOT / "hls") if current and not current.startswith("<") else False
        if inside:
            lines.append(raw)
            where.append((str((ROOT / current).resolve().relative_to(ROOT)), number))
        number += 1
    code = "\n".join(lines)
    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)
    code = re.sub(r"'(?:\\.|[^'\\])*'", "' '", code)
    return code, where, macros


@dataclass
class Scope:
    kind: str  # namespace, class, function, loop, block, init
    name: str  # the namespace, class or function name ("" if none)
    open: int  # offset of its '{'
    close: int  # offset of its '}'
    head: str  # the text before the '{' that opened it (parameters, for-init, template head)
    parent: Scope | None = None
    children: list[Scope] = field(default_factory=list)

    @property
    def transparent(self) -> bool:
        """Its declarations belong to the enclosing scope (anonymous namespace, extern "C", unscoped enum)."""
        return (self.kind == "namespace" and not self.name and self.parent is not None) or self.kind in ("linkage", "enum")

    def path(self) -> tuple[str, ...]:
        """The namespace path of a namespace scope (anonymous ones left out)."""
        up = self.parent.path() if self.parent else ()
        return up + (self.name,) if self.kind == "namespace" and self.name else up


def _head_before(masked: str, pos: int) -> str:
    """The statement head before the '{' at `pos`: back to the ';', '{' or '}' outside parentheses."""
    depth, i = 0, pos - 1
    while i >= 0:
        c = masked[i]
        if c in ")]":
            depth += 1
        elif c in "([":
            depth -= 1
        elif depth == 0 and c in ";{}":
            break
        i -= 1
    return masked[i + 1:pos]


def _classify(head: str) -> tuple[str, str]:
    h = " ".join(head.split())
    h = re.sub(r"^(?:\w+\s*:(?!:)\s*)+", "", h)  # loop labels
    if not h or h.endswith(("=", ",", "(", "[", "return")) or re.search(r"(?:\w|>)$", h) and "(" not in h and not re.search(r"\b(?:namespace|struct|class|union|enum|extern|do|else|try)\b", h):
        if re.fullmatch(r"(?:else|do|try)?", h):
            return ("loop", "") if h == "do" else ("block", "")
        return "init", ""
    m = re.fullmatch(r"namespace\s*(\w*)", h)
    if m:
        return "namespace", m.group(1)
    if re.fullmatch(r'extern ""', h):
        return "linkage", ""
    m = re.search(r"\benum\b(?:\s+class|\s+struct)?\s*(\w*)", h)
    if m:
        return ("class" if re.search(r"\benum\s+(?:class|struct)\b", h) else "enum"), m.group(1)
    m = re.search(r"\b(?:struct|class|union)\s+(\w+)[^()]*$", h)
    if m:
        return "class", m.group(1)
    if re.match(r"(?:for|while)\b", h):
        return "loop", ""
    if re.match(r"(?:if|else|switch)\b", h) or re.search(r"\]\s*\([^()]*\)\s*(?:mutable\s*)?$", h):
        return "block", ""
    m = re.search(r"(\w+)\s*(?:<[^<>]*>)?\s*\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?(?:noexcept\s*)?$", h)
    if m:
        return "function", m.group(1)
    return "init", ""


def _scopes(code: str) -> Scope:
    """The scope tree of `code` (pragma and other preprocessor lines are not part of any head)."""
    masked = re.sub(r"^[ \t]*#[^\n]*", lambda m: " " * len(m.group(0)), code, flags=re.M)
    root = Scope("namespace", "", -1, len(code), "")
    stack = [root]
    for i, c in enumerate(masked):
        if c == "{":
            head = _head_before(masked, i)
            kind, name = _classify(head)
            scope = Scope(kind, name, i, -1, head, stack[-1])
            stack[-1].children.append(scope)
            stack.append(scope)
        elif c == "}":
            assert len(stack) > 1, f"unbalanced '}}' at offset {i}"
            stack.pop().close = i
    assert len(stack) == 1, "unbalanced '{'"
    return root


def _innermost(scope: Scope, pos: int) -> Scope:
    for child in scope.children:
        if child.open < pos < child.close:
            return _innermost(child, pos)
    return scope


def _own_text(code: str, scope: Scope, upto: int | None = None) -> str:
    """The scope's body with the bodies of its non-transparent inner scopes blanked out (their names stay)."""
    start, end = scope.open + 1, scope.close if upto is None else min(upto, scope.close)
    text = list(code[start:end])
    for child in scope.children:
        if child.transparent or child.open >= end:
            continue
        for k in range(child.open + 1 - start, min(child.close, end) - start):
            text[k] = " "
    return "".join(text)


def _declares(text: str, name: str) -> bool:
    return bool(re.search(rf"(?:(?<![\w.]){NOT_A_TYPE}[A-Za-z_]\w*|>|\*|&)\s*[*&]*\s*\b{name}\s*{DECL_FOLLOW}", text)
                or re.search(rf"\busing\s+(?:[\w:]+::)?{name}\s*[;=]", text)
                or re.search(rf"(?:^|[{{,])\s*{name}\s*(?:=[^,}}]*)?(?=[,}}])", text))


def _namespaces(root: Scope, path: tuple[str, ...]) -> list[Scope]:
    """Every block of the namespace `path` (a namespace may be opened many times)."""
    out, todo = [], [root]
    while todo:
        s = todo.pop()
        if s.kind == "namespace" and s.path() == path and (s.name or s is root):
            out.append(s)
        todo.extend(c for c in s.children if c.kind in ("namespace", "linkage"))
    return out


def _visible(code: str, root: Scope, pos: int, name: str) -> bool:
    """Whether `name` is declared where the pragma at `pos` stands (namespace-aware, see above)."""
    scope: Scope | None = _innermost(root, pos)
    while scope is not None:
        if scope.kind in ("function", "loop", "class") and _declares(scope.head + ";", name):
            return True  # parameters, for-init, template parameters
        if scope.kind == "class":
            if _declares(_own_text(code, scope), name):
                return True
        elif scope.kind == "namespace" and not scope.transparent:
            for block in _namespaces(root, scope.path()):
                own = _own_text(code, block, pos) if block.open < pos else ""
                if _declares(own, name):
                    return True
                for used in re.findall(r"\busing\s+namespace\s+([\w:]+)\s*;", own):
                    if any(_declares(_own_text(code, b, pos), name)
                           for b in _namespaces(root, tuple(used.strip(":").split("::")))):
                        return True
        elif not scope.transparent and _declares(_own_text(code, scope, pos), name):
            return True
        scope = scope.parent
    return False


def _pragmas(code: str):
    """(offset, pragma name, {option: value}) of every HLS pragma."""
    for m in re.finditer(r"^[ \t]*#pragma\s+HLS\s+(\w+)([^\n]*)", code, flags=re.I | re.M):
        options = {k: v.strip() for k, v in re.findall(r"(\w+)\s*=\s*((?:(?!\b\w+\s*=(?!=)).)+)", m.group(2))}
        yield m.start(), m.group(1).upper(), options


def pragma_problems(code: str, where: list[tuple[str, int]], macros: set[str]) -> list[str]:
    """Pragma values naming something not visible at the pragma; loop pragmas outside the top of a loop body."""
    root, bad = _scopes(code), []
    for pos, pragma, options in _pragmas(code):
        file, line = where[code.count("\n", 0, pos)]
        at = f"{file}:{line} {pragma}"
        for key, value in options.items():
            if key in NAME_OPTIONS:
                names = [] if value == "return" else re.findall(r"^[A-Za-z_]\w*", value)
            elif key in NUMBER_OPTIONS:
                names = re.findall(r"(?<![\w.])[A-Za-z_]\w*(?:::\w+)*", value)
            else:
                continue
            for name in names:
                last = name.split("::")[-1]
                if "::" in name:  # qualified: the namespace must hold it
                    ok = any(_declares(_own_text(code, b), last) for b in _namespaces(root, tuple(name.split("::")[:-1])))
                else:
                    ok = name in macros or _visible(code, root, pos, name)
                if not ok:
                    bad.append(f"{at}: {key} = {value}: {name} is not visible here")
        if pragma in LOOP_PRAGMAS:
            scope = _innermost(root, pos)
            before = re.sub(r"^[ \t]*#[^\n]*", "", _own_text(code, scope, pos), flags=re.M) if scope.kind == "loop" else ""
            before = re.sub(r"\b\w+\s*:(?!:)", "", before)
            if scope.kind != "loop" or before.strip():
                bad.append(f"{at}: not at the top of a loop body (in a {scope.kind} scope"
                           + (f" after '{' '.join(before.split())[:60]}'" if before.strip() else "") + ")")
    return bad


SYNTH_TOPS = sorted(p for p in ROOT.glob("hls/*/*.cpp") if _is_hls(p))


@pytest.mark.parametrize("path", SYNTH_TOPS, ids=lambda p: str(p.relative_to(ROOT)))
def test_pragma_values_are_visible_and_loop_pragmas_sit_in_their_loops(path):
    """Every name a pragma's value uses is visible where the pragma stands (a macro, or a constant or
    variable of an enclosing scope, namespaces included), and every loop pragma is at the top of its
    loop's body (UG1399)."""
    bad = pragma_problems(*_preprocess(path))
    assert not bad, "\n".join(bad)


def test_the_pragma_checks_see_the_mistakes():
    bad = '''namespace k {
constexpr int MAX_BATCH = 8;
void core(int* a, int n) {
    for (int d = 0; d < n; d++) {
#pragma HLS LOOP_TRIPCOUNT max = MAX_BATCH
        for (int i = 0; i < n; i++) a[i] = 0;
#pragma HLS LOOP_TRIPCOUNT max = MAX_BATCH
    }
    for (int i = 0; i < n; i++) a[i] = 1;
#pragma HLS LOOP_TRIPCOUNT max = MAX_BATCH
}
}
namespace {
using k::MAX_BATCH;
constexpr int DEPTH = 2;
}
void top(int n) {
    static int mem[8];
#pragma HLS DEPENDENCE variable = mem type = inter false
    for (int c = 0; c < n; c++) {
#pragma HLS LOOP_TRIPCOUNT max = MAX_BATCH
#pragma HLS DEPENDENCE variable = mem type = inter direction = RAW distance = DEPTH dependent = true
#pragma HLS PIPELINE II = STAGES
        mem[c] = c;
    }
    for (int c = 0; c < n; c++) {
#pragma HLS LOOP_TRIPCOUNT max = k::MAX_BATCH
#pragma HLS UNROLL factor = WIDTH
#pragma HLS DEPENDENCE variable = other type = inter false
    }
}
'''
    where = [("t.cpp", i + 1) for i in range(bad.count("\n") + 1)]
    got = pragma_problems(bad, where, {"WIDTH"})
    assert got == [
        "t.cpp:7 LOOP_TRIPCOUNT: not at the top of a loop body (in a loop scope after 'for (int i = 0; i < n; i++) a[i] = 0;')",
        "t.cpp:10 LOOP_TRIPCOUNT: not at the top of a loop body (in a function scope)",
        "t.cpp:19 DEPENDENCE: not at the top of a loop body (in a function scope)",
        "t.cpp:23 PIPELINE: II = STAGES: STAGES is not visible here",
        "t.cpp:29 DEPENDENCE: variable = other: other is not visible here",
    ], got
    # without the using-declaration, the top cannot see k's constant
    assert "t.cpp:21 LOOP_TRIPCOUNT: max = MAX_BATCH: MAX_BATCH is not visible here" in pragma_problems(
        bad.replace("using k::MAX_BATCH;", ""), where, {"WIDTH"})


# the default build's tree (8192 leaves, K = 16: 4 levels) has levels 1..3 above its leaf level
HAZARD_KERNELS = {"replay": ["front_leaves", "leaf_level"] + [f"level{d}" for d in range(1, 4)]}


@pytest.mark.parametrize("kernel", sorted(HAZARD_KERNELS))
def test_hazard_forwarding_depth_matches_the_dependence_and_the_spec(kernel):
    """The top's memories that COMMANDS reads and writes: each has, inside COMMANDS (UG1399, pragma HLS
    dependence), an inter RAW dependence of distance FWD_DEPTH + 1 that HLS must enforce, FWD_DEPTH is
    the depth of the write window the reads go through, and SPEC.md states that depth."""
    path = ROOT / "hls" / kernel / f"{kernel}.cpp"
    code, where, macros = _preprocess(path)
    source = _code(path)
    assert re.search(r"constexpr uint32_t FWD_DEPTH = LEAF_LATENCY \+ 1;", source)
    depth = int(re.search(r"constexpr uint32_t LEAF_LATENCY = (\d+);", code).group(1)) + 1  # the block RAM build
    assert re.search(r"constexpr uint32_t RAW_DISTANCE = FWD_DEPTH \+ 1;", source)
    assert len(re.findall(r"pearl::WriteWindow<[^;]*,\s*FWD_DEPTH>", source)) >= 1
    spec = (ROOT / "hls" / kernel / "SPEC.md").read_text()
    stated = re.search(r"Forwarding depth: (\d+) \(FWD_DEPTH in", spec)
    assert stated and int(stated.group(1)) == depth, "SPEC.md must state the forwarding depth of the code"
    assert f"distance = {depth + 1} dependent = true" in spec
    root = _scopes(code)
    commands = code.index("COMMANDS:")
    loop = _innermost(root, code.index("{", commands) + 1)
    assert loop.kind == "loop"
    found = {}
    for pos, pragma, options in _pragmas(code):
        if pragma != "DEPENDENCE":
            continue
        assert loop.open < pos < loop.close, f"DEPENDENCE outside COMMANDS at {where[code.count(chr(10), 0, pos)]}"
        found[options["variable"]] = options
    assert sorted(found) == sorted(HAZARD_KERNELS[kernel])
    for variable, options in found.items():
        assert (options.get("type"), options.get("direction"), options.get("distance"), options.get("dependent")) == \
            ("inter", "RAW", "RAW_DISTANCE", "true"), (variable, options)


def test_the_tabular_loop_states_its_hazard_window_to_hls():
    """tabular_top issues in order and holds back a command that reads a row written within
    HAZARD_WINDOW - 1 slots; inside COMMANDS, DEPENDENCE distance HAZARD_WINDOW on both table copies
    says so to HLS, and tabular.h, the Python model and SPEC.md state the same window."""
    from pearl_fpga.spec import tabular as tspec

    path = ROOT / "hls" / "tabular" / "tabular.cpp"
    code, _, _ = _preprocess(path)
    header = (ROOT / "hls" / "tabular" / "tabular_config.h").read_text()  # generated from the descriptor
    window = int(re.search(r"constexpr uint32_t HAZARD_WINDOW = (\d+);", header).group(1))
    assert "constexpr uint32_t HAZARD_WINDOW = config::HAZARD_WINDOW;" in (ROOT / "hls" / "tabular" / "tabular.h").read_text()
    assert window == tspec.HAZARD_WINDOW
    assert f"distance = {window} dependent = true" in (ROOT / "hls" / "tabular" / "SPEC.md").read_text()
    loop = _innermost(_scopes(code), code.index("{", code.index("COMMANDS:")) + 1)
    found = {}
    for pos, pragma, options in _pragmas(code):
        if pragma == "DEPENDENCE":
            assert loop.open < pos < loop.close
            found[options["variable"]] = (options.get("type"), options.get("direction"), options.get("distance"),
                                          options.get("dependent"))
    assert found == {v: ("inter", "RAW", "HAZARD_WINDOW", "true") for v in ("row_copy", "update_copy")}
    assert "constexpr uint32_t IN_FLIGHT = HAZARD_WINDOW - 1;" in _code(path)


def test_the_mlp_layer_loop_states_that_its_activations_do_not_alias():
    """LAYER_MACS reads act[l & 1] and writes act[(l + 1) & 1], one array: without DEPENDENCE inter false
    on both halves (or two arrays), HLS assumes a write may reach a later read and LAYER_MACS loses II = 1."""
    code = _code(ROOT / "hls/mlp/mlp.cpp")
    body = _loop_body(code, "LAYER_MACS")
    two_arrays = not re.search(r"act\[\s*l\s*&\s*1\s*\]", code)
    for name in ("in", "out"):
        assert two_arrays or re.search(rf"#pragma HLS DEPENDENCE variable = {name} type = inter false", body), name
    reason = (ROOT / "hls/mlp/mlp.cpp").read_text()
    assert two_arrays or "no write of one iteration reaches a read of a later one" in reason


# ---- What the vendor flows require of the tops (issue 31) ------------------------------------------------


@pytest.mark.parametrize("kernel", sorted(TOPS))
def test_tops_have_c_linkage(kernel, tmp_path):
    """UG1393 ("C/C++ Kernels"): a Vitis kernel's top has C linkage, `extern "C"`, as the data movers'
    do; compiled, the top's symbol is its plain name, not a mangled one."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    nm = shutil.which("nm")
    if cxx is None or nm is None:
        pytest.skip("no C++ compiler or nm")
    obj = tmp_path / f"{kernel}.o"
    subprocess.run([cxx, "-std=c++14", "-O0", "-c", "-w", f"-I{ROOT / 'hls'}", f"-I{ROOT / 'hls' / kernel}",
                    str(ROOT / "hls" / kernel / f"{kernel}.cpp"), "-o", str(obj)], check=True, timeout=300)
    symbols = subprocess.run([nm, "--defined-only", str(obj)], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^\S+ T {kernel}_top$", symbols, re.M), f"{kernel}_top is not an unmangled (extern \"C\") symbol"


def _function_bodies(code: str):
    """(name, parameter text, body) of every function definition in `code`."""
    root = _scopes(code)
    todo = [root]
    while todo:
        scope = todo.pop()
        todo.extend(scope.children)
        if scope.kind == "function":
            yield scope.name, scope.head, code[scope.open + 1:scope.close]


def _needs_inline(code: str) -> list[str]:
    """Functions with a DEPENDENCE pragma on one of their parameters that do not say `#pragma HLS INLINE`
    first: kept as a function, the pragma binds to a port, not to the caller's array (UG1399, pragma HLS
    dependence, and pragma HLS inline: arguments become ports of a sub-function)."""
    bad = []
    for name, head, body in _function_bodies(code):
        params = set(re.findall(r"(\w+)\s*(?:\[[^\]]*\])*\s*(?:,|\)\s*(?:const\s*)?$)", head))
        on_params = [v for v in re.findall(r"#pragma HLS DEPENDENCE variable\s*=\s*(\w+)", body) if v in params]
        first = re.sub(r"^\s+", "", body).splitlines()[0] if body.strip() else ""
        if on_params and not first.startswith("#pragma HLS INLINE"):
            bad.append(name)
    return bad


@pytest.mark.parametrize("path", SYNTH_TOPS, ids=lambda p: str(p.relative_to(ROOT)))
def test_functions_whose_pragmas_name_their_arguments_are_inlined(path):
    bad = _needs_inline(_preprocess(path)[0])
    assert not bad, f"{path.relative_to(ROOT)}: not inlined, so their DEPENDENCE pragmas bind to ports: {bad}"


def test_the_inline_check_sees_a_missing_pragma():
    bad = "void f(const int in[8], int out[8]) {\n    for (int i = 0; i < 8; i++) {\n#pragma HLS DEPENDENCE variable = in type = inter false\n        out[i] = in[i];\n    }\n}\n"
    assert _needs_inline(bad) == ["f"]
    assert _needs_inline(bad.replace("{\n    for", "{\n#pragma HLS INLINE\n    for", 1)) == []


def test_the_mlp_datapath_is_inlined_into_the_top():
    """mlp.cpp's layer functions (issue 31: inline only for g++) say `#pragma HLS INLINE`, so act[l & 1] and
    act[(l + 1) & 1] stay one array of mlp_top's datapath and LAYER_MACS's DEPENDENCE pragmas bind to it."""
    code = _code(ROOT / "hls/mlp/mlp.cpp")
    for name in ("layer_forward", "tanh_lookup", "forward_core", "forward_one"):
        body = _function_body(code, name)
        assert body.lstrip().startswith("#pragma HLS INLINE"), name


def _uram_build() -> tuple[str, dict[str, int]]:
    """replay.cpp preprocessed as an Alveo card's build compiles it, and its replay descriptor constants."""
    from pearl_fpga.board.catalog import hls_defines, load_catalog
    from pearl_fpga.spec.descriptor import descriptor

    spec = next(s for s in load_catalog().values() if s.replay_leaf_memory == "uram")
    code, _, _ = _preprocess(ROOT / "hls/replay/replay.cpp", tuple(hls_defines(spec, "replay").split()))
    return code, {k: v for k, (v, _) in descriptor("replay").constants.items()}


def test_leaf_words_in_ultraram_use_the_cascade_registers_and_banks():
    """UG573 (REG_CAS) and UG949 (cascade height 8): the Alveo build binds the leaf words to UltraRAM with
    the descriptor's URAM_READ_LATENCY (>= 3: output register and cascade registers), banks front_leaves
    so that no bank cascades more than URAM_CASCADE_BLOCKS blocks, and the forwarding depth and the RAW
    distance grow with the latency (SPEC.md states both builds)."""
    code, const = _uram_build()
    assert const["URAM_READ_LATENCY"] >= 3 and const["URAM_CASCADE_BLOCKS"] <= 8
    assert "constexpr uint32_t LEAF_LATENCY = replay::config::URAM_READ_LATENCY;" in code
    binds = dict(re.findall(r"BIND_STORAGE variable = (front_leaves|leaf_level) type = ram_s2p impl = uram latency = (\w+)", code))
    assert binds == {"front_leaves": "LEAF_LATENCY", "leaf_level": "LEAF_LATENCY"}, binds
    assert "ARRAY_PARTITION variable = front_leaves type = block factor = FRONT_BANKS" in code
    assert re.search(r"FRONT_BANKS = \(LEAVES \+ URAM_BANK_WORDS - 1\) / URAM_BANK_WORDS;", code)
    assert "URAM_BANK_WORDS = 4096 * replay::config::URAM_CASCADE_BLOCKS;" in code
    spec = (ROOT / "hls/replay/SPEC.md").read_text()
    assert f"Forwarding depth: 2 (FWD_DEPTH in replay.cpp, LEAF_LATENCY + 1) in block RAM, {const['URAM_READ_LATENCY'] + 1} in UltraRAM" in spec


@pytest.mark.parametrize("kernel", ["replay", "tabular"])
def test_commands_ii_follows_the_clock(kernel):
    """The COMMANDS loops' one-cycle recurrences do not fit a 300 MHz period: their PIPELINE II is
    <KERNEL>_COMMANDS_II, which the catalog sets to 2 above the descriptor's II1_MAX_MHZ and leaves at 1
    below; SPEC.md states the rule and the planner counts II clocks per command."""
    from pearl_fpga.board.catalog import hls_defines, load_catalog
    from pearl_fpga.spec.descriptor import descriptor
    from pearl_fpga.spec.kernels import commands_ii

    macro = f"{kernel.upper()}_COMMANDS_II"
    code = _code(ROOT / "hls" / kernel / f"{kernel}.cpp")
    assert f"#pragma HLS PIPELINE II = {macro}" in _loop_body(code, "COMMANDS")
    limit = descriptor(kernel).constant("II1_MAX_MHZ")
    for spec in load_catalog().values():
        ii = commands_ii(kernel, spec.clock_mhz)
        assert ii == (1 if spec.clock_mhz <= limit else 2)
        assert (f"-D{macro}={ii}" in hls_defines(spec, kernel)) == (ii > 1), spec.name
    assert any(commands_ii(kernel, s.clock_mhz) == 2 for s in load_catalog().values())  # the Alveo cards
    assert f"II1_MAX_MHZ = {limit} MHz" in (ROOT / "hls" / kernel / "SPEC.md").read_text()


def test_stream_beats_carry_no_tstrb():
    """The AXI DMA's stream ports have TKEEP and TLAST but no TSTRB (PG021, "AXI4-Stream Interface"): the
    beat types Vitis HLS compiles enable KEEP and LAST only, and no kernel drives strb."""
    vendor = _code(ROOT / "hls/common/hls_compat.h")
    assert "AXIS_SIGNALS = AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST;" in vendor
    assert "ap_axiu<128, 0, 0, 0, AXIS_SIGNALS>" in vendor and "ap_axis<16, 0, 0, 0, AXIS_SIGNALS>" in vendor
    for path in SYNTH_SOURCES:
        code = vendor if path.name == "hls_compat.h" else _code(path)
        assert not re.search(r"\.strb\b", code), path


@pytest.mark.parametrize("path", SYNTH_TOPS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_interface_offsets_in_the_vitis_flow(path):
    """UG1399: in the Vitis kernel flow the tool assigns the s_axilite offsets ("S_AXILITE Offset Option":
    do not specify the offset option in that flow) and m_axi keeps its default offset=slave ("Offset and
    Modes of Operation"); the Vivado IP flow keeps the register map of SPEC.md."""
    vitis, _, _ = _preprocess(path, ("-DPEARL_VITIS_FLOW",))
    vivado, _, _ = _preprocess(path)
    interface = lambda code: re.findall(r"#pragma HLS INTERFACE[^\n]*", code)  # noqa: E731
    assert not [p for p in interface(vitis) if "offset" in p], path
    if path.parent.name != "datamover":
        assert any(re.search(r"s_axilite port = \w+ offset = 0x", p) for p in interface(vivado))


@pytest.mark.parametrize("capacity, fanout", [(1, 2), (17, 16), (8192, 16), (1000, 8), (1 << 20, 2), (524288, 16)])
def test_only_the_levels_the_tree_has_carry_pragmas(capacity, fanout):
    """replay_top declares MAX_DEPTH level memories; those from DEPTH on are unused placeholders that
    Vitis HLS removes, and a pragma on one is a warning: storage and DEPENDENCE pragmas name exactly the
    levels 1 .. DEPTH - 1 (REPLAY_TREE_DEPTH, which the source checks against tree_depth)."""
    from pearl_fpga.spec.replay import tree_depth

    code, _, _ = _preprocess(ROOT / "hls/replay/replay.cpp", (f"-DREPLAY_CAPACITY={capacity}", f"-DREPLAY_FANOUT={fanout}"))
    want = {f"level{d}" for d in range(1, tree_depth(capacity, fanout))}
    for pragma in ("ARRAY_PARTITION", "BIND_STORAGE", "DEPENDENCE"):
        named = set(re.findall(rf"#pragma HLS {pragma} variable = (level\d+)", code))
        assert named == want, (pragma, sorted(named ^ want))
