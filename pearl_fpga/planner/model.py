"""The planner's performance and power model: pure functions over data tables, no device needed.

An off-policy training step is a set of tasks (TASKS). The runtime groups them into three roles
that a placement puts on targets (ROLE_TASKS): "act" (policy inference), "replay" (insert, sample,
priority update) and "learn" (gradient step); the env step always runs on the CPU and the weight
sync costs whatever loading new weights into the act target costs.

The runtime runs concurrent stages (sequential processes): W actor workers, each stepping its
vectorized envs and acting; a replay manager; a learner. Throughput X (env steps/s) is limited by

- each stage: X * (seconds of that stage's tasks per env step) <= number of processes of the stage;
- each device: X * (seconds of all tasks placed on it per env step) <= its capacity (for the CPU
  the cores our processes get together, measured when the machine is shared; 1 for an
  accelerator): tasks sharing a device share its time, CPU cores are split among env workers,
  actor, replay manager and learner.

so X = min over those limits; the binding one is reported as the bottleneck. With 0 workers (the
runtime's in-process mode) one process runs every task in turn: X = 1 / (sum of all task times). Per
env step the learner does `updates_per_step` gradient steps (the update-to-data ratio), each with one
sample and one priority update of `batch_size`, and syncs weights every `sync_every` gradient steps.

Measured costs of the runtime itself are part of it (fits keyed by `OVERHEADS`, all on the
CPU): "explore", the exploration step around each act call (random draws, epsilon mask), counted in
"act" because the runtime times it there; "lockstep_sample" and "learner_convert": with uniform
replay the in-process runtime draws a training round's batches at once and converts them to tensors
in that draw (runtime.learner_batches), so there its sample costs the bulk draw's share per batch and
its learn step the profile's less the per-batch conversion; "actor_loop", the actor loop's own
time per env-group step beyond its act and env-step timers (the loop, joining a round's transitions
into one block), counted in "act"; "learner_loop", the Trainer's work around each gradient step (the
algorithm's before_update, e.g. DQN's target copy, and the loss meter), counted in "learn"; "worker_poll", the learner loop's bookkeeping of the worker
pool around each gradient step (learner stage, worker mode only); and "worker_start" +
"worker_stop", the one-off start of W worker processes (until each has delivered transitions) and
their shutdown, paid once per run; "thread_probe", what one probe round of the learner's adaptive
thread count costs beyond the same gradient steps at the chosen count (a CPU learner with
learner_threads = 0 probes at its first step and at growing intervals after, runtime.threads.probe_round_starts:
Workload.probe_rounds rounds per run), paid per round.

A run is counted as the schedule runs it: `run_updates` gradient steps (training rounds of
gradient_steps updates at whole multiples of train_freq past learning_starts), not the steady
update-to-data ratio times the steps after learning starts; the difference is paid at the
learner's seconds per update.

Worker mode on a shared CPU. The limits above let the learner use a whole core whenever it needs
one; on a machine whose cores are shared (other users, hyper-threads, memory bandwidth) a learner
iteration is measurably slower while the workers step (by "learner_corun", a factor of W), and the
workers are slower than the profiled actor loop (by "actor_corun": contention plus copying and
sending transitions). Each training round the workers are given the next round's env steps at once
and step flat out for a = actor_corun * (actor seconds per env step) / W, during which the learner
gets through a / learner_corun of its L seconds of work; it does the rest alone:
T = a + max(0, L - a / learner_corun) seconds per env step ("stage learner+actors"), which
never allows more than the stage limits do. The actors' factor is measured per act target.
"""

from __future__ import annotations

import math
from typing import Any
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pearl_fpga.runtime.vocabulary import ROLE_TASKS, ROLES

ENV_TARGET = "cpu"  # gymnasium envs step on the host CPU
OBJECTIVES = ("throughput", "efficiency")
# Measured costs of the runtime itself (not tasks of their own; see the module docstring).
OVERHEADS = ("explore", "worker_poll", "worker_start", "worker_stop", "learner_corun", "actor_corun",
             "thread_probe", "lockstep_sample", "learner_convert", "actor_loop", "learner_loop")


@dataclass(frozen=True)
class Fit:
    """Seconds per call of a task as a function of its batch: t(batch) = a + b * batch."""

    a: float
    b: float
    source: str = "measured"  # measured | cycle-model | csynth | nominal

    def __call__(self, batch: float) -> float:
        return max(0.0, self.a + self.b * batch)


