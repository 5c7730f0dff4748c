"""Q-learning's and SARSA's registry entries: a Q table on the TabularQ kernel, tuned here per toy-text
env (docs/tabular.md has the policies they reach).

Each budget covers the episodes the settings were tuned for (Taxi 10,000, CliffWalking 1,000,
FrozenLake 10,000, FrozenLake8x8 20,000) with room to spare; epsilon decays over the first half of those
episodes (Taxi, CliffWalking) or 70% of them (FrozenLake, whose slippery ice needs more exploring).
Evaluation runs only at the end of a run (eval_freq 0), over more episodes than the deep runs (cheap)."""

from __future__ import annotations

from pearl_fpga.presets.spec import AlgoSpec

TABULAR_PRESETS: dict[str, dict] = {
    "Taxi-v4": dict(total_steps=350_000, learning_rate=0.5, gamma=0.99, exploration_episodes=5_000,
                    success_reward=20.0),
    "CliffWalking-v1": dict(total_steps=150_000, learning_rate=0.5, gamma=0.99, exploration_episodes=500,
                            success_reward=-1.0, max_episode_steps=1000),
    "FrozenLake8x8-v1": dict(total_steps=1_600_000, learning_rate=0.05, gamma=0.999, exploration_episodes=14_000,
                             success_reward=1.0),
    "FrozenLake-v1": dict(total_steps=250_000, learning_rate=0.05, gamma=0.99, exploration_episodes=7_000,
                          success_reward=1.0),
}
_DEFAULTS = dict(learning_rate=0.5, gamma=0.99, exploration_initial_eps=1.0, exploration_final_eps=0.01,
                 eval_freq=0, eval_episodes=100)
# SARSA learns the values of its exploring behaviour; on Taxi it needs a smaller step and twice the
# episodes (20,000) to settle on the shortest routes.
_SARSA = {env: dict(settings) for env, settings in TABULAR_PRESETS.items()}
_SARSA["Taxi-v4"].update(total_steps=800_000, learning_rate=0.2, exploration_episodes=10_000)

ALGORITHMS = (
    AlgoSpec(name="qlearning", order=10, family="tabular", action_space="discrete", default_env="Taxi-v4",
             summary="tabular Q-learning on the TabularQ kernel (discrete states and actions)",
             learner="pearl_fpga.algos.tabular_learner:TabularLearner", defaults=dict(_DEFAULTS),
             presets={env: dict(s) for env, s in TABULAR_PRESETS.items()}),
    AlgoSpec(name="sarsa", order=11, family="tabular", action_space="discrete", default_env="Taxi-v4",
             summary="tabular SARSA on the TabularQ kernel (discrete states and actions)",
             learner="pearl_fpga.algos.tabular_learner:TabularLearner", defaults=dict(_DEFAULTS), presets=_SARSA),
)
