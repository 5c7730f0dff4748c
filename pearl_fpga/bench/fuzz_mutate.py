"""The generated inputs of `pearl-fpga bench fuzz`: seeded corruptions and edits of a pristine file.

`mutations(kind, original, rng, n)` returns n (label, protected, write) triples: `write(path)` turns
the copy of the pristine case folder's file at `path` into the input; `protected` says the input is a
corruption of a digest-carrying dump, whose load must then return exactly the pristine content (a
deliberate edit with a matching digest, or any JSON edit, may load as what it now reads)."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Write = Callable[[Path], None]
Mutation = tuple[str, bool, Write]

JSON_KINDS = ("config", "catalog", "manifest", "profile")
NPZ_KINDS = ("replay", "dataset", "tabular-checkpoint")
VALUES: list[Any] = [None, True, False, 0, -1, 1, 7, 2**31, 2**63 + 5, 10**30, -10**30, 1e308, 1e-300, 0.5, -0.5,
                     "", "x", "two", [], [1], [None, "a"], {}, {"a": 1}, float("nan"), float("inf"), float("-inf")]
"""Values a JSON field is set to: every type, the edges of each, and what JSON cannot hold (NaN)."""


# ---- the same for every kind -------------------------------------------------------------------------
def _special(name: str) -> Write:
    def write(path: Path) -> None:
        path.unlink()
        if name == "fifo":
            os.mkfifo(path.with_name(path.name + ".fifo"))
            path.symlink_to(path.name + ".fifo")
        elif name == "dev-zero":
            path.symlink_to("/dev/zero")
        elif name == "dev-null":
            path.symlink_to("/dev/null")
        elif name == "directory":
            path.mkdir()
        elif name == "empty":
            path.write_bytes(b"")
        elif name == "sparse-64GiB":
            with open(path, "wb") as fh:
                fh.truncate(64 << 30)
        elif name == "dangling-link":
            path.symlink_to(path.name + ".missing")
    return write


SPECIALS = ("fifo", "dev-zero", "dev-null", "directory", "empty", "sparse-64GiB", "dangling-link")


def _bytes(change: Callable[[bytes], bytes]) -> Write:
    def write(path: Path) -> None:
        path.write_bytes(change(path.read_bytes()))
    return write


def _flip(pos: int, bit: int) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        b = bytearray(data)
        b[pos] ^= 1 << bit
        return bytes(b)
    return change


def _cut(length: int) -> Callable[[bytes], bytes]:
    return lambda data: data[:length]


def _splice(pos: int, junk: bytes, replaced: int) -> Callable[[bytes], bytes]:
    """`junk` in place of `replaced` bytes at `pos` (-1: appended)."""
    def change(data: bytes) -> bytes:
        at = len(data) if pos < 0 else pos
        return data[:at] + junk + data[at + replaced:]
    return change


def _structure(data: bytes) -> list[int]:
    """Byte offsets of a zip's metadata: local headers, the .npy headers after them, the central
    directory and its end record ([] when `data` is not a zip)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return []
    spots: list[int] = []
    for info in zf.infolist():
        start = info.header_offset
        name_len = int.from_bytes(data[start + 26:start + 28], "little")
        extra_len = int.from_bytes(data[start + 28:start + 30], "little")
        body = start + 30 + name_len + extra_len
        npy = 128 if info.compress_type == zipfile.ZIP_STORED else 0
        spots += range(start, min(body + npy, len(data)))
    end = data.rfind(b"PK\x05\x06")
    cd = int.from_bytes(data[end + 16:end + 20], "little") if end >= 0 else len(data)
    spots += range(min(cd, len(data)), len(data))
    return spots


