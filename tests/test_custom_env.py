"""docs/training.md's custom-env recipe: an env registered in an importable module, named
"module:EnvId", trains with worker processes (each worker imports the module through gymnasium)."""

from __future__ import annotations

from pearl_fpga import Trainer, TrainConfig


def test_custom_env_from_an_importable_module_trains_with_workers():
    config = TrainConfig.preset("dqn", learning_starts=32, train_freq=16, gradient_steps=1, net_arch=[8],
                                buffer_size=256, batch_size=8, eval_freq=0, eval_episodes=1, workers=1)
    with Trainer("dqn", "corridor_env:Corridor-v0", placement="cpu", config=config) as trainer:
        trainer.train(64)
        assert trainer.env_steps >= 64 and trainer.worker_restarts == 0
        assert trainer.evaluate(1).returns


def test_custom_env_without_preset_says_whose_it_uses():
    import pytest

    with pytest.warns(UserWarning, match="no preset for corridor_env:Corridor-v0: using CartPole-v1's"):
        Trainer("dqn", "corridor_env:Corridor-v0", placement="cpu").close()
