"""Writing one file so that a crash, a kill or a full disk never leaves it half written: the content goes
to a temporary sibling (`.NAME.tmp-PID`), is flushed and fsynced, and only then renamed over the file;
on any error the temporary file is removed and the previous file stays as it was. Tabular checkpoints
and a run's summary.json are written this way (a deep checkpoint, a directory, by runtime.checkpoint)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

# Files are opened through this name, so that tests can point the writes at a full disk.
_open = open


class WriteRefused(OSError):
    """The OSError of a write that failed (full disk, read-only place), with the partial file removed."""


def describe_write_error(exc: BaseException, fix: str) -> str:
    """'no space left on the device' / 'not writable' / the error itself, and `fix` (what to do)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return f"no space left on the device ({exc}); free some space or {fix}"
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"the directory is not writable ({exc}); fix its permissions or {fix}"
    return f"{type(exc).__name__}: {exc}; check the disk and the directory, or {fix}"


class RecordingFile:
    """A file object that remembers the OSError of a failed write: a library that wraps the error in
    its own (torch.save: "unexpected pos") then still reports the cause."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return self.fh.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fh, name)


def temporary_sibling(path: Path) -> Path:
    return path.parent / f".{path.name}.tmp-{os.getpid()}"


def stale_temporaries(path: Path) -> list[Path]:
    """Temporary siblings of `path` that killed writers left (any process id)."""
    return sorted(p for p in path.parent.glob(f".{path.name}.tmp-*") if p.is_file()) if path.parent.is_dir() else []


def write_atomically(path: Path, write: Callable[[Any], None]) -> Path:
    """Call `write(file object)` on a temporary sibling of `path`, fsync it and rename it over `path`.
    Raises WriteRefused (an OSError carrying the cause's errno) with the temporary file removed."""
    path = Path(path)
    tmp = temporary_sibling(path)
    try:
        with _open(tmp, "wb") as fh:
            recording = RecordingFile(fh)
            try:
                write(recording)
            except (OSError, RuntimeError) as exc:
                raise recording.error or exc
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise WriteRefused(exc.errno or 0, str(exc.strerror or exc), str(path)) from exc
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    fsync_dir(path.parent)
    return path


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (best effort: some file systems refuse a directory fsync)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
