"""Replay split over M shards (Ape-X), sampled as if it were one buffer.

Each shard (`ReplayShard`) holds a local buffer (uniform, or prioritized on the replay kernel) of
capacity buffer_size / M. The learner's `ShardedReplay` draws a batch as one buffer would:

- stratified targets over the shards' totals T_1..T_M (priority sums; sizes for uniform replay) give
  each shard its share k_i of the batch, so sampling stays globally proportional;
- shard i draws its k_i proportionally to its own priorities; the drawn transition's global
  probability is P = (T'_i / T') * p / T_i (T' the totals the split used, T_i the shard's total when
  it drew), and the importance weights (N P)^-beta / max use those global probabilities (beta
  annealed over the run as in PrioritizedReplayBuffer);
- indices come back as shard * stride + local index, and priority updates go to the shard that
  produced each index, tagged with that shard's incarnation: a shard restarted since (empty, being
  refilled) drops them, and the restart and the transitions it lost are counted, never silent.

The shards are reached through two functions, `submit(i, method, *args) -> future` and
`gather(futures) -> results`: direct calls for local shards (tests), Ray actor calls in the Ray engine
(runtime.engines.ray_engine), which also gives the beta annealing horizon (`beta_steps`: the run's
gradient steps, from runtime.schedule).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import CheckpointError
from pearl_fpga.replay.batch import Batch
from pearl_fpga.replay.manager import Replay, ReplayEmpty, make_replay
from pearl_fpga.replay.transitions import Transitions


class ReplayShard:
    """One shard: a local buffer (make_replay's, `beta_steps` as there) plus the identity (incarnation) that
    tells a restart apart."""

    def __init__(self, config: TrainConfig, obs_dim: int, action_shape: tuple[int, ...], discrete: bool, seed: int,
                 backends: tuple[str, ...] = ("cpu",), device: str = "cpu", sizes: dict[str, int] | None = None, *,
                 beta_steps: int) -> None:
        self.replay = make_replay(config, obs_dim, action_shape, discrete, seed, backends, device, sizes,
                                  beta_steps=beta_steps)
        self.incarnation = uuid.uuid4().hex
        self.inserted = 0

    def status(self) -> dict[str, Any]:
        return {"incarnation": self.incarnation, "size": len(self.replay), "total": self.replay.total,
                "inserted": self.inserted}

    def add(self, transitions: Transitions, td_errors: np.ndarray | None = None) -> dict[str, Any]:
        self.replay.add(transitions, td_errors)
        self.inserted += len(transitions)
        return self.status()

    def sample(self, n: int, updates: Sequence[tuple[str, np.ndarray, np.ndarray]] = ()) -> dict[str, Any]:
        """Apply the priority updates that came with the request, then draw n transitions with their
        priorities (none, and size 0 in the status, when the shard is empty)."""
        dropped = sum(self.update(*u) for u in updates)
        out: dict[str, Any] = {"status": self.status(), "dropped": dropped, "asked": n}
        if n > 0 and len(self.replay):
            out["batch"], out["priorities"], out["status"]["total"] = self.replay.sample_with_priorities(n)
        return out

    def update(self, incarnation: str, indices: np.ndarray, td_errors: np.ndarray) -> int:
        """Write priorities; returns how many were dropped because they belong to an earlier incarnation."""
        if incarnation != self.incarnation:
            return len(indices)
        self.replay.update_priorities(indices, td_errors)
        return 0

    def state_dict(self) -> dict[str, Any]:
        return {"replay": self.replay.state_dict(), "inserted": self.inserted}

    def load_state_dict(self, state: dict[str, Any]) -> dict[str, Any]:
        self.replay.load_state_dict(state["replay"])
        self.inserted = int(state["inserted"])
        return self.status()


class ShardedReplay(Replay):
    """The learner's view of M shards, with the interface of replay.manager's buffers."""

    def __init__(self, n_shards: int, stride: int, config: TrainConfig, submit: Callable[..., Any],
                 gather: Callable[[list[Any]], list[Any]], seed: int, beta_steps: int) -> None:
        self.n = n_shards
        self.stride = stride  # shard capacity: global index = shard * stride + local index
        self.prioritized = bool(config.per)
        self.beta_initial, self.beta_steps = config.per_beta, max(beta_steps, 1)
        self.submit, self.gather = submit, gather
        self.rng = np.random.default_rng(seed)
        self.sample_calls = 0
        self.restarts = 0
        self.lost = 0
        self.dropped_updates = 0
        self._status: list[dict[str, Any]] = [{"incarnation": None, "size": 0, "total": 0.0, "inserted": 0}] * n_shards
        self._updates: list[list[tuple[str, np.ndarray, np.ndarray]]] = [[] for _ in range(n_shards)]
        self._prefetched: tuple[int, list[int], list[Any], np.ndarray] | None = None
        self._retired: list[set[str]] = [set() for _ in range(n_shards)]
        self._next_add = 0
        self.refresh()

    # ---- status and restarts -------------------------------------------------------------------
    def observe(self, i: int, status: dict[str, Any]) -> None:
        """Take a shard's status from any reply; a new incarnation is a restart: count what it lost."""
        known = self._status[i]["incarnation"]
        if status["incarnation"] in self._retired[i]:
            return  # a late reply from before the restart
        if known is not None and status["incarnation"] != known:
            self.restarts += 1
            self.lost += int(self._status[i]["size"])
            self._retired[i].add(known)
        self._status[i] = dict(status)

    def refresh(self) -> None:
        for i, status in enumerate(self.gather([self.submit(i, "status") for i in range(self.n)])):
            self.observe(i, status)

    def __len__(self) -> int:
        return sum(int(s["size"]) for s in self._status)

    @property
    def total(self) -> float:
        """The shards' totals at their last report."""
        return sum(float(s["total"]) for s in self._status)

    @property
    def inserted(self) -> int:
        """Transitions inserted into the shards' current incarnations."""
        return sum(int(s["inserted"]) for s in self._status)

    def report(self) -> dict[str, int]:
        return {"shard_restarts": self.restarts, "transitions_lost": self.lost}

    @property
    def beta(self) -> float:
        frac = min(1.0, self.sample_calls / self.beta_steps)
        return self.beta_initial + (1.0 - self.beta_initial) * frac

    # ---- add / sample / update -----------------------------------------------------------------
    def add(self, transitions: Transitions, td_errors: np.ndarray | None = None) -> None:
        """Insert a batch into the next shard in turn (the Ray engine's actors insert directly instead)."""
        i = self._next_add
        self._next_add = (i + 1) % self.n
        self.observe(i, self.gather([self.submit(i, "add", transitions, td_errors)])[0])

    def split(self, batch_size: int, totals: np.ndarray) -> np.ndarray:
        """Each shard's share of a batch: stratified targets over the concatenated totals."""
        edges = np.cumsum(totals)
        targets = (np.arange(batch_size) + self.rng.random(batch_size)) * (edges[-1] / batch_size)
        shard = np.minimum(np.searchsorted(edges, targets, side="right"), self.n - 1)
        return np.bincount(shard, minlength=self.n)

    def sample(self, batch_size: int) -> Batch[np.ndarray]:
        """A batch drawn across the shards. The next batch's draw is sent before this one returns, so it
        is under way while the learner computes (as Ape-X's learner prefetches)."""
        request = self._prefetched if self._prefetched and self._prefetched[0] == batch_size else None
        self._prefetched = None
        out = self._collect(request or self._request(batch_size))
        self._prefetched = self._request(batch_size)
        return out

    def _request(self, batch_size: int) -> tuple[int, list[int], list[Any], np.ndarray]:
        totals = np.array([float(s["total"]) for s in self._status])
        if totals.sum() <= 0:
            self.refresh()
            totals = np.array([float(s["total"]) for s in self._status])
            if totals.sum() <= 0:
                raise ReplayEmpty("cannot sample: every replay shard is empty; add transitions first")
        counts = self.split(batch_size, totals)
        asked = [i for i in range(self.n) if counts[i] or self._updates[i]]
        futures = [self.submit(i, "sample", int(counts[i]), self._updates[i]) for i in asked]
        for i in asked:
            self._updates[i] = []
        return batch_size, asked, futures, totals

    def _collect(self, request: tuple[int, list[int], list[Any], np.ndarray]) -> Batch[np.ndarray]:
        for _ in range(3):  # a shard found empty (restarted) since its last status: refresh and redraw
            batch_size, asked, futures, totals = request
            replies = self.gather(futures)
            for i, reply in zip(asked, replies, strict=True):
                self.observe(i, reply["status"])
                self.dropped_updates += reply["dropped"]
            wanted = [(i, r) for i, r in zip(asked, replies, strict=True) if r.get("asked", 1)]
            if all("batch" in r for i, r in wanted):
                return self._merge([i for i, _ in wanted], [r for _, r in wanted], totals)
            self.refresh()
            request = self._request(batch_size)
        raise ValueError("cannot sample: replay shards keep restarting (see the shard restart count)")

    def _merge(self, asked: list[int], replies: list[dict[str, Any]], totals: np.ndarray) -> Batch[np.ndarray]:
        beta = self.beta  # as PrioritizedReplayBuffer: the exponent before this call is counted
        self.sample_calls += 1
        out = Batch.concatenate([r["batch"] for r in replies])
        out.indices = np.concatenate([i * self.stride + np.asarray(r["batch"].indices, dtype=np.int64)
                                      for i, r in zip(asked, replies, strict=True)])
        out.weights = None
        if self.prioritized:
            prob = np.concatenate([(totals[i] / totals.sum()) * r["priorities"] / r["status"]["total"]
                                   for i, r in zip(asked, replies, strict=True)])
            out.weights = np.power(prob.min() / prob, beta).astype(np.float32)
        return out

    def update_priorities(self, indices: np.ndarray, td_errors: np.ndarray) -> None:
        """Queue each index's new priority for the shard that produced it, tagged with that shard's
        incarnation; the queue goes with the next draw request (one call per shard and step), so a
        draw sees every update queued before it."""
        if not self.prioritized:
            return
        indices, td_errors = np.asarray(indices, dtype=np.int64), np.asarray(td_errors)
        shard = indices // self.stride
        for i in np.unique(shard):
            mask = shard == i
            self._updates[int(i)].append((self._status[int(i)]["incarnation"], indices[mask] % self.stride,
                                          td_errors[mask]))

    def flush(self) -> None:
        """Deliver queued priority updates and wait for a draw in flight (before a checkpoint)."""
        if self._prefetched is not None:
            self._collect(self._prefetched)
            self._prefetched = None
        pending = [i for i in range(self.n) if self._updates[i]]
        for i, reply in zip(pending, self.gather([self.submit(i, "sample", 0, self._updates[i]) for i in pending]),
                            strict=True):
            self._updates[i] = []
            self.observe(i, reply["status"])
            self.dropped_updates += reply["dropped"]

    # ---- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        self.flush()
        return {"kind": "sharded", "shards": self.gather([self.submit(i, "state_dict") for i in range(self.n)]),
                "rng": self.rng.bit_generator.state, "sample_calls": self.sample_calls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "sharded" or len(state.get("shards", ())) != self.n:
            have = f"{len(state['shards'])} shards" if state.get("kind") == "sharded" else f"a {state.get('kind')!r} buffer"
            raise CheckpointError(f"checkpoint replay holds {have}, this run has {self.n} replay shards; resume "
                                  "with the same engine and --replay-shards")
        for i, status in enumerate(self.gather([self.submit(i, "load_state_dict", s)
                                                for i, s in enumerate(state["shards"])])):
            self._status[i] = dict(status)
        self.rng.bit_generator.state = state["rng"]
        self.sample_calls = int(state["sample_calls"])


def local_shards(shards: Sequence[ReplayShard]) -> tuple[Callable[..., Any], Callable[[list[Any]], list[Any]]]:
    """submit/gather over shards in this process (direct calls)."""
    return (lambda i, method, *args: getattr(shards[i], method)(*args)), list