@dataclass(frozen=True)
class Device:
    """A physical resource that tasks share: the CPU (capacity = cores), a GPU or an FPGA (1)."""

    name: str
    kind: str  # cpu | cuda | fpga | fpga-emu
    capacity: float
    power_idle_w: float
    power_active_w: float  # at full use of the whole capacity
    power_source: str  # measured | nominal

    def power(self, utilization: float) -> float:
        """Watts at a utilization in [0, 1] of the device's capacity (linear between idle and active)."""
        u = min(max(utilization, 0.0), 1.0)
        return self.power_idle_w + (self.power_active_w - self.power_idle_w) * u


@dataclass(frozen=True)
class Workload:
    """What the training configuration asks of the tasks per env step."""

    envs_per_worker: int  # envs each actor worker steps together (act batch)
    batch_size: int  # learner batch (sample / learn / priority-update batch)
    updates_per_step: float  # gradient steps per env step (update-to-data ratio)
    sync_every: int  # gradient steps between weight broadcasts to the actors
    insert_batch: int  # transitions per replay insert call
    learning_starts: int = 0  # env steps before the first gradient step (acting only)
    prioritized: bool = True  # with plain uniform replay there is no priority update
    act_fraction: float = 1.0  # share of env steps (after learning starts) whose action needs inference
    total_steps: int = 0  # env steps of the run the objective averages over (0: steady state only)
    worker_insert_batch: int = 0  # transitions per insert when actor workers stream them (0: insert_batch)
    run_updates: int = -1  # gradient steps the schedule runs in `total_steps` (-1: the steady ratio's count)
    probe_rounds: int = 0  # probe rounds of the learner's adaptive thread count in the run

    def __post_init__(self) -> None:
        if self.envs_per_worker < 1 or self.batch_size < 1 or self.insert_batch < 1 or self.sync_every < 1:
            raise ValueError(f"workload sizes must be >= 1: {self}")
        if self.updates_per_step < 0 or self.learning_starts < 0 or self.worker_insert_batch < 0 or self.probe_rounds < 0:
            raise ValueError(f"updates_per_step, learning_starts and worker_insert_batch must be >= 0: {self}")
        if not 0.0 <= self.act_fraction <= 1.0:
            raise ValueError(f"act_fraction must be in [0, 1]: {self}")


@dataclass(frozen=True)
class Tables:
    """The data the model runs on: fitted task times per target, the device of each target, devices."""

    fits: Mapping[tuple[str, str], Fit]  # (task, target) -> fit; a missing pair cannot run
    target_device: Mapping[str, str]  # target name (placement token) -> device name
    devices: Mapping[str, Device]
    # Stages (sequential processes) of the runtime: name -> tasks it runs. The "actor" stage has W
    # processes, every other stage one.
    stages: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {
            "actor": ("env_step", "act"),
            "replay": ("replay_insert", "replay_sample", "replay_update"),
            "learner": ("learn", "weight_sync"),
        }
    )
    # CPU time our P concurrent processes get together, relative to what one process gets (1.0 for
    # P = 1; up to the core count on an idle machine, less when others share it). Task times are
    # profiled in one process, so the CPU's capacity for P processes is cpu_parallel[P]. Empty:
    # every core is ours.
    cpu_parallel: Mapping[int, float] = field(default_factory=dict)

    def cpu_capacity(self, processes: int) -> float:
        """Cores (in single-process units) that `processes` processes of ours get together."""
        cores = self.devices[self.target_device[ENV_TARGET]].capacity
        if not self.cpu_parallel:
            return min(float(processes), cores)
        known = sorted(self.cpu_parallel)
        p = min(processes, known[-1])
        below = max(k for k in known if k <= p) if any(k <= p for k in known) else known[0]
        return min(float(processes), cores, self.cpu_parallel[below])

    def can_run(self, role: str, target: str) -> bool:
        return target in self.target_device and all((t, target) in self.fits for t in ROLE_TASKS[role])


