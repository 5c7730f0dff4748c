"""The board install: a plain `pip install pearl_fpga` pulls no torch (PyTorch has no wheel for the PYNQ-Z2's
armv7l), and everything a board runs works in an interpreter where torch cannot be imported
(tests/no_torch/sitecustomize.py blocks it): the kernels on the numpy and cpu backends, an exported policy
on both, `pearl-fpga devices`, and a clear error naming the install command wherever torch is needed.
The pynq driver on the mock Zynq and the board example run in .venv-pynq, which has no torch at all
(tests/pynq_stack/test_deploy_on_board.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mlp_cases import sensible_shift_layers

from pearl_fpga.kernels.mlp_artifact import PolicyArtifact, write_artifact
from pearl_fpga.kernels.mlp_torch import LayerFormat
from pearl_fpga.spec.mlp import HEAD_RAW, HEAD_TANH, TANH_FRAC_BITS

ROOT = Path(__file__).resolve().parents[1]
NO_TORCH = ROOT / "tests" / "no_torch"
PYNQ_IMAGE_NUMPY = "1.21.5"  # Ubuntu 22.04's python3-numpy, what a PYNQ 3.x image's Python has (docs/hardware.md)


def no_torch_env() -> dict[str, str]:
    """The environment of a subprocess that cannot import torch and uses this checkout."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(NO_TORCH), str(ROOT)])}


def run_without_torch(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=no_torch_env(), cwd=ROOT,
                          timeout=timeout)


def random_policy(seed: int, widths: list[int], head: str, low: float = -1.0, high: float = 1.0) -> PolicyArtifact:
    """A policy with the kernel's integers and formats consistent with their shifts (input Q.10)."""
    layers = sensible_shift_layers(np.random.default_rng(seed), widths, head)
    formats, fa_in = [], 10
    for i, layer in enumerate(layers):
        fa_out = TANH_FRAC_BITS if head == HEAD_TANH and i == len(layers) - 1 else 10
        formats.append(LayerFormat(fw=layer.shift + fa_out - fa_in, fa_in=fa_in, fa_out=fa_out))
        fa_in = fa_out
    m = widths[-1]
    return PolicyArtifact(layers, formats, head, np.full(m, low), np.full(m, high), {"env_id": "none"})


def test_torch_is_blocked_in_the_board_interpreter():
    out = run_without_torch(["-c", "import torch"])
    assert out.returncode != 0 and "No module named 'torch'" in out.stderr


IMPORT_SCRIPT = r"""
import importlib, json, pkgutil, sys
failed = {}
names = ["pearl_fpga", "pearl_fpga.cli", "pearl_fpga.limits", "pearl_fpga.data", "pearl_fpga.host", "pearl_fpga.errors",
         "pearl_fpga.config", "pearl_fpga.planner.devices"]
for package in ("kernels", "backends", "board", "spec", "sim", "commands", "export", "presets"):
    module = importlib.import_module(f"pearl_fpga.{package}")
    names += [info.name for info in pkgutil.walk_packages(module.__path__, module.__name__ + ".")]
from pearl_fpga.errors import PearlError
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:  # a PearlError naming another missing extra (cocotb for the sim transport) is fine
        if not isinstance(exc, PearlError) or "torch" in str(exc):
            failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"modules": len(names), "failed": failed, "torch_loaded": "torch" in sys.modules}))
"""


def test_every_module_a_board_uses_imports_without_torch():
    """The kernels, backends, drivers, specs, the simulation helpers, the command modules (each imports what
    it runs inside its run()), the export package and the presets: a new top-level `import torch` fails here."""
    out = run_without_torch(["-c", IMPORT_SCRIPT])
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["modules"] > 60 and not result["failed"], result["failed"]
    assert result["torch_loaded"] is False


BOARD_SCRIPT = r"""
import json, sys
import numpy as np
from pearl_fpga.kernels import MLPInfer, ReplaySampler, TabularQ

obs = np.load(sys.argv[2])
result = {}
for name in sys.argv[1].split(","):
    outs = {}
    for backend in ("numpy", "cpu"):
        policy = MLPInfer.load(name, backend=backend)
        outs[backend] = (policy(obs), np.asarray(policy.act(obs)))
    result[name] = {"same": all(np.array_equal(outs["numpy"][k], outs["cpu"][k]) for k in (0, 1)),
                    "out": outs["cpu"][0].tolist(), "act": outs["cpu"][1].tolist()}
samples = []
for backend in ("numpy", "cpu"):
    s = ReplaySampler(1000, fanout=8, backend=backend)
    s.update(np.arange(100), np.linspace(0.25, 9.0, 100))
    samples.append(s.sample(64, np.random.default_rng(0))[0].tolist())
tables = []
for backend in ("numpy", "cpu"):
    q = TabularQ(16, 4, backend=backend)
    q.update(np.arange(8), np.arange(8) % 4, np.ones(8), np.arange(1, 9) % 16, np.zeros(8, dtype=bool))
    tables.append(q.table.tolist())
result["replay_same"] = samples[0] == samples[1]
result["tabular_same"] = tables[0] == tables[1]
result["torch_loaded"] = "torch" in sys.modules
print(json.dumps(result))
"""


