"""pearl_fpga.safe_io, the one reader of files users hand the package, and each row of issue 35's
table through the loader that hit it: every refusal is an InputError naming the file, the field, the
rule and the fix, found before anything blocks or allocates."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pearl_fpga.errors import CheckpointError, ConfigError, InputError, PearlError
from pearl_fpga.safe_io import load_npz, open_regular, read_json, with_digest


def _fifo(tmp_path: Path, name: str) -> Path:
    """`name`: a symlink to a FIFO nobody writes (a blocking open would wait forever)."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / name).symlink_to(tmp_path / "pipe")
    return tmp_path / name


@pytest.mark.timeout(20)
def test_a_link_to_a_fifo_is_refused_without_blocking(tmp_path):
    path = _fifo(tmp_path, "c.json")
    with pytest.raises(InputError, match=r"c\.json \(a link to .*pipe\) is not a regular file: it is a FIFO \(named pipe\); "
                                         "point it at the file itself"):
        read_json(path, "config")


@pytest.mark.parametrize("target,kind", [("/dev/zero", "a character device"), ("/dev/null", "a character device")])
def test_a_link_to_a_device_is_refused(tmp_path, target, kind):
    (tmp_path / "x.json").symlink_to(target)
    with pytest.raises(InputError, match=f"is not a regular file: it is {kind}"):
        read_json(tmp_path / "x.json", "catalog")


def test_the_size_limit_is_checked_before_reading(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as fh:
        fh.truncate(64 << 30)  # sparse: reading it would take minutes and 64 GiB
    with pytest.raises(InputError, match=r"is larger than 16.0 MiB \(68,719,476,736 bytes\)"):
        read_json(path, "config")
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing", "config", 1 << 20)


@pytest.mark.parametrize("text,words", [
    ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
    (json.dumps({"a": json.loads("[" * 80 + "]" * 80)}), "nests too deeply"),
    ('{"gamma": NaN}', "holds NaN, which is not a JSON value"),
    ('{"gamma": -Infinity}', "holds -Infinity, which is not a JSON value"),
    ("", "the file is empty"),
    ('{"a": 1', "is not valid JSON"),
])
def test_json_limits(tmp_path, text, words):
    (tmp_path / "c.json").write_text(text)
    with pytest.raises(InputError, match=words) as info:
        read_json(tmp_path / "c.json", "config")
    assert "c.json" in str(info.value)


def test_json_that_is_not_utf8_names_the_byte(tmp_path):
    (tmp_path / "c.json").write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match=r"is not UTF-8 text \(byte 7 is 0xff\)"):
        read_json(tmp_path / "c.json", "catalog")


def test_json_of_the_wrong_top_type(tmp_path):
    (tmp_path / "c.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="must hold a JSON object at the top level, not an array"):
        read_json(tmp_path / "c.json", "config", top=dict)


# ---- .npz -------------------------------------------------------------------------------------------
def _npz_with_header(path: Path, arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for key, value in arrays.items():
            buf = io.BytesIO()
            if key == name:
                np.lib.format.write_array_header_1_0(buf, {"descr": value.dtype.str, "fortran_order": False,
                                                           "shape": shape})
                buf.write(value.tobytes())
            else:
                np.lib.format.write_array(buf, value)
            zf.writestr(f"{key}.npy", buf.getvalue())


def test_an_npy_header_declaring_a_huge_shape_is_refused_before_allocation(tmp_path):
    arrays = with_digest({"s": np.arange(10, dtype=np.int64), "r": np.zeros(10)})
    _npz_with_header(tmp_path / "d.npz", arrays, "s", (10**12,))
    with pytest.raises(CheckpointError, match=r"d\.npz: field 's \(\.npy header\)': declares shape \(1000000000000,\) "
                                              r"of int64 \(8,000,000,000,000 bytes\) but the member holds 80"):
        load_npz(tmp_path / "d.npz", "dataset", ("s", "r"), "")


def test_npz_member_kinds_object_arrays_and_the_digest(tmp_path):
    good = with_digest({"n": np.int64(4), "r": np.ones(3)})
    with open(tmp_path / "ok.npz", "wb") as fh:
        np.savez(fh, **good)
    out = load_npz(tmp_path / "ok.npz", "dataset", {"n": "iu", "r": "f"}, "")
    assert set(out) == {"n", "r"} and int(out["n"]) == 4

    with open(tmp_path / "complex.npz", "wb") as fh:
        np.savez(fh, **with_digest({"n": np.complex128(4), "r": np.ones(3)}))
    with pytest.raises(CheckpointError, match=r"field 'n \(\.npy header\)': has dtype complex128, but this member must "
                                              r"be an integer array; write it with such a dtype"):
        load_npz(tmp_path / "complex.npz", "dataset", {"n": "iu", "r": "f"}, "")

    changed = {**good, "r": np.full(3, 2.0)}  # content edited, digest kept: a bit flip the CRC-32 cannot see
    with open(tmp_path / "changed.npz", "wb") as fh:
        np.savez(fh, **changed)
    with pytest.raises(CheckpointError, match="does not match the content digest it carries"):
        load_npz(tmp_path / "changed.npz", "dataset", {"n": "iu", "r": "f"}, "")

    obj = np.empty(1, dtype=object)
    with zipfile.ZipFile(tmp_path / "obj.npz", "w") as zf:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, obj, allow_pickle=True)
        zf.writestr("n.npy", buf.getvalue())
    with pytest.raises(CheckpointError, match="is an object array, which only pickle reads"):
        load_npz(tmp_path / "obj.npz", "dataset", ("n",), "")


@pytest.mark.timeout(20)
def test_npz_through_a_fifo_and_a_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="FIFO"):
        load_npz(_fifo(tmp_path, "r.npz"), "replay buffer file", ("x",), "")
    with pytest.raises(CheckpointError, match="does not exist; save one first"):
        load_npz(tmp_path / "none.npz", "replay buffer file", ("x",), "save one first")


