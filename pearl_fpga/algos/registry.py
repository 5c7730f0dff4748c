"""The learners of the registered algorithms (pearl_fpga.presets): their classes, and a learner built for a
config on a placement's learn target."""

from __future__ import annotations

import importlib
from typing import Any

from pearl_fpga import presets as registry
from pearl_fpga.algos.api import DeepLearner


def learner_class(algo: str) -> type[DeepLearner]:
    """The learner class the registry names for `algo` (imported on first use)."""
    spec = registry.get(algo)
    if spec.family != "deep":
        raise ValueError(f"{spec.name} is a {spec.family} algorithm: its learner is {spec.learner}, not a deep learner "
                         "(pearl_fpga.make_trainer builds either trainer)")
    module, _, name = spec.learner.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, DeepLearner)):
        raise TypeError(f"the registry's learner of {spec.name}, {spec.learner}, is not a "
                        "pearl_fpga.algos.api.DeepLearner")
    return cls


def bf16_refusal(algo: str, hardware: str | None) -> str | None:
    """Why `algo`'s learner cannot run in bfloat16: `hardware` (what the device lacks, or None), else that
    the learner runs in float32 only; None where it can."""
    if hardware is None and "bfloat16" not in learner_class(algo).precisions:
        return f"{algo}'s learner runs in float32 only"
    return hardware


def make_learner(config: Any, obs_dim: int, action_dim: int, device: str = "cpu", seed: int = 0) -> Any:
    """The learner of `config.algo` (action_dim: the number of discrete actions, or the action's size).

    device: the placement's learn target ("cpu", "cpu-bf16", "cuda", "cuda-bf16") or a torch device.
    A "-bf16" target runs the wide GEMMs in bfloat16 (float32 master weights, optimizer state and loss);
    BackendUnavailable says what is missing where the hardware has no bfloat16 arithmetic."""
    import torch

    from pearl_fpga.errors import BackendUnavailable
    from pearl_fpga.host import bf16_unsupported, learn_target

    torch_device, precision = learn_target(device)
    cls: Any = learner_class(config.algo)
    low = None
    if precision == "bfloat16":
        hardware = bf16_unsupported(torch_device)
        reason = bf16_refusal(config.algo, hardware)
        if reason is not None:
            fix = f"; use learn={torch_device}" if hardware is None else ""  # the hardware's reason names its fix
            raise BackendUnavailable(f"placement learn={device}: {reason}{fix}")
        low = torch.bfloat16
    return cls(config, obs_dim, action_dim, device=torch_device, seed=seed, precision=low)
