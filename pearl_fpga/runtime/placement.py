"""Placement: which device runs each task of the training loop.

Tasks: "act" (policy inference in the actors), "replay" (the prioritized-replay sum tree, used with
PER; a uniform buffer is plain host memory), "learn" (gradient steps). Devices:

| device       | act                                   | replay (PER)                      | learn |
| ------------ | ------------------------------------- | --------------------------------- | ----- |
| "cpu"        | torch on the CPU                      | sum tree, C++ build ("cpu")       | torch CPU |
| "cpu-kernel" | MLP kernel, C++ build                 | sum tree, C++ build               | -     |
| "fpga-emu"   | MLP kernel emulated (C++ build computes, the planner models the board's time) | same | - |
| "cuda"       | torch on the GPU                      | -                                 | torch CUDA |
| "fpga"       | MLP kernel on a board (pynq/xrt)      | sum tree on a board               | -     |
| "cpu-bf16"   | -                                     | -                                 | torch CPU, bfloat16 GEMMs |
| "cuda-bf16"  | -                                     | -                                 | torch CUDA, bfloat16 GEMMs |

The "-bf16" learn targets run the learner's wide GEMMs in bfloat16 with float32 master weights,
optimizer state and loss (pearl_fpga.algos.common.cast_layers); they need a CPU with AMX or
AVX512_BF16, or a CUDA GPU with bfloat16 (`bf16_unsupported` says what is missing). Acting is
unchanged: the actors run the float32 network or the kernels' fixed-point one.

`parse_placement("fpga-emu")` puts act and replay on fpga-emu and learns on the CPU;
"act=fpga-emu,replay=cpu,learn=cpu" names each task. "fpga-emu:<board>" emulates that catalog board
(one per run), plain "fpga-emu" the catalog's default board: the kernels run at the board's
synthesized sizes (runtime.emulation). The dispatcher may extend this module.
"""

from __future__ import annotations

import warnings

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pearl_fpga.host import BF16_SUFFIX, bf16_unsupported, learn_target  # noqa: F401 - re-exported for the planner and benchmarks
from pearl_fpga.config import TrainConfig
from pearl_fpga.runtime.vocabulary import ROLES

if TYPE_CHECKING:
    from pearl_fpga.board.catalog import BoardSpec

DEVICES = {
    "act": ("cpu", "cpu-kernel", "fpga-emu", "cuda", "fpga"),
    "replay": ("cpu", "cpu-kernel", "fpga-emu", "fpga"),
    "learn": ("cpu", "cpu-bf16", "cuda", "cuda-bf16"),
}
KERNEL_DEVICES = ("cpu-kernel", "fpga-emu", "fpga")
BOARD_BACKENDS = ("pynq", "xrt", "serial")  # a Zynq board through PYNQ, an Alveo card through XRT, a UART board


@dataclass(frozen=True)
class Placement:
    """Device of each task of the training loop."""

    act: str = "cpu-kernel"
    replay: str = "cpu"
    learn: str = "cpu"
    board: str | None = None  # the catalog board fpga-emu emulates (set whenever a role is on fpga-emu)

    def __post_init__(self) -> None:
        boards = set()
        for task in ROLES:
            device, _, board = _normalize(getattr(self, task)).partition(":")
            if device == "fpga-emu":
                boards.add(board or None)
            object.__setattr__(self, task, device)
            if device not in DEVICES[task]:
                raise ValueError(f"placement: device {device!r} cannot run task {task!r}; "
                                 f"choose one of {', '.join(DEVICES[task])}")
        named = {b for b in boards if b} | ({self.board} if self.board else set())
        if len(named) > 1:
            raise ValueError(f"placement: fpga-emu emulates one board per run, got {', '.join(sorted(named))}")
        spec = None
        if boards or self.board:
            from pearl_fpga.board.catalog import CatalogError, get_board

            name = next(iter(named), None)
            try:
                spec = get_board(name)
            except CatalogError as exc:
                raise CatalogError(f"placement fpga-emu:{name}: {exc} (e.g. --placement fpga-emu:pynq-z2)") from None
            object.__setattr__(self, "board", spec.name)
        object.__setattr__(self, "_board_spec", spec)  # the one catalog look-up: every user reads board_spec

    @property
    def board_spec(self) -> BoardSpec | None:
        """The catalog entry of the board fpga-emu emulates (None when no role is on fpga-emu)."""
        spec: BoardSpec | None = self.__dict__.get("_board_spec")
        return spec

    def target(self, task: str) -> str:
        """The target of `task` as written: "fpga-emu:pynq-z2" for an emulated board."""
        device = getattr(self, task)
        return f"{device}:{self.board}" if device == "fpga-emu" else device

    def __str__(self) -> str:
        return ",".join(f"{task}={self.target(task)}" for task in ROLES)

    def as_dict(self) -> dict[str, str]:
        """{"act": ..., "replay": ..., "learn": ...}."""
        return {task: getattr(self, task) for task in ROLES}

    @property
    def learn_device(self) -> str:
        """The torch device of the learner: "cpu" or "cuda" (whatever the learn target's precision)."""
        return learn_target(self.learn)[0]

    @property
    def kernel_actor(self) -> bool:
        """True when the actors run the quantized MLP kernel rather than torch."""
        return self.act in KERNEL_DEVICES

    def mlp_backends(self) -> tuple[str, ...]:
        """MLPInfer backends to try, in order, for the act device (kernel devices only)."""
        return {"cpu-kernel": ("cpu",), "fpga-emu": ("cpu",), "fpga": BOARD_BACKENDS}[self.act]

    def replay_backends(self) -> tuple[str, ...]:
        """ReplaySampler backends to try, in order, for the replay device."""
        return {"cpu": ("cpu",), "cpu-kernel": ("cpu",), "fpga-emu": ("cpu",), "fpga": BOARD_BACKENDS}[self.replay]


