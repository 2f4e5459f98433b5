"""PNG plots of a run's `metrics.jsonl`: strength (or returns), losses, throughput."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turbozero.gamespec import Judge

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
        "turns_per_s",
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


def strength_series(
    rows: list[dict[str, Any]], judge: Judge | None = None
) -> dict[str, dict[str, str]]:
    """The strength panels a run's rows support: `{panel title: {line label: metric key}}`.

    Move accuracy against a solver (or the panels of the game's `judge`: backgammon's gnubg
    error rate and share of its best plays), the score against each fixed opponent (wins plus
    half the draws, from the `eval/NAME/win` and `eval/NAME/draw` rates) beside random play's
    against it (`eval/NAME/random_score`), the score against the
    best network, the Elo rating, and a one-player game's mean return."""
    keys = {k for r in rows for k in r}
    panels: dict[str, dict[str, str]] = {}
    accuracy = {
        label: f"eval/accuracy/{name}"
        for name, label in (("result", "keeps the result"), ("best", "solver's best move"))
        if f"eval/accuracy/{name}" in keys
    }
    if accuracy:
        panels["move accuracy vs solver"] = accuracy
    for title, lines in (judge.panels if judge is not None else {}).items():
        present = {label: key for label, key in lines.items() if key in keys}
        if present:  # an engine's judgement (backgammon's gnubg), as its judge draws it
            panels[title] = present
    opponents = sorted(k[5:-4] for k in keys if k.startswith("eval/") and k.endswith("/win"))
    score = {f"vs {o}": f"score:{o}" for o in opponents}
    for o in opponents:  # the baseline: what random play scores against the same opponent
        if f"eval/{o}/random_score" in keys:
            score[f"random play vs {o}"] = f"eval/{o}/random_score"
    if "eval/best/score" in keys:
        score["vs best so far"] = "eval/best/score"
    if score:
        panels["score (win + draw/2)"] = score
    if "elo" in keys:
        panels["Elo (random = 0)"] = {"Elo": "elo"}
    # (the agent's own return is its search's where its network alone is drawn beside it)
    played = "searched" if "eval/network/return" in keys else "agent"
    returns = {
        label: key
        for label, key in (
            (played, "eval/return"),
            ("network alone", "eval/network/return"),
            ("random policy", "eval/random/return"),
        )
        if key in keys
    }
    if returns:
        panels["mean return"] = returns
    reached = sorted(
        (k for k in keys if k.startswith("eval/reached_") and k.endswith("/mean")),
        key=lambda k: float(k[13:-5]) if k[13:-5].isdigit() else math.inf,
    )
    if reached:  # a game's milestones (2048's tiles), as the share of games reaching each
        panels["share of games reaching"] = {k[13:-5]: k for k in reached}
    return panels


def _value(row: dict[str, Any], key: str) -> float | None:
    if key.startswith("score:"):
        name = key[6:]
        win, draw = row.get(f"eval/{name}/win"), row.get(f"eval/{name}/draw")
        return None if win is None else win + 0.5 * (draw or 0.0)
    value = row.get(key)
    return None if value is None else float(value)


def accuracy_limits(values: list[float]) -> tuple[float, float]:
    """The accuracy panel's y-range: from a multiple of 5% at least a point below the lowest
    value up to 100%, so that a run near perfect play shows its last points of progress
    rather than a flat line at the top of [0, 1]."""
    low = min(values, default=0.0)
    return max(0.0, math.floor((low - 0.01) * 20) / 20), 1.005


def _last(value: float, fraction: bool) -> str:
    # (two decimals: at one, 2 mistakes in 4,520 positions read as 100.0%)
    if fraction:
        return f" ({value:.2%} last)"
    return f" ({value:,.0f} last)" if abs(value) >= 1000 else f" ({value:.4g} last)"


