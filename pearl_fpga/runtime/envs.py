"""A small group of gymnasium environments stepped together, with SB3's transition conventions.

Why not gymnasium's vector envs: the runtime needs the true final observation of each episode
(stored as next_obs, as SB3 does with `terminal_observation`), `done` = terminated only (a time-limit
truncation still bootstraps), and an exact snapshot of every env for checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np

from pearl_fpga.errors import CheckpointError
from pearl_fpga.replay.transitions import Transitions


@dataclass
class EnvSpec:
    """What the learner needs to know about an environment."""

    env_id: str
    obs_dim: int
    discrete: bool
    action_dim: int  # number of actions (discrete) or action components (continuous)
    action_low: np.ndarray | None = None
    action_high: np.ndarray | None = None


class SlowEnv(gym.Wrapper):
    """An env whose every step also waits `delay_s` without using the CPU (a stand-in for a simulator
    on another device or across a network): with it, actor scaling shows on a host with few cores."""

    def __init__(self, env_id: str = "CartPole-v1", delay_s: float = 0.001) -> None:
        super().__init__(gym.make(env_id))
        self.delay_s = delay_s

    def step(self, action: Any) -> Any:
        import time

        time.sleep(self.delay_s)
        return self.env.step(action)


SLOW_ENV_ID = "pearl_fpga/SlowCartPole-v1"
if SLOW_ENV_ID not in gym.registry:
    gym.register(SLOW_ENV_ID, entry_point="pearl_fpga.runtime.envs:SlowEnv", max_episode_steps=500)


USER_NAMESPACE = "pearl_fpga_user"
"""Where env_id_for registers the envs a caller passes as an instance or a callable (this process only)."""


def env_id_for(env: Any) -> str | None:
    """An env argument as SB3 takes it, as a gymnasium id: an id (str) or None as it is; a callable that
    makes an env, or an env instance (made again from its spec, wrappers included, as many times as the run
    needs envs: actors, evaluation, calibration), registered in this process under USER_NAMESPACE. The
    worker engines (processes, ray) start other processes, which know only registered ids: there, pass an id
    registered in a module the workers import (gymnasium.register)."""
    if env is None or isinstance(env, str):
        return env
    if isinstance(env, gym.Env):
        spec = env.spec
        if spec is None:
            raise ValueError(f"the env instance {env!r} has no spec (it was not made by gymnasium.make), so it cannot "
                             "be made again for the actors and the evaluation; pass a callable that makes it "
                             "(env=lambda: MyEnv(...)) or a registered gymnasium id")
        name, factory = spec.name, (lambda: gym.make(spec))
    elif callable(env):
        name, factory = getattr(env, "__name__", type(env).__name__).strip("<>") or "env", env
    else:
        raise ValueError(f"env must be a gymnasium id (e.g. 'CartPole-v1'), a gymnasium.Env or a callable that makes "
                         f"one, got {type(env).__name__}")
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    version = sum(1 for key in gym.registry if key.startswith(f"{USER_NAMESPACE}/{name}-v"))
    env_id = f"{USER_NAMESPACE}/{name}-v{version}"
    gym.register(env_id, entry_point=cast(Any, factory))  # gymnasium calls it with the spec's kwargs (none)
    return env_id


def is_user_env(env_id: str) -> bool:
    return env_id.startswith(USER_NAMESPACE + "/")


def make_env(env_id: str) -> gym.Env:
    """gym.make with a clear error for unknown ids."""
    try:
        return gym.make(env_id)
    except gym.error.Error as exc:
        raise ValueError(f"cannot create environment {env_id!r}: {exc}. Use a gymnasium id such as "
                         "CartPole-v1 (DQN) or Pendulum-v1 (DDPG, TD3)") from exc


ENV_MODULE_CONSENT = ("trust_env_module=True (Trainer.load), --trust-env-module (pearl-fpga eval), or by naming "
                      "that env id with --env (pearl-fpga train --resume)")


def env_module(env_id: str) -> str | None:
    """The module gymnasium imports (running its code) to make `env_id` ("my_pkg.envs:Corridor-v0"), or None."""
    return env_id.split(":", 1)[0] if ":" in env_id else None


def check_env_import(env_id: str, source: str, trusted: bool, consent: str) -> None:
    """CheckpointError, before anything is imported, when `env_id` read from the file `source` would make
    gymnasium import a module and the user did not consent (`trusted`): a file must never decide what
    code runs. `consent` says how to give it (the flag or argument)."""
    module = env_module(env_id)
    if module is None or trusted:
        return
    raise CheckpointError(f"{source} names the env {env_id!r}, which would import the Python module {module!r} "
                          "and run its code; a file does not decide what code runs, so it was refused and nothing "
                          f"was imported. If you trust that module, consent with {consent}")


def env_spec(env_id: str) -> EnvSpec:
    """Observation and action description of `env_id` (flat Box observations only)."""
    env = make_env(env_id)
    try:
        obs_space, act_space = env.observation_space, env.action_space
        if not isinstance(obs_space, gym.spaces.Box) or len(obs_space.shape) != 1:
            hint = ""
            if isinstance(obs_space, gym.spaces.Discrete) and isinstance(act_space, gym.spaces.Discrete):
                hint = ("; a discrete-state env is tabular: train it with --algo qlearning or --algo sarsa "
                        "(the Q-table kernel), e.g. pearl-fpga train --algo qlearning --env " + env_id)
            raise ValueError(f"{env_id}: the deep algorithms take flat Box observations (a vector), got "
                             f"{obs_space}{hint}")
        if isinstance(act_space, gym.spaces.Discrete):
            return EnvSpec(env_id, int(obs_space.shape[0]), True, int(act_space.n))
        if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) == 1:
            if not (np.all(np.isfinite(act_space.low)) and np.all(np.isfinite(act_space.high))):
                raise ValueError(f"{env_id}: DDPG and TD3 need finite action bounds, got {act_space}")
            return EnvSpec(env_id, int(obs_space.shape[0]), False, int(act_space.shape[0]),
                           act_space.low.astype(np.float64), act_space.high.astype(np.float64))
        raise ValueError(f"{env_id}: unsupported action space {act_space}")
    finally:
        env.close()


def check_action_space(algo: str, env_id: str, discrete: bool) -> None:
    """ValueError when `algo`'s registry entry needs the other kind of action space than env_id has,
    naming algorithms that fit."""
    from pearl_fpga import presets as registry

    spec = registry.get(algo)
    if (spec.action_space == "discrete") == discrete:
        return
    need = "discrete" if spec.action_space == "discrete" else "continuous (Box)"
    fits = [s.name for s in registry.algorithms().values()
            if s.family == "deep" and (s.action_space == "discrete") == discrete]
    raise ValueError(f"{algo.upper()} needs a {need} action space; {env_id} does not have one "
                     f"({env_id} fits --algo {' or '.join(fits)}; {algo} runs e.g. on {spec.default_env})")


class EnvGroup:
    """n copies of one environment, auto-reset, with episode bookkeeping."""

    def __init__(self, env_id: str, n: int, seed: int) -> None:
        self.spec = env_spec(env_id)
        self.envs = [make_env(env_id) for _ in range(n)]
        self.n = n
        self.obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]).astype(np.float32)
        self.episode_return = np.zeros(n, dtype=np.float64)
        self.episode_length = np.zeros(n, dtype=np.int64)

    def to_env_action(self, action: np.ndarray) -> np.ndarray:
        """Actor-scale action in [-1, 1] -> the env's bounds (continuous envs; SB3's unscale_action)."""
        low, high = self.spec.action_low, self.spec.action_high
        assert low is not None and high is not None, "to_env_action is for continuous (Box) action spaces"
        return (low + 0.5 * (np.asarray(action, dtype=np.float64) + 1.0) * (high - low)).astype(np.float32)

    def step(self, actions: np.ndarray) -> tuple[Transitions, list[tuple[float, int]]]:
        """Step every env; returns the transitions and (return, length) of finished episodes."""
        n = self.n
        next_obs = np.empty_like(self.obs)
        reward = np.empty(n, dtype=np.float32)
        done = np.empty(n, dtype=np.float32)
        finished: list[tuple[float, int]] = []
        new_obs = self.obs.copy()
        for i, env in enumerate(self.envs):
            a = int(actions[i]) if self.spec.discrete else self.to_env_action(actions[i])
            ob, r, terminated, truncated, _ = env.step(a)
            next_obs[i] = ob
            reward[i] = r
            done[i] = float(terminated)
            self.episode_return[i] += r
            self.episode_length[i] += 1
            if terminated or truncated:
                finished.append((float(self.episode_return[i]), int(self.episode_length[i])))
                self.episode_return[i] = 0.0
                self.episode_length[i] = 0
                ob, _ = env.reset()
            new_obs[i] = ob
        transitions = Transitions(obs=self.obs, action=np.asarray(actions), reward=reward, next_obs=next_obs,
                                  done=done)
        self.obs = new_obs
        return transitions, finished

    def close(self) -> None:
        for env in self.envs:
            env.close()

    # --------------------------------------------------------------- snapshots for checkpoints
    def snapshot(self) -> dict[str, Any]:
        """Plain numeric state of every env (wrapper chain attributes and RNG) plus episode counters."""
        return {"obs": self.obs.copy(), "episode_return": self.episode_return.copy(),
                "episode_length": self.episode_length.copy(),
                "envs": [_snapshot_env(env) for env in self.envs]}

    def check(self, snap: dict[str, Any]) -> None:
        """CheckpointError unless `snap` fits these envs: the same wrapper chain, only attributes the
        envs have, the env's constants unchanged (ENV_CONSTANTS), finite numbers, arrays of the same
        shape and dtype, valid generator states."""
        obs_shape = np.shape(snap["obs"]) if "obs" in snap else None
        if len(snap.get("envs", ())) != self.n or obs_shape != self.obs.shape:
            raise CheckpointError(f"checkpoint holds {len(snap.get('envs', ()))} env states of shape "
                                  f"{obs_shape}, this run has {self.n} of {self.obs.shape}")
        if not np.isfinite(np.asarray(snap["obs"], dtype=np.float64)).all():
            raise CheckpointError("checkpoint env observations hold NaN or inf")
        constants = env_constants(self.spec.env_id)
        for env, state in zip(self.envs, snap["envs"]):
            _check_env(env, state, constants, self.spec.env_id)

    def restore(self, snap: dict[str, Any]) -> None:
        """Inverse of snapshot(); raises CheckpointError, changing nothing, when it does not fit these envs."""
        self.check(snap)
        for env, state in zip(self.envs, snap["envs"]):
            _restore_env(env, state)
        self.obs = np.asarray(snap["obs"], dtype=np.float32).copy()
        self.episode_return = np.asarray(snap["episode_return"], dtype=np.float64).copy()
        self.episode_length = np.asarray(snap["episode_length"], dtype=np.int64).copy()


_PLAIN = (bool, int, float, type(None), np.ndarray, np.generic)


def _chain(env: gym.Env) -> list[Any]:
    layers = [env]
    while hasattr(layers[-1], "env"):
        layers.append(layers[-1].env)
    return layers


def _snapshot_env(env: gym.Env) -> list[dict[str, Any]]:
    out = []
    for layer in _chain(env):
        attrs: dict[str, Any] = {}
        for key, value in vars(layer).items():
            if isinstance(value, np.random.Generator):
                attrs[key] = {"__generator__": value.bit_generator.state}
            elif isinstance(value, _PLAIN):
                attrs[key] = value.copy() if isinstance(value, np.ndarray) else value
        out.append(attrs)
    return out


ENV_PROBE_STEPS = 32
_NUMBER = (bool, int, float, np.bool_, np.integer, np.floating)
_MISSING = object()


def _numbers(env: gym.Env) -> list[dict[str, Any]]:
    return [{k: v for k, v in vars(layer).items() if isinstance(v, _NUMBER)} for layer in _chain(env)]


def env_constants(env_id: str) -> list[dict[str, Any]]:
    """ENV_CONSTANTS: per wrapper layer, the numbers that define an env of this id, i.e. those a new one
    keeps unchanged through reset and ENV_PROBE_STEPS random steps (CartPole's x_threshold and gravity,
    Pendulum's max_speed, a TimeLimit's _max_episode_steps). A checkpoint restores an env's state (its
    physical state, step counters, last action, generators), never these: a checkpoint that sets one
    to another value (x_threshold = 1e9) is refused."""
    env = make_env(env_id)
    try:
        seen = [_numbers(env)]
        env.reset(seed=0)
        env.action_space.seed(0)
        seen.append(_numbers(env))
        for _ in range(ENV_PROBE_STEPS):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
            seen.append(_numbers(env))
    finally:
        env.close()
    return [{k: v for k, v in layer.items() if all(s[i].get(k, _MISSING) == v for s in seen)}
            for i, layer in enumerate(seen[0])]


def _generator(value: dict[str, Any]) -> np.random.Generator:
    """The numpy Generator of a snapshot's {"__generator__": bit generator state}."""
    name = value["__generator__"].get("bit_generator") if isinstance(value["__generator__"], dict) else None
    if name not in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
        raise CheckpointError(f"checkpoint env generator has an unknown bit generator {name!r}")
    bit_gen = getattr(np.random, name)()
    try:
        bit_gen.state = value["__generator__"]
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"checkpoint env generator state is invalid ({exc})") from None
    return np.random.Generator(bit_gen)


