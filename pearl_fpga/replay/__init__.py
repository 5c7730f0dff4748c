"""The replay buffers' shared pieces: `transitions` (Transitions, the one type env steps have from every
actor to every buffer), `batch` (Batch, the one sampled-batch type from every buffer to every learner),
`buffer` (PrioritizedReplayBuffer on the replay kernel) and `state` (its saved state: keys, validation,
.npz file)."""

from pearl_fpga.replay.batch import Batch
from pearl_fpga.replay.buffer import PrioritizedReplayBuffer
from pearl_fpga.replay.state import STATE_FORMAT
from pearl_fpga.replay.transitions import Transitions

__all__ = ["STATE_FORMAT", "Batch", "PrioritizedReplayBuffer", "Transitions"]
