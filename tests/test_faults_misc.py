"""The smaller faults of issue 36, item 6: a resumed run asked for another seed, a caller's array
changed after the buffer checked it, an MLP whose Linear sizes do not chain, signals that arrive
outside the training loop's handlers. (The full checkpoint disk, the full log directory and the
sparse state.pt are in test_faults_files.py and test_checkpoint_trust.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pearl_fpga import PrioritizedReplayBuffer

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(180)
def test_resume_with_another_seed_is_refused(tmp_path, capsys):
    from pearl_fpga.cli import main

    run = ["train", "--placement", "cpu", "--set", "net_arch=[16]", "--set", "learning_starts=100", "--no-tensorboard",
           "--eval-episodes", "1", "--logdir", str(tmp_path / "run")]
    assert main([*run, "--steps", "300"]) == 0
    capsys.readouterr()
    assert main([*run, "--steps", "600", "--resume", "--seed", "7"]) == 2  # was silently ignored
    out = " ".join(capsys.readouterr().out.split())
    assert "--seed 7" in out and "trained with seed 0" in out
    assert main([*run, "--steps", "600", "--resume", "--seed", "0"]) == 0  # the same seed: fine


def test_prioritized_add_checks_a_copy_of_the_callers_arrays(monkeypatch):
    """Another thread turns the caller's observation into NaN right after the finiteness check (here: in
    the next numpy call the buffer makes): the buffer stores what it checked."""
    buf = PrioritizedReplayBuffer(64, obs_shape=(3,), action_shape=(), action_dtype=np.int64, seed=0)
    obs = np.ones((4, 3), np.float32)
    original_isin = np.isin

    def isin_after_another_thread_wrote(*a, **k):
        obs[:] = np.nan
        return original_isin(*a, **k)

    monkeypatch.setattr(np, "isin", isin_after_another_thread_wrote)
    buf.add(obs, np.zeros(4, np.int64), np.zeros(4, np.float32), np.ones((4, 3), np.float32), np.zeros(4, np.float32))
    monkeypatch.undo()
    assert np.isnan(obs).all()  # the caller's array did change
    assert np.isfinite(buf.state_dict()["obs"]).all()  # the buffer kept the checked copy


def test_an_mlp_whose_linear_sizes_do_not_chain_is_a_clear_error():
    from torch import nn

    from pearl_fpga.kernels import MLPInfer

    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(16, 2))
    with pytest.raises(ValueError, match="Linear layer 1 takes 16 inputs, but the layer before it gives 8 outputs"):
        MLPInfer.from_torch(net, backend="numpy", calibration=np.zeros((8, 4), np.float32))


SIGNAL_OUTSIDE_THE_LOOP = textwrap.dedent("""
    import os, signal, sys
    import pearl_fpga.cli as cli
    from pearl_fpga.trainer import Trainer

    checkpoint, name, where = sys.argv[1:]
    # Python's SIGINT handler, as a command started from a terminal has it (a background job of a
    # non-interactive shell inherits SIGINT ignored, and Python then leaves it ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def arrive(*a, **k):  # the signal arrives where no handler of the training loop is installed
        os.kill(os.getpid(), getattr(signal, name))
        raise AssertionError("the signal did not interrupt")

    if where == "evaluation":
        Trainer.evaluate = arrive
    else:  # while the command line is parsed
        cli.build_parser = arrive
    sys.exit(cli.main(["eval", checkpoint]))
""")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.trainer import Trainer

    t = Trainer("dqn", placement="cpu", config=TrainConfig.preset("dqn", net_arch=[16], learning_starts=50), seed=0)
    t.train(100)
    return t.save(tmp_path_factory.mktemp("ck") / "ck")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, where", [("SIGTERM", "evaluation"), ("SIGINT", "parsing"), ("SIGTERM", "parsing")])
def test_a_signal_outside_the_training_loop_ends_the_command_with_a_line(checkpoint, name, where):
    """SIGTERM used to kill the command (-15) and SIGINT to end it with a traceback (-2) wherever the
    training loop's handlers were not installed; now: exit 128 + the signal, one line, no traceback."""
    proc = subprocess.run([sys.executable, "-c", SIGNAL_OUTSIDE_THE_LOOP, str(checkpoint), name, where], cwd=ROOT,
                          capture_output=True, text=True, timeout=100, env={**os.environ, "PYTHONPATH": str(ROOT)})
    signum = getattr(signal, name)
    assert proc.returncode == 128 + signum, (proc.returncode, proc.stderr[-2000:])
    assert f"interrupted ({name})" in proc.stderr and "Traceback" not in proc.stderr
