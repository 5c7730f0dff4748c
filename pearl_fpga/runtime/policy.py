"""The actors' policy on the act device: torch ("cpu", "cuda") or the quantized MLP kernel.

Exploration follows Stable-Baselines3: uniform random actions before `learning_starts`; then DQN is
epsilon-greedy and DDPG and TD3 add Gaussian noise (std `action_noise_std`, actor scale) and clip to [-1, 1].
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import BackendUnavailable, DivergenceError
from pearl_fpga.runtime.checkpoint import all_finite
from pearl_fpga.runtime.placement import Placement


class ActorPolicy:
    """A private copy of the policy network, kept in sync by `load_weights`."""

    def __init__(self, module: nn.Sequential, placement: Placement, discrete: bool, calibration: np.ndarray) -> None:
        self.placement = placement
        self.discrete = discrete
        self.calibration = np.asarray(calibration, dtype=np.float32)
        self.module = copy.deepcopy(module).cpu().requires_grad_(False)
        self.kernel: Any = None
        self.torch_device = torch.device("cpu")
        if placement.kernel_actor:
            self.kernel = _make_kernel(self.module, placement, discrete, self.calibration)
        elif placement.act == "cuda":
            if not torch.cuda.is_available():
                raise BackendUnavailable("placement act=cuda, but torch sees no CUDA device; use act=cpu or act=cpu-kernel")
            self.torch_device = torch.device("cuda")
            self.module.to(self.torch_device)

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Take new weights from the learner (re-quantized for a kernel actor)."""
        self.module.load_state_dict(state_dict)
        if self.kernel is not None:
            for name, tensor in self.module.state_dict().items():
                if tensor.is_floating_point() and not all_finite(tensor):
                    # say why, rather than the quantizer's "cannot choose a fixed-point format"
                    raise DivergenceError(f"the policy weights are not finite ({name} holds NaN or inf): training "
                                          "diverged; lower learning_rate or clip the gradients (max_grad_norm), then "
                                          "start again or resume from the last checkpoint")
            self.kernel.load_weights(self.module)

    def deterministic(self, obs: np.ndarray) -> np.ndarray:
        """Greedy action (DQN, int64) or actor output in [-1, 1] (DDPG, TD3: float32) per observation."""
        obs = np.asarray(obs, dtype=np.float32)
        if self.kernel is not None:
            try:
                out = np.asarray(self.kernel.act(obs))
            except ValueError:
                finite = np.isfinite(obs).all(axis=1)
                if finite.all():
                    raise
                # The kernel refuses a non-finite observation (an env's NaN or inf); torch would act on it
                # anyway. Act on zeros instead: the replay then refuses or drops the transition that holds it
                # (nonfinite_transitions), naming the env, as with a torch actor.
                out = np.asarray(self.kernel.act(np.where(finite[:, None], obs, np.float32(0))))
            return out.astype(np.int64) if self.discrete else out.astype(np.float32).reshape(len(obs), -1)
        with torch.no_grad():
            y = self.module(torch.as_tensor(obs, device=self.torch_device))
            y = y.argmax(dim=1) if self.discrete else y
            return y.cpu().numpy()

    def explore(self, obs: np.ndarray, step: int, config: TrainConfig, rng: np.random.Generator,
                n_actions_or_dim: int) -> np.ndarray:
        """Exploration action at env step `step` (SB3's schedule)."""
        n = len(obs)
        if self.discrete:
            if n == 1:  # one env: scalar draws, the same stream as arrays of one without their per-call cost
                if step < config.learning_starts:
                    return np.array([rng.integers(0, n_actions_or_dim)])
                explore = rng.random() < config.epsilon(step)
                drawn = rng.integers(0, n_actions_or_dim)
                if explore:
                    return np.array([drawn], dtype=np.int64)
                return self.deterministic(obs).astype(np.int64, copy=False)
            if step < config.learning_starts:
                return rng.integers(0, n_actions_or_dim, size=n)
            eps = config.epsilon(step)
            random_mask = rng.random(n) < eps
            actions = rng.integers(0, n_actions_or_dim, size=n)
            if not random_mask.all():
                greedy = self.deterministic(obs)
                actions = np.where(random_mask, actions, greedy)
            return actions.astype(np.int64)
        if step < config.learning_starts:
            return rng.uniform(-1.0, 1.0, size=(n, n_actions_or_dim)).astype(np.float32)
        action = self.deterministic(obs)
        noise = rng.normal(0.0, config.action_noise_std, size=action.shape)
        return np.clip(action + noise, -1.0, 1.0).astype(np.float32)


def _make_kernel(module: nn.Sequential, placement: Placement, discrete: bool, calibration: np.ndarray) -> Any:
    try:
        from pearl_fpga.kernels import MLPInfer
    except ImportError as exc:  # the kernel module is missing from this install
        raise BackendUnavailable(f"placement act={placement.act} needs pearl_fpga.kernels.mlp ({exc}); "
                                 "use act=cpu (torch) instead") from exc
    from pearl_fpga.runtime.placement import first_available

    kwargs: dict[str, Any] = {"calibration": calibration}
    if discrete:
        kwargs["head"] = "raw"
    else:
        kwargs.update(head="tanh", action_low=-1.0, action_high=1.0)
    from pearl_fpga.backends import registry
    from pearl_fpga.runtime.emulation import limit_mlp_backend

    def make(name: str) -> Any:  # fpga-emu: the C++ build at the emulated board's sizes
        return MLPInfer.from_torch(module, backend=limit_mlp_backend(registry.create("mlp", name)[1], placement), **kwargs)

    return first_available(make,
                           placement.mlp_backends(), f"placement act={placement.act} (MLP kernel)")
