"""Board symmetries move the observation and the policy/mask the same way: the transformed
mask is the legal moves of the transformed board."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero import envs
from turbozero.alphazero.learner import augmentations


def _positions(env, games: int, moves: int):
    """Observations and legal-move masks after `moves` random legal moves (games not over)."""

    def play(key):
        state, md = env.init(key)

        def body(i, c):
            state, md = c
            k = jax.random.fold_in(key, i)
            a = jax.random.categorical(k, jnp.where(md.action_mask, 0.0, -jnp.inf))
            new = env.step(state, a, k)
            return jax.tree_util.tree_map(lambda n, o: jnp.where(md.terminated, o, n), new, c)

        state, md = jax.lax.fori_loop(0, moves, body, (state, md))
        return env.observe(state), md.action_mask, md.terminated

    obs, mask, over = jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(0), games))
    keep = ~np.asarray(over)
    return np.asarray(obs)[keep], np.asarray(mask)[keep]


def _empty(obs):
    return (obs[..., 0] + obs[..., 1]) == 0  # no stone of either player


@pytest.mark.parametrize("moves", [1, 3, 5])
def test_tic_tac_toe_symmetries_keep_the_mask_on_the_empty_squares(moves):
    env = envs.make("tic_tac_toe")
    fns = augmentations(env)
    assert len(fns) == 7
    obs, mask = _positions(env, 16, moves)
    assert len(obs) and np.array_equal(mask, _empty(obs).reshape(len(obs), 9))  # the rule
    policy = mask / mask.sum(-1, keepdims=True)
    seen = set()
    for fn in fns:
        o2, p2, m2 = (np.asarray(x) for x in jax.vmap(fn)(obs, policy, mask))
        np.testing.assert_array_equal(m2, _empty(o2).reshape(len(o2), 9))
        np.testing.assert_allclose(p2.sum(-1), 1.0, rtol=1e-6)
        assert np.all(p2[~m2] == 0)
        seen.add(o2.tobytes())
    assert len(seen) == 7  # seven different transforms of these positions


def test_connect_four_mirror_keeps_the_mask_on_the_open_columns():
    env = envs.make("connect_four")
    (fn,) = augmentations(env)
    obs, mask = _positions(env, 16, 12)
    # an open column has an empty top cell; find which row pgx draws on top
    (top,) = [r for r in (0, obs.shape[1] - 1) if np.array_equal(mask, _empty(obs)[:, r, :])]
    o2, _, m2 = (np.asarray(x) for x in jax.vmap(fn)(obs, mask / mask.sum(-1, keepdims=True), mask))
    np.testing.assert_array_equal(m2, _empty(o2)[:, top, :])
    assert not np.array_equal(o2, obs)


def _hex_positions(games: int, moves: int):
    """pgx's own hex states (`GameState`: step count, board of signed group labels) after
    `moves` random legal moves, the games not over."""
    import pgx

    env = pgx.make("hex")

    def play(key):
        def body(i, s):
            k = jax.random.fold_in(key, i)
            a = jax.random.categorical(k, jnp.where(s.legal_action_mask, 0.0, -jnp.inf))
            new = env.step(s, a)
            return jax.tree_util.tree_map(lambda n, o: jnp.where(s.terminated, o, n), new, s)

        return jax.lax.fori_loop(0, moves, body, env.init(key))

    states = jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(moves), games))
    keep = ~np.asarray(states.terminated)
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[keep], states._x)


@pytest.mark.parametrize("moves", [2, 50, 100])
def test_hex_symmetries_are_the_games_own(moves):
    """Each of Hex's symmetries, applied to pgx's own state (stones moved, group labels moved
    with them, and the colour to move flipped where the edges swap), gives the observation and
    legal moves the augmentation computes, and the same moves win: a wrong diagonal or a
    forgotten colour flip breaks the winning moves or the observation."""
    from pgx._src.games.hex import Game, GameState

    n = 11
    game = Game(size=n)
    env = envs.make("hex")
    fns = augmentations(env)
    assert len(fns) == 3
    x = _hex_positions(24, moves)
    assert len(x.step_count)
    cells = np.arange(n * n).reshape(n, n)
    maps = [  # where each cell goes, and whether the players' edges swap
        (np.flip(cells, (0, 1)), False),
        (cells.T, True),
        (np.flip(cells.T, (0, 1)), True),
    ]

    def wins(state):  # [n*n + 1]: whether each move ends the game (illegal ones: False)
        done = jax.vmap(lambda a: game.step(state, a).terminated)(jnp.arange(n * n + 1))
        return done & game.legal_action_mask(state)

    observe = jax.jit(jax.vmap(game.observe))
    legal = jax.jit(jax.vmap(game.legal_action_mask))
    winning = jax.jit(jax.vmap(wins))

    def state(steps, board):
        return GameState(jnp.asarray(steps), jnp.asarray(board), jnp.zeros(len(steps), bool))

    before = state(x.step_count, x.board)
    won = np.asarray(winning(before))
    if moves == 75:
        assert won.any()  # some positions have a winning move to compare
    obs, mask = np.asarray(observe(before)), np.asarray(legal(before))
    policy = mask / mask.sum(-1, keepdims=True)
    for fn, (where, swaps) in zip(fns, maps, strict=True):
        dest = where.reshape(-1).argsort()  # dest[c]: the cell c goes to
        dest = np.append(dest, n * n)  # the swap action stays
        board = np.zeros_like(x.board)
        board[:, dest[: n * n]] = np.sign(x.board) * dest[np.abs(x.board) - 1] + np.sign(x.board)
        after = state(x.step_count + swaps, board)
        o2, p2, m2 = (np.asarray(v) for v in jax.vmap(fn)(obs, policy, mask))
        np.testing.assert_array_equal(o2, np.asarray(observe(after)))
        np.testing.assert_array_equal(m2, np.asarray(legal(after)))
        np.testing.assert_array_equal(won[:, np.argsort(dest)], np.asarray(winning(after)))
        np.testing.assert_allclose(p2.sum(-1), 1.0, rtol=1e-6)
