"""DDPG's registry entry: Stable-Baselines3's defaults plus PEARL's runtime settings (evaluation, weight
sync), and rl-baselines3-zoo's presets (hyperparams/ddpg.yml, master of 2026-04)."""

from __future__ import annotations

from pearl_fpga.presets.spec import AlgoSpec, Param

UPDATE_SCHEDULE = Param(
    "auto", "DDPG, TD3: where a gradient step's parallel parts run (the actor's half of a concurrent update, "
    "TD3's critics after Q1): 'serial' on the learner's thread, 'concurrent' on a second thread beside it, "
    "'auto' measured and re-measured while training, the faster kept (the same bits either way)",
    kind="str", choices=("auto", "serial", "concurrent"))
"""The actor-critic learners' update schedule (algos/td3.py, runtime/update_schedule.py)."""

ACTOR_CRITIC_DEFAULTS = dict(
    total_steps=1_000_000, learning_rate=1e-3, buffer_size=1_000_000, learning_starts=100, batch_size=256,
    gamma=0.99, tau=0.005, train_freq=1, gradient_steps=1, action_noise_std=0.1, net_arch=[400, 300],
    max_grad_norm=0.0, eval_freq=2_000, eval_episodes=10, weight_sync_interval=10)
"""SB3's DDPG constructor defaults (TD3 adds its delay and smoothing)."""

ZOO = {
    "Pendulum-v1": dict(total_steps=20_000, gamma=0.98, buffer_size=200_000, learning_starts=10_000,
                        action_noise_std=0.1, learning_rate=1e-3, net_arch=[400, 300]),
    # rl-zoo uses Ornstein-Uhlenbeck noise of std 0.5 here; PEARL's DDPG has Gaussian noise, of the same std
    "MountainCarContinuous-v0": dict(total_steps=300_000, action_noise_std=0.5, learning_rate=1e-3, batch_size=256,
                                     net_arch=[400, 300]),
    "LunarLanderContinuous-v3": dict(total_steps=300_000, gamma=0.98, buffer_size=200_000, learning_starts=10_000,
                                     action_noise_std=0.1, learning_rate=1e-3, net_arch=[400, 300]),
}
"""rl-zoo's ddpg.yml; its td3.yml gives these envs the same settings."""

ALGORITHMS = (AlgoSpec(
    name="ddpg", order=1, family="deep", action_space="continuous", default_env="Pendulum-v1",
    summary="DDPG: deterministic tanh actor, Q critic, Polyak-averaged targets, Gaussian action noise",
    learner="pearl_fpga.algos.ddpg:DDPG", defaults=dict(ACTOR_CRITIC_DEFAULTS), presets=ZOO,
    params={"update_schedule": UPDATE_SCHEDULE}),)
