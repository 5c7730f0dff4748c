"""Limits on what users hand the package: memory that a size would need, JSON and .npz files.

`require_memory` refuses a size up front (the bytes it needs, the bytes available, the fix) instead of
letting numpy fail deep inside with an ArrayMemoryError. `read_json` reads a JSON file the way every
loader should: a regular file only (not a directory, nor a link to /dev/zero), at most `max_bytes`,
UTF-8, not nested deeper than the parser recurses; any problem is a ValueError naming the file and the
cause. `load_npz` reads an .npz without pickle, refusing unknown members and members that would unpack
beyond a bound from the zip directory, before any member is read; a truncated or bit-flipped file is a
CheckpointError, never a BadZipFile or zlib traceback.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile
import zlib
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from pearl_fpga.errors import CheckpointError

MAX_JSON_BYTES = 16 << 20
"""Default bound of a JSON file (manifests, profiles, configs are kilobytes)."""


def available_memory() -> int | None:
    """Bytes this process can still allocate: MemAvailable, and the cgroup's limit where one is set;
    None where neither is readable."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def require_memory(nbytes: int, what: str, fix: str) -> None:
    """ValueError when `what` (e.g. "buffer_size=10^11") needs more than the available memory."""
    free = available_memory()
    if free is not None and nbytes > free:
        raise ValueError(f"{what} needs {_size(nbytes)} of memory, but {_size(free)} are available; {fix}")


def _size(n: float) -> str:
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while n >= 1024 and len(units) > 1:
        n /= 1024
        units.pop(0)
    return f"{n:,.0f} B" if units[0] == "B" else f"{n:,.1f} {units[0]}"


def read_bytes(path: str | os.PathLike[str], max_bytes: int, what: str) -> bytes:
    """The contents of the regular file `path`, at most `max_bytes`; ValueError (FileNotFoundError
    when missing) naming `what` and the cause otherwise."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ValueError(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise ValueError(f"{what} {path} is {kind}; point it at the file itself")
    with open(path, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{what} {path} is larger than {_size(max_bytes)}; it is not a file this package wrote")
    return data


def read_json(path: str | os.PathLike[str], what: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Parsed JSON of `path` (see the module docstring); FileNotFoundError when it is missing."""
    data = read_bytes(path, max_bytes, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} {path} is not UTF-8 text (byte {exc.start}); it is corrupt or not JSON") from None
    return parse_json(text, f"{what} {path}")


def parse_json(text: str, where: str) -> Any:
    """json.loads; ValueError naming `where` on any problem (a nesting deep enough to exhaust the
    parser's recursion included)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{where} nests too deeply to be one of this package's files; it is corrupt") from None


def load_npz(path: str | os.PathLike[str], what: str, keys: Collection[str], missing: str,
             max_member_bytes: int | None = None) -> dict[str, np.ndarray]:
    """The members of the .npz at `path` (np.load without pickle). CheckpointError naming `what` and
    `path` when it does not exist (with the hint `missing`), is truncated, bit-flipped or not an .npz,
    or has a member outside `keys` or one unpacking to more than `max_member_bytes` (default: the
    available memory); the last two are found from the zip directory, before any member is read."""
    bound = max_member_bytes if max_member_bytes is not None else available_memory()
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise CheckpointError(f"{what} {path} is a single array, not an .npz archive")
            unknown = sorted(set(z.files) - set(keys))
            if unknown:
                raise CheckpointError(f"{what} {path} has members {unknown} that pearl_fpga never writes; it is not "
                                      "one of its files, nothing was loaded")
            assert z.zip is not None  # open for the with-block
            for info in z.zip.infolist():
                if bound is not None and info.file_size > bound:
                    raise CheckpointError(f"{what} {path}: member {info.filename} unpacks to {info.file_size:,} "
                                          f"bytes, more than the {bound:,} it may take; it is corrupt")
            return {key: z[key] for key in z.files}
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(f"{what} {path} does not exist; {missing}") from None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        raise CheckpointError(f"{what} {path} is corrupt (truncated or changed) or not an .npz that pearl_fpga wrote "
                              f"({type(exc).__name__}: {exc})") from None
