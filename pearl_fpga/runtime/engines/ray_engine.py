"""The `ray` engine (Ape-X on Ray): `config.actors` env actors and `config.replay_shards` replay shards
as Ray actors, on one host or a Ray cluster; the learner stays in this process.

- Flow control as in the processes engine: the learner grants each actor credit (env steps, from a
  global step index that drives exploration), so actors never run more than `config.actor_lag` env
  steps ahead of the learner and the update-to-data schedule holds exactly as in the other engines.
  A grant is one Ray call that steps up to RAY_MESSAGE_STEPS env steps and inserts them into the
  actor's shard (actor i feeds shard i mod M) in one call.
- Weights: one `ray.put` per sync; actors get the reference with their next grant and fetch it once.
- Faults: Ray restarts a dead actor or shard (max_restarts=-1). A dead actor's grant is returned and
  re-granted; a restarted shard starts empty, is refilled by its actors, and its lost transitions are
  counted (ShardedReplay.report). Priority updates for a lost shard's old indices are dropped.
"""

from __future__ import annotations

import time
from typing import Any

from pearl_fpga.errors import EngineError
from pearl_fpga.runtime.engines.base import LearnerHost
from pearl_fpga.runtime.engines.processes import credit_limit
from pearl_fpga.runtime.engines.ray_cluster import as_options, check_resources, connect, import_ray, size_to_cluster
from pearl_fpga.runtime.engines.sharded_replay import ShardedReplay, ShardsEmpty
from pearl_fpga.runtime.schedule import RAY_MESSAGE_STEPS, allowed_gradient_steps

CALL_TIMEOUT_S = 120.0
"""A shard call that has not returned by then (its node gone and no other node can host it) is an error."""


