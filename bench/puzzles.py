"""AlphaZero on jumanji's one-player puzzles: a preset trained for a fixed budget, then the mean
return of the searched agent, of the network alone and of the random policy.

Each run trains the preset (`turbozero.train`) with `max_wall_seconds` set to the budget, loads
its latest network (`turbozero.load_agent`) and plays `--games` games three ways, with the same
keys: the searched agent at the preset's evaluation simulation count, the network's most likely
legal move at each step (no search), and uniformly random legal moves. One JSON line per run:

- `searched`, `network`, `random`: mean returns; `*_length`: mean episode lengths;
- `searched_vs_random`: the searched agent's mean return over the random policy's (the bar
  `make check` holds: at least 2);
- `epochs`, `env_steps`, `minutes` (training wall-clock, compilation excluded), `seed`.

A search steps the game's true state: on Minesweeper it sees the hidden mines, so only the
network's figure is a player's.

    python bench/puzzles.py [--preset minesweeper] [--preset maze] [--budget 600]
        [--games 256] [--seed 0] [--set KEY=VALUE ...] [--keep DIR]

Default: both presets at their own `max_wall_seconds`. Run it alone: it uses every core.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.arena import network_agent, play_match, random_agent
from turbozero.config import get_preset

PRESETS = ("minesweeper", "maze")


def run_preset(
    preset: str, overrides: list[str], budget: float | None, seed: int, games: int, out: Path
) -> dict[str, Any]:
    """Train `preset` for at most `budget` seconds (None: its own); its returns row."""
    from turbozero.alphazero.train import train_alphazero as train

    config = get_preset(preset).make().with_overrides([*overrides, f"seed={seed}"]).resolved()
    if budget is not None:
        config = config.with_overrides([f"max_wall_seconds={budget}"])
    summary = train(config, out, preset=preset, progress=False)
    loaded = turbozero.load_agent(out, which="latest")
    env, key = loaded.env, jax.random.PRNGKey(10_000 + seed)
    agents = {
        "searched": loaded.agent,
        "network": network_agent(env, loaded.az.eval_fn, loaded.params, name="network"),
        "random": random_agent(env),
    }
    row: dict[str, Any] = {"preset": preset, "seed": seed}
    for name, agent in agents.items():
        r = play_match(env, agent, None, key, num_games=games, max_steps=config.max_episode_steps)
        row[name] = round(float(r.mean_return_a), 4)
        row[f"{name}_length"] = round(float(r.mean_length), 2)
    row["searched_vs_random"] = round(row["searched"] / max(row["random"], 1e-9), 2)
    row["network_vs_random"] = round(row["network"] / max(row["random"], 1e-9), 2)
    row.update(
        simulations=config.eval_simulations or config.search.num_simulations,
        games=games,
        epochs=summary["epochs"],
        env_steps=summary["env_steps"],
        minutes=round(summary["wall_seconds"] / 60, 2),
    )
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", action="append", choices=PRESETS, help="(repeatable)")
    parser.add_argument("--budget", type=float, help="seconds of training (default: preset's)")
    parser.add_argument("--games", type=int, default=256, help="evaluation games per agent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="config override")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    args = parser.parse_args(argv)
    if (args.budget is not None and args.budget <= 0) or args.games < 1:
        parser.error("--budget must be > 0 and --games >= 1")
    presets = args.preset or list(PRESETS)
    emit({"machine": machine(), "presets": presets, "budget_seconds": args.budget})
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        for preset in presets:
            out = where / f"{preset}{args.seed}"
            row = run_preset(preset, args.set, args.budget, args.seed, args.games, out)
            emit({**row, "overrides": args.set})


if __name__ == "__main__":
    main()
