"""The types of the registry: an algorithm's spec, one parameter of its own, a numeric range."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Range:
    """The values a numeric field accepts: lo..hi, lo itself excluded when lo_open; `why` explains a
    bound that is not obvious."""

    lo: float
    hi: float
    lo_open: bool = False
    why: str = ""

    def __contains__(self, value: float) -> bool:
        return (value > self.lo if self.lo_open else value >= self.lo) and value <= self.hi

    def __str__(self) -> str:
        def text(x: float) -> str:
            return str(x) if isinstance(x, int) else f"{x:g}"

        hi = "inf)" if self.hi == math.inf else f"{text(self.hi)}]"
        return f"{'(' if self.lo_open else '['}{text(self.lo)}, {hi}"

    def check(self, owner: str, name: str, value: float) -> None:
        """Raise ValueError naming the field, the value, the range and the fix."""
        if value not in self:
            why = f" ({self.why})" if self.why else ""
            raise ValueError(f"{owner}.{name} = {value!r} is out of range: it must be in {self}{why}; "
                             f"set a value in that range (--set {name}=VALUE or the config file)")


@dataclass(frozen=True)
class Param:
    """A parameter an algorithm declares for itself (TrainConfig holds it beside the shared fields).

    kind: "float", "int", "bool" or "str"; a number must lie in `range`; `choices` are the strings a
    numeric parameter also takes (e.g. "auto"), and the only ones a "str" parameter with choices takes."""

    default: Any
    doc: str
    kind: str = "float"
    range: Range | None = None
    choices: tuple[str, ...] = ()

    def check(self, owner: str, name: str, value: Any) -> Any:
        """The value, normalized (an int where a float is wanted becomes a float); ValueError naming the
        parameter, its rule and the fix otherwise."""
        if isinstance(value, str) and value in self.choices:
            return value
        rule = self.rule()
        fix = f"(--set {name}=VALUE or the config file)"
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
        elif self.kind == "str":
            if isinstance(value, str) and value and not self.choices:
                return value
        elif not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value):
            if self.kind == "int" and not isinstance(value, int):
                raise ValueError(f"{owner}.{name} must be {rule}, got {value!r}; set one {fix}")
            if self.range is not None:
                self.range.check(owner, name, value)
            return int(value) if self.kind == "int" else float(value)
        raise ValueError(f"{owner}.{name} must be {rule}, got {value!r}; set one {fix}")

    def rule(self) -> str:
        """The accepted values in words."""
        if self.kind == "str" and self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        base = {"float": "a finite number", "int": "an integer", "bool": "true or false",
                "str": "a non-empty string"}[self.kind]
        if self.range is not None:
            base += f" in {self.range}"
        if self.choices:
            base += " or " + " or ".join(repr(c) for c in self.choices)
        return base


@dataclass(frozen=True)
class AlgoSpec:
    """What one algorithm declares. `learner` is "module:Class" of its learner (imported only when a run
    builds one, so that reading the registry needs no torch); `defaults` are Stable-Baselines3's
    constructor defaults plus PEARL's runtime settings for it; `presets` rl-zoo's per env (fields of
    TrainConfig or of `params`)."""

    name: str
    summary: str
    learner: str
    family: str  # "deep" (networks, replay, actors) or "tabular" (a Q table on the TabularQ kernel)
    action_space: str  # "discrete" or "continuous"
    default_env: str
    defaults: dict[str, Any]
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    params: dict[str, Param] = field(default_factory=dict)
    order: int = 100  # position in listings (the built-in ones first, in the order users know them)

    def preset(self, env_id: str | None) -> dict[str, Any]:
        """defaults + the preset of env_id (the default env's when env_id has none), algo and env_id set."""
        env = env_id or self.default_env
        return {**self.defaults, **self.presets.get(env, self.presets.get(self.default_env, {})),
                "algo": self.name, "env_id": env}

    def preset_note(self, env_id: str | None) -> str | None:
        """The line to show when env_id has no preset of its own (None when it has one, and for an id
        gymnasium does not know: making the env says what is wrong, and no note should come before that;
        a `module:Id` is imported when made, so it keeps its note)."""
        if env_id is None or env_id in self.presets or (":" not in env_id and not _registered(env_id)):
            return None
        source = "tabular" if self.family == "tabular" else "rl-zoo"
        return (f"no preset for {env_id}: using {self.default_env}'s ({self.name} {source} settings; "
                "override with --set/--config)")


def _registered(env_id: str) -> bool:
    """Whether gymnasium knows `env_id` (True without gymnasium: nothing to check it against)."""
    try:
        import gymnasium
    except ImportError:
        return True
    return env_id in gymnasium.registry
