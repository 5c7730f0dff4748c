"""Runs whose results are recorded in tests/records/inline_engine.json, made before the runtime's
redesign (issue 23): the inline engine must give the same bits for a seed after it.

The deep-RL cases use 16-wide networks, so every layer of the fused learner runs in the native loops
(algos/fused.py, THIN), whose bits are the same on every x86 CPU and ISA path (tests/test_native_isa.py);
the actor is the MLP kernel (fixed point) and the replay is the sum-tree kernel. The tabular case is
fixed point throughout.

    python -m tests.inline_record   # rewrite the record (only for a deliberate change of the numerics)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

RECORD = Path(__file__).parent / "records" / "inline_engine.json"

DEEP_CASES: dict[str, dict[str, Any]] = {
    "dqn-per": dict(algo="dqn", env="CartPole-v1", steps=3000,
                    config=dict(net_arch=[16, 16], per=True, learning_starts=500, train_freq=16, gradient_steps=8,
                                buffer_size=4096, eval_freq=1000, eval_episodes=2)),
    "dqn-uniform": dict(algo="dqn", env="CartPole-v1", steps=2000,
                        config=dict(net_arch=[16, 16], learning_starts=300, train_freq=4, gradient_steps=1,
                                    buffer_size=2048, eval_freq=1000, eval_episodes=2, n_envs=2)),
}


def _digest(array: Any) -> str:
    data = np.ascontiguousarray(np.asarray(array))
    return hashlib.sha256(str(data.dtype).encode() + str(data.shape).encode() + data.tobytes()).hexdigest()


def run_deep(case: dict[str, Any]) -> dict[str, Any]:
    from pearl_fpga import Trainer
    from pearl_fpga.config import TrainConfig

    config = TrainConfig.preset(case["algo"], case["env"])
    for key, value in {**case["config"], "engine": "inline", "learner_threads": 1}.items():
        setattr(config, key, value)
    with Trainer(algo=case["algo"], env=case["env"], placement="fpga-emu", config=config, seed=0) as trainer:
        stats = trainer.train(case["steps"])
        params = {name: _digest(p.detach().cpu().numpy()) for name, p in trainer.algo.policy_module.state_dict().items()}
        evaluation = trainer.evaluate(3)
        return {"env_steps": stats.env_steps, "grad_steps": stats.grad_steps, "episodes": stats.episodes,
                "loss": float(stats.loss).hex(), "episode_log": [[s, float(r).hex(), n] for s, r, n in trainer.episode_log],
                "eval_log": [[s, float(m).hex(), float(d).hex()] for s, m, d in trainer.eval_log],
                "final_eval": [float(r).hex() for r in evaluation.returns], "policy": params}


def run_tabular() -> dict[str, Any]:
    from pearl_fpga import TabularTrainer
    from pearl_fpga.config import TrainConfig

    # recorded as 400 episodes with epsilon decaying over the first 70% of them: 5,410 env steps
    config = TrainConfig.preset("qlearning", "FrozenLake-v1", exploration_episodes=280, eval_episodes=20,
                                checkpoint_freq=0)
    with TabularTrainer(algo="qlearning", env="FrozenLake-v1", config=config, seed=0) as trainer:
        trainer.train(5410)
        result = trainer.evaluate(20)
        return {"env_steps": trainer.env_steps,
                "episode_log": [[s, float(r).hex(), n] for s, r, n in trainer.episode_log],
                "q": _digest(trainer.kernel.table), "eval": [float(r).hex() for r in result.returns]}


def run_all() -> dict[str, Any]:
    out = {name: run_deep(case) for name, case in DEEP_CASES.items()}
    out["tabular-qlearning"] = run_tabular()
    return out


if __name__ == "__main__":
    RECORD.write_text(json.dumps(run_all(), indent=1) + "\n")
    print(f"wrote {RECORD}")