def _binary(data: bytes, rng: np.random.Generator, n: int) -> list[Mutation]:
    out: list[Mutation] = []
    spots = _structure(data)
    for i in range(n):
        choice = i % 8
        if choice < 5:  # single bit flips: half in the zip and .npy headers (when there are any), half anywhere
            where = "header" if spots and choice % 2 == 0 else "anywhere"
            pos = int(spots[rng.integers(len(spots))]) if where == "header" else int(rng.integers(len(data)))
            bit = int(rng.integers(8))
            out.append((f"bit-flip-{where}:{pos}.{bit}", True, _bytes(_flip(pos, bit))))
        elif choice == 5:
            cut = int(rng.integers(len(data)))
            out.append((f"truncate:{cut}", True, _bytes(_cut(cut))))
        elif choice == 6:
            pos, size = int(rng.integers(len(data))), int(rng.integers(1, 64))
            junk = rng.bytes(size)
            out.append((f"overwrite:{pos}+{size}", True, _bytes(_splice(pos, junk, len(junk)))))
        else:
            junk = rng.bytes(int(rng.integers(1, 4096)))
            out.append((f"append:{len(junk)}", True, _bytes(_splice(-1, junk, 0))))
    return out


# ---- JSON --------------------------------------------------------------------------------------------
def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _edit(doc: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def _text(text: str) -> Write:
    def write(path: Path) -> None:
        path.write_text(text, encoding="utf-8")
    return write


def _json(data: bytes, rng: np.random.Generator, n: int) -> list[Mutation]:
    doc = json.loads(data)
    paths = _paths(doc)
    fixed: list[Mutation] = [
        ("top-array", False, _text(json.dumps([doc]))), ("top-number", False, _text("7")),
        ("top-null", False, _text("null")), ("deep-nesting:100000", False, _text("[" * 100_000 + "]" * 100_000)),
        ("deep-nesting:100", False, _text(json.dumps({"a": json.loads("[" * 100 + "]" * 100)}))),
        ("non-utf8", False, _bytes(lambda d: d[:10] + b"\xff\xfe" + d[10:])),
        ("bom", False, _bytes(lambda d: b"\xef\xbb\xbf" + d)), ("whitespace-only", False, _text("  \n")),
        ("duplicate-keys", False, _text(data.decode()[:-2] + ', "schema": 1}' if data.rstrip().endswith(b"}") else "{}")),
    ]
    out = list(fixed)
    while len(out) < n:
        choice = len(out) % 10
        if choice < 6:
            path = paths[int(rng.integers(len(paths)))]
            value = VALUES[int(rng.integers(len(VALUES)))]
            out.append((f"set:{'.'.join(map(str, path))}={value!r}", False, _text(json.dumps(_edit(doc, path, value)))))
        elif choice == 6:
            path = paths[int(rng.integers(len(paths)))]
            out.append((f"delete:{'.'.join(map(str, path))}", False, _text(json.dumps(_edit(doc, path, None, True)))))
        elif choice == 7 and isinstance(doc, dict):
            out.append(("add-unknown-field", False, _text(json.dumps({**doc, f"unknown_{len(out)}": 1}))))
        else:
            out += [(f"text-{label}", False, write) for label, _, write in _binary(data, rng, 1)]
    return out[:n]


# ---- .npz dumps --------------------------------------------------------------------------------------
def _members(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _save(arrays: dict[str, Any], digest: bool = True) -> Write:
    from pearl_fpga.safe_io import DIGEST_MEMBER, with_digest

    def write(path: Path) -> None:
        body = {k: v for k, v in arrays.items() if k != DIGEST_MEMBER}
        with open(path, "wb") as fh:
            np.savez(fh, **(with_digest(body) if digest else body))
    return write


def _raw_member(header: dict[str, Any], data: bytes, name: str, arrays: dict[str, np.ndarray]) -> Write:
    """An .npz whose member `name` has the .npy `header` given over `data` (the digest left as it was)."""
    def write(path: Path) -> None:
        with zipfile.ZipFile(path, "w") as zf:
            for key, value in arrays.items():
                buf = io.BytesIO()
                if key == name:
                    np.lib.format.write_array_header_1_0(buf, header)
                    buf.write(data)
                else:
                    np.lib.format.write_array(buf, value, allow_pickle=False)
                zf.writestr(f"{key}.npy", buf.getvalue())
    return write


def _npz(original: Path, rng: np.random.Generator, n: int) -> list[Mutation]:
    from pearl_fpga.safe_io import DIGEST_MEMBER

    arrays = _members(original)
    names = [k for k in arrays if k != DIGEST_MEMBER]
    out: list[Mutation] = [("no-digest", True, _save(arrays, digest=False)),
                           ("extra-member", False, _save({**arrays, "extra": np.zeros(3)}))]
    for name in names:
        a = arrays[name]
        header = {"descr": np.lib.format.dtype_to_descr(a.dtype), "fortran_order": False,
                  "shape": (10**12, *a.shape[1:]) if a.ndim else (10**12,)}
        out.append((f"huge-shape:{name}", False, _raw_member(header, a.tobytes(), name, arrays)))
        out.append((f"object-array:{name}", False, _object_member(arrays, name)))
        out.append((f"drop-member:{name}", False, _save({k: v for k, v in arrays.items() if k != name})))
        for dtype in (np.complex128, np.float64, np.int8, np.bool_, np.dtype("<U4")):
            try:
                cast = a.astype(dtype)
            except (ValueError, TypeError):
                cast = np.full(a.shape, 1, dtype)
            out.append((f"dtype:{name}={np.dtype(dtype)}", False, _save({**arrays, name: cast})))
        for label, shaped in (("scalar", a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype)),
                              ("2d", a.reshape(1, -1)), ("empty", a.reshape(-1)[:0])):
            out.append((f"shape:{name}={label}", False, _save({**arrays, name: shaped})))
        if a.dtype.kind in "iuf" and a.size:
            for label, value in (("nan", np.nan), ("inf", np.inf), ("negative", -5), ("huge", 2**62)):
                edited = a.astype(np.float64 if label in ("nan", "inf") and a.dtype.kind != "f" else a.dtype).copy()
                try:
                    edited.reshape(-1)[int(rng.integers(edited.size))] = value
                except (OverflowError, ValueError):
                    continue
                out.append((f"value:{name}={label}", False, _save({**arrays, name: edited})))
    rest = max(n - len(out), 0)
    return out[:n] + _binary(original.read_bytes(), rng, rest)


def _object_member(arrays: dict[str, np.ndarray], name: str) -> Write:
    def write(path: Path) -> None:
        obj = np.empty(2, dtype=object)
        obj[0], obj[1] = {"a": 1}, [1, 2]
        with zipfile.ZipFile(path, "w") as zf:
            for key, value in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, obj if key == name else value, allow_pickle=key == name)
                zf.writestr(f"{key}.npy", buf.getvalue())
    return write


