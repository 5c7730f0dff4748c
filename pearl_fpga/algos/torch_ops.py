"""The private torch functions the learners use for speed (torch._foreach_*, torch._fused_adam_),
each next to a public fallback that computes the same thing. The private ones are not a stable API:
on a torch that lacks one, the fallback runs (tests/test_torch_ops.py checks that both agree on the
pinned torch, and that the fallbacks are what a torch without them would run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch

_PRIVATE = ("_foreach_norm", "_foreach_mul_", "_foreach_add_", "_foreach_copy_", "_foreach_lerp_", "_fused_adam_")
HAVE_PRIVATE = {name: hasattr(torch, name) for name in _PRIVATE}


def foreach_norm(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    if HAVE_PRIVATE["_foreach_norm"]:
        return list(torch._foreach_norm(cast(Any, tensors)))
    return [torch.linalg.vector_norm(t) for t in tensors]


def foreach_mul_(tensors: Sequence[torch.Tensor], factor: torch.Tensor) -> None:
    if HAVE_PRIVATE["_foreach_mul_"]:
        torch._foreach_mul_(cast(Any, tensors), factor)
        return
    for t in tensors:
        t.mul_(factor)


def foreach_add_(tensors: Sequence[torch.Tensor], value: float) -> None:
    if HAVE_PRIVATE["_foreach_add_"]:
        torch._foreach_add_(cast(Any, tensors), value)
        return
    for t in tensors:
        t.add_(value)


def foreach_copy_(dst: Sequence[torch.Tensor], src: Sequence[torch.Tensor]) -> None:
    if HAVE_PRIVATE["_foreach_copy_"]:
        torch._foreach_copy_(cast(Any, dst), cast(Any, src))
        return
    for d, s in zip(dst, src, strict=True):
        d.copy_(s)


def foreach_lerp_(dst: Sequence[torch.Tensor], src: Sequence[torch.Tensor], weight: float) -> None:
    if HAVE_PRIVATE["_foreach_lerp_"]:
        torch._foreach_lerp_(cast(Any, dst), cast(Any, src), weight)
        return
    for d, s in zip(dst, src, strict=True):
        d.lerp_(s, weight)


def adam_(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], exp_avgs: Sequence[torch.Tensor],
          exp_avg_sqs: Sequence[torch.Tensor], steps: Sequence[torch.Tensor], lr: float, beta1: float, beta2: float,
          weight_decay: float, eps: float) -> None:
    """One Adam update in place (torch.optim.Adam's arithmetic); `steps` are already incremented."""
    if HAVE_PRIVATE["_fused_adam_"]:
        torch._fused_adam_(list(params), list(grads), list(exp_avgs), list(exp_avg_sqs), [], list(steps),
                           amsgrad=False, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay, eps=eps,
                           maximize=False, grad_scale=None, found_inf=None)
        return
    adam_fallback_(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, weight_decay, eps)


def adam_fallback_(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], exp_avgs: Sequence[torch.Tensor],
                   exp_avg_sqs: Sequence[torch.Tensor], steps: Sequence[torch.Tensor], lr: float, beta1: float,
                   beta2: float, weight_decay: float, eps: float) -> None:
    """Adam with public ops only (the formula of torch.optim.Adam). The bias corrections are computed
    from the step tensors on their device (no host sync), so torch.compile traces it into one graph."""
    with torch.no_grad():
        for p, g, m, v, step in zip(params, grads, exp_avgs, exp_avg_sqs, steps, strict=True):
            if weight_decay:
                g = g.add(p, alpha=weight_decay)
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            t = step.double()  # float64 bias corrections, as the Python floats of torch.optim.Adam
            denom = (v.sqrt() / (1 - beta2**t).sqrt()).add_(eps)
            p.addcdiv_(m, denom * ((1 - beta1**t) / -lr))
