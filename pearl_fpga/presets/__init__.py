"""The algorithm registry: what each algorithm declares, as data (no torch, no code of the algorithm).

One module of this package per algorithm family defines `ALGORITHMS`, a tuple of `AlgoSpec`: the
algorithm's name, where its learner class lives, the action space it needs, its own parameters
(beyond the shared TrainConfig fields) with their defaults and ranges, Stable-Baselines3's constructor
defaults, rl-baselines3-zoo's presets per env, and its default env. Everything that offers a choice of
algorithm (the CLI's `--algo`, `bench`, `plan`, TrainConfig) reads this registry; nothing else lists the
algorithms. Adding one is its learner module (pearl_fpga/algos/) plus its module here (CONTRIBUTING.md,
"Add an algorithm").
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from pearl_fpga.presets.spec import AlgoSpec, Param, Range

__all__ = ["AlgoSpec", "Param", "Range", "algorithms", "get", "names", "deep_names", "tabular_names",
           "param_owners"]


@lru_cache(maxsize=1)
def algorithms() -> dict[str, AlgoSpec]:
    """Every registered algorithm by name, in the order of their modules (then of ALGORITHMS)."""
    found: dict[str, AlgoSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "spec":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for spec in getattr(module, "ALGORITHMS", ()):
            if spec.name in found:
                raise RuntimeError(f"algorithm {spec.name!r} is registered twice ({module.__name__})")
            found[spec.name] = spec
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


def get(name: str) -> AlgoSpec:
    """The spec of algorithm `name`; ValueError listing the registered ones (and the nearest) otherwise."""
    specs = algorithms()
    key = str(name).lower()
    if key not in specs:
        import difflib

        near = difflib.get_close_matches(key, specs, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise ValueError(f"unknown algo {name!r}{hint}: choose one of {', '.join(specs)}")
    return specs[key]


def names() -> tuple[str, ...]:
    """Every algorithm's name."""
    return tuple(algorithms())


def deep_names() -> tuple[str, ...]:
    """Algorithms of neural networks, replay and actors (pearl_fpga.Trainer)."""
    return tuple(n for n, s in algorithms().items() if s.family == "deep")


def tabular_names() -> tuple[str, ...]:
    """Algorithms of a Q table on the TabularQ kernel (pearl_fpga.TabularTrainer)."""
    return tuple(n for n, s in algorithms().items() if s.family == "tabular")


def param_owners() -> dict[str, tuple[str, ...]]:
    """Each algorithm-declared parameter's name -> the algorithms that declare it."""
    owners: dict[str, list[str]] = {}
    for spec in algorithms().values():
        for pname in spec.params:
            owners.setdefault(pname, []).append(spec.name)
    return {k: tuple(v) for k, v in owners.items()}
