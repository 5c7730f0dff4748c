"""Act on a board with a policy trained on a host: no torch here, only numpy, gymnasium and pearl_fpga's
board install (the PYNQ-Z2 is a 32-bit ARM board for which PyTorch publishes no wheel).

On the training host:

    pearl-fpga train --algo dqn --env CartPole-v1 --steps 50000 --logdir runs/cartpole
    pearl-fpga export runs/cartpole --out policy     # policy/kernel/: policy.json + policy.npz

Copy policy/kernel/ to the board, then there (pip install pearl_fpga gymnasium; the bitstream folder as in
docs/hardware.md):

    python examples/deploy_on_board.py policy/kernel --backend pynq --episodes 5

--backend cpu or numpy runs the same policy on the host, bit for bit the same actions. The env is the
one the policy was trained on (its manifest says which) unless --env names another with the same spaces.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import gymnasium as gym
import numpy as np

from pearl_fpga.kernels import MLPInfer


def run_episodes(policy: MLPInfer, env_id: str, episodes: int, seed: int) -> dict[str, Any]:
    """`episodes` episodes of `env_id`, acting with `policy.act` (greedy for DQN, the scaled tanh actor for
    DDPG and TD3); the returns and every action taken."""
    env = gym.make(env_id)
    n_obs = int(np.prod(env.observation_space.shape))
    if n_obs != policy.n_in:
        raise SystemExit(f"{env_id} has {n_obs} observations; the policy takes {policy.n_in}")
    returns, actions = [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done, total = False, 0.0
        while not done:
            action = policy.act(np.asarray(obs, dtype=np.float32).reshape(-1))
            actions.append(np.asarray(action).tolist())
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return {"env_id": env_id, "returns": returns, "mean_return": float(np.mean(returns)), "actions": actions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("policy", help="the kernel/ folder that pearl-fpga export wrote")
    parser.add_argument("--backend", default="pynq", help="pynq (a Zynq board), xrt (Alveo), cpu or numpy (default pynq)")
    parser.add_argument("--env", default=None, help="gymnasium env id (default: the one the policy was trained on)")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the returns and actions as JSON")
    args = parser.parse_args(argv)

    policy = MLPInfer.load(args.policy, backend=args.backend)
    env_id = args.env or policy.info.get("env_id")
    if not env_id:
        raise SystemExit("the policy does not say which env it was trained on: pass --env")
    result = run_episodes(policy, env_id, args.episodes, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{policy} on {env_id}: returns {', '.join(f'{r:.1f}' for r in result['returns'])} "
              f"(mean {result['mean_return']:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
