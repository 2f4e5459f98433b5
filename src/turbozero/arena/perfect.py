"""Perfect players: `perfect_agent(env)` for the games in `PERFECT_GAMES`.

Tic-tac-toe plays from an exhaustive minimax table, built here; Connect Four asks the `bitbully`
solver (`turbozero.arena.connect_four`, the `solvers` extra).

Positions are encoded from the mover's point of view: cell `k` (row-major, the same index as the
action that marks it) holds 0 when empty, 1 for the mover's mark, 2 for the opponent's, and the
position's index is `sum(code[k] * 3**k)`, one of 3^9 = 19683. The table is solved once on the
host with numpy (unreachable encodings are solved too; they are never queried) and handed to the
agent as its `params`, so it lives on the device as a `[19683, 9]` array.

Values are from the mover's perspective: +1 a forced win, 0 a draw, -1 a forced loss.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import (
    Agent,
    AgentOutput,
    legal_mask,
    make_agent,
    uniform_over_best,
)
from turbozero.envs.boards import BOARDS
from turbozero.envs.core import Env
from turbozero.types import Array, Params, PRNGKey, PyTree

NUM_POSITIONS = 3**9
ILLEGAL = -2.0  # table entry of an occupied cell
LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
POWERS = 3 ** np.arange(9)


@functools.lru_cache(maxsize=1)
def solve_tic_tac_toe() -> np.ndarray:
    """Minimax action values of every position.

    Returns:
        `[19683, 9]` float32: entry `[p, k]` is the value for the mover of marking cell `k` in
        position `p` (encoded as in the module docstring), or `ILLEGAL` (-2) if `k` is occupied.
    """
    index = np.arange(NUM_POSITIONS)
    digits = (index[:, None] // POWERS) % 3  # [N, 9]
    swapped = np.where(digits == 0, 0, 3 - digits)  # the opponent's point of view
    swapped_index = swapped @ POWERS
    opponent_won = np.all(digits[:, LINES] == 2, axis=-1).any(axis=-1)
    mover_won = np.all(digits[:, LINES] == 1, axis=-1).any(axis=-1)
    full = ~(digits == 0).any(axis=-1)
    terminal = opponent_won | mover_won | full
    terminal_value = np.where(opponent_won, -1.0, np.where(mover_won, 1.0, 0.0))

    # After the mover marks k, the opponent is to move in `swapped` with a 2 at k.
    children = swapped_index[:, None] + 2 * POWERS[None, :]  # [N, 9]
    empty = digits == 0
    children = np.where(empty, children, 0)  # occupied cells have no child
    value = np.zeros(NUM_POSITIONS)
    q = np.full((NUM_POSITIONS, 9), ILLEGAL)
    num_empty = empty.sum(axis=-1)
    for e in range(10):  # children have one empty cell fewer: solve them first
        rows = np.flatnonzero(num_empty == e)
        if e > 0:
            child_values = -value[children[rows]]
            q[rows] = np.where(empty[rows] & ~terminal[rows, None], child_values, ILLEGAL)
        best = q[rows].max(axis=-1)
        value[rows] = np.where(terminal[rows], terminal_value[rows], best)
    return (q + 0.0).astype(np.float32)  # no negative zeros


def encode_observations(observations: Array) -> Array:
    """`[B]` int32 position indices from pgx tic-tac-toe observations `[B, 3, 3, 2]`.

    Channel 0 holds the mover's marks and channel 1 the opponent's.
    """
    flat = observations.reshape(observations.shape[0], 9, 2).astype(jnp.int32)
    codes = flat[..., 0] + 2 * flat[..., 1]
    return jnp.sum(codes * jnp.asarray(POWERS, jnp.int32), axis=-1)


@dataclasses.dataclass(frozen=True)
class PerfectPolicy:
    """Uniform among the legal moves of highest minimax value; `params` is the table."""

    env: Env

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        observations = jax.vmap(self.env.observe)(states)
        q = params[encode_observations(observations)]  # [B, 9]
        action, weights, value = uniform_over_best(q, legal_mask(self.env, states), key)
        value = jnp.clip(value, -1.0, 1.0)  # terminal rows (all cells full) have no legal move
        return AgentOutput(action, weights, value)


def perfect_tic_tac_toe_agent(env: Env, *, name: str = "perfect") -> Agent:
    """A perfect tic-tac-toe agent (see the module docstring).

    Raises:
        ValueError: if `env` is not tic-tac-toe with 9 actions and `[3, 3, 2]` observations.
    """
    if (
        env.name not in ("tic_tac_toe", "pgx:tic_tac_toe")
        or env.num_actions != 9
        or tuple(env.observation_shape) != (3, 3, 2)
    ):
        raise ValueError(
            "perfect_agent supports only tic_tac_toe (9 actions, observation [3, 3, 2]), "
            f"got {env!r}"
        )
    return make_agent(PerfectPolicy(env), jnp.asarray(solve_tic_tac_toe()), name=name)


#: games with a perfect player, and the extra each needs (None: none), from `envs.boards`
PERFECT_GAMES: dict[str, str | None] = {
    name: board.solver_extra for name, board in BOARDS.items() if board.perfect
}


def perfect_agent(env: Env, *, name: str = "perfect") -> Agent:
    """A perfect player of `env` choosing uniformly among its best moves.

    Raises:
        ValueError: if `env` has no perfect player here (see `PERFECT_GAMES`).
        MissingExtraError: if the game's solver is not installed.
    """
    game = env.name.removeprefix("pgx:")
    if game == "connect_four":
        from turbozero.arena.connect_four import perfect_connect_four_agent

        return perfect_connect_four_agent(env, name=name)
    if game == "tic_tac_toe":
        return perfect_tic_tac_toe_agent(env, name=name)
    raise ValueError(
        f"no perfect player for {env.name!r}; games with one: {', '.join(PERFECT_GAMES)}"
    )