# ---- the table's rows through their loaders -----------------------------------------------------------
@pytest.mark.parametrize("text,words", [
    ('{"batch_size": "x"}', r"TrainConfig.batch_size must be an integer, got 'x'; set it in the config file or with "
                            r"--set batch_size=VALUE"),
    ('{"net_arch": null}', "TrainConfig.net_arch must be a non-empty list of positive layer widths"),
    ("", "the file is empty; write a JSON object there"),
    ("[1]", "must hold a JSON object at the top level, not an array"),
    ('{"gamma": "two"}', "TrainConfig.gamma must be a finite number, got 'two'"),
    ('{"batch_sise": 3}', "unknown field"),
])
def test_config_file_errors_name_the_file_the_field_and_the_rule(tmp_path, text, words):
    from pearl_fpga.config import TrainConfig

    (tmp_path / "run.json").write_text(text)
    with pytest.raises(ConfigError, match=words) as info:
        TrainConfig.from_json(tmp_path / "run.json")
    assert str(info.value).startswith(f"config {tmp_path / 'run.json'}")


@pytest.mark.timeout(20)
def test_config_and_catalog_links_to_a_fifo(tmp_path):
    from pearl_fpga.board.catalog import load_catalog
    from pearl_fpga.config import TrainConfig

    with pytest.raises(ConfigError, match="FIFO"):
        TrainConfig.from_json(_fifo(tmp_path, "c.json"))
    (tmp_path / "cat.json").symlink_to(tmp_path / "pipe")
    with pytest.raises(PearlError, match="FIFO"):
        load_catalog(tmp_path / "cat.json")


def _catalog(tmp_path: Path, change) -> Path:
    from pearl_fpga.data import data_path

    doc = json.loads(data_path("bitstreams", "catalog.json").read_text())
    change(doc)
    (tmp_path / "cat.json").write_text(json.dumps(doc))
    return tmp_path / "cat.json"


def test_catalog_absurd_resources_and_bad_bytes(tmp_path):
    from pearl_fpga.board.catalog import CatalogError, load_catalog

    path = _catalog(tmp_path, lambda d: d["boards"]["pynq-z2"]["resources"].update(bram36=10**9))
    with pytest.raises(CatalogError, match=r"boards.pynq-z2.resources.bram36 must be an integer in \[0, 20000\]"):
        load_catalog(path)
    path.write_bytes(path.read_bytes().replace(b'"pynq-z2"', b'"pynq-\xff"', 1))
    with pytest.raises(CatalogError, match="is not UTF-8 text"):
        load_catalog(path)


def test_manifest_absurd_resources(tmp_path):
    from pearl_fpga.board.manifest import build_manifest, load_manifest, write_manifest
    from pearl_fpga.errors import ManifestError

    write_manifest(build_manifest("pynq-z2", {"bit": "a.bit", "hwh": "a.hwh"}, {"vivado": "2024.2"}),
                   tmp_path / "manifest.json")
    doc = json.loads((tmp_path / "manifest.json").read_text())
    doc["resources"] = {"uram": 10**6}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=r"resources.uram = 1,000,000 is out of range: a count must be in \[0, 5,000\]"):
        load_manifest(tmp_path)


def test_dataset_members_of_the_wrong_kind(tmp_path):
    from pearl_fpga.algos.tabular import load_dataset, save_dataset

    rng = np.random.default_rng(0)
    path = save_dataset(tmp_path / "d.npz", rng.integers(0, 4, 20), rng.integers(0, 2, 20), rng.normal(size=20),
                        rng.integers(0, 4, 20), rng.random(20) < 0.1, 4, 2)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["n_states"] = np.complex128(4)
    with open(path, "wb") as fh:
        np.savez(fh, **with_digest(arrays))  # a well-formed file with a matching digest: the kinds refuse it
    with pytest.raises(CheckpointError, match=r"d\.npz: field 'n_states \(\.npy header\)': has dtype complex128"):
        load_dataset(path)


