"""What a checkpoint's state must satisfy before a Trainer restores any of it (Trainer._restore calls
`check_trainer_state` first, so a bad checkpoint changes nothing): every network tensor and every
optimizer moment has the shape of the parameter it belongs to and is finite; the kept best policy's
weights fit the policy network; the replay's transitions lie in the env's spaces (actions in range,
observations, rewards finite, done 0 or 1); the envs' states fit the envs (EnvGroup.check).
CheckpointError names the first problem."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from pearl_fpga.errors import CheckpointError

FIELDS = ("obs", "action", "reward", "next_obs", "done")


def check_trainer_state(state: dict[str, Any], trainer: Any) -> None:
    """CheckpointError unless `state` (Trainer.save's) fits `trainer`: its algorithm, policy network,
    env spec and envs."""
    algo, policy_module, spec = trainer.algo, trainer.algo.policy_module, trainer.spec
    for key, saved in state["algo"].items():
        live = getattr(algo, key, None)  # the algorithms' state_dict keys are their attribute names
        if isinstance(live, torch.optim.Optimizer):
            _check_optimizer(f"algo.{key}", saved, live)
        elif isinstance(live, torch.nn.Module):
            _check_tensors(f"algo.{key}", saved, live.state_dict())
    _check_tensors("policy", state["policy"], policy_module.state_dict())
    best = state.get("best")
    if best is not None:
        if not isinstance(best, dict) or not np.isfinite(float(best.get("mean", np.nan))) or int(best.get("step", -1)) < 0:
            raise _fail("best: expected {mean (finite), step (>= 0), weights}")
        _check_tensors("best.weights", best.get("weights"), policy_module.state_dict())
    for where, fields in _transition_sets(state["replay"], "replay"):
        _check_transitions(where, fields, spec)
    trainer.actor.envs.check(state["envs"])
    _check_rngs(state.get("rng"))


def _check_rngs(rng: Any) -> None:
    """Each saved generator state is put into a scratch generator first: a value out of its range (an
    inf seed word, a wrong type) is a CheckpointError here, not an OverflowError mid-restore."""
    if not isinstance(rng, dict):
        raise _fail(f"rng is {_describe(rng)}, expected the generator states of run_state()")

    def as_tuple(obj: Any) -> Any:
        return tuple(as_tuple(v) for v in obj) if isinstance(obj, (list, tuple)) else obj

    def numpy_global(s: Any) -> None:
        np.random.RandomState().set_state((s["name"], np.asarray(s["keys"], dtype=np.uint32), s["pos"], s["has_gauss"],
                                           s["gauss"]))

    def explore(s: Any) -> None:
        np.random.Generator(np.random.PCG64()).bit_generator.state = s

    checks = {"python": lambda s: random.Random().setstate(as_tuple(s)), "numpy_global": numpy_global,
              "torch": lambda s: torch.Generator().set_state(s), "explore": explore}
    for name, check in checks.items():
        try:
            check(rng[name])
        except Exception as exc:  # noqa: BLE001 - any failure to take the state means a bad file
            raise _fail(f"rng.{name} is not a valid generator state ({type(exc).__name__}: {exc}); the checkpoint is "
                        "corrupt: resume from an earlier one") from None


def _fail(msg: str) -> CheckpointError:
    return CheckpointError(f"checkpoint does not fit this trainer: {msg}")


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _check_tensor(where: str, value: Any, shape: torch.Size) -> None:
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.shape != shape:
        raise _fail(f"{where} is {_describe(value)}, this run needs a float tensor of shape "
                              f"{tuple(shape)}; the checkpoint is corrupt or for other settings (net_arch)")
    if not bool(torch.isfinite(value).all()):
        raise _fail(f"{where} holds NaN or inf; resume from an earlier checkpoint")


def _check_tensors(where: str, saved: Any, live: dict[str, torch.Tensor]) -> None:
    if not isinstance(saved, dict) or set(saved) != set(live):
        names = sorted(saved) if isinstance(saved, dict) else _describe(saved)
        raise _fail(f"{where} holds {names}, this run's network has {sorted(live)}; the "
                              "checkpoint is corrupt or for other settings (net_arch)")
    for name, tensor in live.items():
        _check_tensor(f"{where}.{name}", saved[name], tensor.shape)


def _check_optimizer(where: str, saved: Any, live: torch.optim.Optimizer) -> None:
    """Adam's moments must have their parameter's shape (a wrong one loaded, then failed at the next step)."""
    try:
        ids = [pid for group in saved["param_groups"] for pid in group["params"]]
        moments = dict(saved["state"])
    except (KeyError, TypeError) as exc:
        raise _fail(f"{where} is not an optimizer state ({exc})") from None
    params = [p for group in live.param_groups for p in group["params"]]
    if len(saved["param_groups"]) != len(live.param_groups) or len(ids) != len(params):
        raise _fail(f"{where} has {len(ids)} parameters, this run's optimizer {len(params)}")
    shapes = dict(zip(ids, (p.shape for p in params)))
    for pid, entry in moments.items():
        if pid not in shapes or not isinstance(entry, dict):
            raise _fail(f"{where}: state of unknown parameter {pid!r}")
        for name, value in entry.items():
            if name == "step":
                step = value.item() if isinstance(value, torch.Tensor) and value.numel() == 1 else value
                if not isinstance(step, (int, float)) or not np.isfinite(step) or step < 0:
                    raise _fail(f"{where}: step of parameter {pid} is {step!r}")
            else:
                _check_tensor(f"{where} moment {name} of parameter {pid}", value, shapes[pid])


def _transition_sets(obj: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every dict of stored transitions in a replay state (uniform, prioritized, or per shard)."""
    if isinstance(obj, dict):
        if all(f in obj for f in FIELDS):
            return [(where, obj)]
        return [found for k, v in obj.items() for found in _transition_sets(v, f"{where}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [found for i, v in enumerate(obj) for found in _transition_sets(v, f"{where}[{i}]")]
    return []


def _check_transitions(where: str, fields: dict[str, Any], spec: Any) -> None:
    arrays = {f: np.asarray(fields[f]) for f in FIELDS}
    for f in ("obs", "next_obs", "reward"):
        if arrays[f].dtype.kind not in "biuf" or not np.isfinite(arrays[f]).all():
            raise _fail(f"{where}: {f} of a stored transition is NaN, infinite or not a number")
    if arrays["obs"].ndim != 2 or arrays["obs"].shape[1:] != (spec.obs_dim,):
        raise _fail(f"{where}: observations of shape {arrays['obs'].shape[1:]}, "
                              f"{spec.env_id} has ({spec.obs_dim},)")
    if not np.isin(arrays["done"], (0, 1)).all():
        raise _fail(f"{where}: done must hold only 0 and 1")
    action = arrays["action"]
    if spec.discrete:
        ok = action.dtype.kind in "iu" and (action.size == 0 or (action.min() >= 0 and action.max() < spec.action_dim))
        space = f"integers in [0, {spec.action_dim})"
    else:
        ok = action.dtype.kind == "f" and np.isfinite(action).all() and (np.abs(action) <= 1).all()
        space = "finite numbers in the actor's scale [-1, 1]"
    if not ok:
        raise _fail(f"{where}: stored actions are not {space} ({spec.env_id}'s action space); "
                              "the checkpoint is corrupt or for another env")