DEPRECATED_TARGETS = {"fpga-sim": "fpga-emu"}
"""Old target names, still accepted with a deprecation message: "fpga-sim" was never a simulation
(the kernels' C++ build computes, the board's time is modelled), so it is now "fpga-emu"."""


def canonical_target(token: str) -> str:
    """`token` with a deprecated target name replaced by its new one (a FutureWarning says so);
    "fpga-sim:pynq-z2" becomes "fpga-emu:pynq-z2"."""
    name, sep, arg = str(token).strip().partition(":")
    new = DEPRECATED_TARGETS.get(name.lower())
    if new is None:
        return str(token).strip()
    warnings.warn(f"target {name!r} is deprecated: it is called {new!r} now (the kernels' C++ build computes, "
                  "the board's time is modelled; it is not a simulation)", FutureWarning, stacklevel=3)
    return new + sep + arg


def _normalize(device: str) -> str:
    device = canonical_target(device).lower()
    if device.startswith("cuda:") or device == "gpu":
        return "cuda"
    if device.startswith("fpga:"):
        return "fpga"
    return device.strip()


def parse_placement(text: str | Placement | dict | None) -> Placement:
    """Parse "fpga-emu", "cpu", "act=fpga-emu,replay=cpu,learn=cpu" or a dict into a Placement.

    A single device name places every task it can run there (the rest on the CPU). "auto" is the
    dispatcher's job: callers route it to pearl_fpga.planner before calling this.
    """
    if text is None:
        return default_placement()
    if isinstance(text, Placement):
        return text
    if isinstance(text, dict):
        unknown = sorted(set(text) - set(ROLES))
        if unknown:
            raise ValueError(f"placement: unknown role(s) {', '.join(unknown)}; roles are {', '.join(ROLES)}")
        return Placement(**{k: str(v) for k, v in text.items()})
    spec = ",".join(part.split("=", 1)[0] + "=" + canonical_target(part.split("=", 1)[1]) if "=" in part
                    else canonical_target(part) for part in str(text).strip().split(",")) if str(text).strip() else ""
    if not spec:
        raise ValueError("placement: empty string; use e.g. 'fpga-emu' or 'act=fpga-emu,replay=cpu,learn=cpu'")
    if spec.lower() == "auto":
        raise ValueError("placement 'auto' is chosen by the dispatcher (pearl_fpga.planner), not parse_placement")
    if "=" not in spec:
        device = _normalize(spec)
        if device.partition(":")[0] == "fpga-emu":
            return Placement(act=device, replay=device, learn="cpu")
        if device not in DEVICES["act"]:
            raise ValueError(f"placement: unknown device {spec!r}; choose one of {', '.join(DEVICES['act'])} "
                             "or name each task, e.g. 'act=fpga-emu,replay=cpu,learn=cpu'")
        return Placement(
            act=device,
            replay=device if device in DEVICES["replay"] else "cpu",
            learn=device if device in DEVICES["learn"] else "cpu",
        )
    fields: dict[str, str] = {}
    for part in spec.split(","):
        if "=" not in part:
            raise ValueError(f"placement: {part!r} is not task=device (in {spec!r})")
        task, device = (s.strip() for s in part.split("=", 1))
        task = task.lower()
        if task not in ROLES:
            raise ValueError(f"placement: unknown role {task!r} in {spec!r}; roles are {', '.join(ROLES)}")
        if task in fields:
            raise ValueError(f"placement: task {task!r} given twice in {spec!r}")
        fields[task] = device
    return Placement(**fields)


def unused_replay_notice(text: str | Placement | dict | None, per: bool) -> str | None:
    """A notice when `text` names the replay device explicitly ("replay=fpga") for a run without
    prioritized replay: the replay kernel serves only PER, a uniform buffer is host memory, so the
    setting would be ignored silently. None otherwise (a single device name such as "fpga-emu" places
    replay only where it applies)."""
    if per or text is None or isinstance(text, Placement):
        return None
    named = set(text) if isinstance(text, dict) else {p.split("=", 1)[0].strip().lower() for p in str(text).split(",")
                                                        if "=" in p}
    if "replay" not in named:
        return None
    return (f"placement replay={parse_placement(text).replay} is not used: the replay kernel serves prioritized "
            "replay only (--per, or --set per=true); this run's uniform buffer is in host memory")


def default_placement() -> Placement:
    """The MLP kernel's C++ build for acting when it is built, else torch; everything else on the CPU."""
    import importlib.util

    act = "cpu-kernel" if importlib.util.find_spec("pearl_fpga._mlp_native") is not None else "cpu"
    return Placement(act=act, replay="cpu", learn="cpu")


def resolve_engine(config: TrainConfig) -> str:
    """The engine a config runs on: its `engine`, or for "auto" `processes` when workers > 0, else `inline`."""
    if config.engine == "auto":
        return "processes" if config.workers > 0 else "inline"
    return config.engine
