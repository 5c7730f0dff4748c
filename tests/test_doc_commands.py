"""The first run, as the docs tell it: every command of the README's quick start and of the docs'
bash blocks runs as written, in its short form, in a fresh folder. A doc command that breaks (a
renamed option, a missing file) fails `make test`.

Short form (shorten()): budgets become tiny (--steps 300, eval's --episodes, --eval-episodes and --seeds cut
down, --quick where a command has it), so the whole file runs in about a minute on 2 cores. Commands
this cannot run are in SKIP, each with its reason; a SKIP entry that matches no doc command fails, so
the list stays current."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from pearl_fpga.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# pattern (re.search on the command as written) -> why it is not run here
SKIP = {
    r"^make (test|venv)\b": "sets up or runs the whole suite: this test is part of it",
    r"^make (hls|cosim|bitstream|xclbin)\b": "needs the vendor tools (Vivado / Vitis), or for BOARD=ulx3s tens of "
                                             "minutes of the open flow; tests/test_board_make.py checks these targets "
                                             "with stubs, tests/test_board_ulx3s.py runs the open flow on a small design",
    r"^openFPGALoader ": "loads the bitstream on a ULX3S: needs the board",
    r"^PEARL_FPGA_SERIAL_PORT=": "talks to a ULX3S over its serial port: needs the board; tests/test_board_serial.py "
                                 "runs the drivers over the same transport against the simulated board",
    r"^make resources\b": "Yosys runs minutes per kernel; tests/test_board_resources.py runs the smallest estimate",
    r"^source ": "the vendor tools' environment",
    r"pearl_fpga\.board\.manifest check": "checks the bitstream that make bitstream builds with the vendor tools; "
                                           "tests/test_board_manifest.py checks the checker",
    r"^(ray |export RAY_)": "a Ray cluster node and its authentication set-up",
    r"--engine ray|bench ray": "starts Ray (tens of seconds and most of 2 cores); tests/test_ray_engine.py runs it small",
    r"bench plan": "a dozen measured training runs and profiles: minutes",
    r"bench tabular": "times every backend and trains every preset: minutes",
    r"--placement auto": "profiles every task on every device before training (minutes uncached)",
    r"python3 -m pip install": "installs on a board; tests/test_board_install.py checks the board install",
    r"^scp ": "copies the exported policy to a board",
    r"examples/deploy_on_board\.py": "acts on a board; tests/pynq_stack/test_deploy_on_board.py runs it on the mock "
                                      "Zynq, tests/test_deploy.py on the cpu backend without torch",
}

if importlib.util.find_spec("stable_baselines3") is None:
    SKIP[r"bench train"] = "needs the bench extra (Stable-Baselines3), which make bench installs"

SMALL = {"--steps": "300", "--episodes": "2", "--eval-episodes": "2"}


def doc_commands() -> list[tuple[str, str]]:
    """(page, command) of every line of a bash block, comments and prompts stripped, in page order."""
    out = []
    for page in DOCS:
        for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", page.read_text(), re.S):
            for line in block.splitlines():
                command = line.split("  #")[0].split(" # ")[0].strip()
                if command and not command.startswith("#"):
                    out.append((page.relative_to(ROOT).as_posix(), command))
    return out


def make_recipe(target: str) -> str:
    """The command of a one-line Makefile target (e.g. train)."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{target}:.*\n\t(.+)$", text, re.M)
    assert match, f"Makefile has no one-line target {target}"
    return match.group(1).replace("$(VENV)/bin/", "")


def shorten(command: str) -> list[str]:
    """argv for pearl_fpga.cli.main: the command as written, with tiny budgets (module docstring)."""
    if command.startswith("make "):
        command = make_recipe(command.split()[1])
    argv = shlex.split(command.replace(".venv/bin/", ""))
    assert argv[0] == "pearl-fpga", f"not a pearl-fpga command: {command}"
    argv, rest = [], argv[1:]
    while rest:
        arg = rest.pop(0)
        argv.append(arg)
        if arg in SMALL and rest:
            rest.pop(0)
            argv.append(SMALL[arg])
        elif arg == "--seeds":  # one seed
            argv.append(rest.pop(0))
            while rest and rest[0].isdigit():
                rest.pop(0)
    if argv[0] == "train":
        if "--eval-episodes" not in argv:
            argv += ["--eval-episodes", "2"]
        if "--steps" not in argv and "--resume" not in argv and "--dataset" not in argv:  # offline: the dataset's size
            argv += ["--steps", "300"]
    if argv[0] == "plan" and "--engine" not in argv:
        argv.append("--quick")
    return argv


def _skip_reason(command: str) -> str | None:
    return next((why for pattern, why in SKIP.items() if re.search(pattern, command)), None)


def test_every_skip_entry_matches_a_doc_command():
    commands = [c for _, c in doc_commands()]
    for pattern in SKIP:
        assert any(re.search(pattern, c) for c in commands), f"SKIP entry {pattern!r} matches no doc command: remove it"


def test_shortening_rule():
    assert shorten("make train")[:5] == ["train", "--algo", "dqn", "--env", "CartPole-v1"]
    assert shorten(".venv/bin/pearl-fpga train --algo dqn --steps 50000") == [
        "train", "--algo", "dqn", "--steps", "300", "--eval-episodes", "2"]
    assert shorten("pearl-fpga bench train --algo dqn --steps 20000 --seeds 0 1") == [
        "bench", "train", "--algo", "dqn", "--steps", "300", "--seeds", "0"]
    assert shorten("pearl-fpga train --algo qlearning --env Taxi-v4") == [
        "train", "--algo", "qlearning", "--env", "Taxi-v4", "--eval-episodes", "2", "--steps", "300"]
    assert shorten("pearl-fpga train --algo qlearning --dataset fl.npz --parts 4")[-2:] == ["--eval-episodes", "2"]
    assert shorten("pearl-fpga plan --algo dqn")[-1] == "--quick"


def test_doc_commands_run_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # relative paths of the docs (runs/, fl.npz) land here, in doc order
    monkeypatch.setenv("PEARL_FPGA_CACHE", str(tmp_path / "cache"))  # a first run: no profile cached yet
    failures, ran = [], 0
    for page, command in doc_commands():
        if _skip_reason(command):
            continue
        argv = shorten(command)
        rc = main(argv)
        output = capsys.readouterr()
        ran += 1
        if rc != 0:
            tail = (output.out + output.err)[-1500:]
            failures.append(f"{page}: {command}\n  ran: pearl-fpga {shlex.join(argv)}\n  exit {rc}:\n{tail}")
    assert ran >= 10, f"only {ran} doc commands ran: did the docs' bash blocks move?"
    assert not failures, "\n\n".join(failures)
