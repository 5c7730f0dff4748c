"""`pearl-fpga bench tabular-policies`: the policies the tabular kernel learns with each preset.

For Q-learning and SARSA on Taxi-v4, CliffWalking-v1 and FrozenLake8x8-v1 (slippery): train with the
preset (`pearl_fpga.config.TrainConfig.preset(algo, env)`, seed 0), then evaluate the greedy policy over
2,000 episodes with their own seeds and exactly from the env's transition model, and check the issue's
targets (Taxi success 1.0 and return >= 7.9, CliffWalking return -13, FrozenLake8x8 success >= 0.85)
for Q-learning. SARSA learns the values of its exploring behaviour, so its targets are not the same.
Training time depends on the machine; the policies do not (every backend computes the same table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pearl_fpga.bench.meta import measured_record


ENVS = ("Taxi-v4", "CliffWalking-v1", "FrozenLake8x8-v1")
ALGOS = ("qlearning", "sarsa")
# Q-learning's targets: (mean return at least, success at least), checked on the exact evaluation
TARGETS: dict[str, tuple[float | None, float | None]] = {
    "Taxi-v4": (7.9, 1.0), "CliffWalking-v1": (-13.0, None), "FrozenLake8x8-v1": (None, 0.85)}


@dataclass(frozen=True)
class TabularPoliciesBench:
    eval_episodes: int = 2000  # sampled evaluation episodes
    envs: tuple[str, ...] = ENVS
    algos: tuple[str, ...] = ALGOS
    backend: str = "auto"  # TabularQ backend for training (auto: cpu if built)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.eval_episodes < 1:
            raise ValueError("eval_episodes must be >= 1")


def _met(env_id: str, ret: float, success: float) -> bool | None:
    want_ret, want_success = TARGETS.get(env_id, (None, None))
    if want_ret is None and want_success is None:
        return None
    ok = True
    if want_ret is not None:
        ok = ok and ret >= want_ret - 5e-3  # the targets are stated to two decimals
    if want_success is not None:
        ok = ok and success >= want_success - 1e-9
    return ok


def measure(args: TabularPoliciesBench, log: Callable[[str], None]) -> dict[str, Any]:
    from pearl_fpga import TabularTrainer
    from pearl_fpga.config import TrainConfig

    rows = []
    for env_id in args.envs:
        for algo in args.algos:
            cfg = TrainConfig.preset(algo, env_id, eval_episodes=args.eval_episodes, checkpoint_freq=0,
                                     backend=args.backend)
            with TabularTrainer(algo, env_id, config=cfg, seed=args.seed) as trainer:
                t0 = time.perf_counter()
                trainer.train(cfg.total_steps)
                train_s = time.perf_counter() - t0
                sampled = trainer.evaluate(args.eval_episodes)
                exact_ret, exact_success = trainer.exact_evaluation()
                row = {"env": env_id, "algo": algo, "episodes": trainer.episodes, "env_steps": trainer.env_steps,
                       "alpha": cfg.learning_rate, "gamma": cfg.gamma,
                       "backend": trainer.kernel.backend_name, "train_s": train_s, "eval_return": sampled.mean,
                       "eval_success": sampled.success_rate, "exact_return": exact_ret, "exact_success": exact_success,
                       "target_met": _met(env_id, exact_ret, exact_success) if algo == "qlearning" else None}
            rows.append(row)
            log(f"  {env_id} {algo}: {trainer.episodes:,} episodes in {train_s:.1f} s, exact return {exact_ret:.3f}, "
                f"success {exact_success:.3f}")
    return {"eval_episodes": args.eval_episodes, "seed": args.seed, "targets": {k: list(v) for k, v in TARGETS.items()},
            "rows": rows}


def run(config: TabularPoliciesBench, argv: list[str] | None = None,
        log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Train and evaluate every env and algorithm of `config`; the JSON record (argv: the command line)."""
    return measured_record("tabular-policies", lambda: measure(config, log), argv)


def report(record: dict[str, Any], console: Any) -> None:
    """One line per env and algorithm, printed to a rich Console."""
    for r in record["results"]["rows"]:
        met = {True: "target met", False: "target NOT met", None: ""}[r["target_met"]]
        console.print(f"{r['env']:<18} {r['algo']:<10} exact return {r['exact_return']:9.3f}  success "
                      f"{r['exact_success']:.3f}  sampled {r['eval_return']:9.3f} / {r['eval_success']:.3f}  {met}",
                      markup=False)
