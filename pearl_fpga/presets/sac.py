"""SAC's registry entry: its own parameters, Stable-Baselines3's defaults and rl-baselines3-zoo's presets
(hyperparams/sac.yml, github.com/DLR-RM/rl-baselines3-zoo, master of 2026-04)."""

from __future__ import annotations

import dataclasses
import math

from pearl_fpga.presets.ddpg import UPDATE_SCHEDULE
from pearl_fpga.presets.spec import AlgoSpec, Param, Range

ALGORITHMS = (AlgoSpec(
    name="sac", order=3, family="deep", action_space="continuous", default_env="Pendulum-v1",
    summary="SAC: squashed Gaussian policy, twin critics, automatic entropy tuning",
    learner="pearl_fpga.algos.sac:SAC",
    params={
        "ent_coef": Param("auto", "SAC: the entropy coefficient alpha, or 'auto' to tune it towards target_entropy "
                          "(SB3's default)", range=Range(0.0, math.inf, lo_open=True), choices=("auto",)),
        "ent_coef_init": Param(1.0, "SAC: alpha's starting value when ent_coef is 'auto' (SB3's 'auto_X' is X)",
                               range=Range(0.0, math.inf, lo_open=True)),
        "target_entropy": Param("auto", "SAC: the entropy alpha is tuned towards; 'auto' is -(action size)",
                                range=Range(-math.inf, math.inf), choices=("auto",)),
        "update_schedule": dataclasses.replace(
            UPDATE_SCHEDULE, doc="SAC: where the fused CPU step's parallel parts run (each twin critic's target value, "
            "gradient, Adam step and input gradient): 'serial' on the learner's thread, 'concurrent' one critic on a "
            "second thread, 'auto' measured and re-measured while training, the faster kept (the same bits either way)"),
    },
    # SB3's SAC constructor defaults; target_update_interval counts gradient steps for SAC, as in SB3
    defaults=dict(total_steps=1_000_000, learning_rate=3e-4, buffer_size=1_000_000, learning_starts=100,
                  batch_size=256, gamma=0.99, tau=0.005, train_freq=1, gradient_steps=1, target_update_interval=1,
                  net_arch=[256, 256], max_grad_norm=0.0, eval_freq=2_000, eval_episodes=10, weight_sync_interval=10),
    presets={
        "Pendulum-v1": dict(total_steps=20_000, learning_rate=1e-3),
        # rl-zoo adds gSDE (use_sde, log_std_init -3.67) here; this SAC samples plain Gaussian noise
        "MountainCarContinuous-v0": dict(total_steps=50_000, learning_rate=3e-4, buffer_size=50_000, batch_size=512,
                                         ent_coef=0.1, train_freq=32, gradient_steps=32, gamma=0.9999, tau=0.01,
                                         learning_starts=0, net_arch=[64, 64]),
        # rl-zoo's learning rate here is linear from 7.3e-4 to 0; this one is constant
        "LunarLanderContinuous-v3": dict(total_steps=500_000, learning_rate=7.3e-4, buffer_size=1_000_000,
                                         batch_size=256, ent_coef="auto", gamma=0.99, tau=0.01, train_freq=1,
                                         gradient_steps=1, learning_starts=10_000, net_arch=[400, 300]),
    }),)
