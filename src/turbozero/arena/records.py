"""Game records: replay a match's game on the host and draw its positions as SVG."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.match import MatchResult
from turbozero.envs.core import Env
from turbozero.types import PyTree


def replay_game(env: Env, result: MatchResult, game: int) -> list[PyTree]:
    """The states of game `game` of `result`, from `init` to its last move (unbatched).

    The match must have been played with `max_steps` (so that its actions were recorded); the
    environment's randomness is rebuilt from `result.game_keys` exactly as `play_match` drew it.

    Raises:
        ValueError: if the match recorded no actions or `game` is out of range.
    """
    if result.actions is None:
        raise ValueError("result has no actions: play the match with max_steps to record them")
    if not 0 <= game < result.num_games:
        raise ValueError(f"game must be in [0, {result.num_games}), got {game}")
    game_key = jnp.asarray(result.game_keys[game])
    init = jax.jit(env.init)
    step = jax.jit(env.step)
    state, _ = init(jax.random.fold_in(game_key, 0))
    states = [state]
    # the game's own length bounds it (continuous actions have no end marker; discrete ones
    # are -1 once the game is over)
    actions = np.asarray(result.actions[: int(result.lengths[game]), game])
    for t, action in enumerate(actions):
        move = jnp.asarray(action, jnp.float32) if env.continuous else jnp.int32(action)
        state, _ = step(state, move, jax.random.fold_in(game_key, t + 1))
        states.append(state)
    return states


def render_game_svgs(env: Env, states_sequence: Sequence[PyTree]) -> list[str]:
    """SVG text of each (unbatched) state through `env.render_svg` (pgx's visualizer for pgx).

    Raises:
        ValueError: if the environment cannot draw itself.
    """
    if env.render_svg is None:
        raise ValueError(f"environment {env.name!r} has no render_svg")
    return [env.render_svg(jax.device_get(state)) for state in states_sequence]
