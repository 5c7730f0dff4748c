"""What a checkpoint may make the loader do (issue 36): it never imports a module that it names
without the user's consent, its manifest is covered by the same digest as its tensors, and its
counters are bounded and agree with the state they describe. Counted in docs/reliability.md."""

from __future__ import annotations

import json
import random
import sys

import numpy as np
import pytest

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError
from pearl_fpga.runtime import checkpoint as ckpt_mod
from pearl_fpga.runtime.checkpoint import read_checkpoint
from pearl_fpga.runtime.manifest_checks import seal_manifest
from pearl_fpga.safe_io import DIGEST_MEMBER, with_digest
from pearl_fpga.trainer import Trainer
from pearl_fpga.trainers import load_trainer, make_trainer

TINY = dict(learning_starts=100, train_freq=32, gradient_steps=8, net_arch=[16, 16], buffer_size=4000,
            batch_size=32, eval_freq=0, total_steps=1000)
EVIL = '''
import pathlib, gymnasium as gym
pathlib.Path(__file__).with_name("IMPORTED").write_text("ran")
if "X-v0" not in gym.registry:
    gym.register("X-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv", max_episode_steps=500)
'''


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A DQN checkpoint of 600 env steps (the replay holds 600 transitions)."""
    path = tmp_path_factory.mktemp("ck") / "ck"
    t = Trainer("dqn", placement="cpu", config=TrainConfig.preset("dqn", **TINY), seed=0)
    t.train(600)
    return t.save(path)


def _edited(checkpoint, tmp_path, change, seal=True):
    """A copy of `checkpoint` whose manifest `change` edited (digest recomputed when `seal`)."""
    import shutil

    path = tmp_path / "edited"
    shutil.copytree(checkpoint, path)
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(seal_manifest(manifest) if seal else manifest))
    return path


# ------------------------------------------------------------------- a module named in a checkpoint
@pytest.fixture
def evil(tmp_path, monkeypatch):
    """A module `evil_envs_36` on the import path that leaves a file when imported (and registers X-v0)."""
    folder = tmp_path / "mods"
    folder.mkdir()
    (folder / "evil_envs_36.py").write_text(EVIL)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(folder)
    yield folder / "IMPORTED"
    sys.modules.pop("evil_envs_36", None)


def _point_at_evil(manifest):
    manifest["config"]["env_id"] = manifest["env_id"] = "evil_envs_36:X-v0"


def test_trainer_load_refuses_a_module_named_in_the_checkpoint_without_consent(checkpoint, tmp_path, evil):
    ck = _edited(checkpoint, tmp_path, _point_at_evil)
    with pytest.raises(CheckpointError, match="trust_env_module=True") as info:
        Trainer.load(ck)
    assert "evil_envs_36" in str(info.value) and "nothing was imported" in str(info.value)
    assert not evil.exists() and "evil_envs_36" not in sys.modules
    with pytest.raises(CheckpointError, match="trust_env_module"):  # an expect without the env id is no consent
        Trainer.load(ck, expect={"algo": "dqn"})
    assert not evil.exists()
    back = Trainer.load(ck, trust_env_module=True)  # consent: the module is imported, the run restored
    assert evil.exists() and back.env_steps == 600


def test_eval_refuses_a_module_named_in_the_checkpoint_without_the_flag(checkpoint, tmp_path, evil, capsys):
    from pearl_fpga.cli import main

    ck = _edited(checkpoint, tmp_path, _point_at_evil)
    assert main(["eval", str(ck), "--episodes", "1"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "--trust-env-module" in out and not evil.exists()
    assert main(["eval", str(ck), "--episodes", "1", "--trust-env-module"]) == 0
    assert evil.exists()


def test_naming_the_env_id_is_consent(tmp_path):
    """`train --resume --env my_pkg:Env-v0` passes expect={"env_id": ...}: the user typed the module."""
    config = TrainConfig.preset("dqn", **TINY)
    t = Trainer("dqn", "corridor_env:Corridor-v0", placement="cpu", config=config, seed=0)
    t.train(200)
    ck = t.save(tmp_path / "ck")
    with pytest.raises(CheckpointError, match="corridor_env"):
        Trainer.load(ck)
    assert Trainer.load(ck, expect={"env_id": "corridor_env:Corridor-v0"}).env_steps == 200


def test_tabular_load_refuses_a_module_named_in_the_checkpoint(tmp_path, evil):
    t = make_trainer("qlearning", env="FrozenLake-v1", config=TrainConfig.preset("qlearning", "FrozenLake-v1",
                                                                                    total_steps=200), seed=0)
    t.train(200)
    ck = tmp_path / "tab"
    path = t.save(ck)
    with np.load(path) as data:
        members = {k: data[k] for k in data.files}
    config = json.loads(str(members["config"]))
    config["env_id"] = "evil_envs_36:X-v0"
    members["config"] = np.str_(json.dumps(config))
    members.pop(DIGEST_MEMBER)
    np.savez(path, **with_digest(members))  # re-signed: only the env id is wrong
    with pytest.raises(CheckpointError, match="trust_env_module=True"):
        load_trainer(ck)
    assert not evil.exists()


# -------------------------------------------------------------------------------- the digest
def test_every_flipped_bit_of_the_manifest_is_refused(checkpoint, tmp_path):
    """300 seeded single-bit flips across manifest.json: each one refused (the issue's probe loaded
    "env_steps": 600 turned into 400, and changed total_steps, learning_starts, actors silently)."""
    import shutil

    rng = random.Random(36)
    original = (checkpoint / "manifest.json").read_bytes()
    path = tmp_path / "flipped"
    shutil.copytree(checkpoint, path)
    refused = 0
    for _ in range(300):
        data = bytearray(original)
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
        (path / "manifest.json").write_bytes(bytes(data))
        with pytest.raises(CheckpointError):
            read_checkpoint(path)
        refused += 1
    assert refused == 300


def test_the_issues_flip_of_env_steps_is_refused_by_the_digest(checkpoint, tmp_path):
    ck = _edited(checkpoint, tmp_path, lambda m: m["counters"].update(env_steps=400), seal=False)
    with pytest.raises(CheckpointError, match="digest"):
        Trainer.load(ck)


# -------------------------------------------------------------- counters against the state
@pytest.mark.parametrize("change, words", [
    (lambda m: m["counters"].update(env_steps=400), "the replay holds 600 transitions"),
    (lambda m: m["counters"].update(env_steps=900), "leave 900"),
    (lambda m: m["counters"].update(env_steps=2**63 + 5), "must be an integer in"),
    (lambda m: m["counters"].update(grad_steps=10**6), "more than the schedule allows"),
    (lambda m: m["counters"].update(episodes=m["counters"]["episodes"] + 1), "the episode log holds"),
    (lambda m: m["counters"].update(target_checked=10**6), "target_checked"),
    (lambda m: m["counters"]["faults"].update(actor_restarts=-1), "faults.actor_restarts"),
    (lambda m: m.update(seed=2**40), "seed"),
], ids=["env_steps_below_replay", "env_steps_above_replay", "env_steps_2^63", "grad_steps", "episodes",
        "target_checked", "negative_fault", "seed"])
def test_counters_that_disagree_with_the_state_are_refused(checkpoint, tmp_path, change, words):
    """Even with the digest recomputed (a writer's bug, or an edit that re-signs): the counters must be
    bounded and agree with the state."""
    ck = _edited(checkpoint, tmp_path, change)
    with pytest.raises(CheckpointError, match=words):
        Trainer.load(ck)


def test_a_state_file_of_another_size_is_refused_before_it_is_hashed(checkpoint, tmp_path, monkeypatch):
    """A 6 GiB sparse state.pt used to be hashed in full although the manifest says some KB."""
    import shutil

    path = tmp_path / "sparse"
    shutil.copytree(checkpoint, path)
    with open(path / "state.pt", "r+b") as fh:
        fh.truncate(6 << 30)
    hashed = []
    monkeypatch.setattr(ckpt_mod, "sha256", lambda p: hashed.append(p) or "0" * 64)
    with pytest.raises(CheckpointError, match="bytes, manifest.json says"):
        Trainer.load(path)
    assert hashed == []
