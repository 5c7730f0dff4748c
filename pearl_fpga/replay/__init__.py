"""The prioritized replay buffer on the replay kernel: `buffer` (PrioritizedReplayBuffer, ReplayBatch)
and `state` (its saved state: keys, validation, .npz file)."""

from pearl_fpga.replay.buffer import PrioritizedReplayBuffer, ReplayBatch
from pearl_fpga.replay.state import STATE_FORMAT

__all__ = ["STATE_FORMAT", "PrioritizedReplayBuffer", "ReplayBatch"]
