"""`pearl-fpga bench fuzz`: every kind of file a user hands the package, corrupted and edited in seeded
ways, each loaded by the package's own loader in a subprocess with a timeout.

For each kind (bench/fuzz_cases.py: configs, the catalog, board manifests, planner profiles, replay
and dataset dumps, tabular and deep checkpoints) a pristine file is written and then `per_kind` inputs
are generated from it with one seeded generator: single bit flips (half anywhere, half in the zip and
.npy headers of binary files), truncations, overwritten and appended bytes, a FIFO, /dev/zero, a
directory and an oversized sparse file in its place; for JSON, fields set to values of every type and
magnitude, removed or added, deep nesting, bytes that are not UTF-8; for .npz dumps, members whose
.npy header declares a huge shape, members of another dtype or shape (with a matching digest: a
deliberate edit) and object arrays. Every outcome is counted:

- clear error: a PearlError whose message names the file (the CLI prints it and exits with 2);
- unclear error: a PearlError that does not name the file; traceback: any other exception;
- hang: no result before the timeout;
- loaded identically: an input whose load returns exactly the pristine content;
- loaded but changed: a corrupted dump whose load returns something else (must be 0);
- accepted: a JSON file or a deliberately edited dump (with a matching digest) that is still valid and
  loads as it now reads.

`make test` runs the same suite (tests/test_fuzz_files.py) and checks the zero columns; the record
behind docs/reliability.md's table is `pearl-fpga bench fuzz --json docs/figures/fuzz.json`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.bench.fuzz_cases import DUMPS, FILE_NAMES, KINDS, make_pristine
from pearl_fpga.bench.fuzz_mutate import mutations
from pearl_fpga.bench.meta import measured_record

COLUMNS = ("inputs", "clear_errors", "unclear_errors", "tracebacks", "hangs", "loaded_identically",
           "loaded_but_changed", "accepted")
MUST_BE_ZERO = ("unclear_errors", "tracebacks", "hangs", "loaded_but_changed")


@dataclass(frozen=True)
class FuzzBench:
    per_kind: int = 225  # generated inputs of each kind
    seed: int = 0
    kinds: tuple[str, ...] = KINDS
    batch: int = 114  # cases per worker process (two per kind)
    case_timeout_s: float = 60.0  # a case that takes longer is a hang (a loaded machine needs the margin)
    jobs: int = 2  # worker processes at once

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"unknown kind(s) {sorted(unknown)}; kinds: {', '.join(KINDS)}")
        if self.per_kind < 1 or self.batch < 1 or self.jobs < 1 or self.case_timeout_s <= 0:
            raise ValueError("per_kind, batch and jobs must be >= 1 and case_timeout_s > 0")


def _run_batch(cases: list[dict[str, Any]], workdir: Path, timeout_s: float) -> dict[int, dict[str, Any]]:
    """Outcomes by case id; a case that outlives `timeout_s` is a hang, and the rest of its batch runs
    again in a fresh worker."""
    results: dict[int, dict[str, Any]] = {}
    todo = list(cases)
    while todo:
        spec = workdir / f"cases-{todo[0]['id']}.json"
        spec.write_text(json.dumps(todo))
        env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
        proc = subprocess.Popen([sys.executable, "-m", "pearl_fpga.bench.fuzz_cases", str(spec)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=workdir)
        assert proc.stdout is not None
        started: int | None = None
        deadline = time.monotonic() + timeout_s + 240.0  # the worker's imports (torch) on a loaded machine
        timed_out = False
        for line in _lines(proc, deadline, timeout_s):
            if line is None:
                timed_out = True
                break
            word, _, rest = line.partition(" ")
            if word == "start":
                started = int(rest)
            elif word == "done":
                ident, _, payload = rest.partition(" ")
                results[int(ident)] = json.loads(payload)
                started = None
        if timed_out:
            proc.kill()
        proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        if started is not None:  # hung (timeout) or killed the worker outright (a crash is a traceback too)
            results[started] = ({"outcome": "hang"} if timed_out else
                                {"outcome": "traceback", "type": f"exit {proc.returncode}", "message": err[-400:]})
        elif not timed_out and proc.returncode != 0 and not all(c["id"] in results for c in todo):
            raise RuntimeError(f"fuzz worker failed before its first case (exit {proc.returncode}): {err[-2000:]}")
        todo = [c for c in todo if c["id"] not in results]
    return results


def _lines(proc: subprocess.Popen[str], first_deadline: float, timeout_s: float) -> Any:
    """The worker's stdout lines; None once no line came for `timeout_s` (the first: until
    `first_deadline`)."""
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = first_deadline
    buffered = ""
    fd = proc.stdout.fileno()
    while True:
        while "\n" in buffered:
            line, buffered = buffered.split("\n", 1)
            yield line
            deadline = time.monotonic() + timeout_s
        left = deadline - time.monotonic()
        if left <= 0 or not sel.select(left):
            yield None
            return
        chunk = os.read(fd, 1 << 16).decode()
        if not chunk:
            if buffered:
                yield buffered
            return
        buffered += chunk


def classify(case: dict[str, Any], result: dict[str, Any], pristine: str) -> str:
    """The column a case's result counts in (COLUMNS)."""
    outcome = result["outcome"]
    if outcome == "refused":
        return "clear_errors" if result["names_file"] else "unclear_errors"
    if outcome == "traceback":
        return "tracebacks"
    if outcome == "hang":
        return "hangs"
    if result["fingerprint"] == pristine:
        return "loaded_identically"
    return "loaded_but_changed" if case["protected"] else "accepted"


