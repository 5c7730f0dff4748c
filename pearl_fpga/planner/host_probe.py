"""Host micro-benchmarks: the runtime's own code (EnvGroup, ActorPolicy and its exploration step, the
learner's `learn`, the replay buffer) timed at a few batch sizes and fitted, in the order the
runtime runs it; and the learner's speed now against the profile's (a shared machine's load drifts).
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.model import Fit

from pearl_fpga.planner.loops import (actor_loop, actor_loop_overhead, explore_overhead, learner_step,
                                      learner_thread_count, random_transitions)
from pearl_fpga.planner.profile import HOST_TARGETS, Profile, REPLAY_TASKS, fit_line, machine_info, time_call
from pearl_fpga.planner.worker_probe import cpu_parallel, worker_pool_costs

# ----------------------------------------------------------------------------------- host micro-benchmarks
@dataclass(frozen=True)
class Sizes:
    """Batch sizes and repeats of the micro-benchmarks; `quick` ones keep tests short."""

    envs: tuple[int, ...] = (1, 2, 4)
    act: tuple[int, ...] = (1, 4, 16)
    insert: tuple[int, ...] = (1, 16, 64)
    repeats: int = 60
    learn_repeats: int = 40  # a gradient step is ~1 ms: 40 of them per batch size keep the fit's noise low
    worker_starts: tuple[int, ...] = (1, 2)  # worker pools started and stopped (each process imports torch: seconds)
    parallel: tuple[int, ...] = (1, 2, 3)  # busy processes run together to measure the CPU we get
    parallel_seconds: float = 0.5

    @staticmethod
    def quick() -> "Sizes":
        return Sizes(envs=(1, 2), act=(1, 4), insert=(1, 8), repeats=5, learn_repeats=2, worker_starts=(),
                     parallel=(1, 2), parallel_seconds=0.15)


def workload_key(config: TrainConfig) -> str:
    """The part of a TrainConfig that host task times depend on."""
    arch = "x".join(str(w) for w in config.net_arch)
    return (f"{config.algo}|{config.env_id}|net{arch}|batch{config.batch_size}|cap{config.buffer_size}|"
            f"per{int(config.per)}|envs{config.n_envs}|threads{config.learner_threads}")


def profile_host(config: TrainConfig, targets: Iterable[str] = HOST_TARGETS, sizes: Sizes | None = None,
                 progress: Callable[[str], None] | None = None) -> Profile:
    """Measure every task on every host target (those that cannot run here are listed with the reason)."""
    import torch

    from pearl_fpga.algos import make_learner
    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.runtime.envs import EnvGroup, env_spec
    from pearl_fpga.runtime.placement import DEVICES, Placement
    from pearl_fpga.runtime.policy import ActorPolicy

    targets = tuple(targets)
    sizes = sizes or Sizes()
    note = progress or (lambda _msg: None)
    prof = Profile(machine_info(), workload_key(config))
    spec = env_spec(config.env_id)
    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()

    def record(task: str, target: str, batches: Sequence[int], fn: Callable[[int], Callable[[], Any]], repeats: int) -> None:
        note(f"{task} on {target}")
        pts = [(float(n), time_call(fn(n), repeats, warmup=2 if repeats > 1 else 1)) for n in batches]
        prof.points[(task, target)] = pts
        prof.fits[(task, target)] = fit_line([p[0] for p in pts], [p[1] for p in pts])

    def record_points(task: str, target: str, pts: list[tuple[float, float]]) -> None:
        prof.points[(task, target)] = pts
        prof.fits[(task, target)] = fit_line([p[0] for p in pts], [p[1] for p in pts])

    try:
        torch.set_num_threads(1)  # actors and envs run single-threaded, one process each
        obs_pool = rng.normal(size=(64, spec.obs_dim)).astype(np.float32)
        learner = make_learner(config, spec.obs_dim, spec.action_dim, device="cpu", seed=0)
        module = learner.policy_module
        head = learner.actor_head(config, spec.action_dim)
        # two weight sets that differ as a learning run's syncs do (a kernel actor skips its calibration
        # pass when new weights cannot change the formats: syncing one set again would time only that)
        other = make_learner(config, spec.obs_dim, spec.action_dim, device="cpu", seed=1).policy_module
        states = [{k: v.clone() for k, v in m.state_dict().items()} for m in (other, module)]
        env_points: list[tuple[float, float]] = []
        for target in targets:
            if target == "cuda" and not torch.cuda.is_available():
                prof.unavailable["act@cuda"] = prof.unavailable["learn@cuda"] = "torch sees no CUDA device"
                continue
            if target not in DEVICES["act"]:  # a learn-only target ("cpu-bf16")
                continue
            try:
                policy = ActorPolicy(module, Placement(act=target, replay="cpu", learn="cpu"), head, obs_pool)
            except (BackendUnavailable, ImportError, ValueError) as exc:
                prof.unavailable[f"act@{target}"] = str(exc)
                continue
            note(f"actor loop (act on {target}, env step)")
            act_pts, envs = actor_loop(config, policy, sizes.envs, sizes.repeats, EnvGroup)
            record_points("act", target, act_pts)
            env_points = env_points or envs  # the env step does not depend on the act target
            record("weight_sync", target, (1,), functools.partial(_weight_sync, policy, states), max(3, sizes.repeats // 4))
            if ("actor_loop", "cpu") not in prof.fits:  # the loop's own time does not depend on the act target
                record_points("actor_loop", "cpu", actor_loop_overhead(config, policy, max(2, sizes.repeats // 50)))
        if not env_points:
            _, env_points = actor_loop(config, None, sizes.envs, sizes.repeats, EnvGroup)
        record_points("env_step", "cpu", env_points)

        # learner loop: sample, learn (the learner's own update, its intra-op threads chosen as the run
        # chooses them), priority update and inserts, interleaved in that order as the runtime runs them
        controller = learner_controller(config)
        if controller is None:
            torch.set_num_threads(learner_thread_count(config))
        _profile_learner(config, spec, targets, sizes, prof, record_points, rng, note, controller)
        torch.set_num_threads(1)
        _profile_host_storage(config, spec, sizes, record, rng)
        record_points("explore", "cpu", explore_overhead(config, spec, sizes.envs, sizes.repeats))
        if sizes.worker_starts:
            note("starting and stopping actor worker processes")
            acts = [t for t in targets if ("act", t) in prof.fits and t != "cuda"]
            for (task, target), pts in worker_pool_costs(config, sizes.worker_starts, acts or ("cpu",)).items():
                record_points(task, target, pts)
        if sizes.parallel:
            note("CPU time several processes get together")
            prof.points[("cpu_parallel", "cpu")] = cpu_parallel(sizes.parallel, sizes.parallel_seconds)
            prof.fits[("cpu_parallel", "cpu")] = Fit(0.0, 0.0, "points only")  # kept with its points in the cache
    finally:
        torch.set_num_threads(threads)
    return prof


def _weight_sync(policy: Any, states: Sequence[Any], _n: int) -> Callable[[], Any]:
    """One weight sync of `policy`, to each of `states` in turn (the batch size does not apply)."""
    turn = itertools.cycle(states)
    return lambda: policy.load_weights(next(turn))


def _insert_loop(config: TrainConfig, buf: Any, counts: Sequence[int], repeats: int) -> list[tuple[float, float]]:
    """Seconds per insert of n fresh transitions, each made right after stepping n envs."""
    from pearl_fpga.runtime.envs import EnvGroup

    rng = np.random.default_rng(3)
    pts = []
    for n in counts:
        group = EnvGroup(config.env_id, n, seed=1)
        try:
            total = 0.0
            for i in range(repeats + 2):
                if group.spec.discrete:
                    actions = rng.integers(0, group.spec.action_dim, size=n)
                else:
                    actions = rng.uniform(-1, 1, size=(n, group.spec.action_dim)).astype(np.float32)
                transitions, _ = group.step(actions)
                t0 = time.perf_counter()
                buf.add(transitions)
                if i >= 2:
                    total += time.perf_counter() - t0
        finally:
            group.close()
        pts.append((float(n), total / repeats))
    return pts


def learner_controller(config: TrainConfig) -> Any:
    """The thread controller an inline run of `config` has (None for a fixed count): the profile's CPU
    gradient steps run under it as the run's do, so that a core taken while profiling moves the profile
    off the lost count as it moves the run."""
    if config.learner_threads > 0:
        return None
    from pearl_fpga.runtime.envs import env_spec
    from pearl_fpga.runtime.thread_bits import reproducible_controller

    spec = env_spec(config.env_id)
    return reproducible_controller(config, spec.obs_dim, spec.action_dim)


def _profile_learner(config: TrainConfig, spec: Any, targets: Sequence[str], sizes: Sizes, prof: Profile,
                     record_points: Callable[..., None], rng: np.random.Generator, note: Callable[[str], None],
                     controller: Any = None) -> None:
    """The learner's loop on each replay target (and on each learn device): per iteration one sample
    of the batch, one gradient step and one priority update (PER), as the runtime does; inserts are
    timed after env steps (where the in-process runtime makes them). CPU gradient steps run under
    `controller` (the run's thread controller) when one is given."""
    import contextlib

    import torch

    from pearl_fpga.algos import make_learner
    from pearl_fpga.algos.registry import bf16_refusal
    from pearl_fpga.runtime.placement import DEVICES, bf16_unsupported, learn_target
    from pearl_fpga.runtime.schedule import needed_env_steps
    from pearl_fpga.runtime.stats import LossMeter

    buffer_factory = _replay_factory(config, spec)
    b = config.batch_size
    batches = sorted({max(1, b // 2), b, 2 * b})
    inserts = list(sizes.insert)
    measured: dict[str, str] = {}  # replay backend -> first target measured with it
    plans = [(t, "cpu") for t in targets if t in DEVICES["replay"]]
    if "cuda" in targets and "learn@cuda" not in prof.unavailable:
        plans.append(("cpu", "cuda"))
    if "cpu-bf16" in targets:  # the bfloat16 learner, timed like float32's and chosen only when faster
        reason = bf16_refusal(config.algo, bf16_unsupported("cpu"))
        if reason is None:
            plans.append(("cpu", "cpu-bf16"))
        else:
            prof.unavailable["learn@cpu-bf16"] = reason
    for target, device in plans:
        try:
            backend_key, make = buffer_factory(target)
            reuse = device == "cpu" and backend_key in measured
            buf = None if reuse else make()
        except Exception as exc:  # noqa: BLE001 - any failure to build the buffer makes the target unusable
            prof.unavailable[f"replay@{target}"] = f"replay buffer: {exc}"
            continue
        if reuse:  # same code path (e.g. "cpu" and "cpu-kernel" share the C++ tree)
            src = measured[backend_key]
            for task in REPLAY_TASKS:
                if (task, src) in prof.fits:
                    prof.fits[(task, target)] = prof.fits[(task, src)]
                    prof.points[(task, target)] = prof.points.get((task, src), [])
            continue
        assert buf is not None  # made above: only a reused target has none
        note(f"learner loop (replay on {target}, learn on {device})")
        algo = make_learner(config, spec.obs_dim, spec.action_dim, device=device, seed=0)
        fill = min(config.buffer_size, max(4 * max(batches), 2048))
        buf.add(random_transitions(rng, fill, spec))
        on_cpu = learn_target(device)[0] == "cpu"
        stepping = controller if on_cpu else None
        probe_s, probe_steps = 0.0, 0  # the run's first probe round, at its batch size, before anything is timed
        while stepping is not None and stepping.choice.rounds == 0 and len(stepping.choice.candidates) > 1:
            data = buf.sample(b)
            t0 = time.perf_counter()
            with stepping.step():
                algo.update(data.to_torch(algo.device, discrete=spec.discrete))
            probe_s, probe_steps = probe_s + time.perf_counter() - t0, probe_steps + 1
        pts: dict[str, list[tuple[float, float]]] = {"replay_sample": [], "learn": [], "replay_update": [],
                                                     "learner_convert": [], "learner_loop": []}
        losses, g = LossMeter(), 0
        for n in batches:
            t_s = t_c = t_l = t_u = t_b = 0.0
            counted = tries = 0
            # steps of a later probe round are left out (the batch sizes of the fit are not the run's, so
            # the controller may probe here when a run would not); the run's rounds are "thread_probe"
            while counted < sizes.learn_repeats and tries < 4 * sizes.learn_repeats + 2:
                tries += 1
                rounds = stepping.choice.rounds if stepping is not None else 0
                probing = stepping is not None and stepping.probing
                t0 = time.perf_counter()
                data = buf.sample(n)
                t1 = time.perf_counter()
                with stepping.step() if stepping is not None else contextlib.nullcontext():
                    tensors = data.to_torch(algo.device, discrete=spec.discrete)
                    tc = time.perf_counter()
                    loss, td = algo.update(tensors)
                if not on_cpu:
                    torch.cuda.synchronize()
                t2 = time.perf_counter()
                if buf.prioritized:
                    buf.update_priorities(data.indices, td.cpu().numpy())
                t3 = time.perf_counter()
                # the Trainer's own work around each gradient step: the algorithm's before_update (e.g.
                # DQN's target copy, due once per training round) and the loss meter
                algo.before_update(needed_env_steps(config, g))
                losses.add(loss)
                g += 1
                t4 = time.perf_counter()
                probed = stepping is not None and (probing or stepping.probing or stepping.choice.rounds != rounds)
                if tries > 2 and not probed:  # the first calls warm up
                    t_s, t_l, t_u, counted = t_s + t1 - t0, t_l + t2 - t1, t_u + t3 - t2, counted + 1
                    t_c, t_b = t_c + tc - t1, t_b + t4 - t3
            reps = max(counted, 1)
            pts["learner_convert"].append((float(n), t_c / reps))
            pts["learner_loop"].append((float(n), t_b / reps))
            pts["replay_sample"].append((float(n), t_s / reps))
            pts["learn"].append((float(n), t_l / reps))
            pts["replay_update"].append((float(n), t_u / reps))
        record_points("learn", device, pts["learn"])
        record_points("learner_convert", device, pts["learner_convert"])
        record_points("learner_loop", device, pts["learner_loop"])
        if probe_steps:  # what a probe round costs beyond the same steps at the chosen count
            extra = probe_s - probe_steps * prof.fits[("learn", device)](b)
            prof.points[("thread_probe", device)] = [(float(probe_steps), probe_s)]
            prof.fits[("thread_probe", device)] = Fit(max(0.0, extra), 0.0)
        if device != "cpu":
            continue
        measured[backend_key] = target
        record_points("replay_sample", target, pts["replay_sample"])
        if not buf.prioritized:
            record_points("lockstep_sample", target, _lockstep_sample(config, spec, buf, batches, sizes.learn_repeats))
        record_points("replay_insert", target, _insert_loop(config, buf, inserts, sizes.repeats))
        if buf.prioritized:
            record_points("replay_update", target, pts["replay_update"])
        else:
            prof.fits[("replay_update", target)] = Fit(0.0, 0.0, "none without PER")


def _lockstep_sample(config: TrainConfig, spec: Any, buf: Any, batches: Sequence[int], repeats: int
                     ) -> list[tuple[float, float]]:
    """Seconds per gradient step of the in-process run's uniform sampling (runtime.learner_batches in bulk
    mode): a training round's batches drawn, converted and sliced at once, as the Trainer draws them."""
    from pearl_fpga.runtime.learner_batches import BULK_SAMPLE_ROWS, LearnerBatches
    from pearl_fpga.runtime.timers import TaskTimer

    pts = []
    for n in batches:
        per_round = max(1, min(config.gradient_steps, BULK_SAMPLE_ROWS // n))
        timer = TaskTimer()
        for i in range(max(2, -(-repeats // per_round)) + 1):
            draws = LearnerBatches(buf, True, n, "cpu", spec.discrete, timer if i else TaskTimer())  # first: warm-up
            for g in range(per_round):
                draws.take(g, per_round)
        pts.append((float(n), timer.seconds["replay_sample"] / max(1, timer.calls["replay_sample"])))
    return pts


def _profile_host_storage(config: TrainConfig, spec: Any, sizes: Sizes, record: Callable[..., None], rng: np.random.Generator) -> None:
    """Host-side transition storage that stays on the CPU when an FPGA holds the sum tree: writing
    n transitions ("host_store") and gathering a batch of them ("host_gather")."""
    cap = min(config.buffer_size, 1 << 16)
    arrays = random_transitions(rng, cap, spec).arrays()

    def store(n: int) -> Callable[[], Any]:
        rows, src = rng.integers(0, cap - n, size=1)[0] + np.arange(n), random_transitions(rng, n, spec).arrays()
        return lambda: [a.__setitem__(rows, b) for a, b in zip(arrays, src, strict=True)]

    def gather(n: int) -> Callable[[], Any]:
        return lambda: [a[rng.integers(0, cap, size=n)] for a in arrays]

    b = config.batch_size
    record("host_store", "cpu", sizes.insert, store, sizes.repeats)
    record("host_gather", "cpu", sorted({max(1, b // 2), b, 2 * b}), gather, sizes.repeats)


def _replay_factory(config: TrainConfig, spec: Any) -> Callable[[str], tuple[str, Callable[[], Any]]]:
    """target -> (backend key, maker of the runtime's own replay buffer for that target)."""
    from pearl_fpga.replay.manager import make_replay
    from pearl_fpga.runtime.placement import Placement
    from pearl_fpga.runtime.schedule import allowed_gradient_steps

    action_shape = () if spec.discrete else (spec.action_dim,)

    def factory(target: str) -> tuple[str, Callable[[], Any]]:
        placement = Placement(act="cpu", replay=target, learn="cpu")
        backends = placement.replay_backends()  # as the Trainer builds its buffer
        key = f"per-{backends}" if config.per else "uniform"  # without PER the buffer is host memory
        return key, lambda: make_replay(config, spec.obs_dim, action_shape, spec.discrete, 0, backends, placement.replay,
                                        beta_steps=allowed_gradient_steps(config, config.total_steps))

    return factory


# ----------------------------------------------------------------------------------- load on a shared machine
def learner_reference(config: TrainConfig, repeats: int = 20) -> float:
    """Seconds per learner iteration (sample + gradient step at the run's batch) right now: compared
    with the same figure from the profile it says how much slower or faster this shared machine is
    than when it was profiled. Timed in the schedule the profile's learner loop runs, without the run's
    schedule probes (a probe step of the slower schedule would read as a slower machine)."""
    import torch

    threads = torch.get_num_threads()
    step = learner_step(config, np.random.default_rng(2), probe_schedules=False)
    try:
        torch.set_num_threads(learner_thread_count(config))
        return time_call(step, repeats)
    finally:
        torch.set_num_threads(threads)


def load_factor(config: TrainConfig, profile: Profile, repeats: int = 20) -> float:
    """How much slower (> 1) or faster (< 1) the CPU runs now than when `profile` was measured,
    from the learner iteration both timed; 1.0 when the profile lacks it."""
    learn, sample = profile.fits.get(("learn", "cpu")), profile.fits.get(("replay_sample", "cpu"))
    if learn is None:
        return 1.0
    then = learn(config.batch_size) + (sample(config.batch_size) if sample is not None else 0.0)
    now = learner_reference(config, repeats)
    return float(min(max(now / then, 0.2), 5.0)) if then > 0 else 1.0
