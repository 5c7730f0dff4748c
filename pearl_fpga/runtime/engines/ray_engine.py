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
  counted (ShardedReplay.report). Priority updates for a lost shard's old indices are dropped. An env
  actor finds its shard by name (a restarted actor re-runs its constructor, whose arguments must not
  hold an actor handle: Ray cannot keep those for a restart). An error raised in an actor or a shard
  (not a death) ends the run with an EngineError that names it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import EngineError
from pearl_fpga.replay.sharded import ReplayShard, ShardedReplay
from pearl_fpga.runtime.actor import Rollout
from pearl_fpga.runtime.engines.base import RunSetup
from pearl_fpga.runtime.engines.ray_cluster import (RAY_LOG_NAME, actor_error, as_options, check_resources, connect,
                                                    import_ray, size_to_cluster)
from pearl_fpga.runtime.schedule import RAY_MESSAGE_STEPS, allowed_gradient_steps

CALL_TIMEOUT_S = 120.0
"""A shard call that has not returned by then (its node gone and no other node can host it) is an error."""


def ray_credit_chunk(config: TrainConfig) -> int:
    """Env steps per grant: the allowed lag shared by the actors, at most RAY_MESSAGE_STEPS, whole env groups."""
    share = min(RAY_MESSAGE_STEPS, max(config.actor_lag // config.actors, 1))
    return max(config.n_envs, share // config.n_envs * config.n_envs)


class RayEngine:
    name = "ray"
    lockstep = False

    def __init__(self, setup: RunSetup) -> None:
        """Start Ray (or join the cluster), check its resources, and start the replay shards."""
        self.setup = setup
        cfg = self.config = setup.config
        self.started_ray = connect(cfg.ray_address, logdir=setup.logdir)
        self.ray_log = setup.logdir / RAY_LOG_NAME if setup.logdir is not None else None
        self.ray: Any = import_ray()
        self.actors: list[Any] = []
        self.restarts = 0
        self.weights_ref: list[Any] = []
        self.version = 0
        self.chunk = ray_credit_chunk(cfg)
        self.refill_steps = max(self.chunk * cfg.actors, cfg.batch_size)
        self._reset_grants(0)
        cluster = self.ray.cluster_resources()
        self.actor_resources, self.shard_resources, self.sizing = size_to_cluster(
            cfg.actors, cfg.replay_shards, cfg.actor_resources, cfg.shard_resources, cluster)
        check_resources([("env actors", cfg.actors, self.actor_resources),
                         ("replay shards", cfg.replay_shards, self.shard_resources)], cluster)
        from pearl_fpga.runtime.emulation import replay_sizes

        stride = cfg.buffer_size // cfg.replay_shards
        shard_cfg = TrainConfig.from_dict({**cfg.to_dict(), "buffer_size": stride})
        beta_steps = allowed_gradient_steps(cfg, cfg.total_steps)
        remote = self.ray.remote(max_restarts=-1, max_task_retries=-1)(ReplayShard)
        run = uuid.uuid4().hex[:12]  # names unique in the cluster: other runs may share it
        self.shard_names = [f"pearl-fpga-replay-{run}-{i}" for i in range(cfg.replay_shards)]
        self.shards = [remote.options(name=self.shard_names[i], **as_options(self.shard_resources)).remote(
            shard_cfg, setup.spec.obs_dim, setup.action_shape, setup.spec.discrete, setup.seed + 1 + 7 * i,
            setup.placement.replay_backends(), setup.placement.replay, replay_sizes(setup.placement),
            beta_steps=beta_steps)
            for i in range(cfg.replay_shards)]
        self.replay = ShardedReplay(cfg.replay_shards, stride, cfg, self._submit, self._gather, setup.seed + 3, beta_steps)

    def _submit(self, i: int, method: str, *args: Any) -> Any:
        return getattr(self.shards[i], method).remote(*args)

    def _gather(self, refs: list[Any]) -> list[Any]:
        try:
            return self.ray.get(refs, timeout=CALL_TIMEOUT_S)
        except self.ray.exceptions.GetTimeoutError as exc:
            raise EngineError(f"a replay shard did not answer within {CALL_TIMEOUT_S:.0f} s: its node is gone and no "
                              "other node has the shard_resources to restart it; add a node or lower "
                              "shard_resources") from exc
        except self.ray.exceptions.RayTaskError as exc:
            raise actor_error(exc, "replay shard", self.ray_log) from exc

    # ---- env actors ----------------------------------------------------------------------------
    def _reset_grants(self, env_steps: int) -> None:
        self.granted = env_steps
        self.pending: dict[Any, tuple[int, int]] = {}  # run() reference -> (actor, credit)
        self.recovering: dict[Any, int] = {}  # ping reference -> actor, for actors Ray is restarting
        self.busy: set[int] = set()
        self.last_grant: dict[int, int] = {}  # the least recently granted free actor goes first

    def start(self, env_steps: int, weights: dict[str, Any]) -> None:
        from pearl_fpga.runtime.engines.env_actor import EnvActor

        s, cfg = self.setup, self.config
        remote = self.ray.remote(max_restarts=-1, max_task_retries=0)(EnvActor)
        spec = {"config": cfg.to_dict(), "placement": str(s.placement), "calibration": s.calibration}
        self.actors = [remote.options(**as_options(self.actor_resources)).remote(
            i, {**spec, "seed": s.actor_seed(env_steps) + 104_729 * i}, self.shard_names[i % len(self.shards)])
            for i in range(cfg.actors)]
        self._reset_grants(env_steps)
        self.set_weights(weights)

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.weights_ref = [self.ray.put({k: v.detach().cpu() for k, v in weights.items()})]
        self.version += 1

    def sample(self, upto: int, wait: bool) -> list[Rollout]:
        ray, cfg = self.ray, self.config
        for i in sorted(range(len(self.actors)), key=lambda a: self.last_grant.get(a, -1)):
            if i in self.busy or self.granted >= upto:
                continue
            credit = -(-min(self.chunk, upto - self.granted) // cfg.n_envs) * cfg.n_envs
            ref = self.actors[i].run.remote(credit, self.granted, self.weights_ref, self.version)
            self.pending[ref], self.granted = (i, credit), self.granted + credit
            self.last_grant[i] = self.granted
            self.busy.add(i)
        waiting = list(self.pending) + list(self.recovering)
        ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0.05 if wait else 0.0) if waiting else ([], [])
        out: list[Rollout] = []
        for ref in ready:
            if ref in self.recovering:
                i = self.recovering.pop(ref)
                try:
                    ray.get(ref)
                    self.busy.discard(i)
                except ray.exceptions.RayActorError:
                    time.sleep(0.05)
                    self.recovering[self.actors[i].ping.remote()] = i
                continue
            i, credit = self.pending.pop(ref)
            try:
                msg = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                raise actor_error(exc, f"env actor {i}", self.ray_log) from exc
            except ray.exceptions.RayActorError:
                self.granted -= credit  # nothing of this grant was counted: grant it again
                self.restarts += 1
                self.recovering[self.actors[i].ping.remote()] = i
                self.setup.note(f"Ray env actor {i} died; Ray restarts it ({self.restarts} so far)")
                continue
            self.busy.discard(i)
            self.replay.observe(i % len(self.shards), msg["status"])
            out.append(Rollout(msg["n"], None, msg["finished"], msg["seconds"], msg["calls"]))
        return out

    def faults(self) -> dict[str, int]:
        return {"actor_restarts": self.restarts, **self.replay.report()}

    def stop(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []

    def close(self) -> None:
        if self.ray is None:
            return
        self.stop()
        if self.shards:
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
        self.ray = None