# ---- every kind ----------------------------------------------------------------------------------------
def mutations(kind: str, original: Path, rng: np.random.Generator, n: int) -> list[Mutation]:
    """n inputs of `kind` made from the pristine file `original` (see the module docstring)."""
    out: list[Mutation] = [(f"special:{name}", kind != "profile" and name != "dangling-link", _special(name))
                           for name in SPECIALS]
    rest = max(n - len(out), 0)
    if kind in JSON_KINDS:
        out += _json(original.read_bytes(), rng, rest)
    elif kind in NPZ_KINDS:
        out += _npz(original, rng, rest)
    elif kind in ("checkpoint", "policy"):  # the data corrupted (two thirds), the JSON manifest edited (one third)
        manifest = original.with_name("manifest.json" if kind == "checkpoint" else "policy.json")
        data = _npz(original, rng, rest - rest // 3) if kind == "policy" else _binary(original.read_bytes(), rng,
                                                                                      rest - rest // 3)
        out += data
        out += [(f"manifest-{label}", False, _sibling(write, manifest.name))
                for label, _, write in _json(manifest.read_bytes(), rng, rest // 3)]
    return out[:n]


def _sibling(write: Write, name: str) -> Write:
    """`write` applied to the manifest `name` beside the case's data file."""
    return lambda path: write(path.with_name(name))
