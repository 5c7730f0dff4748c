"""TD3's registry entry: SB3's TD3 is DDPG's settings plus the delay and the smoothing noise, and its
update order (the actor's gradient on the updated critics); rl-zoo's td3.yml gives the continuous
control envs DDPG's presets."""

from __future__ import annotations

from pearl_fpga.presets.ddpg import ACTOR_CRITIC_DEFAULTS, UPDATE_SCHEDULE, ZOO
from pearl_fpga.presets.spec import AlgoSpec

ALGORITHMS = (AlgoSpec(
    name="td3", order=2, family="deep", action_space="continuous", default_env="Pendulum-v1",
    summary="TD3: twin critics, delayed actor and target updates, target policy smoothing",
    learner="pearl_fpga.algos.td3:TD3",
    defaults=dict(ACTOR_CRITIC_DEFAULTS, policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5,
                  concurrent_updates=False),
    presets={env: dict(settings) for env, settings in ZOO.items()}, params={"update_schedule": UPDATE_SCHEDULE}),)
