"""The worker mode's costs, measured on the runtime's own WorkerPool: start, polling, stop, and how much
slower the learner and the workers run side by side (the co-run factors); and the CPU time several
processes get together on this machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.loops import actor_loop, explore_overhead, learner_thread_count, random_transitions
from pearl_fpga.planner.profile import time_call
from pearl_fpga.runtime.schedule import credit_chunk

def cpu_parallel(counts: Sequence[int], seconds: float) -> list[tuple[float, float]]:
    """(P, CPU seconds P busy processes get per wall second together, relative to one process).

    On an idle machine this is min(P, cores); when others share the machine it is less, and that
    is what our actor workers and learner will get."""
    import subprocess
    import sys

    code = ("import time, sys\nd = float(sys.argv[1])\nw0 = time.perf_counter(); c0 = time.process_time()\n"
            "while time.perf_counter() - w0 < d: sum(range(1000))\n"
            "print((time.process_time() - c0) / (time.perf_counter() - w0))")
    rates = {}
    for p in counts:
        procs = [subprocess.Popen([sys.executable, "-c", code, str(seconds)], stdout=subprocess.PIPE, text=True)
                 for _ in range(p)]
        rates[p] = sum(float(proc.communicate()[0].strip() or 0.0) for proc in procs)
    one = rates.get(1) or max(rates.values()) or 1.0
    return [(float(p), r / one) for p, r in sorted(rates.items())]


def worker_pool_costs(config: TrainConfig, counts: Sequence[int], act_targets: Sequence[str] = ("cpu",),
                      poll_iterations: int = 200, corun_s: float = 1.0,
                      timeout_s: float = 120.0) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """The runtime's own worker pool, timed: for each W in `counts`, start W actor processes with
    `WorkerPool` exactly as the Trainer does, then measure

    - "worker_start": seconds until each worker has delivered its first message of transitions;
    - "worker_poll": seconds of the learner loop's bookkeeping of the pool per iteration (receive,
      grant, restart check) while the workers are up;
    - "learner_corun": how many times longer a learner iteration (sample + gradient step, the
      learner's own `learn`) takes while the W workers step their envs flat out than just before,
      with them idle; on a machine whose cores are shared (with other users, or as hyper-threads)
      it is well above 1;
    - "actor_corun": wall seconds per env step of each worker meanwhile (everything a worker does per
      step: exploration, inference, env step, copying and sending transitions), relative to the
      actor loop (exploration, inference, env step) alone in this process, on the pool's act target;
    - "worker_stop": seconds to close the pool.

    Each act target in `act_targets` gets its own pools; "actor_corun" is kept per act target, the
    others from the first. Returns (task, target) -> [(W, value)] with target "cpu" for all but
    "actor_corun". Start and stop are one-off costs every worker run pays; on a shared machine all of
    these vary with the load, so a benchmark re-measures them right before its run."""
    from pearl_fpga.algos import Batch, make_learner
    from pearl_fpga.runtime.envs import EnvGroup, env_spec
    from pearl_fpga.runtime.placement import Placement
    from pearl_fpga.runtime.policy import ActorPolicy
    from pearl_fpga.runtime.envs import calibration_batch
    from pearl_fpga.runtime.update_schedule import schedule_control, step_timing

    import torch

    spec = env_spec(config.env_id)
    algo = make_learner(config, spec.obs_dim, spec.action_dim, device="cpu", seed=0)
    weights = {k: v.detach().cpu().clone() for k, v in algo.policy_module.state_dict().items()}
    calibration = calibration_batch(config.env_id, 0)
    rng = np.random.default_rng(5)
    data = random_transitions(rng, 4096, spec)
    b = config.batch_size

    stepping = step_timing(schedule_control(algo))  # DDPG, TD3: the schedule a run would measure, beside the workers

    def learner_step() -> None:
        idx = rng.integers(0, 4096, size=b)
        batch = Batch(*data.rows(idx).arrays()).to_torch("cpu", discrete=spec.discrete)
        with stepping:
            algo.update(batch)

    out: dict[tuple[str, str], list[tuple[float, float]]] = {}
    threads = torch.get_num_threads()
    learner_threads = learner_thread_count(config)
    torch.set_num_threads(learner_threads)
    try:
        for t_index, act in enumerate(act_targets):
            placement = Placement(act=act, replay="cpu", learn="cpu")
            # the actor loop alone, in this process, on the pool's act target: what "actor_corun" is relative to
            torch.set_num_threads(1)
            policy = ActorPolicy(algo.policy_module, placement, algo.actor_head(config, spec.action_dim), calibration)
            act_pts, env_pts = actor_loop(config, policy, (config.n_envs,), 60, EnvGroup)
            actor_alone = (act_pts[0][1] + env_pts[0][1]
                           + explore_overhead(config, spec, (config.n_envs,), 60)[0][1]) / config.n_envs
            torch.set_num_threads(learner_threads)
            for w in counts:
                start, poll, stop, learner_corun, actor_corun = _pool_session(
                    config, w, placement, calibration, weights, learner_step, actor_alone, poll_iterations, corun_s,
                    timeout_s)
                out.setdefault(("actor_corun", act), []).append((float(w), actor_corun))
                if t_index == 0:
                    for task, value in (("worker_start", start), ("worker_poll", poll), ("worker_stop", stop),
                                        ("learner_corun", learner_corun)):
                        out.setdefault((task, "cpu"), []).append((float(w), value))
    finally:
        torch.set_num_threads(threads)
    return out


def _pool_session(config: TrainConfig, w: int, placement: Any, calibration: np.ndarray, weights: dict[str, Any],
                  learner_step: Callable[[], None], actor_alone: float, poll_iterations: int, corun_s: float,
                  timeout_s: float) -> tuple[float, float, float, float, float]:
    """One WorkerPool of w workers: (start s, poll s, stop s, learner co-run factor, actor co-run factor)."""
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.workers import WorkerPool

    cfg = TrainConfig.from_dict({**config.to_dict(), "workers": int(w)})
    chunk = credit_chunk(cfg)  # as the Trainer grants
    t0 = time.perf_counter()
    pool = WorkerPool(cfg, placement, calibration, weights, seed=7919)
    try:
        granted = pool.grant_upto(0, 2 * chunk * w, chunk)
        given = list(pool.credit)
        while any(c >= g for c, g in zip(pool.credit, given)):  # some worker has not reported yet
            if time.perf_counter() - t0 > timeout_s:
                raise RuntimeError(f"{w} actor worker(s) delivered nothing within {timeout_s:.0f} s")
            pool.receive(timeout=0.05)
            if any(not p.is_alive() for p in pool.procs):
                raise RuntimeError("an actor worker process died while starting")
        t1 = time.perf_counter()
        while any(c > 0 for c in pool.credit):  # let them use up their credit: idle from here on
            pool.receive(timeout=0.05)
        tp = time.perf_counter()
        for _ in range(poll_iterations):  # the learner loop's bookkeeping around each gradient step
            pool.receive(timeout=0.0)
            pool.grant_upto(granted, granted, chunk)
            pool.restart_dead()
        poll = (time.perf_counter() - tp) / max(1, poll_iterations)
        alone = time_call(learner_step, max(5, int(corun_s / 2 / max(time_call(learner_step, 3, 1), 1e-4))))
        # workers step flat out (credit kept topped up) while this process runs learner iterations
        granted = pool.grant_upto(granted, granted + (1 << 40), chunk)
        steps, learn_s, iters = 0, 0.0, 0
        c0 = time.perf_counter()
        while time.perf_counter() - c0 < corun_s:
            steps += sum(m.n for m in pool.receive(timeout=0.0))
            granted = pool.grant_upto(granted, granted + (1 << 40), chunk)
            s0 = time.perf_counter()
            learner_step()
            learn_s += time.perf_counter() - s0
            iters += 1
        wall = time.perf_counter() - c0
    finally:
        t3 = time.perf_counter()
        pool.close()
        t4 = time.perf_counter()
    return t1 - t0, poll, t4 - t3, (learn_s / max(1, iters)) / alone, (wall * w / max(1, steps)) / actor_alone
