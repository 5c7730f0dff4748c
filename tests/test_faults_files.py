"""Fault injection, part 3 (issue 36): checkpoints and logs on a full disk and on a read-only one, for
the deep and the tabular trainers, and two runs sharing a checkpoint directory. Counted in
docs/reliability.md ("Faults injected").

The disks are real where this process may mount file systems (root): a small tmpfs, filled to the last
byte, and one remounted read-only, so ENOSPC and EROFS come from the kernel. Elsewhere the same tests
run on a fault hook: the writers' `_open` returns /dev/full (ENOSPC from the kernel), and a folder of
mode 0500 stands for the read-only disk."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError, DirectoryInUse
from pearl_fpga.runtime import atomic, checkpoint as ckpt_mod
from pearl_fpga.runtime.locks import checkpoint_lock
from pearl_fpga.trainer import Trainer
from pearl_fpga.trainers import load_trainer, make_trainer

TINY = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
            batch_size=32, eval_freq=0, total_steps=1000)
ROOT = Path(__file__).resolve().parents[1]


def _deep(**kw):
    return TrainConfig.preset("dqn", **{**TINY, **kw})


def _tabular(**kw):
    return TrainConfig.preset("qlearning", "FrozenLake-v1", **{"total_steps": 2000, "eval_freq": 0, **kw})


class Disk:
    """A folder on a small disk that fill() makes full and free() empties again."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch, mounted: bool) -> None:
        self.path, self.monkeypatch, self.mounted, self.full = path, monkeypatch, mounted, False

    def fill(self, leave: int = 0) -> None:
        """Fill the disk up to its last `leave` bytes (0: to the last byte)."""
        self.full = True
        if not self.mounted:  # the fault hook: every file the writers open goes to /dev/full
            for module in (ckpt_mod, atomic):
                self.monkeypatch.setattr(module, "_open", lambda p, mode="r", *a, **k: open(
                    "/dev/full" if "w" in mode else p, mode, *a, **k))
            return
        if leave:
            st = os.statvfs(self.path)
            with open(self.path / ".filler", "wb") as fh:
                fh.write(b"\0" * (st.f_bavail * st.f_frsize - leave))
            return
        with open(self.path / ".filler", "wb") as fh:
            block = b"\0" * (1 << 16)
            try:
                while True:
                    fh.write(block)
                    fh.flush()
            except OSError:
                pass
            try:  # the last bytes, a few at a time
                while True:
                    os.write(fh.fileno(), b"\0" * 512)
            except OSError:
                pass

    def free(self) -> None:
        self.full = False
        if not self.mounted:
            for module in (ckpt_mod, atomic):
                self.monkeypatch.setattr(module, "_open", open)
        else:
            (self.path / ".filler").unlink()


def _mount(target: Path, options: str) -> bool:
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                          capture_output=True).returncode == 0


def _umount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], capture_output=True)


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """A 2 MiB tmpfs (or, where mounting is not allowed, a folder with the /dev/full hook)."""
    target = tmp_path / "disk"
    mounted = _mount(target, "size=2m")
    yield Disk(target, monkeypatch, mounted)
    if mounted:
        _umount(target)


@pytest.fixture
def read_only(tmp_path):
    """A read-only folder: a tmpfs remounted read-only (EROFS even for root), else mode 0500."""
    target = tmp_path / "ro"
    if _mount(target, "size=1m"):
        subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
        yield target
        _umount(target)
        return
    target.chmod(0o500)
    if os.access(target, os.W_OK):
        pytest.skip("root without mount: no read-only folder can be made here")
    yield target
    target.chmod(0o700)


