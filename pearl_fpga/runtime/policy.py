"""The actors' policy on the act device: torch ("cpu", "cuda") or the quantized MLP kernel, and the
algorithm's actor head (pearl_fpga.algos.heads) that turns the network's outputs into greedy or exploring
actions (Stable-Baselines3's schedule: uniform random actions before `learning_starts`, then the
algorithm's exploration).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from pearl_fpga.algos.heads import ActorHead
from pearl_fpga.errors import BackendUnavailable, DivergenceError
from pearl_fpga.runtime.checkpoint import first_nonfinite
from pearl_fpga.runtime.placement import Placement


class ActorPolicy:
    """A private copy of the policy network, kept in sync by `load_weights`."""

    def __init__(self, module: nn.Sequential, placement: Placement, head: ActorHead, calibration: np.ndarray) -> None:
        self.placement = placement
        self.head = head
        self.discrete = head.discrete
        self.calibration = np.asarray(calibration, dtype=np.float32)
        self.module = copy.deepcopy(module).cpu().requires_grad_(False)
        self.kernel: Any = None
        self.torch_device = torch.device("cpu")
        if placement.kernel_actor:
            self.kernel = _make_kernel(self.module, placement, head, self.calibration)
        elif placement.act == "cuda":
            if not torch.cuda.is_available():
                raise BackendUnavailable("placement act=cuda, but torch sees no CUDA device; use act=cpu or act=cpu-kernel")
            self.torch_device = torch.device("cuda")
            self.module.to(self.torch_device)

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Take new weights from the learner (re-quantized for a kernel actor). The learner's weights were
        checked on their way out (Trainer.check_finite), so they are not scanned again here: only when the
        kernel refuses them is the reason looked for, to name non-finite weights rather than the quantizer's
        refusal."""
        self.module.load_state_dict(state_dict)
        if self.kernel is not None:
            try:
                self.kernel.load_weights(self.module)
            except ValueError as exc:
                where = first_nonfinite(self.module.state_dict())
                if where is None:
                    raise
                raise DivergenceError(f"the policy weights are not finite ({where}): training diverged; lower "
                                      "learning_rate or clip the gradients (max_grad_norm), then start again or "
                                      "resume from the last checkpoint") from exc

    def outputs(self, obs: np.ndarray) -> np.ndarray:
        """The network's outputs per observation (float32): the kernel's dequantized ones on a kernel actor."""
        obs = np.asarray(obs, dtype=np.float32)
        if self.kernel is not None:
            return np.asarray(self._on_kernel(self.kernel, obs), dtype=np.float32).reshape(len(obs), -1)
        with torch.no_grad():
            return self.module(torch.as_tensor(obs, device=self.torch_device)).cpu().numpy()

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        """The head's greedy action per observation (int64 for discrete actions, float32 in [-1, 1] for continuous ones)."""
        obs = np.asarray(obs, dtype=np.float32)
        if self.kernel is not None:
            return self._on_kernel(lambda x: self.head.greedy_kernel(self.kernel, x), obs)
        if self.discrete:  # argmax on the device: one small copy back
            with torch.no_grad():
                return self.module(torch.as_tensor(obs, device=self.torch_device)).argmax(dim=1).cpu().numpy()
        return self.head.greedy(self.outputs(obs))

    @staticmethod
    def _on_kernel(call: Any, obs: np.ndarray) -> Any:
        """`call(obs)` on the kernel, which refuses a non-finite observation (an env's NaN or inf) that torch
        would act on anyway: such rows are acted on as zeros instead, and the replay then refuses or drops
        the transitions that hold them (nonfinite_transitions), naming the env, as with a torch actor."""
        try:
            return call(obs)
        except ValueError:
            finite = np.isfinite(obs).all(axis=1)
            if finite.all():
                raise
            return call(np.where(finite[:, None], obs, np.float32(0)))

    def explore(self, obs: np.ndarray, step: int, rng: np.random.Generator) -> np.ndarray:
        """Exploration action at env step `step` (SB3's schedule, the head's exploration)."""
        return self.head.explore(self, obs, step, rng)


def _make_kernel(module: nn.Sequential, placement: Placement, head: ActorHead, calibration: np.ndarray) -> Any:
    try:
        from pearl_fpga.kernels import MLPInfer
    except ImportError as exc:  # the kernel module is missing from this install
        raise BackendUnavailable(f"placement act={placement.act} needs pearl_fpga.kernels.mlp ({exc}); "
                                 "use act=cpu (torch) instead") from exc
    kwargs: dict[str, Any] = {"calibration": calibration, **head.kernel_options}
    from pearl_fpga.backends import registry
    from pearl_fpga.runtime.emulation import mlp_limits

    limits = mlp_limits(placement)  # fpga-emu: the C++ build made at the emulated board's sizes

    def make(name: str) -> Any:
        return MLPInfer.from_torch(module, backend=registry.create("mlp", name, **limits)[1], **kwargs)

    return registry.first_available(make, placement.mlp_backends(), f"placement act={placement.act} (MLP kernel)")
