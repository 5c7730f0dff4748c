"""Placement: which device runs each task of the training loop.

Tasks: "act" (policy inference in the actors), "replay" (the prioritized-replay sum tree, used with
PER; a uniform buffer is plain host memory), "learn" (gradient steps). Devices:

| device       | act                                   | replay (PER)                      | learn |
| ------------ | ------------------------------------- | --------------------------------- | ----- |
| "cpu"        | torch on the CPU                      | sum tree, C++ build ("cpu")       | torch CPU |
| "cpu-kernel" | MLP kernel, C++ build                 | sum tree, C++ build               | -     |
| "fpga-sim"   | MLP kernel emulated (C++ build computes, the planner models the board's time) | same | - |
| "cuda"       | torch on the GPU                      | -                                 | torch CUDA |
| "fpga"       | MLP kernel on a board (pynq/xrt)      | sum tree on a board               | -     |

`parse_placement("fpga-sim")` puts act and replay on fpga-sim and learns on the CPU;
"act=fpga-sim,replay=cpu,learn=cpu" names each task. The dispatcher may extend this module.
"""

from __future__ import annotations

from dataclasses import dataclass

TASKS = ("act", "replay", "learn")
DEVICES = {
    "act": ("cpu", "cpu-kernel", "fpga-sim", "cuda", "fpga"),
    "replay": ("cpu", "cpu-kernel", "fpga-sim", "fpga"),
    "learn": ("cpu", "cuda"),
}
KERNEL_DEVICES = ("cpu-kernel", "fpga-sim", "fpga")
BOARD_BACKENDS = ("pynq", "xrt")  # a Zynq board through PYNQ, an Alveo card through XRT


def first_available(make, backends: tuple[str, ...], what: str):
    """make(backend) for the first backend that is available; BackendUnavailable listing why none is."""
    from pearl_fpga.errors import BackendUnavailable

    reasons = []
    for backend in backends:
        try:
            return make(backend)
        except BackendUnavailable as exc:
            reasons.append(f"{backend}: {exc}")
    raise BackendUnavailable(f"{what}: no backend available ({'; '.join(reasons)}); "
                             "use placement fpga-sim or cpu-kernel on a machine without a board")


@dataclass(frozen=True)
class Placement:
    """Device of each task of the training loop."""

    act: str = "cpu-kernel"
    replay: str = "cpu"
    learn: str = "cpu"

    def __post_init__(self) -> None:
        for task in TASKS:
            device = _normalize(getattr(self, task))
            object.__setattr__(self, task, device)
            if device not in DEVICES[task]:
                raise ValueError(f"placement: device {device!r} cannot run task {task!r}; "
                                 f"choose one of {', '.join(DEVICES[task])}")

    def __str__(self) -> str:
        return ",".join(f"{task}={getattr(self, task)}" for task in TASKS)

    def as_dict(self) -> dict[str, str]:
        """{"act": ..., "replay": ..., "learn": ...}."""
        return {task: getattr(self, task) for task in TASKS}

    @property
    def kernel_actor(self) -> bool:
        """True when the actors run the quantized MLP kernel rather than torch."""
        return self.act in KERNEL_DEVICES

    def mlp_backends(self) -> tuple[str, ...]:
        """MLPInfer backends to try, in order, for the act device (kernel devices only)."""
        return {"cpu-kernel": ("cpu",), "fpga-sim": ("cpu",), "fpga": BOARD_BACKENDS}[self.act]

    def replay_backends(self) -> tuple[str, ...]:
        """ReplaySampler backends to try, in order, for the replay device."""
        return {"cpu": ("cpu",), "cpu-kernel": ("cpu",), "fpga-sim": ("cpu",), "fpga": BOARD_BACKENDS}[self.replay]


def _normalize(device: str) -> str:
    device = str(device).strip().lower()
    if device.startswith("cuda:") or device == "gpu":
        return "cuda"
    if device.startswith("fpga:"):
        return "fpga"
    return device


def parse_placement(text: str | Placement | dict | None) -> Placement:
    """Parse "fpga-sim", "cpu", "act=fpga-sim,replay=cpu,learn=cpu" or a dict into a Placement.

    A single device name places every task it can run there (the rest on the CPU). "auto" is the
    dispatcher's job: callers route it to pearl_fpga.planner before calling this.
    """
    if text is None:
        return default_placement()
    if isinstance(text, Placement):
        return text
    if isinstance(text, dict):
        unknown = sorted(set(text) - set(TASKS))
        if unknown:
            raise ValueError(f"placement: unknown task(s) {', '.join(unknown)}; tasks are {', '.join(TASKS)}")
        return Placement(**{k: str(v) for k, v in text.items()})
    spec = str(text).strip()
    if not spec:
        raise ValueError("placement: empty string; use e.g. 'fpga-sim' or 'act=fpga-sim,replay=cpu,learn=cpu'")
    if spec.lower() == "auto":
        raise ValueError("placement 'auto' is chosen by the dispatcher (pearl_fpga.planner), not parse_placement")
    if "=" not in spec:
        device = _normalize(spec)
        if device not in DEVICES["act"]:
            raise ValueError(f"placement: unknown device {spec!r}; choose one of {', '.join(DEVICES['act'])} "
                             "or name each task, e.g. 'act=fpga-sim,replay=cpu,learn=cpu'")
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
        if task not in TASKS:
            raise ValueError(f"placement: unknown task {task!r} in {spec!r}; tasks are {', '.join(TASKS)}")
        if task in fields:
            raise ValueError(f"placement: task {task!r} given twice in {spec!r}")
        fields[task] = device
    return Placement(**fields)


def default_placement() -> Placement:
    """The MLP kernel's C++ build for acting when it is built, else torch; everything else on the CPU."""
    import importlib.util

    act = "cpu-kernel" if importlib.util.find_spec("pearl_fpga._mlp_native") is not None else "cpu"
    return Placement(act=act, replay="cpu", learn="cpu")