def measure(config: FuzzBench, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Generate, run and count every case of `config`; the record's results."""
    import numpy as np

    root = Path(tempfile.mkdtemp(prefix="pearl-fuzz-"))
    try:
        cases: list[dict[str, Any]] = []
        pristine_cases: dict[str, int] = {}
        rng = np.random.default_rng(config.seed)
        for kind in config.kinds:
            original = make_pristine(kind, root / kind / "pristine")
            ident = len(cases)
            pristine_cases[kind] = ident
            cases.append({"id": ident, "kind": kind, "path": str(original), "label": "pristine", "protected": True})
            for label, protected, write in mutations(kind, original, rng, config.per_kind):
                case_dir = root / kind / f"case-{len(cases):05d}"
                shutil.copytree(original.parent, case_dir, symlinks=True)
                write(case_dir / FILE_NAMES[kind])
                cases.append({"id": len(cases), "kind": kind, "path": str(case_dir / FILE_NAMES[kind]), "label": label,
                              "protected": protected and kind in DUMPS})
        batches = [cases[i:i + config.batch] for i in range(0, len(cases), config.batch)]
        log(f"{len(cases)} inputs of {len(config.kinds)} kinds in {len(batches)} worker processes")
        results: dict[int, dict[str, Any]] = {}
        with ThreadPoolExecutor(config.jobs) as pool:
            for part in pool.map(lambda b: _run_batch(b, root, config.case_timeout_s), batches):
                results.update(part)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return summarize(config, cases, results, pristine_cases)


def summarize(config: FuzzBench, cases: list[dict[str, Any]], results: dict[int, dict[str, Any]],
              pristine_cases: dict[str, int]) -> dict[str, Any]:
    """Per-kind counts (COLUMNS), the labels of each kind's inputs, and every case outside the clear
    and identical columns that must be 0 (MUST_BE_ZERO), with its message."""
    kinds: dict[str, dict[str, Any]] = {}
    failures = []
    for kind, ident in pristine_cases.items():
        control = results[ident]
        if control["outcome"] != "loaded":
            raise RuntimeError(f"the pristine {kind} file did not load: {control}")
        counts = dict.fromkeys(COLUMNS, 0)
        labels: dict[str, int] = {}
        for case in cases:
            if case["kind"] != kind or case["id"] == ident:
                continue
            column = classify(case, results[case["id"]], control["fingerprint"])
            counts["inputs"] += 1
            counts[column] += 1
            family = case["label"].split(":")[0]
            labels[family] = labels.get(family, 0) + 1
            if column in MUST_BE_ZERO:
                failures.append({"kind": kind, "label": case["label"], "column": column, **results[case["id"]]})
        kinds[kind] = {**counts, "mutations": labels}
    total = {c: sum(k[c] for k in kinds.values()) for c in COLUMNS}
    return {"seed": config.seed, "per_kind": config.per_kind, "case_timeout_s": config.case_timeout_s,
            "kinds": kinds, "total": total, "failures": failures}


def run(config: FuzzBench, argv: list[str] | None = None, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The JSON record of one fuzz run (argv: the command line)."""
    return measured_record("fuzz", lambda: measure(config, log), argv)


def report(record: dict[str, Any], console: Any) -> None:
    """The per-kind table, then every failure."""
    res = record["results"]
    console.print(f"{'kind':<20}" + "".join(f"{c:>20}" for c in COLUMNS), markup=False)
    for kind, counts in [*res["kinds"].items(), ("total", res["total"])]:
        console.print(f"{kind:<20}" + "".join(f"{counts[c]:>20}" for c in COLUMNS), markup=False)
    for f in res["failures"]:
        console.print(f"FAIL {f['kind']} {f['label']}: {f['column']} {f.get('type', '')} {f.get('message', '')}",
                      markup=False)
