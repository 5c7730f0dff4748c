"""Every native code path the package picks at run time (AVX-512 or AVX2 with or without VNNI, scalar)
computes the same bits.

A host runs only the widest path its CPU has; PEARL_FPGA_NATIVE_ISA caps that choice (an unknown value
fails the import with a clear message). Each path runs in a fresh process, since the choice is made at
import, and the digests of the fused learner step, MLP inference and tabular updates must agree."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = r"""
import hashlib, sys
import numpy as np, torch
torch.set_num_threads(1)
from pearl_fpga import _learner_native, _tabular_native
from pearl_fpga.algos import DQN, Batch
from pearl_fpga.backends.mlp_cpu import CpuMLPBackend
from pearl_fpga.config import TrainConfig
from pearl_fpga.kernels import TabularQ

h = hashlib.sha256()
rng = np.random.default_rng(0)
# the fused DQN step (the native Adam, dot and thin-layer loops), a thin first layer and a wide one
cfg = TrainConfig.preset("dqn", net_arch=[40, 24], max_grad_norm=0.5)
algo = DQN(cfg, 5, 3, seed=0, fused=True)
data = {"obs": rng.normal(size=(48, 5)).astype(np.float32), "action": rng.integers(0, 3, 48),
        "reward": rng.normal(size=48).astype(np.float32), "next_obs": rng.normal(size=(48, 5)).astype(np.float32),
        "done": (rng.random(48) < 0.2).astype(np.float32)}
for _ in range(3):
    loss, td = algo.update(Batch(**data).to_torch(discrete=True))
    h.update(np.float32(loss).tobytes()); h.update(td.numpy().tobytes())
for p in algo.q.parameters():
    h.update(p.detach().numpy().tobytes())
# MLP inference on the auto path, on one thread and split over two
from mlp_cases import random_layers, random_inputs
layers = random_layers(np.random.default_rng(1), [7, 33, 19, 4], shifts=(10, 20))
mlp = CpuMLPBackend(threads=1)
mlp.load(layers, "raw")
for threads in (1, 2):
    mlp.threads, mlp.parallel_batch = threads, 2
    for part in mlp.infer(random_inputs(np.random.default_rng(2), 65, 7)):  # (values, argmax)
        h.update(np.ascontiguousarray(part).tobytes())
# tabular updates
q = TabularQ(50, 4, alpha=0.25, gamma=0.9, backend="cpu")
n = 2000
q.update(rng.integers(0, 50, n), rng.integers(0, 4, n), rng.normal(size=n), rng.integers(0, 50, n), rng.random(n) < 0.1)
h.update(np.ascontiguousarray(q.table).tobytes())
q.update_partitioned(rng.integers(0, 50, n), rng.integers(0, 4, n), rng.normal(size=n), rng.integers(0, 50, n),
                     rng.random(n) < 0.1, parts=3, threads=2)  # the partitioned mode's native loop
h.update(np.ascontiguousarray(q.table).tobytes())
print(_learner_native.isa(), mlp.path, _tabular_native.isa(), h.hexdigest())
"""


def _run(isa: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PEARL_FPGA_NATIVE_ISA"}
    if isa is not None:
        env["PEARL_FPGA_NATIVE_ISA"] = isa
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(__file__), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)


def test_every_native_path_gives_the_same_bits():
    runs = {isa: _run(isa) for isa in ("vnni", "avx512", "avx2", "scalar")}
    for isa, r in runs.items():
        assert r.returncode == 0, f"PEARL_FPGA_NATIVE_ISA={isa}: {r.stderr[-2000:]}"
    out = {isa: r.stdout.split() for isa, r in runs.items()}
    assert out["scalar"][:3] == ["scalar", "plain", "scalar"]  # the cap really narrows every extension
    assert out["avx2"][0] in ("avx2", "scalar") and out["avx2"][1] in ("avx2", "plain")
    assert out["avx512"][1] in ("avx512", "avx2", "plain")  # below "vnni": no dot-product instructions
    assert out["vnni"][0] == out["avx512"][0] and out["vnni"][2] == out["avx512"][2]  # a cap for the MLP only
    digests = {isa: o[3] for isa, o in out.items()}
    assert len(set(digests.values())) == 1, f"the paths disagree: {out}"


def test_an_unknown_isa_name_fails_the_import_and_names_the_variable():
    r = _run("sse9")
    assert r.returncode != 0
    assert "PEARL_FPGA_NATIVE_ISA must be vnni, avx512, avx2 or scalar" in r.stderr
