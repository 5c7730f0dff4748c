"""The learners, one module each, behind one interface (algos/api.py: Learner, DeepLearner, UpdateResult;
tabular.py: TabularLearner) and the deep ones' actor heads (algos/heads.py). `make_learner` builds the
deep learner the registry (pearl_fpga.presets) names for a config."""

from __future__ import annotations

from pearl_fpga.algos.api import DeepLearner, Learner, UpdateResult
from pearl_fpga.algos.common import Batch, mlp
from pearl_fpga.algos.ddpg import DDPG
from pearl_fpga.algos.dqn import DQN
from pearl_fpga.algos.registry import learner_class, make_learner
from pearl_fpga.algos.td3 import TD3

__all__ = ["Batch", "DDPG", "DQN", "DeepLearner", "Learner", "TD3", "UpdateResult", "learner_class", "make_learner", "mlp"]
