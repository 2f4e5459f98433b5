"""PNG plots of a run's `metrics.jsonl`: losses, throughput, evaluation results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

GROUPS = {
    "losses": (
        "loss",
        "policy_loss",
        "value_loss",
        "policy_kl",
        "value_mae",
        "actor_loss",
        "entropy",
        "approx_kl",
    ),
    "throughput": (
        "positions_per_s",
        "train_steps_per_s",
        "simulations_per_s",
        "tree_fullness",
        "env_steps_per_s",
    ),
}


def is_fraction(key: str, values: list[float]) -> bool:
    """Whether a metric's panel is pinned to [0, 1]: win/draw/loss rates, scores and tree
    fullness, when every value lies there (a one-player game's `eval/score` is its mean
    return, which was drawn off the pinned axis)."""
    named = key.endswith(("/win", "/draw", "/loss", "/score", "tree_fullness"))
    return named and all(0.0 <= v <= 1.0 for v in values)


def plot_run(rows: list[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write `losses.png`, `throughput.png` and `evaluation.png` (what the rows hold)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    groups = dict(GROUPS)
    groups["evaluation"] = tuple(
        sorted({k for r in rows for k in r if k.startswith(("eval/", "elo"))})
    )
    for name, keys in groups.items():
        present = [k for k in keys if any(k in r and r[k] is not None for r in rows)]
        if not present:
            continue
        fig, axes = plt.subplots(len(present), 1, figsize=(7, 2.2 * len(present)), squeeze=False)
        for ax, k in zip(axes[:, 0], present, strict=True):
            xs = [r["env_steps"] for r in rows if r.get(k) is not None]
            ys = [r[k] for r in rows if r.get(k) is not None]
            ax.plot(xs, ys, marker="." if len(xs) < 30 else None)
            if is_fraction(k, ys):
                ax.set_ylim(-0.03, 1.03)  # fractions: a flat 0.01 must not look like a swing
            ax.set_ylabel(k, fontsize=8)
            ax.grid(alpha=0.3)
        axes[-1, 0].set_xlabel("environment steps")
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=80)
        plt.close(fig)
        written.append(path)
    return written
