"""Training configuration: every hyper-parameter of a run in one validated dataclass, for every
algorithm (DQN, DDPG, TD3, and tabular Q-learning and SARSA).

The CLI, the Python API and the checkpoints share it. `TrainConfig.preset(algo, env_id)` gives the
settings of that (algo, env) pair (the algorithm registry, pearl_fpga.presets: rl-baselines3-zoo's for
the deep algorithms, tuned here for the tabular ones), or those of the algorithm's default env; an
algorithm's own parameters (declared in its registry entry) live in `params`, read as attributes.
Counters follow Stable-Baselines3:

- `train_freq` and `learning_starts` count env steps: after every `train_freq` collected env steps,
  once more than `learning_starts` have been collected, the learner runs `gradient_steps` updates.
- `target_update_interval` (DQN) counts env steps too, as SB3's `_on_step` does: the target network
  is copied from the online network whenever the env-step counter is a multiple of it.
- the exploration epsilon decays linearly from `exploration_initial_eps` to
  `exploration_final_eps` over the first `exploration_fraction * total_steps` env steps (DQN), or
  over the first `exploration_episodes` episodes, one epsilon per episode (Q-learning, SARSA).
- `total_steps`, `eval_freq` and `checkpoint_freq` count env steps for every algorithm; a tabular run
  acts on them at the end of the episode in which they are reached (it stops, evaluates or
  checkpoints between episodes only, so that a resumed run continues exactly).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# net_arch takes any network torch takes: the MLP kernel's sizes (hls/mlp/SPEC.md) are checked only by the
# placements that put it in the loop (runtime.emulation.check_fits).
from pearl_fpga.errors import ConfigError
from pearl_fpga.safe_io import read_json
from pearl_fpga import presets as registry
from pearl_fpga.presets.spec import Range

TABULAR_FIELDS = ("exploration_episodes", "success_reward", "max_episode_steps", "backend", "epochs", "parts")
"""TrainConfig fields only the tabular algorithms read (a deep run refuses them at other than their defaults)."""
ENGINES = ("inline", "processes", "ray")
"""Execution engines (pearl_fpga.runtime.engines): where actors and replay run."""

MAX_STEPS = 10**12
"""Bound of every env-step count: beyond any run, and far from the int64 limits of the counters."""
MAX_THREADS = 1024
"""Bound of a thread count: torch starts one OS thread per count (100000 exhausted the process: segfault)."""


UNIT = Range(0.0, 1.0)
COUNT = Range(1, MAX_STEPS)
OPTIONAL_COUNT = Range(0, MAX_STEPS)  # 0 = off, or the default
RANGES: dict[str, Range] = {
    "total_steps": COUNT,
    "learning_rate": Range(0.0, math.inf, lo_open=True),
    "buffer_size": Range(1, 2**40, why="also checked against the free memory when the buffer is made"),
    "learning_starts": OPTIONAL_COUNT,
    "batch_size": Range(1, 65536),
    "gamma": UNIT,
    "tau": Range(0.0, 1.0, lo_open=True),
    "train_freq": COUNT,
    "gradient_steps": Range(0, 10**6),
    "target_update_interval": OPTIONAL_COUNT,
    "exploration_fraction": UNIT,
    "exploration_initial_eps": UNIT,
    "exploration_final_eps": UNIT,
    "max_grad_norm": Range(0.0, 1e9, why="0 disables clipping"),
    "action_noise_std": Range(0.0, 10.0, why="in the actor's [-1, 1] action scale"),
    "per_alpha": UNIT,
    "per_beta": UNIT,
    "per_eps": Range(0.0, 1.0, lo_open=True, why="added to |TD error| so that no priority is 0"),
    "n_envs": Range(1, 1024),
    "workers": Range(0, 64, why="one process each"),
    "max_actor_lag": OPTIONAL_COUNT,
    "weight_sync_interval": OPTIONAL_COUNT,
    "eval_freq": OPTIONAL_COUNT,
    "eval_episodes": Range(1, 10**6),
    "checkpoint_freq": OPTIONAL_COUNT,
    "learner_threads": Range(0, MAX_THREADS, why="0 measures the best count while training"),
    "actors": Range(1, 1024),
    "replay_shards": Range(1, 256),
    "policy_delay": Range(1, 1000, why="TD3: critic steps per actor and target update"),
    "target_policy_noise": Range(0.0, 1.0, why="TD3: in the actor's [-1, 1] action scale"),
    "target_noise_clip": Range(0.0, 1.0, why="TD3: in the actor's [-1, 1] action scale"),
    "exploration_episodes": Range(0, 10**9),
    "success_reward": Range(-32768.0, 32768.0, why="rewards are Q16.16 words"),
    "max_episode_steps": Range(0, 10**9, why="0 = the env's own limit"),
    "epochs": Range(1, 10**6),
    "parts": Range(0, 1024, why="one table copy each; 0: K chosen by a measurement on this machine"),
}
"""The range of every numeric TrainConfig field (tests/test_bad_inputs.py checks that none is missing)."""


def preset_note(algo: str, env_id: str | None) -> str | None:
    """The line to show when `env_id` has no preset of its own for `algo` (None when it has one)."""
    try:
        spec = registry.get(algo)
    except ValueError:
        return None
    return spec.preset_note(env_id)


def run_config(algo: str, env: str | None, config: TrainConfig | None, stacklevel: int = 2) -> TrainConfig:
    """The config a trainer runs: the preset of (algo, env), its note (preset_note) as a warning at the
    caller's `stacklevel`; or a validated private copy of `config`, `env` replacing its env_id. ValueError
    when `config` is another algorithm's."""
    if config is None:
        note = preset_note(algo, env)
        if note:
            warnings.warn(note, stacklevel=stacklevel + 1)
        return TrainConfig.preset(algo, env)
    config = TrainConfig.from_dict({**config.to_dict(), **({"env_id": env} if env is not None else {})})
    if config.algo != algo:
        raise ValueError(f"Trainer(algo={algo!r}) got a config for {config.algo!r}; pass matching values")
    return config


