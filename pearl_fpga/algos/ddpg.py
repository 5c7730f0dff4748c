"""DDPG: deterministic tanh actor, Q critic on (obs, action), Polyak-averaged targets.

Matches Stable-Baselines3's DDPG, which is its TD3 with one critic, no target policy smoothing and
policy delay 1: MSE critic loss, actor loss -Q(s, pi(s)), both target networks Polyak-averaged with
`tau` after every gradient step. The update code is TD3's (pearl_fpga.algos.td3), including the
default difference `concurrent_updates`, the lean update path and the fused CPU step.
"""

from __future__ import annotations

from typing import Any

from pearl_fpga.config import TrainConfig
from pearl_fpga.algos.td3 import TD3


class DDPG(TD3):
    """The DDPG learner: `learn(batch)` runs one critic and one actor step and the target updates."""

    n_critics = 1

    @staticmethod
    def _delay_and_smoothing(config: TrainConfig) -> tuple[int, float, float]:
        """Every step updates the actor and the targets; the TD target has no smoothing noise."""
        return 1, 0.0, 0.0
