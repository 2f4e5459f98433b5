"""One recipe for every game: a preset on today's defaults against the first recipe, side by side.

For `--game` (othello, hex or animal_shogi) it trains two runs one after the other on this
machine, each for `--budget` seconds of training (default 1800) with the same seed:

- **new**: the game's preset, which trains on the default recipe (docs/configuration.md,
  "Where the defaults come from");
- **old**: the same preset with the first recipe's settings (`FIRST_RECIPE`: the class defaults
  before they became the Connect Four recipe) and the preset's earlier self-play settings
  (`OLD_PRESET`). Networks, batch sizes and the evaluation schedule are the same on both sides,
  so the runs differ by the recipe alone.

Then the matches, each with colours alternating and `--opening-moves` random moves (default 2)
opening every game, both sides searching with `--simulations` (default 128) so the match weighs
the trained networks and not a play-time setting: new against old over `--games` games (default
200), and each against rollout MCTS (`mcts:N`, `--mcts 100`) over `--mcts-games` games (default
100). One JSON row per run and per match; scores with their Wilson 95% intervals. The target
(issue 62): new beats old, the interval above 0.5.

    python bench/transfer.py --game othello [--budget 1800] [--games 200] [--keep DIR]
    python bench/transfer.py --game othello --runs NEW_RUN OLD_RUN    # the matches only
    python bench/transfer.py --game othello --set temperature_moves=15 --old-run OLD_RUN

An ablation: `--set KEY=VALUE` (repeatable) changes the new side's recipe (one lever of it
undone), and `--old-run DIR` plays a kept old run instead of training one again (same game,
budget and seed), so one lever costs one training.

Run it alone: training and the matches use every core.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.alphazero import train_alphazero as train
from turbozero.arena import play_match, rollout_mcts_agent
from turbozero.config import get_preset

GAMES = ("othello", "hex", "animal_shogi")

#: the class defaults before the recipe (the settings where today's defaults differ)
FIRST_RECIPE = (
    "learning_rate=0.001",
    "root_value_weight=0",
    "ema_decay=0",
    "overlap=false",
    "network.value_bins=0",
    "search.fpu=zero",
    "warmup_steps=8",
)

#: each preset's self-play and memory settings before it moved to the recipe
OLD_PRESET = {
    "othello": ("temperature_moves=15", "memory_capacity=256"),
    "hex": (
        "search.selector=gumbel",
        "search.max_nodes=33",
        "temperature_moves=0",
        "memory_capacity=256",
    ),
    "animal_shogi": ("temperature_moves=10", "memory_capacity=256"),
}


def recipe(game: str, side: str, ablation: Sequence[str] = ()) -> list[str]:
    """`--set` overrides of the preset for `side` ("new": `ablation`, none by default; "old":
    the first recipe)."""
    return list(ablation) if side == "new" else [*FIRST_RECIPE, *OLD_PRESET[game]]


def train_side(
    game: str, side: str, budget: float, seed: int, out: Path, ablation: Sequence[str]
) -> dict[str, Any]:
    """Trains `game`'s preset on `side`'s recipe for `budget` seconds into `out`; its row."""
    overrides = [*recipe(game, side, ablation), f"max_wall_seconds={budget}", f"seed={seed}"]
    config = get_preset(game).make().with_overrides(overrides)
    summary = train(config, out, preset=game, progress=False)
    return {
        "game": game,
        "side": side,
        "run": str(out),
        "overrides": overrides,
        "epochs": summary["epochs"],
        "env_steps": summary["env_steps"],
        "minutes": round(summary["wall_seconds"] / 60, 2),
    }


def match_row(a: Any, b: Any, env: Any, games: int, seed: int, opening: int) -> dict[str, Any]:
    """`games` games of `a` against `b`, summarised with the Wilson interval of `a`'s score."""
    start = time.perf_counter()
    r = play_match(env, a, b, jax.random.PRNGKey(seed), num_games=games, opening_moves=opening)
    return {
        "a": a.name,
        "b": b.name,
        "games": r.num_games,
        "wins": r.wins,
        "draws": r.draws,
        "losses": r.losses,
        "score": round(r.score, 4),
        "score_low": round(r.score_low, 4),
        "score_high": round(r.score_high, 4),
        "opening_moves": opening,
        "seconds": round(time.perf_counter() - start, 1),
    }


def matches(args: argparse.Namespace, new_run: Path, old_run: Path) -> None:
    """New against old, then each against rollout MCTS; a row each."""
    new = turbozero.load_agent(new_run, args.simulations, which="latest")
    old = turbozero.load_agent(old_run, args.simulations, which="latest")
    env = new.env
    if old.env.name != env.name:
        raise SystemExit(f"--runs: {new_run} plays {env.name}, {old_run} {old.env.name}")
    new_agent = new.agent.replace(name="new")
    old_agent = old.agent.replace(name="old")
    mcts = rollout_mcts_agent(env, num_simulations=args.mcts)
    pairs = ((new_agent, old_agent, args.games), (new_agent, mcts, args.mcts_games))
    pairs += ((old_agent, mcts, args.mcts_games),)
    for i, (a, b, games) in enumerate(pairs):
        row = match_row(a, b, env, games, args.seed + i, args.opening_moves)
        emit({"game": env.name, "simulations": args.simulations, **row})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", choices=GAMES, required=True)
    parser.add_argument("--budget", type=float, default=1800.0, help="seconds of training per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--games", type=int, default=200, help="games of new against old")
    parser.add_argument("--mcts", type=int, default=100, help="rollout MCTS's simulations")
    parser.add_argument("--mcts-games", type=int, default=100)
    parser.add_argument("--simulations", type=int, default=128, help="both sides' search")
    parser.add_argument("--opening-moves", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="write the two runs here (default: a temp dir)")
    parser.add_argument("--runs", type=Path, nargs=2, metavar=("NEW", "OLD"), help="no training")
    parser.add_argument(
        "--set", action="append", default=[], help="the new side's recipe changed (an ablation)"
    )
    parser.add_argument("--old-run", type=Path, help="a kept old run: train the new side only")
    args = parser.parse_args()
    if args.runs and (args.set or args.old_run):
        parser.error("--runs trains nothing: --set and --old-run are for a training")
    if args.old_run and not (args.old_run / "config.json").exists():
        parser.error(f"--old-run: {args.old_run} is not a run directory")
    try:  # the ablation's settings, checked before anything trains
        get_preset(args.game).make().with_overrides(args.set).resolved()
    except ValueError as err:
        parser.error(f"--set: {err}")
    for name in ("games", "mcts_games"):
        if getattr(args, name) < 2 or getattr(args, name) % 2:
            parser.error(f"--{name.replace('_', '-')} must be even and >= 2 (colours alternate)")
    emit({"bench": "transfer", "game": args.game, "budget_seconds": args.budget, **machine()})
    if args.runs:
        matches(args, *args.runs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        runs = {side: root / f"{args.game}-{side}" for side in ("new", "old")}
        if args.old_run:
            runs["old"] = args.old_run
        for side, out in runs.items():
            if side == "old" and args.old_run:
                continue
            emit(train_side(args.game, side, args.budget, args.seed, out, args.set))
        matches(args, runs["new"], runs["old"])


if __name__ == "__main__":
    main()