def ray_credit_chunk(config: Any) -> int:
    """Env steps per grant: the allowed lag shared by the actors, at most RAY_MESSAGE_STEPS, whole env groups."""
    share = min(RAY_MESSAGE_STEPS, max(config.actor_lag // config.actors, 1))
    return max(config.n_envs, share // config.n_envs * config.n_envs)


class RayEngine:
    name = "ray"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.ray: Any = None  # imported by make_replay, after connect() chose how
        self.started_ray = False
        self.shards: list[Any] = []
        self.replay: ShardedReplay | None = None
        self.actors: list[Any] = []
        self.restarts = 0
        self.weights_ref: list[Any] = []
        self.version = 0
        self.actor_resources: dict[str, float] = {}
        self.shard_resources: dict[str, float] = {}
        self.sizing = ""  # how the actors' and shards' resources were chosen, for the run's summary

    # ---- replay shards -------------------------------------------------------------------------
    def make_replay(self, host: LearnerHost, build: Any) -> ShardedReplay:
        """Start Ray (or join the cluster), check its resources, and start the replay shards."""
        from pearl_fpga.config import TrainConfig
        from pearl_fpga.runtime.engines.sharded_replay import ReplayShard

        cfg = self.config
        self.started_ray = connect(cfg.ray_address)
        self.ray = ray = import_ray()
        cluster = ray.cluster_resources()
        self.actor_resources, self.shard_resources, self.sizing = size_to_cluster(
            cfg.actors, cfg.replay_shards, cfg.actor_resources, cfg.shard_resources, cluster)
        check_resources([("env actors", cfg.actors, self.actor_resources),
                         ("replay shards", cfg.replay_shards, self.shard_resources)], cluster)
        stride = cfg.buffer_size // cfg.replay_shards
        shard_cfg = TrainConfig.from_dict({**cfg.to_dict(), "buffer_size": stride})
        from pearl_fpga.runtime.emulation import replay_sizes

        remote = ray.remote(max_restarts=-1, max_task_retries=-1)(ReplayShard)
        action_shape = () if host.spec.discrete else (host.spec.action_dim,)
        self.shards = [remote.options(**as_options(self.shard_resources)).remote(
            shard_cfg, host.spec.obs_dim, action_shape, host.spec.discrete, host.seed + 1 + 7 * i,
            host.placement.replay_backends(), host.placement.replay, replay_sizes(host.placement))
            for i in range(cfg.replay_shards)]
        beta_steps = allowed_gradient_steps(cfg, cfg.total_steps)
        self.replay = ShardedReplay(cfg.replay_shards, stride, cfg, self._submit, self._gather, host.seed + 3, beta_steps)
        return self.replay

    def _submit(self, i: int, method: str, *args: Any) -> Any:
        return getattr(self.shards[i], method).remote(*args)

    def _gather(self, refs: list[Any]) -> list[Any]:
        try:
            return self.ray.get(refs, timeout=CALL_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError as exc:
            raise EngineError(f"a replay shard did not answer within {CALL_TIMEOUT_S:.0f} s: its node is gone and no "
                              "other node has the shard_resources to restart it; add a node or lower "
                              "shard_resources") from exc

    # ---- env actors ----------------------------------------------------------------------------
    def _start_actors(self, host: LearnerHost) -> None:
        from pearl_fpga.runtime.engines.env_actor import EnvActor

        cfg = self.config
        remote = self.ray.remote(max_restarts=-1, max_task_retries=0)(EnvActor)
        spec = {"config": cfg.to_dict(), "placement": str(host.placement), "calibration": host.calibration}
        self.actors = [remote.options(**as_options(self.actor_resources)).remote(
            i, {**spec, "seed": host.seed + 7919 * (1 + host.env_steps) + 104_729 * i}, self.shards[i % len(self.shards)])
            for i in range(cfg.actors)]
        self.broadcast(host, host.policy_weights())

    def broadcast(self, host: LearnerHost, weights: dict[str, Any]) -> None:
        self.weights_ref = [self.ray.put({k: v.detach().cpu() for k, v in weights.items()})]
        self.version += 1

    def run(self, host: LearnerHost, end: int) -> None:
        ray, cfg, replay = self.ray, self.config, self.replay
        assert replay is not None
        self._start_actors(host)
        chunk = ray_credit_chunk(cfg)
        pending: dict[Any, tuple[int, int]] = {}  # run() reference -> (actor, credit)
        recovering: dict[Any, int] = {}  # ping reference -> actor, for actors Ray is restarting
        busy: set[int] = set()
        last_grant: dict[int, int] = {}  # the least recently granted free actor goes first
        granted = host.env_steps
        while host.env_steps < end:
            limit = credit_limit(cfg, host.grad_steps, end)
            if not replay.can_sample():  # every shard restarted empty: refill them before the learner goes on
                limit = min(end, max(limit, host.env_steps + max(chunk * len(self.actors), cfg.batch_size)))
            for i in sorted(range(len(self.actors)), key=lambda a: last_grant.get(a, -1)):
                if i in busy or granted >= limit:
                    continue
                credit = -(-min(chunk, limit - granted) // cfg.n_envs) * cfg.n_envs
                ref = self.actors[i].run.remote(credit, granted, self.weights_ref, self.version)
                pending[ref], granted = (i, credit), granted + credit
                last_grant[i] = granted
                busy.add(i)
            can_learn = allowed_gradient_steps(cfg, host.env_steps) > host.grad_steps
            waiting = list(pending) + list(recovering)
            ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0.0 if can_learn else 0.05) if waiting else ([], [])
            for ref in ready:
                if ref in recovering:
                    i = recovering.pop(ref)
                    try:
                        ray.get(ref)
                        busy.discard(i)
                    except ray.exceptions.RayActorError:
                        time.sleep(0.05)
                        recovering[self.actors[i].ping.remote()] = i
                    continue
                i, credit = pending.pop(ref)
                try:
                    msg = ray.get(ref)
                except ray.exceptions.RayActorError:
                    granted -= credit  # nothing of this grant was counted: grant it again
                    self.restarts += 1
                    recovering[self.actors[i].ping.remote()] = i
                    if host.logger is not None:
                        host.logger.message(f"Ray env actor {i} died; Ray restarts it ({self.restarts} so far)")
                    continue
                busy.discard(i)
                replay.observe(i % len(self.shards), msg["status"])
                host.timer.merge(msg["seconds"], msg["calls"])
                host.record_env_steps(msg["n"], msg["finished"])
                host.periodic(msg["n"])
            if allowed_gradient_steps(cfg, host.env_steps) > host.grad_steps and replay.can_sample():
                self._learn(host, host.grad_steps + 1)
        self._learn(host, allowed_gradient_steps(cfg, host.env_steps))  # False only if every shard just restarted

    def _learn(self, host: LearnerHost, allowed: int) -> bool:
        """Run the learner up to `allowed`; False when every shard was found empty (all restarted):
        the actors refill them while the learner waits."""
        try:
            host.learn_until(allowed)
        except ShardsEmpty:
            if host.logger is not None:
                host.logger.message("every replay shard is empty (restarted); the learner waits for the actors")
            return False
        return True

    def report(self) -> dict[str, int]:
        out = {"actor_restarts": self.restarts}
        if self.replay is not None:
            out.update(self.replay.report())
        return out

    def stop(self) -> None:
        if self.ray is None:
            return
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []

    def close(self) -> None:
        if self.ray is None:
            return
        self.stop()
        if self.replay is not None and self.shards:
            try:
                self.replay.flush()  # a draw in flight and queued updates finish before the shards go
            except EngineError:
                pass
        for shard in self.shards:
            self.ray.kill(shard, no_restart=True)
        self.shards = []
        if self.started_ray and self.ray.is_initialized():
            self.ray.shutdown()
        self.started_ray = False