@dataclass(frozen=True)
class Prediction:
    """What the model predicts for one placement and worker count."""

    placement: Mapping[str, str]  # role -> target
    workers: int  # actor worker processes; 0 = everything in one process
    throughput: float  # env steps/s in steady state (after learning starts)
    warmup_throughput: float  # env steps/s before learning starts
    bottleneck: str  # the binding limit, e.g. "stage actor", "device cpu"
    task_seconds: Mapping[str, float]  # seconds of each task per env step (steady state)
    task_target: Mapping[str, str]
    device_utilization: Mapping[str, float]  # in [0, 1]
    power_w: float
    power_source: str  # "measured" when every used device's figure is measured, else "nominal"
    task_sources: Mapping[str, str] = field(default_factory=dict)
    warmup_task_seconds: Mapping[str, float] = field(default_factory=dict)  # before learning starts
    startup_s: float = 0.0  # one-off cost of starting the actor worker processes (until each delivers)
    shutdown_s: float = 0.0  # one-off cost of stopping them at the end of the run
    run_steps: int = 0  # env steps of the planned run (0: steady state)
    learning_starts: int = 0
    probe_s: float = 0.0  # the learner's thread-probe rounds in the planned run (one-off seconds)
    update_s: float = 0.0  # learner seconds per gradient step (sample, learn, priority update, its share of syncs)
    updates_per_step: float = 0.0  # the steady ratio the throughput assumes
    run_updates: int = -1  # gradient steps the schedule runs in the planned run (-1: the steady ratio's)

    @property
    def efficiency(self) -> float:
        """Env steps per joule (throughput per watt)."""
        return self.throughput / self.power_w if self.power_w > 0 else 0.0

    def average_throughput(self, steps: int, learning_starts: int) -> float:
        """Mean env steps/s over a run of `steps` that learns only after `learning_starts` steps,
        including the one-off start and stop of the worker processes."""
        if steps <= 0:
            return self.throughput
        return steps / self.run_seconds(steps, learning_starts)

    def run_seconds(self, steps: int, learning_starts: int) -> float:
        """Wall seconds of a run: worker start + warm-up + learning + worker stop, plus (for the planned
        run) the learner's thread probes and the gradient steps the schedule runs beyond or short of the
        steady ratio's count."""
        warm = min(steps, learning_starts)
        seconds = (self.startup_s + self.shutdown_s + warm / self.warmup_throughput
                   + (steps - warm) / self.throughput)
        if steps == self.run_steps:
            seconds += self.probe_s
            if self.run_updates >= 0:
                seconds += (self.run_updates - self.updates_per_step * (steps - warm)) * self.update_s
        return max(seconds, 1e-9)

    def run_task_seconds(self, steps: int | None = None) -> dict[str, float]:
        """Seconds of each task per env step averaged over a run of `steps` (default: the planned
        run), warm-up included: what a training run's per-task timers measure."""
        steps = self.run_steps if steps is None else steps
        if not steps:
            return dict(self.task_seconds)
        warm = min(steps, self.learning_starts) / steps
        out = {t: warm * self.warmup_task_seconds.get(t, s) + (1 - warm) * s for t, s in self.task_seconds.items()}
        steady = self.updates_per_step * (1 - warm) * steps  # the gradient steps the steady ratio counts
        if steps == self.run_steps and self.run_updates >= 0 and steady > 0:
            for task in ("replay_sample", "replay_update", "learn", "weight_sync"):
                out[task] *= self.run_updates / steady
        if steps == self.run_steps and "learn" in out:
            out["learn"] += self.probe_s / steps  # the run's learn timer holds the probe rounds' steps
        return out

    @property
    def run_throughput(self) -> float:
        """Mean env steps/s over the planned run (warm-up and worker start-up included)."""
        return self.average_throughput(self.run_steps, self.learning_starts) if self.run_steps else self.throughput

    def objective(self, name: str) -> float:
        """The value a search maximizes: mean env steps/s over the run, or that per watt."""
        if name == "throughput":
            return self.run_throughput
        if name == "efficiency":
            return self.run_throughput / self.power_w if self.power_w > 0 else 0.0
        raise ValueError(f"unknown objective {name!r}: use one of {', '.join(OBJECTIVES)}")


def task_targets(placement: Mapping[str, str]) -> dict[str, str]:
    """The target of every task under a role -> target placement (env steps on the CPU)."""
    out = {"env_step": ENV_TARGET}
    for role, tasks in ROLE_TASKS.items():
        for task in tasks:
            out[task] = placement[role]
    return out


