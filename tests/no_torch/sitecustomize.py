"""Put on PYTHONPATH, this makes torch (and what only comes with it) impossible to import in the
interpreter, as on a board whose Python has no torch wheel (the PYNQ-Z2 is armv7l): tests/test_board_install.py
runs the board side under it."""

from __future__ import annotations

import importlib.abc
import sys

BLOCKED = ("torch", "torchvision", "torchaudio", "functorch", "triton")


class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r} (blocked: this interpreter stands in for a board "
                                      "without torch)", name=fullname)
        return None


sys.meta_path.insert(0, _NoTorch())
