"""Exceptions of pearl_fpga. Every message names the problem and how to fix it."""


class PearlError(Exception):
    """Base class of pearl_fpga's own errors."""


class BackendUnavailable(PearlError, RuntimeError):
    """A backend cannot run on this machine (missing tool, board, bitstream or extension)."""


class KernelTimeout(PearlError, TimeoutError):
    """A kernel did not signal completion in time."""


class InputError(PearlError, ValueError):
    """A file or value a user handed the package is refused: the message names the file, the field, the
    rule it breaks and the fix (pearl_fpga.safe_io reads every such file)."""


class ConfigError(InputError):
    """A TrainConfig file (--config) is unreadable or holds a field of the wrong type or range."""


class CheckpointError(InputError):
    """A checkpoint, replay dump or profile is corrupt or does not match what loads it."""


class ManifestError(InputError):
    """A bitstream manifest is missing, malformed or does not match the driver."""


class EngineError(PearlError, RuntimeError):
    """An execution engine cannot start or lost what it cannot recover (e.g. an unreachable Ray cluster)."""


class DivergenceError(PearlError, RuntimeError):
    """Training produced a non-finite loss, weight or TD error, or an env a non-finite transition."""


class DirectoryInUse(PearlError, RuntimeError):
    """Another run holds the lock of a log or checkpoint directory."""


class TrainingInterrupted(KeyboardInterrupt):
    """train() stopped at a step boundary after SIGINT, SIGTERM or Trainer.request_stop().

    `signum` is the signal (None for request_stop), `checkpoint` the directory written at the stop
    (None when the Trainer has no checkpoint_dir)."""

    def __init__(self, message: str, signum: int | None = None, checkpoint: object = None) -> None:
        super().__init__(message)
        self.signum = signum
        self.checkpoint = checkpoint


class LinkError(PearlError, RuntimeError):
    """The serial link to a board carried a corrupted frame, or the board's bridge refused one."""