def plot_strength(rows: list[dict[str, Any]], path: Path, judge: Judge | None = None) -> bool:
    """One figure of strength over time: a row per panel of `strength_series`, against
    wall-clock minutes (left) and environment steps (right). False if there is nothing to plot."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, PercentFormatter

    panels = strength_series(rows, judge)
    if not panels:
        return False
    fig, axes = plt.subplots(
        len(panels), 2, figsize=(10, 2.8 * len(panels)), squeeze=False, sharey="row"
    )
    for (title, lines), row_axes in zip(panels.items(), axes, strict=True):
        for ax, x_key, scale in zip(
            row_axes, ("wall_seconds", "env_steps"), (1 / 60, 1.0), strict=True
        ):
            shown: list[float] = []
            fraction = "accuracy" in title or "score" in title or "best play" in title
            for label, key in lines.items():
                points = [(r[x_key] * scale, _value(r, key)) for r in rows if x_key in r]
                points = [(x, y) for x, y in points if y is not None]
                if points:
                    xs, ys = zip(*points, strict=True)
                    shown += ys
                    ax.plot(
                        xs,
                        ys,
                        marker="." if len(xs) < 30 else None,
                        label=label + _last(ys[-1], fraction),
                    )
            if x_key == "env_steps":  # 200k, 1.5M: the long counts do not run together
                ax.xaxis.set_major_formatter(EngFormatter(sep=""))
            if "accuracy" in title:
                ax.set_ylim(*accuracy_limits(shown))
                ax.yaxis.set_major_formatter(PercentFormatter(1.0))
            elif "score" in title or "best play" in title:
                ax.set_ylim(-0.03, 1.03)
            ax.grid(alpha=0.3)
        row_axes[0].set_ylabel(title, fontsize=9)
        row_axes[1].legend(fontsize=8, loc="lower right")
    axes[-1, 0].set_xlabel("training wall-clock (minutes)")
    axes[-1, 1].set_xlabel("environment steps (positions)")
    fig.suptitle("strength during training", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def plot_returns(rows: list[dict[str, Any]], path: Path) -> bool:
    """An on-policy run's returns in one figure: the evaluation return as a line with its spread
    over episodes as a band (and each seed's mean, thin, when there are several), beside the
    return of the episodes that ended during training. False if the rows have neither."""
    import matplotlib.pyplot as plt

    evals = [r for r in rows if r.get("eval/return") is not None and "env_steps" in r]
    trains = [
        r
        for r in rows
        if isinstance(r.get("episode_return"), float)
        and math.isfinite(r["episode_return"])  # NaN: no episode ended in that epoch
        and "env_steps" in r
    ]
    if not evals and not trains:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4), sharey=True)
    if evals:
        xs = [r["env_steps"] for r in evals]
        mean = [float(r["eval/return"]) for r in evals]
        std = [float(r.get("eval/return_std", 0.0)) for r in evals]
        low = [
            max(m - s, r.get("eval/return_min", m - s))
            for m, s, r in zip(mean, std, evals, strict=True)
        ]
        high = [
            min(m + s, r.get("eval/return_max", m + s))
            for m, s, r in zip(mean, std, evals, strict=True)
        ]
        left.fill_between(xs, low, high, alpha=0.25, label="± one std over episodes")
        seeds = [r.get("eval/return_per_seed") or [] for r in evals]
        if len(seeds[-1]) > 1:
            for i in range(len(seeds[-1])):
                per = [(x, s[i]) for x, s in zip(xs, seeds, strict=True) if len(s) > i]
                left.plot(*zip(*per, strict=True), lw=0.6, alpha=0.5, color="grey")
        left.plot(xs, mean, marker="." if len(xs) < 30 else None, label="mean return")
        left.legend(fontsize=8, loc="lower right")
    left.set_title("evaluation (greedy policy)", fontsize=10)
    if trains:
        xs = [r["env_steps"] for r in trains]
        right.plot(xs, [float(r["episode_return"]) for r in trains], color="tab:orange")
    right.set_title("training episodes (sampled actions)", fontsize=10)
    left.set_ylabel("episode return")
    for ax in (left, right):
        ax.set_xlabel("environment steps")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def plot_run(
    rows: list[dict[str, Any]], out_dir: str | Path, *, judge: Judge | None = None
) -> list[Path]:
    """Write what the rows hold: `strength.png` (AlphaZero and TD) or `returns.png` (PPO),
    beside `losses.png` and `throughput.png`; `judge` (the game's) adds its panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    groups = dict(GROUPS)
    games = any("positions_per_s" in r or "turns_per_s" in r for r in rows)  # AlphaZero, TD
    if games:
        if plot_strength(rows, out / "strength.png", judge):
            written.append(out / "strength.png")
    elif plot_returns(rows, out / "returns.png"):
        written.append(out / "returns.png")
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
