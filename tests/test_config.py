"""TrainConfig: rl-zoo presets, validation, JSON round trip, SB3's training schedule."""

from __future__ import annotations

import json

import pytest

from pearl_fpga.config import TrainConfig


def test_dqn_preset_is_rl_zoo_cartpole():
    c = TrainConfig.preset("dqn")
    assert (c.env_id, c.total_steps, c.learning_rate, c.batch_size, c.buffer_size) == ("CartPole-v1", 50_000, 2.3e-3, 64, 100_000)
    assert (c.learning_starts, c.gamma, c.target_update_interval, c.train_freq, c.gradient_steps) == (1000, 0.99, 10, 256, 128)
    assert (c.exploration_fraction, c.exploration_final_eps, c.net_arch, c.max_grad_norm) == (0.16, 0.04, [256, 256], 10.0)


def test_ddpg_preset_is_rl_zoo_pendulum():
    c = TrainConfig.preset("ddpg")
    assert (c.env_id, c.total_steps, c.learning_rate, c.buffer_size, c.learning_starts) == ("Pendulum-v1", 20_000, 1e-3, 200_000, 10_000)
    assert (c.gamma, c.gradient_steps, c.train_freq, c.action_noise_std, c.net_arch) == (0.98, 1, 1, 0.1, [400, 300])
    assert (c.batch_size, c.tau) == (256, 0.005)


@pytest.mark.parametrize("algo,env,expected", [
    ("dqn", "MountainCar-v0", dict(total_steps=120_000, learning_rate=4e-3, batch_size=128, buffer_size=10_000,
                                   gamma=0.98, target_update_interval=600, train_freq=16, gradient_steps=8)),
    ("dqn", "Acrobot-v1", dict(total_steps=100_000, learning_rate=6.3e-4, learning_starts=0, train_freq=4,
                               gradient_steps=4, target_update_interval=250, exploration_final_eps=0.1)),
    ("dqn", "LunarLander-v3", dict(total_steps=100_000, batch_size=128, buffer_size=50_000, gradient_steps=4)),
    ("ddpg", "MountainCarContinuous-v0", dict(total_steps=300_000, action_noise_std=0.5, gamma=0.99,
                                              buffer_size=1_000_000, learning_starts=100)),
    ("ddpg", "LunarLanderContinuous-v3", dict(total_steps=300_000, gamma=0.98, learning_starts=10_000)),
])
def test_presets_per_env_are_rl_zoo(algo, env, expected):
    from pearl_fpga.config import preset_note

    c = TrainConfig.preset(algo, env)
    assert c.env_id == env and preset_note(algo, env) is None
    assert {k: getattr(c, k) for k in expected} == expected


