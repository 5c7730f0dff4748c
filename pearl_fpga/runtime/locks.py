"""Exclusive locks on the directories of a run (its log directory, its checkpoint directory), shared
by the deep and the tabular trainers and the CLI: a second run on the same directory stops at once
instead of overwriting the first one's files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class DirLock:
    """An exclusive lock on a directory for the lifetime of a run: fcntl.flock on `<dir>/<name>`
    (released by the kernel if the process dies). A second run on the same directory gets
    DirectoryInUse at once, naming the process that holds it."""

    def __init__(self, lock_file: Path, what: str) -> None:
        self.path = Path(lock_file)
        self.what = what
        self._fh: Any = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def acquire(self) -> DirLock:
        import fcntl

        from pearl_fpga.errors import DirectoryInUse

        if self._fh is not None:
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path, "a+")
        except OSError as exc:
            raise DirectoryInUse(f"cannot lock the {self.what} {self.path.parent} ({exc}); it must be a writable "
                                 "directory: fix its permissions or choose another one") from exc
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise DirectoryInUse(f"the {self.what} {self.path.parent} is in use by another run (process {holder}); "
                                 "wait for it to finish or stop it, or choose another directory") from None
        try:  # who holds it, for the next run's message (unbuffered); the lock holds without it (a full disk)
            os.ftruncate(fh.fileno(), 0)
            os.pwrite(fh.fileno(), f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        self._fh = fh
        return self

    def release(self) -> None:
        if self._fh is not None:
            import fcntl

            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            finally:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def checkpoint_lock(directory: Path) -> DirLock:
    """The lock of a checkpoint directory: `.NAME.lock` beside it (the directory itself is replaced
    by every write)."""
    directory = Path(directory)
    return DirLock(directory.parent / f".{directory.name}.lock", "checkpoint directory")
