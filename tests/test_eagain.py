"""EAGAIN (BlockingIOError, errno 11), as `bench plan` once died of it: a progress write to a stdout that
another process made non-blocking, and a worker process start refused for a moment by the system."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRITER = """
import os, sys
os.set_blocking(1, False)  # what a process sharing the pipe or terminal may do
if sys.argv[1] == "cli":
    from pearl_fpga.cli import blocking_std_streams
    blocking_std_streams()
for i in range(20_000):
    print("step", i, "of a progress line", flush=True)
"""
EXPECTED = sum(len(f"step {i} of a progress line\n") for i in range(20_000))


def _write_to_slow_reader(mode: str) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    if mode == "raw":
        proc.wait(timeout=60)  # the reader lags until the writer is done: the pipe's buffer fills
    else:
        time.sleep(1.0)  # the reader lags (a blocking writer waits for it)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_output_to_a_nonblocking_pipe_survives_a_slow_reader():
    raw = _write_to_slow_reader("raw")
    # the failure, reproduced: EAGAIN surfaces as BlockingIOError or, inside Python's buffering, as lost output
    assert (raw.returncode != 0 and b"BlockingIOError" in raw.stderr) or len(raw.stdout) < EXPECTED
    fixed = _write_to_slow_reader("cli")
    assert fixed.returncode == 0, fixed.stderr.decode()
    assert len(fixed.stdout) == EXPECTED


class _Conn:
    def close(self) -> None:
        pass


class _Ctx:
    """A multiprocessing context whose Process.start is refused with EAGAIN `refusals` times."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.starts = 0

    def Pipe(self):  # noqa: N802 (multiprocessing's name)
        return _Conn(), _Conn()

    def Process(self, **kwargs):  # noqa: N802
        ctx = self

        class Proc:
            def start(self) -> None:
                ctx.starts += 1
                if ctx.starts <= ctx.refusals:
                    raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

        return Proc()


def _pool(refusals: int):
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.placement import parse_placement
    from pearl_fpga.runtime.workers import WorkerPool

    pool = WorkerPool.__new__(WorkerPool)
    pool.config, pool.placement, pool.calibration = TrainConfig.preset("dqn", workers=1), parse_placement("cpu"), None
    pool.seed, pool.env_id, pool.shared, pool.version = 0, "CartPole-v1", {}, None
    pool.procs, pool.conns, pool.credit, pool.starts = [None], [None], [0], [0]
    pool.ctx = _Ctx(refusals)
    return pool


def test_worker_start_retries_when_the_system_says_eagain(monkeypatch):
    from pearl_fpga.runtime import workers

    monkeypatch.setattr(workers.time, "sleep", lambda s: None)
    pool = _pool(refusals=2)
    pool._start(0)
    assert pool.ctx.starts == 3 and pool.procs[0] is not None


def test_worker_start_refused_for_good_names_the_limit(monkeypatch):
    from pearl_fpga.errors import EngineError
    from pearl_fpga.runtime import workers

    monkeypatch.setattr(workers.time, "sleep", lambda s: None)
    with pytest.raises(EngineError, match="process or thread limit.*fewer --workers"):
        _pool(refusals=100)._start(0)