# ------------------------------------------------------------------------------------ full disk
@pytest.mark.timeout(120)
@pytest.mark.parametrize("leave_kib", [0, 8, 40])
def test_deep_checkpoint_on_a_full_disk_says_no_space_left(disk, leave_kib):
    """The disk runs out before the first byte, in the middle of state.pt, and near its end (torch used
    to report "unexpected pos" there)."""
    ck = disk.path / "ck"
    t = Trainer("dqn", placement="cpu", config=_deep(checkpoint_freq=200, net_arch=[64, 64]), seed=0,
                checkpoint_dir=ck)
    t.train(200)
    disk.fill(leave_kib << 10)
    with pytest.raises(CheckpointError, match="no space left") as info:
        t.train(300)  # the periodic checkpoint at 400 fails: the run stops with the reason
    assert "unexpected pos" not in str(info.value)
    with pytest.raises(CheckpointError, match="no space left"):  # a save that must first take the lock
        t.save(disk.path / "elsewhere")  # (writing its holder's pid used to raise a raw OSError)
    assert not [p for p in disk.path.iterdir() if ".tmp-" in p.name]  # the partial copies are gone
    disk.free()
    assert load_trainer(ck).env_steps == 200  # the previous checkpoint is whole
    t.save(ck)  # space again: checkpoints work
    assert load_trainer(ck).env_steps == t.env_steps


@pytest.mark.timeout(120)
def test_tabular_checkpoint_on_a_full_disk_leaves_no_temporary_file(disk):
    ck = disk.path / "ck"
    t = make_trainer("qlearning", env="FrozenLake-v1", config=_tabular(checkpoint_freq=500), seed=0, checkpoint_dir=ck)
    t.train(500)
    saved = t.env_steps
    disk.fill()
    with pytest.raises(CheckpointError, match="no space left") as info:
        t.train(1000)
    assert "tabular.npz" in str(info.value) and "previous checkpoint, if any, is kept" in str(info.value)
    assert sorted(p.name for p in ck.iterdir()) == ["tabular.npz"]  # no tabular.npz.tmp
    disk.free()
    assert load_trainer(ck).env_steps == saved
    t.save(ck)
    assert load_trainer(ck).env_steps == t.env_steps


