"""fpga-emu: the kernels' C++ build computes, at the synthesized sizes of one catalog board.

A board's bitstream holds an MLP kernel of at most `max_layers` linear layers of width `max_width`
(batches of up to `max_batch`) and a replay sum tree of `capacity` leaves with fan-out `fanout`
(bitstreams/catalog.json, the HLS defines of `make bitstream`). A run emulating the board gets the same
limits: one that would not fit the board stops at start (BoardFitError), naming the limit and the
fixes. The fixed-point formats (int16 MLP words with per-layer formats, Q16.16 priorities with 64-bit
sums) are the kernels' own, the same on every board, so the C++ build computes them bit for bit.
`cpu-kernel` is the same arithmetic without a board's limits. The uniform buffer (no PER) is host
memory wherever replay is placed, so it has no board limit.
"""

from __future__ import annotations

from typing import Any

from pearl_fpga.board.catalog import BoardSpec, load_catalog
from pearl_fpga.config import TrainConfig
from pearl_fpga.errors import PearlError
from pearl_fpga.runtime.placement import Placement, resolve_engine
from pearl_fpga.spec.mlp import CPU_MAX_WIDTH as MLP_CPU_MAX_WIDTH
from pearl_fpga.spec.mlp import MAX_LAYERS as MLP_MAX_LAYERS

SMALL_NET = [64, 64]
"""PEARL's own network, which every catalog board holds: the fix a too-wide network is offered."""


class KernelFitError(PearlError, ValueError):
    """The run's network does not fit the MLP kernel its placement puts in the loop."""


class BoardFitError(KernelFitError):
    """The run does not fit the emulated board's kernels."""


def emulated_board(placement: Placement) -> BoardSpec | None:
    """The board `placement` emulates, or None when no role is on fpga-emu (looked up in the catalog
    once, when the placement was made)."""
    return placement.board_spec


def net_text(obs_dim: int, net_arch: list[int], out_dim: int) -> str:
    return "-".join(map(str, [obs_dim, *net_arch, out_dim]))


def misfits(board: BoardSpec, config: TrainConfig, obs_dim: int, out_dim: int, act: bool, replay: bool) -> list[str]:
    """Each limit of `board` the run exceeds, in words; `act`/`replay`: whether that kernel is emulated."""
    out = []
    if act:
        mk = board.kernels["mlp"]
        widths = [obs_dim, *config.net_arch, out_dim]
        kernel, net = f"{board.name}'s MLP kernel", f"the network {net_text(obs_dim, config.net_arch, out_dim)}"
        if len(widths) - 1 > mk["max_layers"]:
            out.append(f"{kernel} holds {mk['max_layers']} layers; {net} has {len(widths) - 1}")
        if max(widths) > mk["max_width"]:
            out.append(f"{kernel} holds width {mk['max_width']}; {net} has {max(widths)}")
        if config.n_envs > mk["max_batch"]:
            out.append(f"{kernel} infers batches of up to {mk['max_batch']}; n_envs is {config.n_envs}")
    if replay and config.per:
        capacity, shards = board.kernels["replay"]["capacity"], _shards(config)
        if config.buffer_size // shards > capacity:
            per_shard = f" ({config.buffer_size // shards:,} per shard)" if shards > 1 else ""
            out.append(f"{board.name}'s replay kernel holds {capacity:,} transitions; "
                       f"buffer_size is {config.buffer_size:,}{per_shard}")
    return out


def _roles(placement: Placement) -> dict[str, bool]:
    return {"act": placement.act == "fpga-emu", "replay": placement.replay == "fpga-emu"}


def _misfits_by_kernel(board: BoardSpec, config: TrainConfig, obs_dim: int, out_dim: int,
                       roles: dict[str, bool]) -> tuple[list[str], list[str]]:
    """misfits of the MLP kernel and of the replay kernel, apart."""
    return (misfits(board, config, obs_dim, out_dim, act=roles["act"], replay=False),
            misfits(board, config, obs_dim, out_dim, act=False, replay=roles["replay"]))


def kernel_misfits(config: TrainConfig, obs_dim: int, out_dim: int) -> list[str]:
    """Each size of the MLP kernel's widest build (the cpu extension's, hls/mlp/SPEC.md) the network exceeds."""
    widths = [obs_dim, *config.net_arch, out_dim]
    kernel, net = "the MLP kernel (its cpu build)", f"the network {net_text(obs_dim, config.net_arch, out_dim)}"
    out = []
    if len(widths) - 1 > MLP_MAX_LAYERS:
        out.append(f"{kernel} holds {MLP_MAX_LAYERS} linear layers ({MLP_MAX_LAYERS - 1} hidden); {net} has "
                   f"{len(widths) - 1}")
    if max(widths) > MLP_CPU_MAX_WIDTH:
        out.append(f"{kernel} holds width {MLP_CPU_MAX_WIDTH}; {net} has {max(widths)}")
    return out