def test_env_without_preset_says_whose_it_uses(tmp_path, capsys):
    from pearl_fpga.config import preset_note
    from pearl_fpga.commands.config_args import build_config
    import argparse

    import gymnasium as gym

    assert preset_note("dqn", "NoSuchCorridor-v0") is None  # not an env: making it says so, with no note before
    if "Corridor-v0" not in gym.registry:
        gym.register("Corridor-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    assert preset_note("dqn", "Corridor-v0").startswith("no preset for Corridor-v0: using CartPole-v1's")
    assert preset_note("dqn", "my_envs:Corridor-v1").startswith("no preset")  # imported when made
    config = build_config(argparse.Namespace(set=[], config=None), "dqn", "Corridor-v0")
    assert config.env_id == "Corridor-v0" and config.learning_rate == TrainConfig.preset("dqn").learning_rate
    assert capsys.readouterr().err.count("no preset for Corridor-v0: using CartPole-v1's") == 1


def test_td3_preset_is_rl_zoo_pendulum_with_sb3s_td3_defaults():
    c = TrainConfig.preset("td3")
    ddpg = TrainConfig.preset("ddpg")
    same = ("env_id", "total_steps", "learning_rate", "buffer_size", "learning_starts", "gamma", "gradient_steps",
            "train_freq", "action_noise_std", "net_arch", "batch_size", "tau")
    assert {f: getattr(c, f) for f in same} == {f: getattr(ddpg, f) for f in same}  # rl-zoo: td3.yml = ddpg.yml here
    assert (c.algo, c.policy_delay, c.target_policy_noise, c.target_noise_clip) == ("td3", 2, 0.2, 0.5)
    assert c.concurrent_updates is False  # SB3's order: the actor's gradient on the updated critics


@pytest.mark.parametrize("field,value", [("policy_delay", 0), ("policy_delay", 1001), ("target_policy_noise", -0.1),
                                         ("target_policy_noise", 1.5), ("target_noise_clip", -1.0),
                                         ("target_noise_clip", 2.0)])
def test_td3_fields_are_range_checked(field, value):
    with pytest.raises(ValueError, match=field):
        TrainConfig.preset("td3", **{field: value})


@pytest.mark.parametrize("field,value,words", [
    ("learning_rate", -1.0, "learning_rate"),
    ("gamma", 1.5, "gamma"),
    ("batch_size", 0, "batch_size"),
    ("net_arch", [], "net_arch"),
    ("net_arch", [64, 0], r"positive layer widths, e\.g\. \[64,64\]"),
    ("per", "True", "true or false"),
    ("train_freq", 2.5, "integer"),
    ("tau", 0.0, "tau"),
    ("learning_rate", float("nan"), "finite"),
])
def test_bad_values_raise_naming_the_field(field, value, words):
    with pytest.raises(ValueError, match=words):
        TrainConfig.preset("dqn", **{field: value})


def test_unknown_algo_is_rejected():
    with pytest.raises(ValueError, match="algo"):
        TrainConfig(algo="ppo")
    with pytest.raises(ValueError, match="unknown algo"):
        TrainConfig.preset("ppo")


def test_batch_larger_than_buffer_is_rejected():
    with pytest.raises(ValueError, match="exceeds buffer_size"):
        TrainConfig.preset("dqn", buffer_size=32, batch_size=64)


def test_dict_and_json_round_trip(tmp_path):
    c = TrainConfig.preset("ddpg", per=True, workers=2, net_arch=[64, 32])
    assert TrainConfig.from_dict(c.to_dict()) == c
    c.to_json(tmp_path / "c.json")
    assert TrainConfig.from_json(tmp_path / "c.json") == c
    assert json.loads((tmp_path / "c.json").read_text())["net_arch"] == [64, 32]


def test_json_overrides_preset_and_rejects_unknown_fields(tmp_path):
    (tmp_path / "a.json").write_text('{"algo": "dqn", "batch_size": 32}')
    c = TrainConfig.from_json(tmp_path / "a.json")
    assert c.batch_size == 32 and c.train_freq == 256
    (tmp_path / "b.json").write_text('{"batch_sise": 32}')
    with pytest.raises(ValueError, match="batch_sise"):
        TrainConfig.from_json(tmp_path / "b.json")
    (tmp_path / "c.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        TrainConfig.from_json(tmp_path / "c.json")
    with pytest.raises(ValueError, match="unknown TrainConfig field"):
        TrainConfig.from_dict({"nope": 1})


def test_epsilon_schedule_is_linear_then_flat():
    c = TrainConfig.preset("dqn", total_steps=1000, exploration_fraction=0.5, exploration_final_eps=0.1)
    assert c.epsilon(0) == 1.0
    assert c.epsilon(250) == pytest.approx(0.55)
    assert c.epsilon(500) == pytest.approx(0.1)
    assert c.epsilon(900) == pytest.approx(0.1)


def test_network_limits_are_the_mlp_kernels_where_it_runs():
    """A config takes any network torch takes; the MLP kernel's descriptor (pearl_fpga.spec.mlp: the widest
    build, the cpu extension's, and MAX_LAYERS linear layers) bounds only the placements that act on it."""
    from pearl_fpga.runtime.emulation import KernelFitError, check_fits
    from pearl_fpga.runtime.placement import parse_placement
    from pearl_fpga.spec import mlp as mlp_spec

    widest = [mlp_spec.CPU_MAX_WIDTH] * (mlp_spec.MAX_LAYERS - 1)
    for net in (widest, [mlp_spec.CPU_MAX_WIDTH + 1], widest + [8]):
        config = TrainConfig.preset("dqn", net_arch=net)
        assert config.net_arch == net
        check_fits(config, 4, 2, parse_placement("cpu"))
    check_fits(TrainConfig.preset("dqn", net_arch=widest), 4, 2, parse_placement("cpu-kernel"))
    with pytest.raises(KernelFitError, match=f"holds width {mlp_spec.CPU_MAX_WIDTH}; the network 4-{mlp_spec.CPU_MAX_WIDTH + 1}-2"):
        check_fits(TrainConfig.preset("dqn", net_arch=[mlp_spec.CPU_MAX_WIDTH + 1]), 4, 2, parse_placement("cpu-kernel"))
    with pytest.raises(KernelFitError, match=f"holds {mlp_spec.MAX_LAYERS} linear layers.*--placement act=cpu"):
        check_fits(TrainConfig.preset("dqn", net_arch=widest + [8]), 4, 2, parse_placement("cpu-kernel"))


def test_tabular_fields_are_refused_by_the_deep_algorithms():
    with pytest.raises(ValueError, match="TrainConfig.max_episode_steps is read by qlearning and sarsa only; dqn would "
                                         "ignore it"):
        TrainConfig.preset("dqn", max_episode_steps=200)
    assert TrainConfig.preset("sarsa", "CliffWalking-v1").max_episode_steps == 1000
