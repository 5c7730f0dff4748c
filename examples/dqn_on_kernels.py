"""DQN on CartPole with two kernels in the loop, in one file (cleanrl's style): the MLP kernel
(MLPInfer: the Q-network quantized to fixed point) chooses the actions, and the replay kernel's sum tree
(PrioritizedReplayBuffer) holds the transitions' priorities. The learner is plain torch.

This is what pearl_fpga.Trainer does, without its engines, checkpoints or schedule bookkeeping:

    python examples/dqn_on_kernels.py --total-steps 30000
    python examples/dqn_on_kernels.py --backend numpy    # the kernels' golden numpy references

Every backend of a kernel gives the same bits, so --backend only changes the speed (cpu: the kernels'
C++ build; rtl, pynq, xrt: the RTL under Verilator, or a board, where one is set up).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pearl_fpga import PrioritizedReplayBuffer
from pearl_fpga.kernels import MLPInfer


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    total_steps: int = 20_000
    seed: int = 0
    backend: str = "cpu"  # the kernels' backend: cpu, numpy, rtl, pynq, xrt
    hidden: int = 64  # two hidden layers of this width
    learning_rate: float = 1e-3
    gamma: float = 0.99
    buffer_size: int = 20_000
    batch_size: int = 64
    learning_starts: int = 500  # env steps of random actions before the first gradient step
    train_freq: int = 1  # env steps per gradient step
    target_update_interval: int = 250  # env steps between copies of the Q-network into the target
    actor_sync_interval: int = 10  # gradient steps between re-quantizations of the kernel actor
    start_eps: float = 1.0
    end_eps: float = 0.05
    exploration_fraction: float = 0.3  # part of the run over which epsilon falls from start_eps to end_eps
    per_alpha: float = 0.6  # priority exponent
    per_beta: float = 0.4  # importance-weight exponent, annealed to 1 over the run
    max_grad_norm: float = 10.0
    eval_episodes: int = 10


def q_network(obs_dim: int, n_actions: int, hidden: int) -> nn.Sequential:
    """Linear/ReLU layers: a network the MLP kernel runs as it is."""
    return nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, n_actions))


def epsilon(args: Args, step: int) -> float:
    frac = min(step / (args.exploration_fraction * args.total_steps), 1.0)
    return args.start_eps + frac * (args.end_eps - args.start_eps)


def random_observations(env_id: str, n: int, seed: int) -> np.ndarray:
    """Observations of a random policy: the kernel's quantizer chooses its fixed-point formats on them."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    out = [obs]
    while len(out) < n:
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
        out.append(obs)
    env.close()
    return np.asarray(out, dtype=np.float32)


def evaluate(actor: MLPInfer, env_id: str, episodes: int, seed: int) -> list[float]:
    """Returns of greedy episodes, the kernel choosing every action."""
    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(actor.act(obs))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def train(args: Args) -> dict[str, list[float] | float]:
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # a network this small runs fastest on one thread
    env = gym.make(args.env_id)
    env.action_space.seed(args.seed)
    obs_dim, n_actions = env.observation_space.shape[0], int(env.action_space.n)

    q = q_network(obs_dim, n_actions, args.hidden)
    target = copy.deepcopy(q)
    optimizer = torch.optim.Adam(q.parameters(), lr=args.learning_rate)
    calibration = random_observations(args.env_id, 512, args.seed + 1)
    # The MLP kernel: the Q-network in fixed point, re-quantized every actor_sync_interval gradient steps.
    actor = MLPInfer.from_torch(q, backend=args.backend, calibration=calibration)
    # The replay kernel: priorities (|TD error| + eps)^alpha in a sum tree, sampled in proportion to them.
    replay = PrioritizedReplayBuffer(args.buffer_size, obs_shape=(obs_dim,), action_shape=(), alpha=args.per_alpha,
                                     beta=args.per_beta, beta_steps=args.total_steps, action_dtype=np.int64,
                                     backend=args.backend, seed=args.seed)

    episode_returns: list[float] = []
    episode_return, grad_steps = 0.0, 0
    obs, _ = env.reset(seed=args.seed)
    for step in range(args.total_steps):
        if step < args.learning_starts or rng.random() < epsilon(args, step):
            action = int(env.action_space.sample())
        else:
            action = int(actor.act(obs))
        next_obs, reward, terminated, truncated, _ = env.step(action)
        # `terminated` is the done flag (a time limit is not the end of the task)
        replay.add(obs, action, reward, next_obs, terminated)
        episode_return += float(reward)
        obs = next_obs
        if terminated or truncated:
            episode_returns.append(episode_return)
            episode_return = 0.0
            obs, _ = env.reset()

        if step >= args.learning_starts and step % args.train_freq == 0:
            batch = replay.sample(args.batch_size).to_torch(discrete=True)
            with torch.no_grad():
                next_q = target(batch.next_obs).max(dim=1, keepdim=True).values
                td_target = batch.reward + args.gamma * (1.0 - batch.done) * next_q
            q_taken = q(batch.obs).gather(1, batch.action)
            # Huber loss, each sample weighted by its importance weight (prioritized replay's correction)
            loss = (batch.weights * F.smooth_l1_loss(q_taken, td_target, reduction="none")).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(q.parameters(), args.max_grad_norm)
            optimizer.step()
            replay.update_priorities(batch.indices, (q_taken - td_target).abs().squeeze(1).detach().numpy())
            grad_steps += 1
            if grad_steps % args.actor_sync_interval == 0:
                actor.load_weights(q)
        if step % args.target_update_interval == 0:
            target.load_state_dict(q.state_dict())
    env.close()

    actor.load_weights(q)
    states = replay.sample(min(len(replay), 1024)).obs
    with torch.no_grad():
        torch_greedy = q(torch.as_tensor(states)).argmax(dim=1).numpy()
    return {"episode_returns": episode_returns,
            "eval_returns": evaluate(actor, args.env_id, args.eval_episodes, args.seed + 10_000),
            "kernel_agreement": float(np.mean(actor.act(states) == torch_greedy))}


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in dataclasses.fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


if __name__ == "__main__":
    args = parse_args()
    result = train(args)
    returns = result["episode_returns"]
    assert isinstance(returns, list)
    print(f"{len(returns)} episodes; mean return of the last 10: {np.mean(returns[-10:]):.1f}")
    print(f"greedy evaluation on the kernel actor: {np.mean(result['eval_returns']):.1f} "
          f"over {args.eval_episodes} episodes")
    print(f"kernel and torch choose the same action on {100 * float(result['kernel_agreement']):.1f}% of "
          "replayed states")
