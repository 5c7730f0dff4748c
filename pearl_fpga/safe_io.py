"""The one reader of files users hand pearl_fpga: checkpoints, replay and dataset dumps, JSON configs,
board manifests, the catalog, planner profiles.

Every reader here
- opens the path with O_NONBLOCK and checks what it opened with fstat: a regular file only, so a
  FIFO, a device (/dev/zero) or a directory is refused without blocking, and a symlink is judged by its
  target (named in the message);
- reads at most a size limit, checked before reading;
- decodes UTF-8 and parses JSON with a nesting limit and without NaN/Infinity (not JSON), each problem
  caught;
- reads an .npz without pickle, checking every member's .npy header (dtype kind, object arrays, the
  bytes its shape needs against the bytes the member holds) before numpy allocates anything, and the
  content digest (`with_digest`) where the file carries one.

Every refusal is an InputError (or the subclass the caller passes, e.g. CheckpointError) whose message
names the file, the field, the rule and the fix; the CLI exits with status 2 on it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import zipfile
import zlib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from pearl_fpga.errors import CheckpointError, InputError
from pearl_fpga.limits import available_memory, human_size

MAX_JSON_BYTES = 16 << 20
"""Default bound of a JSON file (manifests, profiles, configs are kilobytes)."""
MAX_JSON_DEPTH = 64
"""Nesting bound of a JSON document: the package's own files nest fewer than 10 levels."""
DIGEST_MEMBER = "digest"
"""The .npz member holding the SHA-256 of every other member (with_digest); a dump's own manifest."""
NPY_HEADER_MAX = 10_000
"""Largest .npy header read (numpy's own default bound)."""

PathLike = str | os.PathLike[str]


def refuse(error: type[InputError], path: PathLike, rule: str, fix: str, field: str | None = None) -> InputError:
    """An `error` whose message reads "<what> <path>[: field <field>:] <rule>; <fix>"."""
    where = f"{path}: field {field!r}:" if field else f"{path}"
    return error(f"{where} {rule}; {fix}")


# ---- opening -----------------------------------------------------------------------------------------
def _describe_mode(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _target(path: PathLike) -> str:
    real = os.path.realpath(path)
    return f" (a link to {real})" if real != os.path.abspath(path) else ""


def open_regular(path: PathLike, what: str, max_bytes: int, error: type[InputError] = InputError) -> IO[bytes]:
    """A binary file object of the regular file `path` (symlinks followed, the target checked), at most
    `max_bytes` long. FileNotFoundError when it is missing (callers phrase their own hint); `error`
    for anything else. Opening never blocks: O_NONBLOCK, then fstat, then the flag is cleared."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise refuse(error, f"{what} {path}", "is a directory", "point it at the file itself") from None
    except OSError as exc:
        raise refuse(error, f"{what} {path}", f"cannot be opened ({exc.strerror or exc})",
                     "check the path and its permissions") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse(error, f"{what} {path}{_target(path)}",
                         f"is not a regular file: it is {_describe_mode(info.st_mode)}", "point it at the file itself")
        if info.st_size > max_bytes:
            raise refuse(error, f"{what} {path}", f"is larger than {human_size(max_bytes)} ({info.st_size:,} bytes), the "
                         "most such a file may have", "it is not a file this package wrote; use the right file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: PathLike, what: str, max_bytes: int, error: type[InputError] = InputError) -> bytes:
    """The contents of the regular file `path` (open_regular's checks); a file that grows past
    `max_bytes` while it is read is refused too."""
    with open_regular(path, what, max_bytes, error) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise refuse(error, f"{what} {path}", f"is larger than {human_size(max_bytes)}",
                     "it is not a file this package wrote; use the right file")
    return data


def read_text(path: PathLike, what: str, max_bytes: int = MAX_JSON_BYTES, error: type[InputError] = InputError) -> str:
    """The UTF-8 text of `path` (read_bytes' checks); a byte that is not UTF-8 is refused."""
    data = read_bytes(path, what, max_bytes, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refuse(error, f"{what} {path}", f"is not UTF-8 text (byte {exc.start} is 0x{data[exc.start]:02x})",
                     "it is corrupt or not a text file; restore or regenerate it") from None


# ---- JSON --------------------------------------------------------------------------------------------
def _no_constant(name: str) -> Any:
    raise ValueError(f"{name}, which is not a JSON value (JSON has no NaN or Infinity)")


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth + 1)
            stack.extend((child, depth + 1) for child in node if isinstance(child, (dict, list)))
    return deepest


def parse_json(text: str, where: str, error: type[InputError] = InputError, max_depth: int = MAX_JSON_DEPTH,
               top: type | None = None) -> Any:
    """json.loads with the limits of this module; `error` naming `where` on any problem. `top`: the
    type the document must be (dict for every file of this package)."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        fix = "the file is empty; write a JSON object there" if not text.strip() else "fix the JSON syntax there"
        raise refuse(error, where, f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                     fix) from None
    except ValueError as exc:  # parse_constant
        raise refuse(error, where, f"holds {exc}", "write a finite number") from None
    except RecursionError:
        raise refuse(error, where, f"nests too deeply (more than the {max_depth} levels allowed)",
                     "it is corrupt or not one of this package's files") from None
    if json_depth(value) > max_depth:
        raise refuse(error, where, f"nests too deeply (more than the {max_depth} levels allowed)",
                     "it is corrupt or not one of this package's files")
    if top is not None and not isinstance(value, top):
        kind = "a JSON object" if top is dict else "a JSON array" if top is list else top.__name__
        raise refuse(error, where, f"must hold {kind} at the top level, not {_json_kind(value)}",
                     "see the documentation of this file")
    return value


def _json_kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def read_json(path: PathLike, what: str, max_bytes: int = MAX_JSON_BYTES, error: type[InputError] = InputError,
              max_depth: int = MAX_JSON_DEPTH, top: type | None = None) -> Any:
    """Parsed JSON of `path` (read_text's and parse_json's checks); FileNotFoundError when missing."""
    return parse_json(read_text(path, what, max_bytes, error), f"{what} {path}", error, max_depth, top)


# ---- .npz --------------------------------------------------------------------------------------------
def content_digest(arrays: Mapping[str, Any]) -> str:
    """SHA-256 over every array but the digest itself: its name, dtype, shape and bytes, by name."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        if name == DIGEST_MEMBER:
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def with_digest(arrays: Mapping[str, Any]) -> dict[str, Any]:
    """`arrays` plus DIGEST_MEMBER (content_digest): pass it to np.savez so that load_npz can prove the
    loaded content is what was written."""
    out = {name: np.asarray(value) for name, value in arrays.items()}
    return {DIGEST_MEMBER: np.str_(content_digest(out)), **out}


def _member_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """(dtype, shape, data bytes) of an .npy member, read from its header alone."""
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fh, max_header_size=NPY_HEADER_MAX)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(fh, max_header_size=NPY_HEADER_MAX)
        else:
            raise ValueError(f"unknown .npy format version {version}")
        return dtype, shape, info.file_size - fh.tell()


KIND_WORDS = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "float", "c": "complex",
              "U": "string"}


def _kind_words(kinds: str) -> str:
    """'iu' -> 'an integer array', 'iuf' -> 'a number array', 'f' -> 'a float array'."""
    words = {"iu": "integer", "ui": "integer", "iuf": "number", "fiu": "number"}.get(kinds)
    words = words or " or ".join(KIND_WORDS.get(k, k) for k in kinds)
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words} array"


