"""The learners of the deep algorithms, one module each, behind one interface
(algos/api.py: Learner, UpdateResult) and their actor heads (algos/heads.py). `make_learner` builds the
one the registry (pearl_fpga.presets) names for a config."""

from __future__ import annotations

from pearl_fpga.algos.api import Learner, UpdateResult
from pearl_fpga.algos.common import Batch, mlp
from pearl_fpga.algos.ddpg import DDPG
from pearl_fpga.algos.dqn import DQN
from pearl_fpga.algos.registry import learner_class, make_learner
from pearl_fpga.algos.td3 import TD3

__all__ = ["Batch", "DDPG", "DQN", "Learner", "TD3", "UpdateResult", "learner_class", "make_learner", "mlp"]