def check_fits(config: TrainConfig, obs_dim: int, out_dim: int, placement: Placement) -> None:
    """KernelFitError when the actors run the MLP kernel and the network exceeds its sizes (a learner or an
    actor in torch takes any network); BoardFitError naming every limit of the emulated board the run
    exceeds, and the fixes."""
    problems = kernel_misfits(config, obs_dim, out_dim) if placement.kernel_actor else []
    if problems:
        raise KernelFitError(f"placement act={placement.act} puts the MLP kernel in the loop, and the network does not "
                             f"fit it: {'; '.join(problems)}. Fixes: a network that fits (up to {MLP_MAX_LAYERS - 1} "
                             f"hidden layers of width up to {MLP_CPU_MAX_WIDTH}, e.g. --set net_arch=[256,256]); or "
                             f"the actors in torch, which takes any network (--placement "
                             f"{_text(placement, 'cpu', role='act')})")
    board = emulated_board(placement)
    if board is None:
        return
    roles = _roles(placement)
    mlp, replay = _misfits_by_kernel(board, config, obs_dim, out_dim, roles)
    problems = mlp + replay
    if not problems:
        return
    fixes = []
    if mlp and not misfits(board, _with(config, net_arch=SMALL_NET), obs_dim, out_dim, act=True, replay=False):
        fixes.append(f"a smaller network (--set net_arch=[{','.join(map(str, SMALL_NET))}])")
    if replay:
        fixes.append(f"a smaller buffer (--set buffer_size={board.kernels['replay']['capacity'] * _shards(config)})")
    boards = [b.name for b in load_catalog().values()
              if b.name != board.name and not misfits(b, config, obs_dim, out_dim, **roles)]
    if boards:
        fixes.append(f"a board that fits (--placement {_text(placement, f'fpga-emu:{boards[0]}')}; boards that fit: "
                     f"{', '.join(boards)})")
    else:
        fixes.append("no board in the catalog fits this run")
    fixes.append(f"--placement {_text(placement, 'cpu-kernel')} (the kernels' arithmetic without board limits)")
    fixes.append("--placement auto, which may choose")
    raise BoardFitError(f"the run does not fit fpga-emu:{board.name}: {'; '.join(problems)}. Fixes: {'; '.join(fixes)}")


def _shards(config: TrainConfig) -> int:
    """Replay kernels of the run: one per Ray replay shard, else one."""
    return config.replay_shards if resolve_engine(config) == "ray" else 1


def _text(placement: Placement, target: str, role: str | None = None) -> str:
    """`placement` as a --placement value, with `target` where fpga-emu is, or in `role` when given (one word
    when it covers act and replay)."""
    roles = {r: target if (r == role if role else d == "fpga-emu") else d for r, d in placement.as_dict().items()}
    if roles["act"] == roles["replay"] == target and roles["learn"] == "cpu":
        return target
    return ",".join(f"{r}={d}" for r, d in roles.items())


def _with(config: TrainConfig, **changes: Any) -> TrainConfig:
    return type(config).from_dict({**config.to_dict(), **changes})


def board_preset(config: TrainConfig, placement: Placement, obs_dim: int, out_dim: int,
                 explicit: set[str] | frozenset[str] = frozenset()) -> tuple[Any, str | None]:
    """The preset `config`, shrunk to the emulated board where it does not fit and the user did not set
    the field (`explicit`): PEARL's own network (SMALL_NET), a buffer of the board's capacity. Returns
    (config, one line saying which runs and why, or None when nothing changed)."""
    board = emulated_board(placement)
    if board is None:
        return config, None
    roles = _roles(placement)
    mlp, replay = _misfits_by_kernel(board, config, obs_dim, out_dim, roles)
    problems = mlp + replay
    changes: dict[str, Any] = {}
    if mlp and "net_arch" not in explicit:
        changes["net_arch"] = SMALL_NET
    if replay and "buffer_size" not in explicit:
        changes["buffer_size"] = board.kernels["replay"]["capacity"] * _shards(config)
    if not changes:
        return config, None
    fitted = _with(config, **changes)
    if misfits(board, fitted, obs_dim, out_dim, **roles):
        return config, None  # still too big: check_fits names what
    changed = ", ".join(f"{k}={v}" for k, v in changes.items())
    return fitted, (f"{board.name} runs the {config.algo.upper()} {config.env_id} preset with {changed}: "
                    f"{'; '.join(problems)} (--placement cpu-kernel runs the preset as it is)")


def board_fit_record(preset: TrainConfig, run: TrainConfig, note: str | None) -> dict[str, Any] | None:
    """What board_preset changed, for summary.json and the console's summary alike: {"changes": {field:
    {"preset": value, "run": value}}, "text": its line}; None when the run is the preset's."""
    before, after = preset.to_dict(), run.to_dict()
    changes = {k: {"preset": before[k], "run": v} for k, v in after.items() if before.get(k) != v}
    return {"changes": changes, "text": note} if changes and note else None


def mlp_limits(placement: Placement) -> dict[str, int]:
    """Options of the MLP kernel's C++ build (CpuMLPBackend) that give it the emulated board's synthesized
    sizes (max_layers, max_width, max_batch), or {} when the actors do not run on fpga-emu."""
    board = emulated_board(placement)
    if board is None or placement.act != "fpga-emu":
        return {}
    mk = board.kernels["mlp"]
    return {key: int(mk[key]) for key in ("max_layers", "max_width", "max_batch")}


def replay_sizes(placement: Placement) -> dict[str, int]:
    """PrioritizedReplayBuffer options of the emulated board's sum tree (fan-out, batch), or {}."""
    board = emulated_board(placement)
    if board is None or placement.replay != "fpga-emu":
        return {}
    rk = board.kernels["replay"]
    return {"fanout": rk["fanout"], "max_batch": rk["max_batch"]}
