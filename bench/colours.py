"""Which seat a game favours between two copies of the same agent (issue 85: hex's first mover).

An agent plays an identical copy of itself (an opponent name as `eval --vs` takes it: `random`,
rollout `mcts:N`, ...), each moving first in half the games, after the same random opening
moves as `turbozero eval` (default 2). What is measured is the first mover's score, which for
equal agents is the seat's advantage alone (on hex it showed that rollout MCTS, before it broke
ties at random, favoured the second mover: 0.25 for the first at 100 simulations, 0.40 since).

One JSON row per opponent kind: `{"game", "agent", "games", "opening_moves", "first_wins",
"first_draws", "first_losses", "first_score", "first_score_ci95", "mean_length", "seconds"}`.

    python bench/colours.py [--game hex] [--agents random,mcts:100] [--games 40]
        [--opening-moves 2] [--seed 1]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero import envs
from turbozero.arena.match import play_match, wilson_interval
from turbozero.arena.opponents import make_opponent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="hex")
    p.add_argument("--agents", default="random,mcts:100", help="comma-separated opponent names")
    p.add_argument("--games", type=int, default=40, help="even: half with each copy first")
    p.add_argument("--opening-moves", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    env = envs.make(args.game)
    emit({"machine": machine()})
    for kind in args.agents.split(","):
        try:
            a, b = make_opponent(env, kind), make_opponent(env, kind)
        except ValueError as err:
            raise SystemExit(f"--agents: {err}") from None
        start = time.perf_counter()
        result = play_match(
            env,
            a,
            b,
            jax.random.PRNGKey(args.seed),
            num_games=args.games,
            opening_moves=args.opening_moves,
        )
        # copy a moved first in the `as_first` games and copy b in the `as_second` ones
        first = (
            result.as_first.wins + result.as_second.losses,
            result.as_first.draws + result.as_second.draws,
            result.as_first.losses + result.as_second.wins,
        )
        score = (first[0] + 0.5 * first[1]) / args.games
        low, high = wilson_interval(first[0] + 0.5 * first[1], args.games)
        emit(
            {
                "game": args.game,
                "agent": kind,
                "games": args.games,
                "opening_moves": args.opening_moves,
                "first_wins": first[0],
                "first_draws": first[1],
                "first_losses": first[2],
                "first_score": round(score, 4),
                "first_score_ci95": [round(low, 4), round(high, 4)],
                "mean_length": round(result.mean_length, 2),
                "seconds": round(time.perf_counter() - start, 1),
            }
        )


if __name__ == "__main__":
    main()