def load_npz(path: PathLike, what: str, keys: Collection[str] | Mapping[str, str], missing: str,
             max_member_bytes: int | None = None, error: type[InputError] = CheckpointError) -> dict[str, np.ndarray]:
    """The members of the .npz at `path` (np.load without pickle, on a file opened by open_regular).

    `keys` names the members it may have; as a mapping, each name's allowed dtype kinds ("iu", "f",
    "b", "U", ...). Before any member is read: unknown members, object arrays, a kind not allowed, and a
    header whose shape needs more bytes than the member holds (or than `max_member_bytes`, default the
    available memory) are refused. After: a DIGEST_MEMBER that differs from the content. `error`
    names `what` and `path`; a missing file gets the hint `missing`."""
    bound = max_member_bytes if max_member_bytes is not None else available_memory()
    bound = bound if bound is not None else 1 << 40
    kinds = dict(keys) if isinstance(keys, Mapping) else {k: "" for k in keys}
    kinds.setdefault(DIGEST_MEMBER, "U")
    label = f"{what} {path}"
    try:
        fh = open_regular(path, what, 1 << 44, error)
    except FileNotFoundError:
        raise refuse(error, label, "does not exist", missing) from None
    corrupt = "it is corrupt (truncated or changed) or not an .npz that pearl_fpga wrote; nothing was loaded"
    try:
        with fh, np.load(fh, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile) or z.zip is None:
                raise refuse(error, label, "is a single array, not an .npz archive", corrupt)
            unknown = sorted(set(z.files) - set(kinds))
            if unknown:
                raise refuse(error, label, f"has members {unknown} that pearl_fpga never writes", corrupt)
            total = 0
            for info in z.zip.infolist():
                name = info.filename.removesuffix(".npy")
                if info.file_size > bound:
                    raise refuse(error, label, f"member {info.filename} unpacks to {info.file_size:,} bytes, more than the "
                                 f"{bound:,} it may take", corrupt)
                dtype, shape, held = _member_header(z.zip, info)
                field = f"{name} (.npy header)"
                if dtype.hasobject:
                    raise refuse(error, label, "is an object array, which only pickle reads", corrupt, field)
                if kinds.get(name) and dtype.kind not in kinds[name]:
                    raise refuse(error, label, f"has dtype {dtype}, but this member must be {_kind_words(kinds[name])}",
                                 f"write it with such a dtype ({what} format: see the documentation)", field)
                need = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if need != held:
                    raise refuse(error, label, f"declares shape {shape} of {dtype} ({need:,} bytes) but the member "
                                 f"holds {held:,}", corrupt, field)
                total += need
            if total > bound:
                raise refuse(error, label, f"holds {total:,} bytes of arrays, more than the {bound:,} it may take",
                             corrupt)
            out = {key: z[key] for key in z.files}
    except InputError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, io.UnsupportedOperation,
            NotImplementedError, RuntimeError, OverflowError, MemoryError, SyntaxError, TypeError) as exc:
        # RuntimeError: zipfile's "is encrypted" for a flipped flag bit; SyntaxError: a garbled .npy header
        raise refuse(error, label, f"cannot be read ({type(exc).__name__}: {exc})", corrupt) from None
    if DIGEST_MEMBER in out:
        stored = out.pop(DIGEST_MEMBER)
        if stored.shape != () or str(stored) != content_digest(out):
            raise refuse(error, label, "does not match the content digest it carries", corrupt, DIGEST_MEMBER)
    return out
