"""From a trained run to a board: `pearl-fpga export` writes the quantized policy (torch-free files that
MLPInfer.load reads on any backend, bit for bit the kernel the run's evaluation acts with), the float
ONNX (checked against torch with onnxruntime) and the QONNX (checked against the kernel's bits with
qonnx's executor); the files are read safely (no pickle, digests, shapes, sizes: clear errors)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_board_install import random_policy, run_without_torch

from pearl_fpga.cli import main as cli
from pearl_fpga.errors import ArtifactError
from pearl_fpga.kernels import MLPInfer
from pearl_fpga.kernels.mlp_artifact import MANIFEST_FILE, WEIGHTS_FILE, read_artifact, write_artifact
from pearl_fpga.spec.mlp import HEAD_RAW, HEAD_TANH

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "deploy_on_board.py"
RUNS = {"dqn": ("CartPole-v1", dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16],
                                    buffer_size=2000, batch_size=32, eval_freq=0), 600),
        "ddpg": ("Pendulum-v1", dict(learning_starts=100, net_arch=[16, 16], batch_size=32, buffer_size=2000,
                                     eval_freq=0), 300),
        "sac": ("Pendulum-v1", dict(learning_starts=100, net_arch=[16, 16], batch_size=32, buffer_size=2000,
                                    eval_freq=0), 300)}


def _greedy(trainer, obs: np.ndarray) -> np.ndarray:
    """What trainer.predict() acts: the run's kernel through the algorithm's actor head, in the env's bounds."""
    actions = trainer.eval_policy.deterministic(obs)
    if trainer.spec.discrete:
        return actions
    return np.stack([trainer.actor.envs.to_env_action(a) for a in actions])