@pytest.mark.timeout(180)
def test_a_full_logdir_after_training_is_a_clear_error_and_keeps_the_checkpoint(disk, tmp_path, capsys, monkeypatch):
    """The disk fills up during the final evaluation: the learning curve and summary.json cannot be
    written; the command says so (exit 1, no traceback) and the checkpoint, elsewhere, is complete."""
    from pearl_fpga.cli import main

    evaluate = Trainer.evaluate

    def evaluate_then_fill(self, *a, **k):
        out = evaluate(self, *a, **k)
        disk.fill()
        if not disk.mounted:  # the hook's version of a full logdir: its writers get ENOSPC
            import pearl_fpga.runtime.logger as logger_mod

            monkeypatch.setattr(logger_mod, "plot_learning_curve", lambda *a, **k: (_ for _ in ()).throw(
                OSError(28, "No space left on device")))
        return out

    monkeypatch.setattr(Trainer, "evaluate", evaluate_then_fill)
    logdir, ck = disk.path / "run", tmp_path / "ck"
    code = main(["train", "--steps", "300", "--placement", "cpu", "--set", "net_arch=[16]", "--no-tensorboard",
                 "--eval-episodes", "2", "--logdir", str(logdir), "--checkpoint-dir", str(ck)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 1 and "no space left" in out and "Traceback" not in out and str(ck) in out
    assert not list(logdir.glob(".summary.json.tmp-*"))
    assert load_trainer(ck).env_steps == 300


# ------------------------------------------------------------------------------ read-only disk
@pytest.mark.timeout(120)
def test_tabular_read_only_checkpoint_dir_is_found_before_the_first_episode(read_only):
    t = make_trainer("qlearning", env="FrozenLake-v1", config=_tabular(), seed=0, checkpoint_dir=read_only / "ck")
    with pytest.raises(CheckpointError, match="not writable") as info:
        t.train(2000)
    assert "nothing was trained" in str(info.value) and t.env_steps == 0


@pytest.mark.timeout(120)
def test_tabular_read_only_checkpoint_dir_through_the_cli(read_only, tmp_path, capsys):
    from pearl_fpga.cli import main

    code = main(["train", "--algo", "qlearning", "--env", "FrozenLake-v1", "--steps", "2000", "--logdir",
                 str(tmp_path / "run"), "--checkpoint-dir", str(read_only / "ck"), "--no-tensorboard"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2 and "not writable" in out and "Traceback" not in out


@pytest.mark.timeout(120)
def test_deep_read_only_checkpoint_dir_is_found_before_the_first_step(read_only):
    t = Trainer("dqn", placement="cpu", config=_deep(), seed=0, checkpoint_dir=read_only / "ck")
    with pytest.raises(CheckpointError, match="not writable"):
        t.train(1000)
    assert t.env_steps == 0


# ---------------------------------------------------------------- a shared checkpoint directory
@pytest.mark.timeout(120)
@pytest.mark.parametrize("holder", ["tabular", "deep"])
def test_a_tabular_run_on_a_locked_checkpoint_dir_stops_at_once(tmp_path, holder):
    """The deep runs' lock serves tabular runs too: held by another tabular run or by a deep one."""
    ck = tmp_path / "ck"
    other = make_trainer("qlearning", env="FrozenLake-v1", config=_tabular(), seed=1, checkpoint_dir=ck) \
        if holder == "tabular" else Trainer("dqn", placement="cpu", config=_deep(), seed=1, checkpoint_dir=ck)
    other._open_checkpoint_dir()  # what its train() does first: the lock is held while it trains
    try:
        t = make_trainer("qlearning", env="FrozenLake-v1", config=_tabular(), seed=0, checkpoint_dir=ck)
        with pytest.raises(DirectoryInUse, match=f"in use by another run \\(process {os.getpid()}\\)"):
            t.train(500)
        assert t.env_steps == 0
        with pytest.raises(DirectoryInUse):  # nor can it save there
            t.save(ck)
    finally:
        other._lock.release()
    t.train(500)
    assert load_trainer(ck).seed == 0


CLI = [sys.executable, "-m", "pearl_fpga.cli", "train", "--algo", "qlearning", "--env", "FrozenLake-v1",
       "--no-tensorboard", "--checkpoint-freq", "1000"]


@pytest.mark.timeout(300)
def test_two_tabular_commands_sharing_a_checkpoint_dir(tmp_path):
    """Two `pearl-fpga train` processes on one --checkpoint-dir: the second stops at once naming the
    first, whose checkpoint is its own (they used to race on one temporary file)."""
    ck = tmp_path / "ck"
    first = subprocess.Popen([*CLI, "--steps", "1000000000", "--seed", "1", "--logdir", str(tmp_path / "a"),
                              "--checkpoint-dir", str(ck)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        lock = ck.parent / ".ck.lock"
        deadline = time.monotonic() + 120
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)) and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()[0]
            time.sleep(0.1)
        second = subprocess.run([*CLI, "--steps", "2000", "--seed", "2", "--logdir", str(tmp_path / "b"),
                                 "--checkpoint-dir", str(ck)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        text = " ".join(second.stdout.split())
        assert second.returncode == 2 and f"in use by another run (process {first.pid})" in text, text
    finally:
        first.terminate()
        out, _ = first.communicate(timeout=120)
    assert first.returncode == 143 and "interrupted" in out, out  # SIGTERM: stopped at an episode's end
    back = load_trainer(ck)
    assert back.seed == 1 and back.env_steps > 0


def test_the_tabular_writer_replaces_the_file_atomically(tmp_path, monkeypatch):
    """A writer killed in the middle of the npz leaves the previous checkpoint and a temporary file that
    the next run removes."""
    ck = tmp_path / "ck"
    t = make_trainer("qlearning", env="FrozenLake-v1", config=_tabular(), seed=0, checkpoint_dir=ck)
    t.train(300)
    before = (ck / "tabular.npz").read_bytes()

    class Killed(BaseException):
        pass

    def killed(*a, **k):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr("numpy.savez", killed)
        with pytest.raises(Killed):
            t.save(ck)
    assert (ck / "tabular.npz").read_bytes() == before and sorted(p.name for p in ck.iterdir()) == ["tabular.npz"]
    stale = ck / ".tabular.npz.tmp-999999"
    stale.write_bytes(b"half")  # as a SIGKILL would leave it
    t.train(300)
    assert not stale.exists() and load_trainer(ck).env_steps == t.env_steps