@dataclass
class TrainConfig:
    """Hyper-parameters and runtime settings of one training run (validated on creation)."""

    algo: str = "dqn"
    """Algorithm: "dqn" (double DQN, discrete actions), "ddpg" or "td3" (continuous actions), "qlearning" or
    "sarsa" (a Q table on the TabularQ kernel: discrete states and actions)."""
    env_id: str = "CartPole-v1"
    """Gymnasium environment id."""
    total_steps: int = 50_000
    """Env steps of the whole run; also the horizon of DQN's epsilon schedule (as SB3's total_timesteps).
    Tabular: the run ends with the episode in which this count is reached."""
    learning_rate: float = 2.3e-3
    """Adam learning rate (actor and critics for DDPG and TD3); tabular: the step size alpha of the
    table update, in (0, 1]."""
    buffer_size: int = 100_000
    """Replay capacity in transitions."""
    learning_starts: int = 1_000
    """Env steps collected with random actions before the first gradient step."""
    batch_size: int = 64
    """Transitions per gradient step."""
    gamma: float = 0.99
    """Discount factor (every algorithm)."""
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
    """DQN: epsilon at step 0; tabular: in the first episode."""
    exploration_final_eps: float = 0.04
    """DQN, tabular: epsilon after the decay."""
    exploration_episodes: int = 0
    """Tabular: epsilon decays linearly from exploration_initial_eps to exploration_final_eps over the first
    exploration_episodes episodes (one epsilon per episode), then stays at exploration_final_eps."""
    success_reward: float = 1.0
    """Tabular: an episode is a success when it terminates with a final reward >= success_reward (the goal
    of FrozenLake, the drop-off of Taxi, the goal of CliffWalking); evaluations report the rate."""
    max_episode_steps: int = 0
    """Tabular: truncate episodes after this many steps (0 = the env's own limit; CliffWalking has none,
    and an early greedy policy can walk in circles there for a very long time)."""
    backend: str = "auto"
    """Tabular: the TabularQ kernel's backend: auto, numpy, cpu, rtl, pynq or xrt (the deep algorithms
    choose their devices with the placement)."""
    epochs: int = 1
    """Tabular offline mode (a stored dataset of transitions): sweeps over the dataset."""
    parts: int = 1
    """Tabular offline mode: SwiftRL partitions, independent table copies merged by their mean (1 = sequential)."""
    max_grad_norm: float = 10.0
    """DQN: gradient-norm clip (SB3 default); 0 disables it."""
    double_q: bool = True
    """DQN: double-DQN target (online net picks the next action, target net values it)."""
    concurrent_updates: bool = True
    """DDPG: take the actor's gradient on the critic of the step's start, as OpenAI Baselines' DDPG, so
    that it can be computed beside the critic's (on a second thread in the `update_schedule` concurrent,
    which `auto` measures); False: the actor's after the critic's update, as SB3. The same for TD3 on
    its actor-update steps (its preset: False, SB3's order). Ignored by DQN."""
    flush_subnormals: bool = True
    """Learner: subnormal floats flushed to zero during each gradient step (FTZ/DAZ, as XLA and TensorFlow
    run the CPU): Adam's second moments of small gradients fill with them, and on many x86 CPUs each
    operation on one costs a microcode assist. False keeps IEEE gradual underflow (slower)."""
    learner_compile: bool = False
    """Learner: run the whole gradient step (forward, backward, clip, Adam, target update) as one
    torch.compile'd unit (inductor). Opt-in: compiling takes tens of seconds at the start of a run (torch
    caches it on disk), and the step's float rounding differs from the default path's. Where compiling
    fails, one warning line says so and the step runs uncompiled. DQN then runs its torch step instead
    of the fused native one."""
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
    """Env steps between periodic evaluations (0 disables them); the deep algorithms keep the best policy
    they find, the tabular ones log the current table's."""
    eval_episodes: int = 20
    """Episodes of every evaluation, the periodic ones and the command's final one (deterministic policy)."""
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
    params: dict[str, Any] = field(default_factory=dict)
    """The parameters the algorithm declares for itself in the registry (pearl_fpga.presets: e.g. an entropy
    coefficient), read as attributes (config.ent_coef) and written flat beside the fields in to_dict()/JSON;
    missing ones take the registry's defaults."""

    def __post_init__(self) -> None:
        self.validate()

    def __getattr__(self, name: str) -> Any:
        """An algorithm-declared parameter (only reached for names that are not fields)."""
        params = self.__dict__.get("params")
        if params is not None and name in params:
            return params[name]
        raise AttributeError(f"TrainConfig has no field or {self.__dict__.get('algo', '?')} parameter {name!r}")

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, algo: str = "dqn", env_id: str | None = None, **overrides: Any) -> TrainConfig:
        """The rl-zoo hyper-parameters of (algo, env_id) (the registry) plus overrides; an env without its own
        entry gets the algorithm's default env's (preset_note says so)."""
        base = registry.get(algo).preset(env_id)
        base.update(overrides)
        return cls.from_dict(base)

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ValueError naming the first field with a wrong type or value and how to fix it."""
        hints = {f.name: f.type for f in dataclasses.fields(self) if f.name != "params"}
        for name, kind in hints.items():
            value = getattr(self, name)
            fix = f"; set it in the config file or with --set {name}=VALUE"
            if kind == "bool":
                if not isinstance(value, bool):
                    raise ValueError(f"TrainConfig.{name} must be true or false, got {value!r}{fix}")
            elif kind == "int":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"TrainConfig.{name} must be an integer, got {value!r}{fix}")
            elif kind == "float":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"TrainConfig.{name} must be a finite number, got {value!r}{fix}")
                setattr(self, name, float(value))
            elif kind == "str":
                if not isinstance(value, str) or (not value and name != "ray_address"):
                    raise ValueError(f"TrainConfig.{name} must be a non-empty string, got {value!r}{fix}")
        try:
            spec = registry.get(self.algo)
        except ValueError as exc:
            raise ValueError(f"TrainConfig.algo: {exc}") from None
        self._validate_params(spec)
        if not isinstance(self.net_arch, (list, tuple)) or not self.net_arch or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in self.net_arch
        ):
            raise ValueError(f"TrainConfig.net_arch must be a non-empty list of positive layer widths, e.g. [64,64] "
                             f"(--set net_arch=[64,64]), got {self.net_arch!r}")
        self.net_arch = list(self.net_arch)
        for name, allowed in RANGES.items():
            allowed.check("TrainConfig", name, getattr(self, name))
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        unread = [name for name in TABULAR_FIELDS if spec.family == "deep" and getattr(self, name) != defaults[name]]
        if unread:
            raise ValueError(f"TrainConfig.{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} read by qlearning and "
                             f"sarsa only; {self.algo} would ignore {'it' if len(unread) == 1 else 'them'}: leave the default")
        if spec.family == "tabular" and self.learning_rate > 1.0:
            raise ValueError(f"TrainConfig.learning_rate = {self.learning_rate!r} is out of range for {self.algo}: the table's "
                             "step size alpha must be in (0, 1]; set one (--set learning_rate=VALUE or the config file)")
        if self.algo == "dqn" and self.target_update_interval < 1:
            raise ValueError("TrainConfig.target_update_interval must be >= 1 env step for DQN")
        if self.batch_size > self.buffer_size:
            raise ValueError(f"TrainConfig.batch_size ({self.batch_size}) exceeds buffer_size ({self.buffer_size})")
        if self.nonfinite_transitions not in ("error", "drop"):
            raise ValueError(f"TrainConfig.nonfinite_transitions must be 'error' or 'drop', got {self.nonfinite_transitions!r}")
        self._validate_distribution()

    def _validate_params(self, spec: registry.AlgoSpec) -> None:
        """The algorithm's own parameters: each known to it, of its kind and range; defaults filled in."""
        if not isinstance(self.params, dict):
            raise ValueError(f"TrainConfig.params must map {self.algo}'s parameter names to values, got {self.params!r}")
        owners = registry.param_owners()
        for name in self.params:
            if name not in spec.params:
                who = owners.get(name)
                raise ValueError(f"TrainConfig: {name!r} is " + (f"read by {', '.join(who)} only; {self.algo} would "
                                 "ignore it: leave it out" if who else f"not a parameter of {self.algo}"))
        self.params = {name: param.check("TrainConfig", name, self.params.get(name, param.default))
                       for name, param in spec.params.items()}

    def _validate_distribution(self) -> None:
        if self.engine not in (*ENGINES, "auto"):
            raise ValueError(f"TrainConfig.engine must be one of auto, {', '.join(ENGINES)}, got {self.engine!r}")
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

    def episode_epsilon(self, episode: int) -> float:
        """Tabular exploration epsilon of episode `episode` (0-based; linear over exploration_episodes)."""
        span = self.exploration_episodes
        if span <= 0 or episode >= span:
            return self.exploration_final_eps
        return self.exploration_initial_eps + (self.exploration_final_eps - self.exploration_initial_eps) * episode / span

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field, the algorithm's own parameters flat beside them."""
        data = dataclasses.asdict(self)
        data.update(data.pop("params"))
        return data

    @classmethod
    def field_names(cls, algo: str | None = None) -> list[str]:
        """The names a config of `algo` accepts (every algorithm's parameters when algo is None), sorted."""
        fields = {f.name for f in dataclasses.fields(cls)} - {"params"}
        extra = registry.get(algo).params if algo is not None else registry.param_owners()
        return sorted(fields | set(extra))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict (e.g. parsed JSON); unknown keys and wrong values raise ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"a TrainConfig must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"params"}
        owners = registry.param_owners()
        unknown = sorted(set(data) - known - set(owners))
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s): {', '.join(unknown)}{nearest_name(unknown[0], cls.field_names())}; "
                             f"valid fields: {', '.join(cls.field_names())}")
        fields = {k: v for k, v in data.items() if k in known}
        params = {**(data.get("params") or {}), **{k: v for k, v in data.items() if k in owners}} \
            if isinstance(data.get("params", {}), dict) else data["params"]
        return cls(**fields, params=params)

    def to_json(self, path: str | Path) -> None:
        """Write the config as indented JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_json(cls, path: str | Path, base: TrainConfig | None = None) -> TrainConfig:
        """Read a JSON file (safe_io.read_json); its keys override `base` (or the preset of its "algo").
        ConfigError names the file and the field, the rule it breaks and the fix."""
        data = read_config_file(path)
        for name in ("algo", "env_id"):  # they choose the preset, before any field is validated
            if name in data and not isinstance(data[name], str):
                raise ConfigError(f"config {path}: TrainConfig.{name} must be a string, got {data[name]!r}; set it in "
                                  f"the config file or with --{name.split('_')[0]}")
        try:
            if base is None:
                base = cls.preset(data.get("algo", "dqn"), data.get("env_id"))
            merged = base.to_dict()
            unknown = sorted(set(data) - set(merged))
            if unknown:
                raise ValueError(f"unknown field(s) {', '.join(unknown)}; valid fields: {', '.join(sorted(merged))}")
            merged.update(data)
            return cls.from_dict(merged)
        except ValueError as exc:
            raise ConfigError(f"config {path}: {exc}") from None


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The JSON object of a --config file: a regular file of at most 1 MiB, UTF-8, nesting limited, an
    object at the top; ConfigError naming the file, the rule and the fix otherwise."""
    try:
        return dict(read_json(path, "config", max_bytes=1 << 20, error=ConfigError, top=dict))
    except FileNotFoundError:
        raise ConfigError(f"config {path} does not exist; check the path given to --config") from None


def nearest_name(name: str, names: list[str]) -> str:
    """ " (did you mean X?)" for the closest of `names`, or ""."""
    import difflib

    near = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {near[0]}?)" if near else ""
