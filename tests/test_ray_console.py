"""`pearl-fpga train --engine ray` keeps the console to the run's own lines (issue 34): Ray's banners,
warnings and workers' output go to ray.log in the run's log directory or Ray's session logs, and an
env actor's error still reaches the user, named, with its traceback in ray.log. One local Ray instance
(loopback only, usage stats off), started by the one run of this module."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# before anything imports ray in this process (Ray reads them at import; the ray engine tests' cluster of
# this session needs the loopback switch)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the ray extra is not installed")]

TESTS = Path(__file__).resolve().parent

# what Ray writes when it reaches a console: log lines of its C++ core ("[2026-... E 123 123] core_worker.cc"),
# its Python loggers ("INFO worker.py:", "WARNING ..."), forwarded worker output ("(EnvActor pid=...)",
# "(raylet)"), its start-up and auth banners, and Python warnings raised in its modules
RAY_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+ [DIWEF] \d+ \d+\]|\.(cc|py):\d+|\((\w+ )?pid=\d+|\(raylet\)|"
                      r"Started a local Ray instance|Token authentication|RAY_|ray\.init|site-packages/ray/|"
                      r"DeprecationWarning|FutureWarning", re.M)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    """A DQN run on the ray engine whose env actors' envs raise at their 1,200th step, after learning began."""
    logdir = tmp_path_factory.mktemp("ray-console") / "run"
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    cmd = [sys.executable, "-m", "pearl_fpga.cli", "train", "--algo", "dqn", "--env", "fault_envs:DiesAt1200-v0",
           "--steps", "4000", "--engine", "ray", "--actors", "2", "--replay-shards", "1", "--eval-freq", "0",
           "--no-tensorboard", "--logdir", str(logdir), "--set", "learning_starts=300", "--set", "buffer_size=4096"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=540, env=env, cwd=TESTS.parent)
    return done, logdir


def test_the_console_has_the_run_and_no_ray_lines(failing_run):
    done, _ = failing_run
    console = done.stdout + done.stderr
    assert "training DQN on fault_envs:DiesAt1200-v0" in done.stdout  # the run's own lines are there
    assert re.search(r"^step [\d,]+/4,000", done.stdout, re.M), console
    ray_lines = [line for line in console.splitlines() if RAY_LINE.search(line)]
    assert ray_lines == [], console


def test_an_actor_error_is_reported_by_name_with_its_traceback_in_ray_log(failing_run):
    done, logdir = failing_run
    assert done.returncode != 0
    console = " ".join((done.stdout + done.stderr).split())
    assert re.search(r"error: Ray env actor \d failed: EnvBroke: the simulator broke at step 1200 \(its traceback is "
                     r"in .*ray\.log\)", console), console
    assert "Traceback" not in console  # the message, not a Python traceback of the driver
    log = (logdir / "ray.log").read_text()
    assert "Token authentication" in log or "Started a local Ray instance" in log  # Ray's own lines land here
    assert "Ray env actor" in log and "fault_envs.py" in log and "EnvBroke" in log  # the remote traceback


def test_raylet_messages_and_ray_warnings_go_to_ray_log(tmp_path, capsys):
    """What Ray's driver prints from its error listener ("(raylet) Task ... failed ... will be retried", also
    with log_to_driver off) and a Python warning raised in a Ray module land in ray.log, not the console."""
    import logging
    import warnings

    import ray._private.worker as ray_worker

    from pearl_fpga.runtime.engines.ray_cluster import route_ray_logs

    path = route_ray_logs(tmp_path)
    try:
        ray_worker.print_to_stdstream({"lines": ["Task ReplayShard.status failed; retried"], "pid": "raylet",
                                       "is_err": False}, ignore_prefix=False)
        warnings.warn_explicit("an old Ray API", DeprecationWarning, ray_worker.__file__, 1)
    finally:
        for handler in logging.getLogger("ray").handlers:
            handler.flush()
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    log = path.read_text() if path is not None else ""
    assert "(raylet) Task ReplayShard.status failed; retried" in log and "DeprecationWarning: an old Ray API" in log
    route_ray_logs(None)  # the file handler closed: errors only, on stderr
