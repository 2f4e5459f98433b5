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