def _check_env(env: gym.Env, state: Any, constants: list[dict[str, Any]], env_id: str) -> None:
    layers = _chain(env)
    if not isinstance(state, (list, tuple)) or len(layers) != len(state):
        raise CheckpointError(f"checkpoint env has {len(state) if isinstance(state, (list, tuple)) else 'no'} "
                              f"wrapper layers, this env has {len(layers)}")
    for layer, attrs, fixed in zip(layers, state, constants):
        for key, value in dict(attrs).items():
            where = f"env attribute {type(layer).__name__}.{key}"
            live = vars(layer).get(key, _MISSING)
            if live is _MISSING:
                raise CheckpointError(f"checkpoint sets {where}, which {env_id} does not have")
            if key in fixed:
                if value != fixed[key]:
                    raise CheckpointError(f"checkpoint sets {where} = {value!r}, but it is {fixed[key]!r} in every "
                                          f"{env_id}: a checkpoint restores an env's state, not its definition")
            elif isinstance(value, dict) and "__generator__" in value:
                _generator(value)
            elif isinstance(value, np.ndarray):
                if (live is not None and (not isinstance(live, np.ndarray) or live.shape != value.shape
                                          or live.dtype != value.dtype)):
                    raise CheckpointError(f"checkpoint sets {where} to a {value.dtype} array of shape {value.shape}, "
                                          f"this env holds {live!r}")
                if value.dtype.kind == "f" and not np.isfinite(value).all():
                    raise CheckpointError(f"checkpoint sets {where} to an array holding NaN or inf")
            elif value is not None and not (isinstance(value, _NUMBER) and np.isfinite(value)):
                raise CheckpointError(f"checkpoint sets {where} = {value!r}: only finite numbers, arrays, None "
                                      "and generator states are restored")


