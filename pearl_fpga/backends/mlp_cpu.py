"""The "cpu" backend of the MLP kernel: the HLS C++ (hls/mlp) compiled into pearl_fpga._mlp_native."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pearl_fpga.spec.mlp import check_layers
from pearl_fpga.errors import BackendUnavailable
from pearl_fpga.spec.mlp import QuantizedLayer, encode_load_stream


def native_module():
    """The compiled extension, or BackendUnavailable saying how to build it."""
    try:
        from pearl_fpga import _mlp_native
    except ImportError as exc:
        raise BackendUnavailable(
            "the cpu backend of the MLP kernel is not built (pearl_fpga._mlp_native is missing): "
            f"run `make native` (or `pip install -e .`) in the repository; import error: {exc}"
        ) from exc
    return _mlp_native


def _limit(name: str, value: int | None, built: int) -> int:
    if value is None:
        return int(built)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= built:
        raise ValueError(f"{name} must be an integer from 1 to {built} (the cpu build's), got {value!r}")
    return int(value)


class CpuMLPBackend:
    """The kernel's C++ on this CPU. path="auto" runs the fastest MAC array the CPU has ("avx512vnni",
    "avx512", "avx2vnni", "avx2": `PATHS`), bit-identical to "plain", the kernel's own HLS loops (used
    where none exists).

    A batch large enough to pay for it (`parallel_batch`, derived from the network's size) is split over
    `threads` threads; the bits are the same for any count. threads=0 (the default) follows torch's
    intra-op thread count where torch is loaded (the runtime sets it per process: 1 in actor processes),
    else the cores this process may use, at most OMP_NUM_THREADS.

    Besides the MLPBackend protocol it offers the fused float path MLPInfer uses:
    `set_io_format(fa_in, fa_out)`, `infer_float(obs)` and `act_argmax(obs)`.
    """

    name = "cpu"

    def __init__(self, path: str = "auto", threads: int = 0, max_layers: int | None = None,
                 max_width: int | None = None, max_batch: int | None = None) -> None:
        """`max_layers`, `max_width`, `max_batch`: smaller sizes than the build's (a board's synthesized
        ones, for fpga-emu); None keeps the build's, a larger one is refused."""
        native = native_module()
        self.max_layers: int = _limit("max_layers", max_layers, native.MAX_LAYERS)
        self.max_width: int = _limit("max_width", max_width, native.MAX_WIDTH)
        self.max_batch: int = _limit("max_batch", max_batch, native.MAX_BATCH)
        self.last_cycles: int | None = None
        self.engine = native.Engine(path, threads)
        self.infer_float = self.engine.infer_float
        self.act_argmax = self.engine.act_argmax
        self.set_io_format = self.engine.set_io_format

    @property
    def path(self) -> str:
        """The MAC array in use: one of `_mlp_native.PATHS`, e.g. "avx512vnni", or "plain"."""
        return str(self.engine.path)

    @property
    def threads(self) -> int:
        """Threads for a batch of at least `parallel_batch` observations; 0: automatic (see the class)."""
        return int(self.engine.threads)

    @threads.setter
    def threads(self, threads: int) -> None:
        self.engine.threads = threads

    @property
    def parallel_batch(self) -> int:
        """The batch size from which a call is split over threads (needs loaded weights). Setting 0 goes
        back to the size derived from the network's work."""
        return int(self.engine.parallel_batch)

    @parallel_batch.setter
    def parallel_batch(self, batch: int) -> None:
        self.engine.parallel_batch = batch

    def load(self, layers: Sequence[QuantizedLayer], head: str) -> None:
        check_layers(layers, head, self.max_layers, self.max_width)
        error = self.engine.load(encode_load_stream(layers, head))
        if error:
            raise ValueError(f"the kernel rejected the LOAD stream (error register {error:#x}); old weights kept")

    def infer(self, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        out, argmax = self.engine.infer_int(x_q)
        return out, argmax
