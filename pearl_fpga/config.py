"""Training configuration: every hyper-parameter of a run in one validated dataclass.

The CLI, the Python API and the checkpoints share it. `TrainConfig.preset(algo, env_id)` gives the
rl-baselines3-zoo settings (DQN CartPole-v1, DDPG and TD3 Pendulum-v1); counters follow Stable-Baselines3:

- `train_freq` and `learning_starts` count env steps: after every `train_freq` collected env steps,
  once more than `learning_starts` have been collected, the learner runs `gradient_steps` updates.
- `target_update_interval` (DQN) counts env steps too, as SB3's `_on_step` does: the target network
  is copied from the online network whenever the env-step counter is a multiple of it.
- the exploration epsilon decays linearly from `exploration_initial_eps` to
  `exploration_final_eps` over the first `exploration_fraction * total_steps` env steps.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALGOS = ("dqn", "ddpg", "td3")
ENGINES = ("inline", "processes", "ray")
"""Execution engines (pearl_fpga.runtime.engines): where actors and replay run."""


@dataclass
class TrainConfig:
    """Hyper-parameters and runtime settings of one training run (validated on creation)."""

    algo: str = "dqn"
    """Algorithm: "dqn" (double DQN, discrete actions), "ddpg" or "td3" (continuous actions)."""
    env_id: str = "CartPole-v1"
    """Gymnasium environment id."""
    total_steps: int = 50_000
    """Env steps of the whole run; also the horizon of the epsilon schedule (as SB3's total_timesteps)."""
    learning_rate: float = 2.3e-3
    """Adam learning rate (actor and critics for DDPG and TD3)."""
    buffer_size: int = 100_000
    """Replay capacity in transitions."""
    learning_starts: int = 1_000
    """Env steps collected with random actions before the first gradient step."""
    batch_size: int = 64
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount factor."""
    tau: float = 1.0
    """Polyak coefficient of the target update (1.0 = hard copy, DQN; 0.005 for DDPG)."""
    train_freq: int = 256
    """Env steps between two training rounds."""
    gradient_steps: int = 128
    """Gradient steps per training round (update-to-data ratio = gradient_steps / train_freq)."""
    target_update_interval: int = 10
    """DQN: env steps between target-network copies (SB3 semantics). Ignored by DDPG (Polyak every step)."""
    exploration_fraction: float = 0.16
    """DQN: fraction of total_steps over which epsilon decays."""
    exploration_initial_eps: float = 1.0
    """DQN: epsilon at step 0."""
    exploration_final_eps: float = 0.04
    """DQN: epsilon after the decay."""
    max_grad_norm: float = 10.0
    """DQN: gradient-norm clip (SB3 default); 0 disables it."""
    double_q: bool = True
    """DQN: double-DQN target (online net picks the next action, target net values it)."""
    concurrent_updates: bool = True
    """DDPG: compute the actor's and the critic's gradients of a step concurrently (two threads), the
    actor's on the critic of the step's start, as OpenAI Baselines' DDPG; False: the actor's after the
    critic's update, as SB3. The same for TD3 on its actor-update steps (its preset: False, SB3's
    order). Ignored by DQN."""
    flush_subnormals: bool = True
    """Learner: subnormal floats flushed to zero during each gradient step (FTZ/DAZ, as XLA and TensorFlow
    run the CPU): Adam's second moments of small gradients fill with them, and on many x86 CPUs each
    operation on one costs a microcode assist. False keeps IEEE gradual underflow (slower)."""
    action_noise_std: float = 0.1
    """DDPG, TD3: std of the Gaussian exploration noise, in the actor's [-1, 1] action scale."""
    policy_delay: int = 2
    """TD3: critic steps per actor step; the targets are averaged on the actor's steps only (1..1000).
    DQN and DDPG ignore the three TD3 fields (DDPG is TD3 with delay 1 and no smoothing)."""
    target_policy_noise: float = 0.2
    """TD3: std of the Gaussian noise added to the target actor's next action, in the [-1, 1] action
    scale (target policy smoothing; 0 turns it off; 0..1)."""
    target_noise_clip: float = 0.5
    """TD3: the smoothing noise is clipped to +-target_noise_clip (0..1)."""
    net_arch: list[int] = field(default_factory=lambda: [256, 256])
    """Hidden layer widths of the Q-network / actor / critic (ReLU)."""
    per: bool = False
    """Prioritized replay through the replay kernel (PrioritizedReplayBuffer) instead of uniform."""
    per_alpha: float = 0.6
    """PER: priority exponent."""
    per_beta: float = 0.4
    """PER: initial importance-sampling exponent (annealed to 1.0 over total_steps)."""
    per_eps: float = 1e-6
    """PER: added to |TD error| so that no priority is zero."""
    n_envs: int = 1
    """Environments stepped together by each actor (1 = SB3's default)."""
    workers: int = 0
    """Actor worker processes; 0 runs everything in-process (deterministic, SB3's exact schedule)."""
    max_actor_lag: int = 0
    """Workers: env steps the actors may run ahead of the sequential schedule (0 = one train_freq round)."""
    weight_sync_interval: int = 0
    """Learner steps between weight broadcasts to the actors (0 = once per training round)."""
    eval_freq: int = 5_000
    """Env steps between periodic evaluations that keep the best policy (0 disables them)."""
    eval_episodes: int = 20
    """Episodes per periodic evaluation (deterministic policy)."""
    checkpoint_freq: int = 0
    """Env steps between periodic checkpoints (0 = only at the end and on Ctrl-C)."""
    learner_threads: int = 0
    """torch intra-op threads of the learner; 0 = chosen by measurement while training (runtime.threads)."""
    nonfinite_transitions: str = "error"
    """What a transition with a NaN or infinite value (obs, reward, action) does at replay insert: "error"
    stops the run naming the env and the field; "drop" counts it (faults: nonfinite_dropped) and drops it."""
    # The distribution policy: where actors and replay run. The algorithm does not see these fields.
    engine: str = "auto"
    """Execution engine: "inline", "processes" (`workers` actor processes), "ray" (`actors` Ray actors and
    `replay_shards` replay shards), or "auto" (processes when workers > 0, else inline)."""
    actors: int = 2
    """Ray engine: env actors (each steps `n_envs` envs)."""
    replay_shards: int = 1
    """Ray engine: replay shards (Ray actors); capacity buffer_size / replay_shards each."""
    actor_resources: dict[str, float] = field(default_factory=dict)
    """Ray engine: resources of each env actor, e.g. {"CPU": 1, "fpga": 1} for an actor on a board, {"GPU": 1};
    empty (the default): a share of the cluster's CPUs (ray_cluster.size_to_cluster), named in the summary."""
    shard_resources: dict[str, float] = field(default_factory=dict)
    """Ray engine: resources of each replay shard (e.g. {"CPU": 1, "fpga": 1} for a shard on a board); empty
    (the default): half an env actor's share of the cluster's CPUs."""
    actor_priorities: bool = False
    """Ray engine, DQN with per: actors compute the initial priorities of their transitions (Ape-X)."""
    ray_address: str = ""
    """Ray engine: "" starts a local Ray instance, "auto" joins the cluster of `ray start`, or host:port."""

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, algo: str = "dqn", env_id: str | None = None, **overrides: Any) -> TrainConfig:
        """The rl-zoo hyper-parameters for `algo` (DQN CartPole-v1, DDPG and TD3 Pendulum-v1) plus overrides."""
        algo = str(algo).lower()
        if algo == "dqn":
            base: dict[str, Any] = dict(
                algo="dqn", env_id="CartPole-v1", total_steps=50_000, learning_rate=2.3e-3,
                buffer_size=100_000, learning_starts=1_000, batch_size=64, gamma=0.99, tau=1.0,
                train_freq=256, gradient_steps=128, target_update_interval=10,
                exploration_fraction=0.16, exploration_final_eps=0.04, max_grad_norm=10.0,
                net_arch=[256, 256], eval_freq=5_000,
            )
        elif algo in ("ddpg", "td3"):  # rl-zoo's ddpg.yml and td3.yml give Pendulum-v1 the same settings
            base = dict(
                algo=algo, env_id="Pendulum-v1", total_steps=20_000, learning_rate=1e-3,
                buffer_size=200_000, learning_starts=10_000, batch_size=256, gamma=0.98, tau=0.005,
                train_freq=1, gradient_steps=1, action_noise_std=0.1, net_arch=[400, 300],
                max_grad_norm=0.0, eval_freq=2_000, eval_episodes=10, weight_sync_interval=10,
            )
            if algo == "td3":  # SB3's TD3 defaults, and its update order
                base.update(policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5, concurrent_updates=False)
        else:
            raise ValueError(f"unknown algo {algo!r}: choose one of {', '.join(ALGOS)}")
        if env_id is not None:
            base["env_id"] = env_id
        base.update(overrides)
        return cls(**base)

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ValueError naming the first field with a wrong type or value and how to fix it."""
        hints = {f.name: f.type for f in dataclasses.fields(self)}
        for name, kind in hints.items():
            value = getattr(self, name)
            if kind == "bool":
                if not isinstance(value, bool):
                    raise ValueError(f"TrainConfig.{name} must be true or false, got {value!r}")
            elif kind == "int":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"TrainConfig.{name} must be an integer, got {value!r}")
            elif kind == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"TrainConfig.{name} must be a finite number, got {value!r}")
                setattr(self, name, float(value))
            elif kind == "str":
                if not isinstance(value, str) or (not value and name != "ray_address"):
                    raise ValueError(f"TrainConfig.{name} must be a non-empty string, got {value!r}")
        if self.algo not in ALGOS:
            raise ValueError(f"TrainConfig.algo must be one of {', '.join(ALGOS)}, got {self.algo!r}")
        if not isinstance(self.net_arch, (list, tuple)) or not self.net_arch or not all(
            isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= 4096 for w in self.net_arch
        ):
            raise ValueError(f"TrainConfig.net_arch must be a non-empty list of layer widths in 1..4096, got {self.net_arch!r}")
        if len(self.net_arch) > 3:
            raise ValueError("TrainConfig.net_arch has more than 3 hidden layers; the MLP kernel holds at most 4 linear layers")
        self.net_arch = list(self.net_arch)
        positive = ("total_steps", "buffer_size", "batch_size", "train_freq", "n_envs", "eval_episodes")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"TrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        non_negative = ("learning_starts", "gradient_steps", "target_update_interval", "workers", "max_actor_lag",
                        "weight_sync_interval", "eval_freq", "checkpoint_freq", "learner_threads")
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"TrainConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.algo == "dqn" and self.target_update_interval < 1:
            raise ValueError("TrainConfig.target_update_interval must be >= 1 env step for DQN")
        if not self.learning_rate > 0:
            raise ValueError(f"TrainConfig.learning_rate must be > 0, got {self.learning_rate}")
        for name in ("gamma", "exploration_fraction", "exploration_initial_eps", "exploration_final_eps", "per_beta"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"TrainConfig.{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"TrainConfig.tau must be in (0, 1], got {self.tau}")
        if self.per_alpha < 0 or self.per_eps <= 0 or self.max_grad_norm < 0 or self.action_noise_std < 0:
            raise ValueError("TrainConfig: per_alpha, max_grad_norm and action_noise_std must be >= 0 and per_eps > 0")
        if not 1 <= self.policy_delay <= 1000:
            raise ValueError(f"TrainConfig.policy_delay must be in 1..1000 critic steps, got {self.policy_delay}")
        for name in ("target_policy_noise", "target_noise_clip"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"TrainConfig.{name} must be in [0, 1] (the actor's action scale), got {getattr(self, name)}")
        if self.batch_size > self.buffer_size:
            raise ValueError(f"TrainConfig.batch_size ({self.batch_size}) exceeds buffer_size ({self.buffer_size})")
        if self.nonfinite_transitions not in ("error", "drop"):
            raise ValueError(f"TrainConfig.nonfinite_transitions must be 'error' or 'drop', got {self.nonfinite_transitions!r}")
        self._validate_distribution()
        if self.workers > 64:
            raise ValueError(f"TrainConfig.workers must be <= 64, got {self.workers}")

    def _validate_distribution(self) -> None:
        if self.engine not in (*ENGINES, "auto"):
            raise ValueError(f"TrainConfig.engine must be one of auto, {', '.join(ENGINES)}, got {self.engine!r}")
        if not 1 <= self.actors <= 1024:
            raise ValueError(f"TrainConfig.actors must be in 1..1024, got {self.actors}")
        if not 1 <= self.replay_shards <= 256:
            raise ValueError(f"TrainConfig.replay_shards must be in 1..256, got {self.replay_shards}")
        if self.buffer_size // self.replay_shards < self.batch_size:
            raise ValueError(f"TrainConfig.replay_shards={self.replay_shards} leaves {self.buffer_size // self.replay_shards} "
                             f"transitions per shard, fewer than batch_size={self.batch_size}; use fewer shards "
                             "or a larger buffer_size")
        for name in ("actor_resources", "shard_resources"):
            value = getattr(self, name)
            if not isinstance(value, dict) or not all(
                    isinstance(k, str) and k and not isinstance(v, bool) and isinstance(v, (int, float))
                    and math.isfinite(v) and v >= 0 for k, v in value.items()):
                raise ValueError(f"TrainConfig.{name} must map resource names to non-negative numbers, "
                                 f'e.g. {{"CPU": 1, "fpga": 1}}, got {value!r}')
            setattr(self, name, {k: float(v) for k, v in value.items()})
        if self.actor_priorities and not (self.per and self.algo == "dqn"):
            raise ValueError("TrainConfig.actor_priorities needs algo dqn with per=true (actors compute "
                             "initial TD-error priorities from their Q-network)")

    # ------------------------------------------------------------------ derived
    @property
    def sync_interval(self) -> int:
        """Learner steps between weight broadcasts (weight_sync_interval, or one training round)."""
        return self.weight_sync_interval or max(self.gradient_steps, 1)

    @property
    def actor_lag(self) -> int:
        """Env steps the worker actors may run ahead of the sequential schedule."""
        return self.max_actor_lag or self.train_freq

    def epsilon(self, step: int) -> float:
        """DQN exploration epsilon after `step` env steps (SB3's linear schedule)."""
        horizon = self.exploration_fraction * self.total_steps
        if horizon <= 0:
            return self.exploration_final_eps
        frac = min(step / horizon, 1.0)
        return self.exploration_initial_eps + frac * (self.exploration_final_eps - self.exploration_initial_eps)

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict (e.g. parsed JSON); unknown keys and wrong values raise ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"a TrainConfig must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s): {', '.join(unknown)}; valid fields: {', '.join(sorted(known))}")
        return cls(**data)

    def to_json(self, path: str | Path) -> None:
        """Write the config as indented JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_json(cls, path: str | Path, base: TrainConfig | None = None) -> TrainConfig:
        """Read a JSON file; its keys override `base` (or the preset of its "algo")."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read config {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"config {path} must hold a JSON object of TrainConfig fields")
        if base is None:
            base = cls.preset(data.get("algo", "dqn"), data.get("env_id"))
        merged = base.to_dict()
        unknown = sorted(set(data) - set(merged))
        if unknown:
            raise ValueError(f"config {path}: unknown field(s) {', '.join(unknown)}")
        merged.update(data)
        return cls.from_dict(merged)
