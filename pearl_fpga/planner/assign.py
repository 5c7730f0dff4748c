"""Choose the placement and actor-worker count that maximize an objective, under user constraints.

Constraints are a comma-separated string:
- `act=fpga-emu`  pin a role (act, replay, learn) to a target ("cuda" also matches "cuda:0");
- `!cuda`         exclude a target or device (every "cuda:N");
- `workers=2`     fix the number of actor workers (0 = the runtime's in-process mode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pearl_fpga.errors import PearlError
from pearl_fpga.planner.model import OBJECTIVES, Prediction, Tables, Workload, placements, predict
from pearl_fpga.runtime.placement import canonical_target
from pearl_fpga.runtime.vocabulary import ROLES

# Candidates whose objective is within this fraction of the best count as tied: the model is not
# more precise than that, and the simpler placement (fewer devices, fewer workers, preferred
# targets first) is then the safer choice.
TIE_TOLERANCE = 0.03


class PlanError(PearlError, ValueError):
    """No placement satisfies the constraints, or a constraint or objective is malformed."""


@dataclass(frozen=True)
class Constraints:
    """Parsed user constraints."""

    pins: Mapping[str, str]  # role -> target (or device prefix)
    excludes: tuple[str, ...]
    workers: int | None
    text: Mapping[str, str]  # each constraint key ("act", "!cuda", "workers") -> its original text

    @staticmethod
    def parse(spec: str | None) -> "Constraints":
        pins: dict[str, str] = {}
        excludes: list[str] = []
        workers: int | None = None
        text: dict[str, str] = {}
        for raw in (spec or "").split(","):
            item = raw.strip()
            if "=" in item:
                item = item.split("=", 1)[0] + "=" + canonical_target(item.split("=", 1)[1])
            elif item.startswith("!"):
                item = "!" + canonical_target(item[1:])
            if not item:
                continue
            if item.startswith("!"):
                name = item[1:].strip()
                if not name:
                    raise PlanError(f"constraint {item!r} excludes nothing: write !<device>, e.g. !cuda")
                excludes.append(name)
                text[item] = item
                continue
            key, sep, value = (s.strip() for s in item.partition("="))
            if not sep or not value:
                raise PlanError(f"constraint {item!r} is not understood: use role=target (e.g. act=fpga-emu), !device or workers=N")
            if key == "workers":
                if not value.isdigit():
                    raise PlanError(f"constraint {item!r}: workers must be an integer >= 0")
                workers = int(value)
            elif key in ROLES:
                if key in pins:
                    raise PlanError(f"constraint {item!r} pins {key} a second time: keep one of them")
                pins[key] = value
            else:
                raise PlanError(f"constraint {item!r} names unknown role {key!r}: pin one of {', '.join(ROLES)} or workers")
            text[key] = item
        return Constraints(pins, tuple(excludes), workers, text)


def _matches(target: str, device: str, name: str) -> bool:
    return name in (target, device) or target.startswith(name + ":") or device.startswith(name + ":")


def _allowed(tables: Tables, c: Constraints, placement: Mapping[str, str], workers: int, only: str | None = None) -> bool:
    """Whether a candidate satisfies the constraints (or only the one named by `only`)."""
    for role, target in placement.items():
        device = tables.target_device[target]
        if role in c.pins and only in (None, role) and not _matches(target, device, c.pins[role]):
            return False
        for ex in c.excludes:
            if only in (None, "!" + ex) and _matches(target, device, ex):
                return False
    if c.workers is not None and only in (None, "workers") and workers != c.workers:
        return False
    return True


def _infeasible(tables: Tables, c: Constraints, candidates: list[tuple[dict[str, str], int]], targets: Sequence[str]) -> PlanError:
    alone = [key for key in c.text if not any(_allowed(tables, c, p, w, only=key) for p, w in candidates)]
    avail = ", ".join(targets)
    if alone:
        reasons = []
        for key in alone:
            if key in c.pins:
                able = [t for t in targets if tables.can_run(key, t)]
                reasons.append(f"{c.text[key]!r}: no available target matching {c.pins[key]!r} can run {key} "
                               f"(targets that can: {', '.join(able) or 'none'})")
            elif key == "workers":
                reasons.append(f"{c.text[key]!r}: outside the worker counts searched "
                               f"({min(w for _, w in candidates)}..{max(w for _, w in candidates)})")
            else:
                reasons.append(f"{c.text[key]!r}: excluding it leaves some role with no target")
        return PlanError("no feasible placement: " + "; ".join(reasons) + f". Available targets: {avail}. "
                         "Drop or change that constraint, or add the device with --devices.")
    return PlanError(f"no feasible placement: the constraints {', '.join(repr(t) for t in c.text.values())} "
                     f"are each satisfiable but not together (available targets: {avail}); relax one of them.")


def search(
    tables: Tables,
    workload: Workload,
    targets: Sequence[str],
    max_workers: int,
    objective: str = "throughput",
    constraints: str | Constraints | None = None,
    tie_tolerance: float = TIE_TOLERANCE,
    min_workers: int = 1,
    default: Mapping[str, str] | None = None,
) -> list[Prediction]:
    """Every feasible candidate, best first for `objective`; raises PlanError when none is feasible.

    `targets` is in order of preference: among candidates within `tie_tolerance` of the best, the one
    using fewer devices, then fewer workers, then the `default` placement's target for each role, then
    earlier targets, then the higher score wins.
    """
    if objective not in OBJECTIVES:
        raise PlanError(f"unknown objective {objective!r}: use one of {', '.join(OBJECTIVES)}")
    if not 0 <= min_workers <= max_workers:
        raise PlanError(f"worker range {min_workers}..{max_workers} is empty or negative")
    c = constraints if isinstance(constraints, Constraints) else Constraints.parse(constraints)
    targets = [t for t in targets if t in tables.target_device]
    candidates = [(p, w) for p in placements(tables, targets) for w in range(min_workers, max_workers + 1)]
    if not candidates:
        missing = [r for r in ROLES if not any(tables.can_run(r, t) for t in targets)]
        raise PlanError(f"no target can run {', '.join(missing)} (targets: {', '.join(targets) or 'none'}): "
                        "check `pearl-fpga devices` and the --devices list")
    chosen = [(p, w) for p, w in candidates if _allowed(tables, c, p, w)]
    if not chosen:
        raise _infeasible(tables, c, candidates, targets)
    preds = [predict(tables, workload, p, w) for p, w in chosen]
    best = max(pr.objective(objective) for pr in preds)
    order = {t: i + 1 for i, t in enumerate(targets)}
    default = default or {}

    def rank(role: str, target: str) -> int:
        return 0 if default.get(role) == target else order[target]

    def key(pr: Prediction) -> tuple:
        tied = pr.objective(objective) >= best * (1.0 - tie_tolerance)
        n_dev = len({tables.target_device[t] for t in pr.placement.values()})
        if not tied:
            return (True, 0, 0, (), -pr.objective(objective))
        return (False, n_dev, pr.workers, tuple(rank(r, pr.placement[r]) for r in ROLES), -pr.objective(objective))

    return sorted(preds, key=key)