def _restore_env(env: gym.Env, state: list[dict[str, Any]]) -> None:
    for layer, attrs in zip(_chain(env), state):
        for key, value in attrs.items():
            if isinstance(value, dict) and "__generator__" in value:
                setattr(layer, key, _generator(value))
            else:
                setattr(layer, key, value.copy() if isinstance(value, np.ndarray) else value)


def calibration_batch(env_id: str, seed: int, steps: int = 256) -> np.ndarray:
    """Observations of a random policy (own env and RNG, so training is not perturbed), used to pick
    the MLP kernel's input and activation formats; non-finite ones are left out."""
    env = make_env(env_id)
    rng = np.random.default_rng(seed + 3)
    env.action_space.seed(int(rng.integers(2**31)))
    obs, _ = env.reset(seed=seed + 3_000_000)
    out = [obs]
    for _ in range(steps - 1):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
        out.append(obs)
    env.close()
    batch = np.asarray(out, dtype=np.float32)
    finite = np.isfinite(batch).all(axis=1)  # an env's NaN or inf is no typical observation
    if not finite.any():
        raise ValueError(f"{env_id} returned no finite observation in {steps} random steps: the MLP kernel's formats "
                         "cannot be calibrated; check the env")
    return batch if finite.all() else batch[finite]


def rollout(env_id: str, group: EnvGroup, policy: Any, episodes: int, seed: int) -> list[float]:
    """Returns of one episode on each of `episodes` fresh envs (seeds seed, seed + 1, ...), stepped
    together, with `policy`'s deterministic actions mapped to the env's bounds as `group` maps them."""
    envs = [make_env(env_id) for _ in range(episodes)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    returns = np.zeros(episodes)
    active = np.ones(episodes, dtype=bool)
    discrete = group.spec.discrete
    while active.any():
        idx = np.flatnonzero(active)
        actions = policy.deterministic(obs[idx])
        for j, i in enumerate(idx):
            a = int(actions[j]) if discrete else group.to_env_action(actions[j])
            ob, r, terminated, truncated, _ = envs[i].step(a)
            returns[i] += r
            obs[i] = ob
            if terminated or truncated:
                active[i] = False
    for env in envs:
        env.close()
    return returns.tolist()

