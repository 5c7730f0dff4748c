"""An interrupt at any moment of `pearl-fpga train`, start-up included, ends with one line that says
what was saved and where, or that nothing was (issue 35: 6 of 24 runs interrupted about 1 s in exited
130 with a run folder, no checkpoint and no word of it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DELAYS = sorted(np.random.default_rng(35).uniform(0.3, 6.0, 5).round(2).tolist())
"""Seconds after the start at which the signal is sent: module loading, the config, the Trainer's set-up."""


@pytest.mark.parametrize("delay", DELAYS)
def test_an_interrupt_at_start_up_says_what_was_saved(tmp_path, delay):
    sig = signal.SIGINT if int(delay * 100) % 2 else signal.SIGTERM
    logdir = tmp_path / "run"
    cmd = [sys.executable, "-m", "pearl_fpga.cli", "train", "--steps", "5000", "--placement", "cpu", "--no-tensorboard",
           "--logdir", str(logdir), "--checkpoint-freq", "100000", "--set", "net_arch=[16]", "--set", "eval_freq=0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"}  # one line, not wrapped at 80 columns
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(delay)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    if proc.returncode == 0:  # finished before the signal: nothing to check
        return
    assert "Traceback" not in out, out
    last = [line for line in out.splitlines() if line.strip()][-1]
    if last.startswith("learning curve:"):  # the run had ended; the signal came while the interpreter shut down
        assert proc.returncode == -sig, out
        return
    # 128 + sig, or killed by the signal itself: Python exits through SIGINT when an interrupt broke an import
    # (a shell shows 128 + sig for both)
    assert proc.returncode in (128 + sig, -sig), out
    assert last.startswith("interrupted"), out
    saved = (logdir / "checkpoint" / "manifest.json").is_file()
    if saved:
        assert str(logdir / "checkpoint") in last, out
    else:
        assert "nothing was saved" in last, out
        if "was removed" in last:
            assert not logdir.exists()


HOLD_PROBE = """
import importlib.abc, os, signal, sys

signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal, also where the caller ignores it

class InterruptInsideTorch(importlib.abc.MetaPathFinder):
    sent = False

    def find_spec(self, name, path, target=None):
        if name.startswith("torch.") and not self.sent:  # a submodule: torch's own import is under way
            self.sent = True
            os.kill(os.getpid(), signal.{sig})
        return None

sys.meta_path.insert(0, InterruptInsideTorch())
from pearl_fpga.cli import main
code = main({argv!r})
print("torch loaded:", "torch" in sys.modules, "exit:", code)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_torchs_import_waits_for_it_then_stops_the_command(sig):
    """torch's import aborts the process (pybind11's terminate, SIGABRT) when an interrupt is raised inside
    it at the wrong moment; the CLI holds the signal until torch has loaded, then stops like any interrupt."""
    code = HOLD_PROBE.format(sig=sig, argv=["devices"])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"interrupted ({sig}): nothing was saved" in proc.stderr, proc.stderr
    assert f"torch loaded: True exit: {128 + int(getattr(signal, sig))}" in proc.stdout, proc.stdout + proc.stderr


def test_a_broken_torch_or_a_caller_s_thread_leaves_torch_to_the_command(tmp_path):
    """A torch whose import fails is left for the command that needs it to report (`devices` runs without
    torch), and a caller's thread, which may not set signal handlers, imports nothing."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('a broken torch install')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "pearl_fpga.cli", "devices", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    code = ("import sys, threading\nfrom pearl_fpga.cli import load_torch_with_signals_held\n"
            "t = threading.Thread(target=load_torch_with_signals_held); t.start(); t.join()\n"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False" and "Traceback" not in proc.stderr, proc.stderr
