"""The runtime's loops as the profile times them: the actor loop (infer, step the envs), the exploration
step, a learner update on random batches of the run's shapes, and the learner's thread count. Shared
by the host and worker-mode benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.profile import time_call
from pearl_fpga.replay.transitions import Transitions
from pearl_fpga.runtime.thread_bits import reproducible_controller
from pearl_fpga.runtime.threads import learner_callers, measured_thread_count


def actor_loop(config: TrainConfig, policy: Any, env_counts: Sequence[int], repeats: int,
                env_group: Callable[..., Any]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """The actor's loop (infer, step the envs) for each env count: mean seconds per call of act and
    of the env step, measured together so that each sees the caches the other leaves."""
    act_pts, env_pts = [], []
    rng = np.random.default_rng(1)
    for n in env_counts:
        group = env_group(config.env_id, n, seed=0)
        try:
            t_act = t_env = 0.0
            for i in range(repeats + 2):
                t0 = time.perf_counter()
                if policy is not None:
                    actions = policy.deterministic(group.obs)
                elif group.spec.discrete:
                    actions = rng.integers(0, group.spec.action_dim, size=n)
                else:
                    actions = rng.uniform(-1, 1, size=(n, group.spec.action_dim)).astype(np.float32)
                t1 = time.perf_counter()
                group.step(actions)
                t2 = time.perf_counter()
                if i >= 2:  # the first calls warm up
                    t_act, t_env = t_act + t1 - t0, t_env + t2 - t1
        finally:
            group.close()
        act_pts.append((float(n), t_act / repeats))
        env_pts.append((float(n), t_env / repeats))
    return act_pts, env_pts


def actor_loop_overhead(config: TrainConfig, policy: Any, rounds: int) -> list[tuple[float, float]]:
    """Seconds per env-group step of the runtime's actor loop itself (`ActorLoop.run` beyond its act and
    env-step timers: the loop's bookkeeping and joining a round's transitions into one block), over
    rounds of the in-process run's length, acting as after learning starts."""
    from pearl_fpga.runtime.actor import ActorLoop
    from pearl_fpga.runtime.envs import EnvGroup
    from pearl_fpga.runtime.schedule import lockstep_insert_steps
    from pearl_fpga.runtime.timers import TaskTimer

    steps = lockstep_insert_steps(config)
    loop = ActorLoop(config, EnvGroup(config.env_id, config.n_envs, seed=2), policy, np.random.default_rng(5))
    start_step = max(config.total_steps, config.learning_starts)
    overhead, groups = 0.0, 0
    try:
        for i in range(max(2, rounds) + 1):
            timer = TaskTimer()
            t0 = time.perf_counter()
            loop.run(steps, start_step, timer)
            wall = time.perf_counter() - t0
            if i:  # the first round warms up
                overhead += wall - timer.seconds["act"] - timer.seconds["env_step"]
                groups += timer.calls["act"]
    finally:
        loop.envs.close()
    return [(float(config.n_envs), max(0.0, overhead) / max(1, groups))]


def random_transitions(rng: np.random.Generator, n: int, spec: Any) -> Transitions:
    action = (rng.integers(0, spec.action_dim, size=n) if spec.discrete
              else rng.uniform(-1, 1, size=(n, spec.action_dim)).astype(np.float32))
    return Transitions(obs=rng.normal(size=(n, spec.obs_dim)).astype(np.float32), action=action,
                       reward=rng.normal(size=n).astype(np.float32),
                       next_obs=rng.normal(size=(n, spec.obs_dim)).astype(np.float32),
                       done=(rng.random(n) < 0.05).astype(np.float32))


def explore_overhead(config: TrainConfig, spec: Any, counts: Sequence[int], repeats: int) -> list[tuple[float, float]]:
    """Seconds per call of the runtime's exploration step (`ActorPolicy.explore`) around the policy
    network, with the inference itself left out (it is the "act" task): the random draws, the
    epsilon mask and the merge, at the schedule's final epsilon."""
    from types import SimpleNamespace

    from torch import nn

    from pearl_fpga.algos.registry import learner_class

    cls = learner_class(config.algo)
    head = cls.actor_head(config, spec.action_dim)
    # the network's output width, for a head that samples from the outputs (a stochastic policy's)
    width = [m.out_features for m in cls.policy_network(spec.obs_dim, spec.action_dim, config)
             if isinstance(m, nn.Linear)][-1]
    rng = np.random.default_rng(4)
    step = max(config.total_steps, config.learning_starts)  # past the epsilon decay: the steady state
    pts = []
    for n in counts:
        obs = rng.normal(size=(n, spec.obs_dim)).astype(np.float32)
        if spec.discrete:
            greedy = np.zeros(n, dtype=np.int64)
        else:
            greedy = np.zeros((n, spec.action_dim), dtype=np.float32)
        outputs = np.zeros((n, width), dtype=np.float32)
        stub = SimpleNamespace(deterministic=lambda _obs, g=greedy: g, outputs=lambda _obs, o=outputs: o)
        pts.append((float(n), time_call(lambda: head.explore(stub, obs, step, rng), repeats)))
    return pts


def learner_thread_count(config: TrainConfig) -> int:
    """The learner's torch threads: the configured count, or (learner_threads = 0) the count the
    runtime's adaptive choice settles on at the present load, among the counts an inline run may use
    (those that give one thread's bits on this machine: runtime.thread_bits.reproducible_controller)."""
    if config.learner_threads > 0:
        return int(config.learner_threads)
    import torch

    from pearl_fpga.runtime.envs import env_spec

    spec = env_spec(config.env_id)
    candidates = reproducible_controller(config, spec.obs_dim, spec.action_dim).choice.candidates
    threads = torch.get_num_threads()
    try:
        return measured_thread_count(learner_step(config, np.random.default_rng(3)), callers=learner_callers(config),
                                     candidates=candidates)
    finally:
        torch.set_num_threads(threads)


def learner_step(config: TrainConfig, rng: np.random.Generator, probe_schedules: bool = True) -> Callable[[], None]:
    """One learner update on random batches of the run's shapes (a fresh CPU learner), in the update schedule a
    run would measure (runtime.update_schedule: its controller probes each schedule, then keeps the faster), so
    that a profile times the step the run takes. probe_schedules False: always in the learner's first schedule,
    the one the profile's learner loop times (host_probe._profile_learner), with no probe steps among them."""
    from pearl_fpga.algos import Batch, make_learner
    from pearl_fpga.runtime.envs import env_spec
    from pearl_fpga.runtime.update_schedule import schedule_control, step_timing

    spec = env_spec(config.env_id)
    algo = make_learner(config, spec.obs_dim, spec.action_dim, device="cpu", seed=0)
    stepping = step_timing(schedule_control(algo) if probe_schedules else None)
    data = random_transitions(rng, 4096, spec)
    b = config.batch_size

    def step() -> None:
        idx = rng.integers(0, 4096, size=b)
        batch = Batch(*data.rows(idx).arrays()).to_torch("cpu", discrete=spec.discrete)
        with stepping:
            algo.update(batch)

    return step
