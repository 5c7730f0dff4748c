"""The learners' private-torch fast paths against their public fallbacks, on the pinned torch."""

import pytest
import torch

from pearl_fpga.algos import torch_ops


def _tensors(seed, shapes=((3, 4), (4,), (2, 3))):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


@pytest.fixture
def fallback(monkeypatch):
    monkeypatch.setattr(torch_ops, "HAVE_PRIVATE", {name: False for name in torch_ops.HAVE_PRIVATE})


def test_the_pinned_torch_has_every_private_function():
    assert all(torch_ops.HAVE_PRIVATE.values()), torch_ops.HAVE_PRIVATE


def _run_all():
    a, b = _tensors(0), _tensors(1)
    out = {"norm": torch_ops.foreach_norm(a)}
    torch_ops.foreach_mul_(a, torch.tensor(0.5))
    torch_ops.foreach_add_(a, 1.0)
    torch_ops.foreach_lerp_(a, b, 0.25)
    out["lerp"] = [t.clone() for t in a]
    torch_ops.foreach_copy_(a, b)
    out["copy"] = [t.clone() for t in a]
    params, grads = _tensors(2), _tensors(3)
    m, v = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    steps = [torch.zeros(()) for _ in params]
    for _ in range(3):
        torch_ops.foreach_add_(steps, 1)
        torch_ops.adam_(params, grads, m, v, steps, lr=1e-2, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8)
    out["adam"] = params
    return out


def test_fallbacks_compute_what_the_fast_paths_do(monkeypatch):
    fast = _run_all()
    monkeypatch.setattr(torch_ops, "HAVE_PRIVATE", {name: False for name in torch_ops.HAVE_PRIVATE})
    slow = _run_all()
    for key in fast:
        for x, y in zip(fast[key], slow[key], strict=True):
            torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)


def test_lean_adam_matches_torch_optim_on_the_fallback(fallback):
    from pearl_fpga.algos.common import LeanAdam

    params, ref = _tensors(4), _tensors(4)
    for p in (*params, *ref):
        p.requires_grad_(True)
    lean, opt = LeanAdam(params, lr=1e-2), torch.optim.Adam(ref, lr=1e-2)
    for step in range(3):
        grads = _tensors(10 + step)
        lean.step(grads)
        for r, g in zip(ref, grads, strict=True):
            r.grad = g.clone()
        opt.step()
    for p, r in zip(params, ref, strict=True):
        torch.testing.assert_close(p.detach(), r.detach(), rtol=1e-6, atol=1e-7)
