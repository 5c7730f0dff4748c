"""The replay buffers and their shared pieces: `transitions` (Transitions, the one type env steps have
from every actor to every buffer), `batch` (Batch, the one sampled-batch type from every buffer to every
learner), `buffer` (PrioritizedReplayBuffer on the replay kernel), `state` (its saved state: keys,
validation, .npz file), `manager` (the Replay interface, the uniform and prioritized buffers a run uses,
make_replay) and `sharded` (the replay split over shards, sampled as one buffer)."""

from pearl_fpga.replay.batch import Batch
from pearl_fpga.replay.buffer import PrioritizedReplayBuffer
from pearl_fpga.replay.state import STATE_FORMAT
from pearl_fpga.replay.transitions import Transitions

__all__ = ["STATE_FORMAT", "Batch", "PrioritizedReplayBuffer", "Transitions"]
