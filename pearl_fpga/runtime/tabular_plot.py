"""The learned policy of a grid world as a PNG: the greedy action of every cell as an arrow over its
state value (max_a Q), with holes, cliffs and the goal marked. FrozenLake and CliffWalking are grids;
other envs (Taxi's states are not cells) get no picture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

# (dx, dy) per action, y pointing down the rows
_FROZENLAKE_MOVES = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}  # left, down, right, up
_CLIFF_MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}  # up, right, down, left


def grid_layout(env: Any) -> tuple[np.ndarray, dict[int, tuple[int, int]]] | None:
    """(cell letters, rows x cols, of S/F/H/G/C; moves per action) of a grid env, else None."""
    base = env.unwrapped
    if hasattr(base, "desc") and hasattr(base, "nrow") and hasattr(base, "ncol"):
        return np.asarray(base.desc).astype(str), _FROZENLAKE_MOVES
    shape = getattr(base, "shape", None)
    if shape is not None and len(shape) == 2 and hasattr(base, "_cliff"):
        rows, cols = shape
        cells = np.full(shape, "F")
        cells[rows - 1, 0], cells[rows - 1, cols - 1] = "S", "G"
        cells[np.asarray(base._cliff, bool)] = "C"
        return cells, _CLIFF_MOVES
    return None


def plot_policy(env: Any, q: np.ndarray, path: str | Path, title: str) -> Path | None:
    """Write the policy picture of `q` (float, n_states x n_actions) to `path`; None for a non-grid env."""
    layout = grid_layout(env)
    if layout is None:
        return None
    cells, moves = layout
    rows, cols = cells.shape
    if q.shape[0] != rows * cols:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    value = q.max(axis=1).reshape(rows, cols)
    greedy = q.argmax(axis=1).reshape(rows, cols)
    fig, ax = plt.subplots(figsize=(max(4.0, cols * 0.6 + 1.5), max(3.0, rows * 0.6 + 1.0)), dpi=100)
    image = ax.imshow(value, cmap="viridis")
    fig.colorbar(image, ax=ax, label="max_a Q (state value)")
    for y in range(rows):
        for x in range(cols):
            cell = cells[y, x]
            if cell in ("H", "C", "G"):
                ax.text(x, y, {"H": "hole", "C": "cliff", "G": "goal"}[cell], ha="center", va="center",
                        color="white", fontsize=7, fontweight="bold")
                continue
            dx, dy = moves[int(greedy[y, x])]
            ax.annotate("", xy=(x + 0.35 * dx, y + 0.35 * dy), xytext=(x - 0.35 * dx, y - 0.35 * dy),
                        arrowprops=dict(arrowstyle="->", color="white", lw=1.5))
            if cell == "S":
                ax.text(x - 0.4, y - 0.3, "S", color="white", fontsize=7)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