def test_kernels_and_an_exported_policy_run_without_torch(tmp_path):
    """MLPInfer.load, ReplaySampler and TabularQ on numpy and cpu, bit for bit alike, in the board interpreter;
    the policy's outputs are those the kernel's numpy reference gives here."""
    from pearl_fpga.kernels import MLPInfer

    cases = {"dqn": random_policy(1, [4, 32, 32, 2], HEAD_RAW),
             "ddpg": random_policy(2, [3, 32, 32, 1], HEAD_TANH, low=-2.0, high=2.0)}
    for name, artifact in cases.items():
        write_artifact(tmp_path / name, artifact)
    obs = np.random.default_rng(0).normal(0, 2, size=(64, 4)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    dirs = {name: tmp_path / name for name in cases}
    out = run_without_torch(["-c", BOARD_SCRIPT, str(dirs["dqn"]), str(tmp_path / "obs.npy")])
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["torch_loaded"] is False
    assert result["replay_same"] and result["tabular_same"]
    here = MLPInfer.load(dirs["dqn"], backend="numpy")
    assert result[str(dirs["dqn"])]["same"]
    assert np.array_equal(np.asarray(result[str(dirs["dqn"])]["out"], dtype=np.float32), here(obs))
    assert result[str(dirs["dqn"])]["act"] == here.act(obs).tolist()
    np.save(tmp_path / "obs3.npy", obs[:, :3])
    out = run_without_torch(["-c", BOARD_SCRIPT, str(dirs["ddpg"]), str(tmp_path / "obs3.npy")])
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    ddpg = MLPInfer.load(dirs["ddpg"], backend="numpy")
    assert result[str(dirs["ddpg"])]["same"]
    act = np.asarray(result[str(dirs["ddpg"])]["act"], dtype=np.float32)
    assert np.array_equal(act, ddpg.act(obs[:, :3])) and np.all(np.abs(act) <= 2.0)


def test_devices_runs_without_torch():
    out = run_without_torch(["-m", "pearl_fpga.cli", "devices", "--json"])
    assert out.returncode == 0, out.stderr[-3000:]
    devices = {d["kind"]: d for d in json.loads(out.stdout)["devices"]}
    assert devices["cpu"]["available"] and "fpga-emu" in devices
    assert devices["cuda"]["available"] is False and "torch" in devices["cuda"]["reason"]


@pytest.mark.parametrize("command", [["train", "--steps", "10"], ["eval", "runs/none"], ["export", "runs/none"],
                                     ["plan"], ["bench", "train"]])
def test_training_commands_name_the_install_command_without_torch(command):
    out = run_without_torch(["-m", "pearl_fpga.cli", *command])
    assert out.returncode == 2, (out.stdout, out.stderr[-3000:])
    text = " ".join((out.stdout + out.stderr).split())
    assert "Traceback" not in text
    assert "needs torch" in text and "pip install 'pearl_fpga[train]'" in text, text


API_SCRIPT = r"""
import json
from pearl_fpga.errors import MissingDependency
errors = {}
def trainer():
    import pearl_fpga
    return pearl_fpga.Trainer
def from_torch():
    from pearl_fpga.kernels import MLPInfer
    return MLPInfer.from_torch(object(), calibration=[[0.0]])
for name, call in (("Trainer", trainer), ("from_torch", from_torch)):
    try:
        call()
        errors[name] = None
    except MissingDependency as exc:
        errors[name] = str(exc)
print(json.dumps(errors))
"""


def test_python_api_needing_torch_raises_missing_dependency():
    out = run_without_torch(["-c", API_SCRIPT])
    assert out.returncode == 0, out.stderr[-3000:]
    errors = json.loads(out.stdout.strip().splitlines()[-1])
    for name, text in errors.items():
        assert text and "pip install 'pearl_fpga[train]'" in text and "MLPInfer.load" in text, (name, text)


def _requirements() -> tuple[list, dict[str, list]]:
    """(base requirements, extra -> its requirements) from the package's metadata as pip builds it."""
    from packaging.requirements import Requirement

    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-build-isolation",
                          "--no-index", "-q", "--report", "-", str(ROOT)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    (item,) = [i for i in report["install"] if i["metadata"]["name"] == "pearl_fpga"]
    base: list = []
    extras: dict[str, list] = {}
    for line in item["metadata"].get("requires_dist", []):
        req = Requirement(line)
        if req.marker is None:
            base.append(req)
            continue
        for extra in item["metadata"].get("provides_extra", []):
            if req.marker.evaluate({"extra": extra}):
                extras.setdefault(extra, []).append(req)
    return base, extras


def test_the_board_install_requires_no_torch_and_accepts_the_pynq_image_numpy():
    """The package's metadata: the plain install needs numpy (at the version a PYNQ 3.x image ships) and no
    torch, gymnasium or other training package; `pearl_fpga[train]` brings them, `[export]` the ONNX tools."""
    base, extras = _requirements()
    names = {r.name.lower() for r in base}
    assert "numpy" in names
    assert not names & {"torch", "gymnasium", "matplotlib", "tensorboard", "threadpoolctl"}, names
    numpy_req = next(r for r in base if r.name.lower() == "numpy")
    assert numpy_req.specifier.contains(PYNQ_IMAGE_NUMPY), numpy_req
    train = {r.name.lower() for r in extras["train"]}
    assert {"torch", "gymnasium"} <= train
    assert {"onnx", "onnxruntime", "qonnx"} <= {r.name.lower() for r in extras["export"]}