@pytest.mark.parametrize("kind", ["replay", "dataset"])
def test_bit_flips_across_a_dump_are_refused_or_load_identically(tmp_path, kind):
    """Flips across the whole of a small dump (one seeded bit at every k-th byte, about 600): the zip's
    CRC-32, the .npy header checks and the content digest leave no flip that loads something else."""
    from pearl_fpga.bench.fuzz_cases import fingerprint, load, make_pristine

    original = make_pristine(kind, tmp_path / "pristine")
    want = fingerprint(load(kind, original))
    data = original.read_bytes()
    case = tmp_path / "case" / original.name
    case.parent.mkdir()
    outcomes = {"refused": 0, "identical": 0}
    rng = np.random.default_rng(0)
    for pos in range(0, len(data), max(1, len(data) // 600)):
        for bit in (int(rng.integers(8)),):
            flipped = bytearray(data)
            flipped[pos] ^= 1 << bit
            case.write_bytes(flipped)
            try:
                got = fingerprint(load(kind, case))
            except CheckpointError as exc:
                assert case.name in str(exc)
                outcomes["refused"] += 1
            else:
                assert got == want, f"flip of bit {bit} at byte {pos} loaded changed content"
                outcomes["identical"] += 1
    assert outcomes["refused"] > 0


@pytest.mark.timeout(120)
def test_train_config_through_a_fifo_exits_2_at_once(tmp_path):
    import subprocess
    import sys

    link = _fifo(tmp_path, "run.json")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "400"}
    proc = subprocess.run([sys.executable, "-m", "pearl_fpga.cli", "train", "--config", str(link), "--logdir",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=100, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "run.json (a link to" in proc.stdout and "is not a regular file: it is a FIFO" in proc.stdout


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.trainer import Trainer

    cfg = TrainConfig.preset("dqn", learning_starts=50, train_freq=16, gradient_steps=2, net_arch=[8], buffer_size=500,
                             batch_size=16, eval_freq=0, checkpoint_freq=0, total_steps=200)
    trainer = Trainer("dqn", placement="cpu", config=cfg, seed=0)
    trainer.train(100)
    path = trainer.save(tmp_path_factory.mktemp("ck") / "ck")
    trainer.close()
    return path


def _edited(checkpoint: Path, tmp_path: Path, manifest_change=None, state_change=None) -> Path:
    """A copy of `checkpoint` with its manifest or state changed (checksum and size updated)."""
    import shutil

    import torch

    from pearl_fpga.runtime.checkpoint import pack, read_checkpoint, sha256
    from pearl_fpga.runtime.manifest_checks import seal_manifest

    path = tmp_path / "edited"
    shutil.copytree(checkpoint, path)
    manifest, state = read_checkpoint(path)
    if state_change is not None:
        state_change(state)
        torch.save(pack(state), path / "state.pt")
        manifest["files"]["state.pt"].update(sha256=sha256(path / "state.pt"), bytes=(path / "state.pt").stat().st_size)
    text = json.dumps(manifest)
    text = manifest_change(text) if manifest_change else text
    try:  # re-signed (issue 36's digest), so that only the edited field is wrong
        text = json.dumps(seal_manifest(json.loads(text)))
    except ValueError:
        pass
    (path / "manifest.json").write_text(text)
    return path


@pytest.mark.parametrize("change,words", [
    (lambda t: t.replace('"faults": {', '"faults": true, "x": {', 1), "field 'counters.faults' must map fault names"),
    (lambda t: t.replace('"seed": 0', '"seed": Infinity', 1), "holds Infinity, which is not a JSON value"),
    (lambda t: t.replace('"seed": 0', '"seed": "two"', 1), "field 'seed' missing or not a int"),
])
def test_checkpoint_manifest_rows(small_checkpoint, tmp_path, change, words):
    from pearl_fpga.trainer import Trainer

    with pytest.raises(CheckpointError, match=words) as info:
        Trainer.load(_edited(small_checkpoint, tmp_path, manifest_change=change))
    assert "edited" in str(info.value)


@pytest.mark.parametrize("field,value", [("python", (3, tuple([float("inf")] * 625), None)),
                                         ("explore", {"bit_generator": "PCG64", "state": {"state": float("inf")}}),
                                         ("torch", "not a tensor")])
def test_checkpoint_rng_states_are_checked_before_restoring(small_checkpoint, tmp_path, field, value):
    from pearl_fpga.trainer import Trainer

    def change(state):
        state["rng"][field] = value

    with pytest.raises(CheckpointError, match=f"rng.{field} is not a valid generator state"):
        Trainer.load(_edited(small_checkpoint, tmp_path, state_change=change))
