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


class CatalogError(InputError):
    """bitstreams/catalog.json is missing, malformed, or names an unknown board (or kernel)."""


class ConfigError(InputError):
    """A TrainConfig file (--config) is unreadable or holds a field of the wrong type or range."""


class CheckpointError(InputError):
    """A checkpoint, replay dump or profile is corrupt or does not match what loads it."""


class ManifestError(InputError):
    """A bitstream manifest is missing, malformed or does not match the driver."""


class ArtifactError(InputError):
    """An exported policy (pearl-fpga export) is missing, corrupt, or does not fit what loads it."""


class RecordError(InputError):
    """A benchmark record (docs/figures/*.json, a per-vendor copy under hosts/) is not valid JSON, not a
    record, or filed under another CPU vendor than its machine's."""


class MissingDependency(PearlError, ImportError):
    """A feature needs a package that this install lacks (torch on a board install, onnx without the
    export extra); the message names the install command."""


class EngineError(PearlError, RuntimeError):
    """An execution engine cannot start or lost what it cannot recover (e.g. an unreachable Ray cluster)."""


class DivergenceError(PearlError, RuntimeError):
    """Training produced a non-finite loss, weight or TD error, or an env a non-finite transition."""


class NoLearningError(PearlError, ValueError):
    """A run's budget ends before the schedule allows one gradient step (strict mode; otherwise a
    NoLearningWarning): the message gives the numbers and the fix."""


class NoLearningWarning(UserWarning):
    """The warning NoLearningError replaces when the run is not strict."""


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

EXTRAS = {"torch": "train", "gymnasium": "train", "matplotlib": "train", "tensorboard": "train",
          "threadpoolctl": "train", "onnx": "export", "onnxscript": "export", "onnxruntime": "export",
          "qonnx": "export", "pynq": "pynq"}
"""Top-level packages of the optional extras (pyproject.toml) -> the extra that installs them."""

NO_TORCH_HINT = ("a board install has no torch (PyTorch publishes no wheel for 32-bit ARM boards such as the "
                 "PYNQ-Z2): train on a host, `pearl-fpga export RUN` there, and load the exported policy on the "
                 "board with MLPInfer.load (docs/hardware.md, \"Deploying a trained policy\")")


def missing_dependency(exc: ImportError, what: str) -> MissingDependency | None:
    """The MissingDependency to raise for `exc` when it is a package of one of the extras is missing
    (`what` needs it), else None (a different import problem: let it propagate)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or name not in EXTRAS:
        return None
    extra = EXTRAS[name]
    hint = f"; {NO_TORCH_HINT}" if name == "torch" else ""
    return MissingDependency(f"{what} needs {name}, which is not installed here: pip install 'pearl_fpga[{extra}]' "
                             f"(in a checkout: make venv){hint}")
