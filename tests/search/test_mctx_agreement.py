"""Differential check: our `muzero_puct` and `gumbel` against mctx on the same workload."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tests.search.helpers import linear_eval_fn, linear_params, play
from tests.search.mctx_peer import mctx_policy
from turbozero.search import gumbel, make_search, muzero_puct

POSITIONS = [[], [3], [3, 3], [0, 6, 1, 5], [3, 2, 3, 2, 4], [6, 6, 6, 0, 1, 2]]
SIMS = 32


def _states(env):
    batch = [play(env, moves, batch=1) for moves in POSITIONS]
    return jax.tree_util.tree_map(lambda *x: np.concatenate(x), *batch)


@pytest.mark.parametrize("kind", ["muzero", "gumbel"])
def test_agrees_with_mctx_on_connect_four(connect_four, kind):
    env = connect_four
    eval_fn = linear_eval_fn(env.num_actions)
    params = linear_params(env, seed=3)
    states = _states(env)
    B = len(POSITIONS)
    if kind == "muzero":
        ours = make_search(
            env,
            eval_fn,
            selector=muzero_puct(dirichlet_fraction=0.0),
            num_simulations=SIMS,
            max_nodes=SIMS + 1,
        )
        theirs = mctx_policy(
            env,
            eval_fn,
            kind="muzero",
            num_simulations=SIMS,
            dirichlet_fraction=0.0,
            temperature=1.0,
        )
    else:
        ours = make_search(
            env,
            eval_fn,
            selector=gumbel(gumbel_scale=0.0, max_num_considered_actions=16),
            num_simulations=SIMS,
            max_nodes=SIMS + 1,
        )
        theirs = mctx_policy(env, eval_fn, kind="gumbel", num_simulations=SIMS, gumbel_scale=0.0)
    _, out = jax.jit(ours.search)(ours.init(B), params, states, jax.random.PRNGKey(0))
    ref = jax.jit(theirs)(params, states, jax.random.PRNGKey(0))
    ref_visits = np.asarray(ref.search_tree.summary().visit_counts)
    our_visits = np.asarray(out.visit_counts)
    if kind == "muzero":
        np.testing.assert_array_equal(our_visits.argmax(-1), ref_visits.argmax(-1))
    else:
        np.testing.assert_array_equal(np.asarray(out.action), np.asarray(ref.action))
        np.testing.assert_allclose(
            np.asarray(out.action_weights), np.asarray(ref.action_weights), atol=0.05
        )
    # with the same rule, network and deterministic settings the searches are identical
    np.testing.assert_array_equal(our_visits, ref_visits.astype(our_visits.dtype))