def per_step_seconds(tables: Tables, workload: Workload, placement: Mapping[str, str], learning: bool = True,
                     workers: int = 0) -> dict[str, float]:
    """Seconds each task costs per env step under `placement` (0 for tasks that do not run).

    Before learning starts (learning=False) actions are random: no inference and no learner work."""
    where = task_targets(placement)

    def t(task: str, batch: float) -> float:
        key = (task, where[task])
        if key not in tables.fits:
            raise KeyError(f"target {where[task]!r} cannot run task {task!r}")
        return tables.fits[key](batch)

    n = workload.envs_per_worker
    u = workload.updates_per_step if learning else 0.0
    b = workload.batch_size
    ins = workload.worker_insert_batch if workers > 0 and workload.worker_insert_batch else workload.insert_batch
    explore = tables.fits.get(("explore", ENV_TARGET))
    around = explore(n) / n if explore is not None else 0.0  # exploration runs every step, inference only when greedy
    loop = tables.fits.get(("actor_loop", ENV_TARGET))
    around += loop(n) / n if loop is not None else 0.0
    sample, learn = t("replay_sample", b), t("learn", b)
    bulk = tables.fits.get(("lockstep_sample", where["replay_sample"]))
    convert = tables.fits.get(("learner_convert", where["learn"]))
    if workers == 0 and not workload.prioritized and bulk is not None and convert is not None:
        # in-process uniform replay: a round's batches are drawn and converted at once (learner_batches)
        sample, learn = bulk(b), max(0.0, learn - convert(b))
    bookkeeping = tables.fits.get(("learner_loop", where["learn"]))
    learn += bookkeeping(b) if bookkeeping is not None else 0.0
    return {
        "env_step": t("env_step", n) / n,
        "act": around + (workload.act_fraction * t("act", n) / n if learning else 0.0),
        "replay_insert": t("replay_insert", ins) / ins,
        "replay_sample": u * sample,
        "replay_update": u * t("replay_update", b) if workload.prioritized else 0.0,
        "learn": u * learn,
        "weight_sync": u / workload.sync_every * t("weight_sync", 1),
    }


def poll_seconds(tables: Tables, workload: Workload, workers: int, learning: bool = True) -> float:
    """Seconds per env step the learner spends polling the worker pool (worker mode, while learning)."""
    poll = tables.fits.get(("worker_poll", ENV_TARGET))
    if workers <= 0 or poll is None or not learning:
        return 0.0
    return workload.updates_per_step * poll(workers)


def _limits(tables: Tables, seconds: Mapping[str, float], where: Mapping[str, str], workers: int,
            poll: float = 0.0) -> dict[str, float]:
    """Each limit on throughput: stage and device names -> the most env steps/s it allows. `poll`:
    seconds per env step of the learner's worker-pool bookkeeping (CPU, the stage that learns)."""
    limits: dict[str, float] = {}
    # workers == 0: the runtime's in-process mode, every task one after another in one process
    stages = tables.stages if workers > 0 else {"in-process": tuple(seconds)}
    processes = workers + len(stages) - 1 if workers > 0 else 1
    cpu_cap = tables.cpu_capacity(processes)
    stage_load: dict[str, float] = {}
    for stage, tasks in stages.items():
        load = stage_load[stage] = sum(seconds.get(task, 0.0) for task in tasks) + (poll if "learn" in tasks else 0.0)
        procs = workers if stage == "actor" else 1
        limits[f"stage {stage}"] = procs / load if load > 0 else math.inf
    overlap = _overlap_seconds(tables, stage_load, workers, where.get("act", ENV_TARGET))
    if overlap is not None:
        limits["stage learner+actors"] = 1.0 / overlap if overlap > 0 else math.inf
    cpu = tables.target_device[ENV_TARGET]
    loads = _device_load(tables, seconds, where)
    loads[cpu] = loads.get(cpu, 0.0) + poll
    for dev_name, load in loads.items():
        cap = cpu_cap if dev_name == cpu else tables.devices[dev_name].capacity
        limits[f"device {dev_name}"] = cap / load if load > 0 else math.inf
    return limits


def _overlap_seconds(tables: Tables, stage_load: Mapping[str, float], workers: int, act_target: str) -> float | None:
    """Seconds per env step of the actors' flat-out burst plus the learner's remaining work (module
    docstring), or None when the profile has no co-run measurement or nothing runs in parallel. The
    actors' factor is measured per act target (their own work differs), else the CPU's is used."""
    learner_corun = tables.fits.get(("learner_corun", ENV_TARGET))
    actor_corun = tables.fits.get(("actor_corun", act_target)) or tables.fits.get(("actor_corun", ENV_TARGET))
    if workers <= 0 or learner_corun is None or actor_corun is None or "actor" not in stage_load:
        return None
    learner = sum(load for stage, load in stage_load.items() if stage != "actor")
    slow = max(1.0, learner_corun(workers))
    burst = max(1.0, actor_corun(workers)) * stage_load["actor"] / workers
    return burst + max(0.0, learner - burst / slow)


