"""Benchmark records on disk: reading and validating them, and the copy of each kept per CPU vendor.

`docs/figures/<name>.json` is the latest record of a benchmark from any host (what the docs' tables
show). Writing it also keeps `docs/figures/hosts/<vendor>/<name>.json`, the latest record of that
benchmark on that CPU vendor (intel, amd, or another vendor's sanitised name), so that a run on one
vendor's CPU does not erase the last figures of the other: issue 33 compares a figure with its last
record on the other vendor. A record is data (JSON, validated), never code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pearl_fpga.errors import RecordError

REQUIRED = ("schema", "benchmark", "command", "commit", "date", "machine", "load_average_before",
            "load_average_after", "under_load", "results")
HOSTS = "hosts"  # the folder beside the records that holds one folder of records per CPU vendor
# /proc/cpuinfo's vendor_id -> the vendor's folder name
KNOWN_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")


def vendor_name(text: str) -> str:
    """A vendor's folder name: a known vendor_id's short name, else `text` lower-cased with every run of
    other characters as one '-' (at most 32 characters), or 'unknown' when nothing is left."""
    if text in KNOWN_VENDORS:
        return KNOWN_VENDORS[text]
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:32].strip("-")
    return name or "unknown"


def vendor_of(machine: dict[str, Any]) -> str:
    """The CPU vendor of a record's `machine`: its `vendor` (records since issue 33), else read from its
    cpu model string (older records: 'Intel(R) Xeon(R) ...', 'AMD EPYC ...'), else the string's first word."""
    vendor = machine.get("vendor")
    if isinstance(vendor, str) and _NAME.fullmatch(vendor):
        return vendor
    cpu = str(machine.get("cpu", ""))
    for word, name in (("intel", "intel"), ("amd", "amd")):
        if re.search(rf"\b{word}\b", cpu.lower()):
            return name
    return vendor_name(cpu.split()[0] if cpu.split() else "")


def host_copy_path(path: Path, record: dict[str, Any]) -> Path | None:
    """Where the per-vendor copy of a record written to `path` goes: `hosts/<vendor>/` beside it; None for
    a path that is already such a copy."""
    if path.parent.parent.name == HOSTS:
        return None
    return path.parent / HOSTS / vendor_of(record["machine"]) / path.name


def check_record(record: Any, where: Path) -> dict[str, Any]:
    """`record` when it is a benchmark record (a JSON object with every field of REQUIRED and a machine
    with its cpu), else a RecordError naming `where` and the fix."""
    missing = [k for k in REQUIRED if k not in record] if isinstance(record, dict) else list(REQUIRED)
    if missing:
        raise RecordError(f"{where}: not a benchmark record (missing {', '.join(missing)}); "
                          "write it with pearl-fpga bench ... --json PATH")
    machine = record["machine"]
    if not isinstance(machine, dict) or not isinstance(machine.get("cpu"), str) \
            or not isinstance(record["results"], dict):
        raise RecordError(f"{where}: not a benchmark record (its machine needs a cpu string and its results "
                          "an object); write it with pearl-fpga bench ... --json PATH")
    return record


def read_record(path: Path) -> dict[str, Any]:
    """The validated record in `path` (RecordError when it is not JSON or not a record)."""
    try:
        record = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordError(f"{path}: not valid JSON ({exc}); rerun its benchmark (make figures)") from exc
    return check_record(record, path)


def read_records(folder: Path) -> dict[str, dict[str, Any]]:
    """Every record directly in `folder` (not in its subfolders), by file stem, validated."""
    return {path.stem: read_record(path) for path in sorted(folder.glob("*.json"))}


def read_host_records(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The per-vendor records under `folder`/hosts, by vendor then file stem. A folder that is not a vendor
    name, or a record filed under another vendor than its machine's, is refused."""
    hosts = folder / HOSTS
    by_vendor: dict[str, dict[str, dict[str, Any]]] = {}
    if not hosts.is_dir():
        return by_vendor
    for sub in sorted(p for p in hosts.iterdir() if p.is_dir()):
        if not _NAME.fullmatch(sub.name):
            raise RecordError(f"{sub}: not a CPU vendor's folder (lower-case letters, digits and '-'); "
                              "records are filed under hosts/<vendor>/ by pearl-fpga bench ... --json")
        records = read_records(sub)
        for stem, record in records.items():
            vendor = vendor_of(record["machine"])
            if vendor != sub.name:
                raise RecordError(f"{sub / (stem + '.json')}: a record of a {vendor} CPU "
                                  f"({record['machine']['cpu']}) filed under {sub.name}; move it to "
                                  f"{hosts / vendor}/")
        if records:
            by_vendor[sub.name] = records
    return by_vendor


def write_record(record: dict[str, Any], path: str, per_vendor: bool = True) -> None:
    """Write a record to `path`, or print it when `path` is '-'. With `per_vendor`, also keep it as the
    latest record of its CPU vendor in hosts/<vendor>/ beside `path` (that vendor's earlier copy is
    replaced, the other vendors' stay)."""
    text = json.dumps(record, indent=2) + "\n"
    if path == "-":
        print(text, end="")
        return
    target = Path(path)
    copy = host_copy_path(target, record) if per_vendor else None
    for out in (target, copy):
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
