"""DQN's registry entry: Stable-Baselines3's defaults and rl-baselines3-zoo's presets (hyperparams/dqn.yml,
github.com/DLR-RM/rl-baselines3-zoo, master of 2026-04; its gradient_steps -1, "as many as env steps
collected", is train_freq here: one env per actor)."""

from __future__ import annotations

import dataclasses

from pearl_fpga.presets.ddpg import UPDATE_SCHEDULE
from pearl_fpga.presets.spec import AlgoSpec

_ACROBOT = dict(total_steps=100_000, learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0,
                gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=4, exploration_fraction=0.12,
                exploration_final_eps=0.1, net_arch=[256, 256])

ALGORITHMS = (AlgoSpec(
    name="dqn", order=0, family="deep", action_space="discrete", default_env="CartPole-v1",
    summary="double DQN: online and target Q-networks, Huber loss, epsilon-greedy exploration",
    learner="pearl_fpga.algos.dqn:DQN",
    defaults=dict(total_steps=1_000_000, learning_rate=1e-4, buffer_size=1_000_000, learning_starts=100, batch_size=32,
                  gamma=0.99, tau=1.0, train_freq=4, gradient_steps=1, target_update_interval=10_000,
                  exploration_fraction=0.1, exploration_initial_eps=1.0, exploration_final_eps=0.05,
                  max_grad_norm=10.0, net_arch=[64, 64], eval_freq=5_000),
    presets={
        "CartPole-v1": dict(
            total_steps=50_000, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000, learning_starts=1_000,
            gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
            exploration_final_eps=0.04, net_arch=[256, 256]),
        "MountainCar-v0": dict(
            total_steps=120_000, learning_rate=4e-3, batch_size=128, buffer_size=10_000, learning_starts=1_000,
            gamma=0.98, target_update_interval=600, train_freq=16, gradient_steps=8, exploration_fraction=0.2,
            exploration_final_eps=0.07, net_arch=[256, 256]),
        "Acrobot-v1": _ACROBOT,
        "LunarLander-v3": dict(_ACROBOT),  # rl-zoo gives LunarLander Acrobot's settings
    },
    params={"update_schedule": dataclasses.replace(
        UPDATE_SCHEDULE,
        doc="DQN: where the fused CPU step's parallel parts run (a wide layer's online and target GEMMs, its weight "
        "and input gradients, Adam's update): 'auto' (default) measures both schedules while training; 'serial' "
        "on the learner's thread, its intra-op threads chosen by measurement; 'concurrent' split with a second "
        "thread (in float32 the fused step's native helper) (the same bits either way)")},
    ),)
