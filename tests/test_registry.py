"""The algorithm registry (pearl_fpga.presets) and what it needs of an algorithm: CONTRIBUTING.md's "Add an
algorithm" says adding one is its learner module plus its registry module; these tests check that every
registered algorithm provides what the runtime reads, and that nothing else in the package names one
algorithm that was added that way."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

from pearl_fpga import presets as registry
from pearl_fpga.algos.api import Learner
from pearl_fpga.algos.heads import ActorHead
from pearl_fpga.algos.registry import learner_class, make_learner
from pearl_fpga.config import TrainConfig

PACKAGE = Path(__file__).resolve().parents[1] / "pearl_fpga"
ADDED_AS_ONE_MODULE = ("sac",)
"""Algorithms added after the redesign: their names may appear only in their own two modules."""


def test_the_registry_lists_every_algorithm_and_the_cli_offers_them():
    from pearl_fpga.cli import build_parser

    assert registry.names() == ("dqn", "ddpg", "td3", "sac", "qlearning", "sarsa")
    assert registry.deep_names() == ("dqn", "ddpg", "td3", "sac")
    assert registry.tabular_names() == ("qlearning", "sarsa")
    for command in (["train"], ["plan"], ["bench", "train"], ["bench", "learner"]):
        assert build_parser().parse_args([*command, "--algo", "sac"]).algo == "sac"
    with pytest.raises(ValueError, match=r"unknown algo 'sacc' \(did you mean sac\?\)"):
        registry.get("sacc")


@pytest.mark.parametrize("name", registry.names())
def test_every_entry_provides_what_the_runtime_reads(name):
    spec = registry.get(name)
    fields = {f.name for f in dataclasses.fields(TrainConfig)} - {"params"}
    assert spec.family in ("deep", "tabular") and spec.action_space in ("discrete", "continuous")
    assert spec.default_env in spec.presets, "the default env needs a preset of its own"
    for env, preset in [("defaults", spec.defaults), *spec.presets.items()]:
        unknown = set(preset) - fields - set(spec.params)
        assert not unknown, f"{name} {env}: {sorted(unknown)} are neither TrainConfig fields nor its own parameters"
    for pname, param in spec.params.items():
        assert pname not in fields, f"{name}.{pname} shadows a TrainConfig field"
        assert param.doc and param.check("t", pname, param.default) == param.default
    cfg = TrainConfig.preset(name)  # validates every default and the default env's preset
    assert cfg.algo == name and cfg.env_id == spec.default_env
    for env in spec.presets:
        TrainConfig.preset(name, env)
    module, _, cls_name = spec.learner.partition(":")
    assert Path(PACKAGE.parent, *module.split(".")).with_suffix(".py").is_file()


@pytest.mark.parametrize("name", registry.deep_names())
def test_every_deep_learner_implements_the_interface(name):
    cls = learner_class(name)
    assert issubclass(cls, Learner) and not inspect.isabstract(cls)
    cfg = TrainConfig.preset(name, net_arch=[8])
    discrete = registry.get(name).action_space == "discrete"
    head = cls.actor_head(cfg, 2)
    assert isinstance(head, ActorHead) and head.discrete == discrete
    net = cls.policy_network(3, 2, cfg)
    learner = cls(cfg, 3, 2, seed=0)
    assert [p.shape for p in net.parameters()] == [p.shape for p in learner.policy_module.parameters()]
    assert set(cls.baseline_kwargs.__code__.co_varnames[:4]) >= {"config", "action_space", "jax"}


@pytest.mark.parametrize("name", ADDED_AS_ONE_MODULE)
def test_an_added_algorithm_is_named_only_in_its_two_modules(name):
    own = {PACKAGE / "algos" / f"{name}.py", PACKAGE / "presets" / f"{name}.py"}
    pattern = re.compile(rf"\b{name}\b", re.IGNORECASE)
    elsewhere = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if p not in own and pattern.search(p.read_text())]
    assert not elsewhere, f"{name} is named outside its learner and registry modules: {elsewhere}"
    assert own <= set(PACKAGE.rglob("*.py"))


def test_deep_and_tabular_trainers_share_one_protocol():
    from pearl_fpga import TabularTrainer, Trainer, TrainerProtocol, make_trainer

    with make_trainer("qlearning", "CliffWalking-v1") as tabular:
        assert isinstance(tabular, TabularTrainer) and isinstance(tabular, TrainerProtocol)
        # what the CLI asks of any trainer, without asking which kind it is
        assert tabular.emulated_board is None and tabular.no_learning_problem(1) is None
    with make_trainer("dqn", "CartPole-v1", placement="fpga-emu:pynq-z2") as deep:
        assert isinstance(deep, Trainer) and isinstance(deep, TrainerProtocol)
        assert deep.emulated_board == "pynq-z2"
        assert "no gradient step can run" in deep.no_learning_problem(1)
    with pytest.raises(ValueError, match=r"qlearning is a tabular algorithm: use pearl_fpga.TabularTrainer"):
        Trainer("qlearning", "CliffWalking-v1")


def test_the_learner_lookup_refuses_what_it_cannot_build(monkeypatch):
    import dataclasses as dc

    from pearl_fpga import host
    from pearl_fpga.algos.sac import SAC
    from pearl_fpga.errors import BackendUnavailable

    with pytest.raises(ValueError, match="qlearning is a tabular algorithm: its learner is "
                                         "pearl_fpga.algos.tabular_learner:TabularLearner, not a deep learner"):
        learner_class("qlearning")
    specs = dict(registry.algorithms())
    specs["dqn"] = dc.replace(specs["dqn"], learner="pearl_fpga.config:TrainConfig")
    monkeypatch.setattr(registry, "algorithms", lambda: specs)
    with pytest.raises(TypeError, match="is not a pearl_fpga.algos.api.DeepLearner"):
        learner_class("dqn")
    monkeypatch.setattr(SAC, "precisions", ("float32",))  # a learner whose GEMMs run in float32 only
    monkeypatch.setattr(host, "bf16_unsupported", lambda device: None)  # on any CPU: the learner's own refusal
    with pytest.raises(BackendUnavailable, match="learn=cpu-bf16: sac's learner runs in float32 only; use learn=cpu"):
        make_learner(TrainConfig.preset("sac", net_arch=[8]), 3, 1, device="cpu-bf16")


@pytest.mark.parametrize("name", registry.tabular_names())
def test_every_tabular_learner_implements_the_interface(name):
    """Q-learning and SARSA: the Learner interface's update gives the kernel's table of the same transitions
    (in order: one update_one each; parts=2: its partitioned update), and the state round-trips."""
    import importlib

    import numpy as np

    from pearl_fpga.algos.tabular_learner import TabularTransitions
    from pearl_fpga.kernels.tabular import TabularQ

    module, _, cls_name = registry.get(name).learner.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    assert issubclass(cls, Learner) and not inspect.isabstract(cls)
    rng = np.random.default_rng(7)
    n = 200
    batch = TabularTransitions(rng.integers(0, 6, n), rng.integers(0, 3, n), rng.normal(size=n), rng.integers(0, 6, n),
                               rng.random(n) < 0.2, rng.integers(0, 3, n))
    for parts in (1, 2):
        cfg = TrainConfig.preset(name, learning_rate=0.25, gamma=0.9, parts=parts)
        learner = cls(cfg, 6, 3)
        assert learner.update(batch) == (None, None)
        one = TabularQ(6, 3, 0.25, 0.9, algo="sarsa" if name == "sarsa" else "q", backend=cfg.backend)
        if parts == 1:
            for s, a, r, s2, done, a2 in zip(*batch, strict=True):
                one.update_one(int(s), int(a), float(r), int(s2), bool(done), int(a2))
        else:
            one.update_partitioned(*batch[:5], a2=batch.a2, parts=2)
            assert learner.last_plan.parts == 2
        assert np.array_equal(learner.state_dict()["table"], one.table)
        back = cls(cfg, 6, 3)
        back.load_state_dict(learner.state_dict())
        assert np.array_equal(back.greedy(), learner.greedy())
