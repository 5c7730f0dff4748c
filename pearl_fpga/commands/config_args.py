"""One way every command builds its TrainConfig: the algorithm's preset, then `--config FILE.json`,
then the command's own options, then each `--set FIELD=VALUE` (last wins). Values are JSON
(`--set net_arch=[64,64]`, `--set per=true`) or, where that does not parse, a plain string
(`--set env_id=Acrobot-v1`); TrainConfig validates every field and names the wrong one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="JSON file of TrainConfig fields overriding the algorithm's preset")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override one TrainConfig field, e.g. --set net_arch=[64,64] --set batch_size=32 "
                             "(repeatable; applied last)")


def parse_set(items: list[str]) -> dict[str, Any]:
    """{field: value} from --set items; a clear ValueError for a malformed item or unknown field."""
    from pearl_fpga.config import TrainConfig, nearest_name

    known = TrainConfig.field_names()  # the shared fields and every algorithm's own parameters
    out: dict[str, Any] = {}
    for item in items:
        field, sep, value = item.partition("=")
        field = field.strip()
        if not sep or not field:
            raise ValueError(f"--set {item!r}: write FIELD=VALUE, e.g. --set batch_size=32")
        if field not in known:
            raise ValueError(f"--set {item!r}: TrainConfig has no field {field!r}{nearest_name(field, known)}; "
                             f"fields: {', '.join(known)}")
        try:
            out[field] = json.loads(value)
        except json.JSONDecodeError:
            if "," in value:  # e.g. net_arch=64,64: a list wants JSON's brackets
                raise ValueError(f"--set {item!r}: {value!r} is not a JSON value; write a list in brackets, "
                                 f"e.g. --set {field}=[{value.strip('[]() ')}]") from None
            out[field] = value  # a bare string such as an env id; TrainConfig checks its type
    return out


def config_flags(args: argparse.Namespace) -> str:
    """The options that made the command's config (--per, --config, each --set), as a shell would take them
    back: what a command suggests (`plan`'s "train with:") must be the config it used."""
    import shlex

    flags = ["--per"] if getattr(args, "per", False) else []
    if getattr(args, "config", None) is not None:
        flags += ["--config", shlex.quote(str(args.config))]
    for item in getattr(args, "set", []) or []:
        flags += ["--set", shlex.quote(item)]
    return "".join(f" {flag}" for flag in flags)


def build_config(args: argparse.Namespace, algo: str, env: str | None = None, **overrides: Any) -> Any:
    """The command's TrainConfig (see the module docstring); ValueError names any wrong field."""
    from pearl_fpga.config import TrainConfig, preset_note

    note = preset_note(algo, env)
    if note and not getattr(args, "_preset_noted", False):
        print(note, file=sys.stderr)
        args._preset_noted = True  # one line per command, however often it builds its config
    config = TrainConfig.preset(algo, env)
    path = getattr(args, "config", None)
    if path is not None:
        config = TrainConfig.from_json(path, base=config)
        if config.algo != algo:
            raise ValueError(f"--config {path} is for algo {config.algo!r}, but --algo is {algo!r}")
    merged = {**config.to_dict(), **overrides, **parse_set(getattr(args, "set", []) or [])}
    if merged["algo"] != algo:
        raise ValueError(f"--set algo={merged['algo']}: use --algo to choose the algorithm")
    return TrainConfig.from_dict(merged)