def _device_load(tables: Tables, seconds: Mapping[str, float], where: Mapping[str, str]) -> dict[str, float]:
    load: dict[str, float] = {}
    for task, sec in seconds.items():
        dev = tables.target_device[where[task]]
        load[dev] = load.get(dev, 0.0) + sec
    return load


def predict(tables: Tables, workload: Workload, placement: Mapping[str, str], workers: int) -> Prediction:
    """Predicted throughput, bottleneck, utilization and power of one placement with `workers` actors."""
    if workers < 0:
        raise ValueError(f"workers must be >= 0 (0 = in-process), got {workers}")
    missing = [r for r in ROLES if r not in placement]
    if missing:
        raise ValueError(f"placement has no target for {', '.join(missing)}: give one for each of {', '.join(ROLES)}")
    for role in ROLES:
        if not tables.can_run(role, placement[role]):
            raise KeyError(f"target {placement[role]!r} cannot run {role}")
    where = task_targets(placement)
    seconds = per_step_seconds(tables, workload, placement, learning=True, workers=workers)
    warm = per_step_seconds(tables, workload, placement, learning=False, workers=workers)
    limits = _limits(tables, seconds, where, workers, poll_seconds(tables, workload, workers))
    # on a tie, name the stage: a process that is busy all the time says more than a device that is
    bottleneck = min(limits, key=lambda k: (limits[k], not k.startswith("stage"), k))
    x = limits[bottleneck]
    x_warm = min(_limits(tables, warm, where, workers).values())
    if not math.isfinite(x) or x <= 0:
        raise ValueError("the profile gives zero time for every task: re-profile (pearl-fpga plan --reprofile)")

    used = {tables.target_device[ENV_TARGET]} | {tables.target_device[where[t]] for t in seconds if seconds[t] > 0}
    util = {d: min(1.0, x * load / tables.devices[d].capacity) for d, load in _device_load(tables, seconds, where).items() if d in used}
    power = sum(tables.devices[d].power(util.get(d, 0.0)) for d in used)
    source = "measured" if all(tables.devices[d].power_source == "measured" for d in used) else "nominal"
    start, stop = tables.fits.get(("worker_start", ENV_TARGET)), tables.fits.get(("worker_stop", ENV_TARGET))
    probe = tables.fits.get(("thread_probe", placement["learn"]))
    learner_tasks = ("replay_sample", "replay_update", "learn", "weight_sync")
    u = workload.updates_per_step
    return Prediction(
        probe_s=workload.probe_rounds * probe(1) if probe is not None else 0.0,
        update_s=sum(seconds[t] for t in learner_tasks) / u if u > 0 else 0.0,
        updates_per_step=u,
        run_updates=workload.run_updates,
        startup_s=start(workers) if start is not None and workers > 0 else 0.0,
        shutdown_s=stop(workers) if stop is not None and workers > 0 else 0.0,
        run_steps=workload.total_steps,
        warmup_task_seconds=warm,
        learning_starts=workload.learning_starts,
        placement=dict(placement),
        workers=workers,
        throughput=x,
        warmup_throughput=x_warm,
        bottleneck=bottleneck,
        task_seconds=seconds,
        task_target=where,
        device_utilization=util,
        power_w=power,
        power_source=source,
        task_sources={t: tables.fits[(t, where[t])].source for t in seconds},
    )


def placements(tables: Tables, targets: Sequence[str]) -> list[dict[str, str]]:
    """Every role -> target assignment over `targets` in which each target can run its role."""
    out: list[dict[str, str]] = [{}]
    for role in ROLES:
        out = [dict(p, **{role: t}) for p in out for t in targets if tables.can_run(role, t)]
    return out


def act_fraction(config: Any) -> float:
    """Share of the env steps after learning starts that run the policy network: the algorithm's actor
    head says (DQN explores with probability epsilon, no inference then; DDPG, TD3 and the rest always infer)."""
    from pearl_fpga.algos.registry import learner_class

    return learner_class(config.algo).actor_head(config, 1).inference_share()
