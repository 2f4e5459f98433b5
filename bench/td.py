"""TD training throughput on backgammon: turns a second of the learner's compiled step.

`make_td` + `init` + one compiled `train(state, steps)` for each network size, after `steps`
turns of warm-up so that the timed games are past their openings (compile excluded, best of
`--repeats` rounds, the rows interleaved).

- `turns_per_s`: `num_games * steps / seconds`, every game playing one turn and one Adam step
  following each turn (`turbozero.td.learner.td_step`).
- `rate_all_turns_per_s`: the same step with every listed play of every turn rated by the
  network (backgammon lists 480 a turn, about 30 of them valid), the baseline the learner's
  packing (`turbozero.td.lookahead.rated`: only the valid plays, gathered in front) is measured
  against; `speedup` is the ratio.

The script uses only `make_td`, `TDConfig`, `init` and `train`, so an older checkout's learner
is measured by the same script: `PYTHONPATH=OLD/src python bench/td.py`.

    python bench/td.py [--hidden 80,80 160,160] [--games 128] [--steps 100] [--repeats 3]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, interleaved_best_times, machine
from turbozero.td import TDConfig, make_td
from turbozero.td import learner as td_learner


def rate_all_turns(rules, net, params, boards, dice):
    """`learner.play_turns` with every listed play rated (the baseline): each game's valid
    play of highest equity, a double's second half in the learner's slots."""

    def choose(board, d):
        plays, _, valid = rules.plays(board, d)
        scores = jnp.where(valid, td_learner.equity(rules, net, params, plays), -jnp.inf)
        return jnp.where(valid.any(), plays[jnp.argmax(scores)], board)

    after = jax.vmap(choose)(boards, dice)
    over = jax.vmap(rules.result)(after)[0]
    again = jax.vmap(rules.again)(dice) & ~over
    B = boards.shape[0]  # (the second halves in as many slots as the learner's)
    slots = jnp.argsort(~again, stable=True)[: min(B, max(B // td_learner.DOUBLE_SLOTS, 8))]
    second = jax.vmap(choose)(after[slots], dice[slots])
    shape = (-1,) + (1,) * (after.ndim - 1)
    return after.at[slots].set(jnp.where(again[slots].reshape(shape), second, after[slots]))


def trainer(hidden: tuple[int, ...], games: int, steps: int, rate_all: bool):
    """A no-argument call of one compiled `train(state, steps)` from a warmed-up state."""
    td = make_td(TDConfig(num_games=games, hidden=hidden))
    if rate_all:
        step = functools.partial(td_learner.td_step, td.rules, td.net, td.optimizer)

        def train(state, n):
            original = td_learner.play_turns
            td_learner.play_turns = rate_all_turns  # (while tracing only)
            try:
                return jax.lax.scan(lambda s, _: step(s), state, None, length=n)
            finally:
                td_learner.play_turns = original

        run = jax.jit(train, static_argnums=1)
    else:
        run = td.train
    state, _ = run(td.init(jax.random.PRNGKey(0)), steps)
    jax.block_until_ready(state)
    return lambda: jax.block_until_ready(run(state, steps))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hidden", nargs="+", default=["80,80", "160,160"])
    parser.add_argument("--games", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100, help="turns a compiled call")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    emit({"bench": "td", "machine": machine(), "learner": turbozero.__file__})
    packed = hasattr(td_learner, "rated")  # (an older learner rated every listed play)
    for text in args.hidden:
        hidden = tuple(int(h) for h in text.split(","))
        calls = {"ours": trainer(hidden, args.games, args.steps, False)}
        if packed:
            calls["rate_all"] = trainer(hidden, args.games, args.steps, True)
        seconds = interleaved_best_times(calls, args.repeats)
        row = {"game": "backgammon", "hidden": list(hidden), "games": args.games}
        row["turns_per_s"] = round(args.games * args.steps / seconds["ours"])
        if packed:
            row["rate_all_turns_per_s"] = round(args.games * args.steps / seconds["rate_all"])
            row["speedup"] = round(seconds["rate_all"] / seconds["ours"], 2)
        emit(row)


if __name__ == "__main__":
    main()