def _example():
    spec = importlib.util.spec_from_file_location("deploy_on_board", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _observations(trainer, n: int = 256) -> np.ndarray:
    """Calibration-like observations plus adversarial ones: far outside the calibrated range (the input
    format saturates), zeros, and values on rounding ties of the input format."""
    rng = np.random.default_rng(7)
    calib = trainer.calibration
    obs = calib[rng.integers(0, len(calib), n)] * rng.uniform(0.5, 1.5, size=(n, calib.shape[1]))
    fa = trainer.eval_policy.kernel.formats[0].fa_in
    ties = (rng.integers(-200, 200, size=(16, calib.shape[1])) + 0.5) * 2.0**-fa
    extreme = np.concatenate([np.full((2, calib.shape[1]), 1e6), np.full((2, calib.shape[1]), -1e6),
                              np.zeros((2, calib.shape[1]))])
    return np.concatenate([obs, ties, extreme]).astype(np.float32)


@pytest.fixture(scope="module", params=sorted(RUNS))
def exported(request, tmp_path_factory):
    """A short run of each algorithm on the kernel actor, saved, then exported; with the trainer that ran it."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.export import export_run
    from pearl_fpga.trainer import Trainer

    algo = request.param
    env_id, overrides, steps = RUNS[algo]
    tmp = tmp_path_factory.mktemp(f"run-{algo}")
    trainer = Trainer(algo, env=env_id, placement="cpu-kernel",
                      config=TrainConfig.preset(algo, env_id, total_steps=steps, **overrides), seed=0)
    trainer.train(steps)
    trainer.save(tmp / "run" / "checkpoint")
    result = export_run(tmp / "run", tmp / "export")
    trainer.evaluate(1)  # loads the weights evaluate() scores into eval_policy, as export does
    yield algo, trainer, result
    trainer.close()


def test_the_kernel_policy_loads_on_every_backend_bit_for_bit(exported):
    algo, trainer, result = exported
    kernel = trainer.eval_policy.kernel
    obs = _observations(trainer)
    expected = kernel(obs)
    for backend in ("numpy", "cpu"):
        policy = MLPInfer.load(result.files["kernel"], backend=backend)
        assert policy.formats == kernel.formats and policy.head == kernel.head
        assert np.array_equal(policy(obs), expected), backend
        assert np.array_equal(policy.act(obs), _greedy(trainer, obs)), backend
    info = read_artifact(result.files["kernel"]).info
    assert info["algo"] == algo and info["env_id"] == trainer.config.env_id and info["policy"] == "last"
    assert info["max_error"] == pytest.approx(kernel.max_error)
    summary = json.loads(result.files["summary"].read_text())
    assert set(summary["files"]) >= {"kernel", "onnx", "qonnx"}


def test_the_board_example_acts_as_the_training_side_kernel(exported, tmp_path):
    """examples/deploy_on_board.py in an interpreter without torch takes the actions the training-side
    kernel takes in the same episodes (the pynq backend on the mock Zynq: tests/pynq_stack)."""
    algo, trainer, result = exported
    kernel = trainer.eval_policy.kernel

    class TrainingSide:  # the actions trainer.predict() takes: the kernel's, in the env's bounds
        n_in = kernel.n_in

        @staticmethod
        def act(obs):
            action = _greedy(trainer, obs[None])[0]
            return int(action) if trainer.spec.discrete else action

    reference = _example().run_episodes(TrainingSide(), trainer.config.env_id, 2, seed=5)
    out = run_without_torch([str(EXAMPLE), str(result.files["kernel"]), "--backend", "cpu", "--episodes", "2",
                             "--seed", "5", "--json"])
    assert out.returncode == 0, out.stderr[-3000:]
    board = json.loads(out.stdout.strip().splitlines()[-1])
    assert board["env_id"] == trainer.config.env_id  # from the policy's manifest
    assert board["actions"] == reference["actions"] and board["returns"] == reference["returns"]


def _float_bound(module, obs: np.ndarray) -> np.ndarray:
    """An absolute bound on the float32 rounding of the network: n·eps of the absolute products, per layer."""
    import torch

    eps = float(np.finfo(np.float32).eps)
    a, bound = np.abs(obs.astype(np.float64)), None
    for layer in module:
        if isinstance(layer, torch.nn.Linear):
            w = np.abs(layer.weight.detach().double().numpy())
            a = a @ w.T + np.abs(layer.bias.detach().double().numpy())
            bound = (w.shape[1] + 2) * eps * a + (0 if bound is None else bound @ w.T)
    return bound


def test_the_float_onnx_matches_torch(exported):
    import onnxruntime as ort
    import torch

    _, trainer, result = exported
    module = trainer.eval_policy.module
    obs = _observations(trainer)[:-6]
    session = ort.InferenceSession(str(result.files["onnx"]), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: obs})
    with torch.no_grad():
        want = module(torch.from_numpy(obs)).numpy()
    assert got.shape == want.shape
    bound = 2 * _float_bound(module, obs) + 1e-30
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


def test_the_qonnx_gives_the_kernel_bits(exported):
    """The file (one observation per call, as FINN takes it) on a few observations, the same graph at a
    batch of all of them (calibration-like, rounding ties, saturating) on the rest."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    from pearl_fpga.export.onnx_files import qonnx_model

    _, trainer, result = exported
    kernel = trainer.eval_policy.kernel
    obs = _observations(trainer)
    model = ModelWrapper(str(result.files["qonnx"]))
    assert {n.op_type for n in model.graph.node} >= {"Quant", "MatMul"}
    for row in (0, 1, len(obs) - 1, len(obs) - 5):
        got = execute_onnx(model, {"obs": obs[row:row + 1].astype(np.float64)})["out"]
        assert np.array_equal(got.astype(np.float32), kernel(obs[row:row + 1])), row
    batched = ModelWrapper(qonnx_model(kernel, batch=len(obs))).transform(InferShapes())
    got = execute_onnx(batched, {"obs": obs.astype(np.float64)})["out"]
    fa_out = 15 if kernel.head == HEAD_TANH else kernel.formats[-1].fa_out
    ints = got * 2.0**fa_out
    assert np.array_equal(ints, np.round(ints)) and np.all(np.abs(ints) <= 32768)
    assert np.array_equal(got.astype(np.float32), kernel(obs))


def test_export_command(exported, tmp_path, capsys):
    algo, trainer, result = exported
    run = result.info["run"]
    assert cli(["export", run, "--out", str(tmp_path / "out"), "--formats", "kernel", "--policy", "last",
                "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed["files"]) == {"kernel", "summary"}
    a, b = read_artifact(printed["files"]["kernel"]), read_artifact(result.files["kernel"])
    assert all(np.array_equal(x.weight, y.weight) and np.array_equal(x.bias, y.bias)
               for x, y in zip(a.layers, b.layers, strict=True))
    assert cli(["export", str(tmp_path / "nothing")]) == 2
    assert "neither a checkpoint" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------------- the files, read safely
@pytest.fixture
def policy_dir(tmp_path):
    return write_artifact(tmp_path / "policy", random_policy(3, [4, 16, 2], HEAD_RAW))


def _rewrite_manifest(directory: Path, change) -> None:
    path = directory / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def _rewrite_weights(directory: Path, arrays: dict, pickle: bool = False) -> None:
    """Replace policy.npz and put its true digest in the manifest (what a forger would do)."""
    path = directory / WEIGHTS_FILE
    with open(path, "wb") as fh:
        np.savez(fh, **arrays) if not pickle else np.savez(fh, w0=np.array([{"x": 1}], dtype=object))
    data = path.read_bytes()

    def fix(m):
        m["weights"]["sha256"], m["weights"]["bytes"] = hashlib.sha256(data).hexdigest(), len(data)

    _rewrite_manifest(directory, fix)


CORRUPTIONS = {
    "manifest not json": (lambda d: (d / MANIFEST_FILE).write_text("{not json"), "not valid JSON"),
    "manifest missing": (lambda d: (d / MANIFEST_FILE).unlink(), "holds no policy.json"),
    "weights missing": (lambda d: (d / WEIGHTS_FILE).unlink(), "is missing"),
    "weights truncated": (lambda d: (d / WEIGHTS_FILE).write_bytes((d / WEIGHTS_FILE).read_bytes()[:100]),
                          "does not match its manifest"),
    "weights bit flipped": (lambda d: (d / WEIGHTS_FILE).write_bytes(
        (lambda b: b[:300] + bytes([b[300] ^ 1]) + b[301:])((d / WEIGHTS_FILE).read_bytes())), "does not match"),
    "wrong format": (lambda d: _rewrite_manifest(d, lambda m: m.update(format="other")), "not a policy"),
    "newer version": (lambda d: _rewrite_manifest(d, lambda m: m.update(version=99)), "version 99"),
    "field missing": (lambda d: _rewrite_manifest(d, lambda m: m["layers"][0].pop("fw")), "'fw' is missing"),
    "bool as int": (lambda d: _rewrite_manifest(d, lambda m: m["layers"][0].update(shift=True)), "must be int"),
    "shift inconsistent": (lambda d: _rewrite_manifest(d, lambda m: m["layers"][0].update(fw=m["layers"][0]["fw"] + 1)),
                           "is not fw + fa_in - fa_out"),
    "formats do not chain": (lambda d: _rewrite_manifest(d, lambda m: m["layers"][1].update(
        fa_in=m["layers"][1]["fa_in"] + 1, fw=m["layers"][1]["fw"] - 1)), "is not layer 0's output"),
    "shape differs from manifest": (lambda d: _rewrite_manifest(d, lambda m: (m["layers"][0].update(m_out=17),
                                                                              m["layers"][1].update(n_in=17))),
                                    "as the manifest says"),
    "too many layers": (lambda d: _rewrite_manifest(d, lambda m: m.update(layers=m["layers"] * 5)), "layers; the kernel"),
    "huge size claimed": (lambda d: _rewrite_manifest(d, lambda m: m["weights"].update(bytes=1 << 40)), "at most"),
    "bounds not finite": (lambda d: _rewrite_manifest(d, lambda m: m.update(action_low=[-1e400, -1])), "finite"),
    "bounds reversed": (lambda d: _rewrite_manifest(d, lambda m: m.update(action_low=[2, 2])), "below"),
    "unknown action rule": (lambda d: _rewrite_manifest(d, lambda m: m.update(action="sample")), "is not one of"),
    "action rule of another head": (lambda d: _rewrite_manifest(d, lambda m: m.update(action="scaled-tanh")),
                                    "needs a tanh head"),
    "tanh-mean with one bound per output": (lambda d: _rewrite_manifest(d, lambda m: m.update(action="tanh-mean")),
                                            "must be 1 finite numbers"),
    "pickled member": (lambda d: _rewrite_weights(d, {}, pickle=True), "corrupt"),
    "unknown member": (lambda d: _rewrite_weights(d, {**dict(np.load(d / WEIGHTS_FILE)), "extra": np.zeros(2)}),
                       "never writes"),
    "weight dtype": (lambda d: _rewrite_weights(d, {**dict(np.load(d / WEIGHTS_FILE)),
                                                    "w0": np.load(d / WEIGHTS_FILE)["w0"].astype(np.int32)}),
                     "must be int16"),
    "not a zip": (lambda d: _rewrite_weights(d, {}) or (d / WEIGHTS_FILE).write_bytes(b"x" * 64) or _rewrite_manifest(
        d, lambda m: m["weights"].update(sha256=hashlib.sha256(b"x" * 64).hexdigest(), bytes=64)), "corrupt"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_a_corrupt_policy_is_a_clear_error(policy_dir, case):
    corrupt, message = CORRUPTIONS[case]
    corrupt(policy_dir)
    with pytest.raises(ArtifactError) as info:
        MLPInfer.load(policy_dir, backend="numpy")
    assert message in str(info.value), str(info.value)


def test_a_policy_wider_than_the_board_says_so(tmp_path):
    directory = write_artifact(tmp_path / "wide", random_policy(4, [300, 8, 2], HEAD_RAW))
    assert MLPInfer.load(directory, backend="cpu").n_in == 300  # the cpu build holds 512
    with pytest.raises(ValueError, match="MAX_WIDTH"):
        MLPInfer.load(directory, backend=_board_sized_backend())


def _board_sized_backend():
    from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend
    from pearl_fpga.spec.mlp import MAX_WIDTH

    backend = NumpyMLPBackend()
    backend.max_width = MAX_WIDTH  # what a board's bitstream holds (256 by default)
    return backend


def test_save_and_load_round_trip_without_pickle(policy_dir):
    with zipfile.ZipFile(policy_dir / WEIGHTS_FILE) as z:
        assert sorted(z.namelist()) == ["b0.npy", "b1.npy", "w0.npy", "w1.npy"]
    policy = MLPInfer.load(policy_dir, backend="numpy")
    again = policy.save(policy_dir.parent / "again")
    a, b = read_artifact(policy_dir), read_artifact(again)
    assert a.formats == b.formats and a.head == b.head
    assert all(np.array_equal(x.weight, y.weight) for x, y in zip(a.layers, b.layers, strict=True))
    with pytest.raises(ValueError, match="no float network"):
        policy.load_weights(None)
