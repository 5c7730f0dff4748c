"""Which learner thread counts give the same bits as one thread, measured on this machine.

Whether results depend on the count is a property of the machine, not of the code: one BLAS code
path splits a GEMM only along rows and columns, another (another CPU, another instruction set) also
along the reduction, and then 1 and 2 threads round differently. So it is measured:
`reproducible_thread_counts` runs a few learner steps on a fixed batch at each candidate count and
keeps the counts whose bits agree with one thread (cached per machine, torch build, instruction-set
settings and network shape). A run that promises bit-reproducibility (the inline engine) switches
only among those (`reproducible_controller`, an AdaptiveThreads of runtime/threads.py); where none
agree it keeps one thread for the whole run and its summary says so.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pearl_fpga.config import TrainConfig
from pearl_fpga.data import read_probe_cache, write_probe_cache
from pearl_fpga.host import available_cores, cpu_identity, thread_candidates
from pearl_fpga.runtime.threads import AdaptiveThreads, learner_callers


# Settings that change the instruction set or the reduction order of torch's CPU kernels (ATen's own
# dispatch, MKL, oneDNN) and of the package's native paths: a probe is valid only under the same ones.
ISA_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "MKL_DEBUG_CPU_TYPE",
                 "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "PEARL_FPGA_NATIVE_ISA")
# Fields that change which arithmetic a learner step runs (its shapes, its code path, its order).
LEARNER_FIELDS = ("algo", "net_arch", "batch_size", "double_q", "max_grad_norm", "concurrent_updates", "per",
                  "flush_subnormals", "policy_delay", "target_policy_noise", "learner_compile")
PROBE_STEPS = 4


def determinism_key(config: TrainConfig, obs_dim: int, action_dim: int) -> dict[str, Any]:
    """What a probe's answer depends on: the CPU, torch's build, the ISA settings and the learner."""
    import torch

    return {**cpu_identity(), "torch": torch.__version__, "blas": torch.backends.mkl.is_available(),
            "isa_settings": {v: os.environ[v] for v in ISA_VARIABLES if v in os.environ},
            "learner": {f: getattr(config, f) for f in LEARNER_FIELDS}, "obs_dim": obs_dim, "action_dim": action_dim,
            "probe_steps": PROBE_STEPS, "code": _learner_code_fingerprint()}


@functools.lru_cache(maxsize=1)
def _learner_code_fingerprint() -> str:
    """Hash of the learner's code (pearl_fpga/algos and the fused step's extension): a new learner is
    probed again."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for f in sorted([*(pkg / "algos").glob("*.py"), *pkg.glob("_learner_native*")]):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _learner_digest(config: TrainConfig, obs_dim: int, action_dim: int, threads: int, steps: int = PROBE_STEPS) -> str:
    """SHA-256 of every learner tensor after `steps` steps on a fixed batch at `threads` threads."""
    import numpy as np
    import torch

    from pearl_fpga.algos import make_learner
    from pearl_fpga.algos.common import Batch

    from pearl_fpga import presets as registry

    discrete = registry.get(config.algo).action_space == "discrete"
    rng = np.random.default_rng(0)
    n = config.batch_size
    data = {
        "obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
        "action": (rng.integers(0, action_dim, n) if discrete
                   else rng.uniform(-1, 1, (n, action_dim)).astype(np.float32)),
        "reward": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.standard_normal((n, obs_dim)).astype(np.float32),
        "done": (rng.random(n) < 0.1).astype(np.float32),
    }
    if config.per:
        data["weights"] = rng.uniform(0.1, 1.0, n).astype(np.float32)
    old_threads, rng_state = torch.get_num_threads(), torch.get_rng_state()
    try:
        torch.set_num_threads(threads)
        learner = make_learner(config, obs_dim, action_dim, device="cpu", seed=0)
        batch = Batch(**data).to_torch(discrete=discrete)
        h = hashlib.sha256()
        for _ in range(steps):
            loss, td = learner.update(batch)
            h.update(np.float32(float(loss)).tobytes())
            h.update(td.detach().cpu().numpy().tobytes())
        for module in vars(learner).values():
            if isinstance(module, torch.nn.Module):
                for p in module.parameters():
                    h.update(p.detach().cpu().numpy().tobytes())
        return h.hexdigest()
    finally:
        torch.set_num_threads(old_threads)
        torch.set_rng_state(rng_state)


@dataclass(frozen=True)
class Reproducibility:
    """The counts whose learner steps give the bits of one thread (`agree`), of those probed."""

    probed: tuple[int, ...]
    agree: tuple[int, ...]
    repeats: bool = True  # one thread gives the same bits twice (else nothing is reproducible)
    cached: bool = False

    @property
    def differ(self) -> tuple[int, ...]:
        return tuple(n for n in self.probed if n not in self.agree)


def _cache_file() -> Path:
    from pearl_fpga.data import cache_root

    return cache_root() / "thread_determinism.json"


def reproducible_thread_counts(config: TrainConfig, obs_dim: int, action_dim: int, candidates: tuple[int, ...],
                               cache: Path | None = None) -> Reproducibility:
    """Which of `candidates` give the same learner bits as one thread on this machine (measured once per
    `determinism_key`, then read from the cache). One thread is the reference; it is run twice, and a
    learner that does not repeat itself at one thread agrees with nothing."""
    cache = cache or _cache_file()
    key = determinism_key(config, obs_dim, action_dim)
    key_id = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    entries = read_probe_cache(cache)
    entry = entries.get(key_id)
    probed = tuple(sorted(set(candidates) | {1}))
    if (isinstance(entry, dict) and isinstance(entry.get("digests"), dict)
            and all(str(n) in entry["digests"] for n in probed) and isinstance(entry.get("repeats"), bool)):
        digests, repeats, cached = {int(n): str(d) for n, d in entry["digests"].items()}, entry["repeats"], True
    else:
        digests = {n: _learner_digest(config, obs_dim, action_dim, n) for n in probed}
        repeats, cached = _learner_digest(config, obs_dim, action_dim, 1) == digests[1], False
        entries[key_id] = {"key": key, "digests": {str(n): d for n, d in digests.items()}, "repeats": repeats}
        write_probe_cache(cache, entries)
    agree = tuple(n for n in probed if repeats and digests[n] == digests[1]) or (1,)
    return Reproducibility(probed=probed, agree=agree, repeats=repeats, cached=cached)


def reproducible_controller(config: TrainConfig, obs_dim: int, action_dim: int, cores: int | None = None) -> AdaptiveThreads:
    """The controller of a run that promises the same bits for a seed: it switches only among counts
    that agree with one thread on this machine, and keeps one thread where none does."""
    callers = learner_callers(config)
    candidates = thread_candidates(max(1, (cores if cores is not None else available_cores()) // callers))
    if len(candidates) == 1:
        return AdaptiveThreads(cores=cores, callers=callers)
    found = reproducible_thread_counts(config, obs_dim, action_dim, candidates)
    reason = ""
    if not found.repeats:
        reason = "the learner's bits differ between two runs at one thread on this machine"
    elif found.agree == (1,):
        reason = (f"the learner's bits at {', '.join(map(str, found.differ))} threads differ from one thread's on "
                  "this CPU, and this run promises the same bits for a seed")
    return AdaptiveThreads(cores=cores, callers=callers, candidates=found.agree, fixed_reason=reason)
