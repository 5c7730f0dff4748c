"""Stopping a training loop at a step boundary on SIGINT or SIGTERM, shared by every trainer.

A signal handler runs between two bytecodes of whatever was running (an optimizer step, a sum-tree
update, a table write), where a checkpoint would be torn. So the handler only sets a flag; the loop
checks it at its next boundary, writes its checkpoint and raises TrainingInterrupted. A second signal
before that stops at once (the last complete checkpoint is kept), except while a checkpoint is being
written, which it lets finish.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pearl_fpga.errors import TrainingInterrupted


class StopRequest:
    """The flag a signal (or `request()`) sets, and the handlers that set it while `handlers()` is open."""

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None
        self.saving = False  # a checkpoint is being written: a second signal waits for it

    def request(self, signum: int | None = None) -> None:
        """Stop at the next boundary (what SIGINT and SIGTERM do); safe from any thread."""
        self.requested = True
        if self.signum is None:
            self.signum = signum

    def reset(self) -> None:
        self.requested, self.signum = False, None

    def reason(self) -> str:
        """'SIGINT', 'SIGTERM' or 'request_stop()'."""
        return signal.Signals(self.signum).name if self.signum is not None else "request_stop()"

    @contextmanager
    def saving_checkpoint(self) -> Iterator[None]:
        """While a checkpoint is written, a second signal waits for it instead of stopping at once."""
        saving, self.saving = self.saving, True
        try:
            yield
        finally:
            self.saving = saving

    @contextmanager
    def handlers(self) -> Iterator[None]:
        """SIGINT and SIGTERM set the flag inside the block (main thread only: signals reach no other)."""
        old: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    old[sig] = signal.signal(sig, self._on_signal)
                except (ValueError, OSError):
                    pass
        try:
            yield
        finally:
            for signum, handler in old.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.requested and not self.saving:
            raise TrainingInterrupted(f"{signal.Signals(signum).name} again: stopped at once without a new checkpoint "
                                      "(the last complete one is kept)", signum, None)
        self.request(signum)
