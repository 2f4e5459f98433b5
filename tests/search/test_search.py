"""Rules of the batched search, each checked on small hand-worked cases."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.games import opening
from tests.search.helpers import (
    assert_same_pytrees,
    bandit,
    compiled_steps,
    linear_eval_fn,
    linear_params,
    play,
    uniform_eval_fn,
)
from turbozero import envs
from turbozero.search import SpeedPaths, compiler_options, gumbel, make_search, muzero_puct, puct
from turbozero.types import StepMetadata

SELECTORS = {
    "puct": lambda: puct(dirichlet_fraction=0.0),
    "muzero_puct": lambda: muzero_puct(dirichlet_fraction=0.0),
    "gumbel": lambda: gumbel(gumbel_scale=0.0, max_num_considered_actions=9),
}
RULES = {"puct": puct, "muzero_puct": muzero_puct, "gumbel": gumbel}  # with their defaults
#: Gumbel's programs compared bit for bit hold where LLVM optimises (tests/conftest.py)
_OPTIMIZED_GUMBEL = pytest.param("gumbel", marks=pytest.mark.optimized)


@pytest.fixture(scope="module")
def ttt_searches(tic_tac_toe):
    out = {}
    for name, make in SELECTORS.items():
        s = make_search(
            tic_tac_toe,
            uniform_eval_fn(9),
            selector=make(),
            num_simulations=96,
            max_nodes=128,
        )
        out[name] = (s, jax.jit(s.search))
    return out


# X: 0 1 2 / O: 3 4 ; X to move wins with 2.
WIN_IN_ONE = [0, 3, 1, 4]
# X took 0 and 1... O to move must block at 2.
MUST_BLOCK = [0, 4, 1]


@pytest.mark.parametrize("name", list(SELECTORS))
def test_one_move_win_is_found(ttt_searches, tic_tac_toe, name):
    s, search = ttt_searches[name]
    states = play(tic_tac_toe, WIN_IN_ONE, batch=2)
    _, out = search(s.init(2), None, states, jax.random.PRNGKey(0))
    assert out.action.tolist() == [2, 2]
    assert float(out.q_values[0, 2]) == pytest.approx(1.0)


@pytest.mark.parametrize("name", list(SELECTORS))
def test_forced_loss_move_is_avoided(ttt_searches, tic_tac_toe, name):
    s, search = ttt_searches[name]
    states = play(tic_tac_toe, MUST_BLOCK, batch=2)
    _, out = search(s.init(2), None, states, jax.random.PRNGKey(1))
    assert out.action.tolist() == [2, 2]


def _puct_reference(rewards, sims, c):
    """Plain-Python PUCT on a bandit with a uniform prior and zero root value."""
    A = len(rewards)
    n = [0] * A
    w = [0.0] * A
    for _ in range(sims):
        total = 1 + sum(n)
        scores = [
            (w[a] / n[a] if n[a] else 0.0) + c * (1 / A) * np.sqrt(total) / (1 + n[a])
            for a in range(A)
        ]
        a = int(np.argmax(scores))
        n[a] += 1
        w[a] += rewards[a]
    return n


def test_bandit_visit_split_matches_puct_formula():
    rewards = [0.1, 0.5, 0.3]
    env = bandit(rewards)
    s = make_search(
        env,
        uniform_eval_fn(3),
        selector=puct(c_puct=1.5, dirichlet_fraction=0.0),
        num_simulations=40,
        max_nodes=41,
    )
    st0, _ = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 1))
    _, out = jax.jit(s.search)(s.init(1), None, st0, jax.random.PRNGKey(0))
    assert out.visit_counts[0].tolist() == _puct_reference(rewards, 40, 1.5)
    assert out.action.tolist() == [1]


def _two_moves_then_opponent():
    """Player 0 moves twice (non-alternating), then the game ends.

    Player 0 wins (+1) iff both moves were action 1; otherwise player 1 wins.
    """

    def init(key):
        return jnp.zeros((2,), jnp.int32), opening(2, 2)

    def step(state, action):
        t = state[0] + 1
        ones = state[1] + action
        over = t >= 2
        win0 = ones == 2
        r0 = jnp.where(over, jnp.where(win0, 1.0, -1.0), 0.0)
        md = StepMetadata(
            rewards=jnp.stack([r0, -r0]),
            action_mask=jnp.ones((2,), bool),
            terminated=over,
            cur_player_id=jnp.int32(0),
            step=t,
        )
        return jnp.stack([t, ones]), md

    return envs.from_functions(
        init_fn=init,
        step_fn=step,
        observe_fn=lambda s: s.astype(jnp.float32),
        name="twice",
    )


def _one_visited_one_unvisited(node_value: float, raw_value: float):
    """A node of two moves: the first (prior 0.9) visited 4 times at Q 0.3, the second (prior
    0.1) not yet visited; the node's backed-up and network values as given."""
    from turbozero.search.selector import NodeView

    return NodeView(
        prior_logits=jnp.log(jnp.array([[0.9, 0.1]])),
        prior_probs=jnp.array([[0.9, 0.1]]),
        mask=jnp.array([[True, True]]),
        child_visits=jnp.array([[4, 0]], jnp.int32),
        child_q=jnp.array([[0.3, 0.0]]),
        node_visits=jnp.array([4], jnp.int32),
        node_value=jnp.array([node_value]),
        raw_value=jnp.array([raw_value]),
    )


def test_first_play_urgency_values_an_unvisited_move_at_the_nodes_or_the_networks_value():
    """`puct(fpu=...)`: "zero" counts an unvisited move as a draw (Q 0), "node" gives it the
    node's backed-up value, "network" the network's value of the node; visited moves keep
    their Q. A visited move at Q 0.3 beats an unvisited one of low prior under "zero" and
    under a network value of -0.5, and loses to it when the node's value is 0.6."""
    view = _one_visited_one_unvisited(node_value=0.6, raw_value=-0.5)
    scores = {
        fpu: puct(c_puct=1.25, fpu=fpu).select(view, view.prior_probs, False)
        for fpu in ("zero", "node", "network")
    }
    assert {fpu: int(jnp.argmax(s[0])) for fpu, s in scores.items()} == {
        "zero": 0,
        "node": 1,
        "network": 0,
    }
    assert float(scores["node"][0, 0]) == pytest.approx(float(scores["zero"][0, 0]))
    assert float(scores["node"][0, 1]) == pytest.approx(float(scores["zero"][0, 1]) + 0.6)
    assert float(scores["network"][0, 1]) == pytest.approx(float(scores["zero"][0, 1]) - 0.5)
    assert puct(fpu="node").without_noise().options["fpu"] == "node"  # play keeps it
    with pytest.raises(ValueError, match="fpu"):
        puct(fpu="parent")
    with pytest.raises(ValueError, match="fpu"):
        puct(fpu="node", normalize_q=True)


def test_a_first_play_reduction_lowers_only_the_unvisited_moves_q():
    """`puct(fpu_reduction=r)` values an unvisited move at the fpu's value less r, for each fpu
    ("zero" becomes -r); visited moves keep their Q. With the network's value 0.6, an unvisited
    move of low prior wins the selection without a reduction and loses it with one of 0.5."""
    view = _one_visited_one_unvisited(node_value=0.2, raw_value=0.6)
    for fpu in ("zero", "node", "network"):
        plain = puct(c_puct=1.25, fpu=fpu).select(view, view.prior_probs, False)
        reduced = puct(c_puct=1.25, fpu=fpu, fpu_reduction=0.5).select(
            view, view.prior_probs, False
        )
        assert float(reduced[0, 0]) == pytest.approx(float(plain[0, 0]))
        assert float(reduced[0, 1]) == pytest.approx(float(plain[0, 1]) - 0.5)
    network = puct(c_puct=1.25, fpu="network")
    assert int(jnp.argmax(network.select(view, view.prior_probs, False)[0])) == 1
    reduced = puct(c_puct=1.25, fpu="network", fpu_reduction=0.5)
    assert int(jnp.argmax(reduced.select(view, view.prior_probs, False)[0])) == 0
    assert reduced.without_noise().options["fpu_reduction"] == 0.5  # play keeps it
    for bad in (-0.1, 2.5, float("nan")):
        with pytest.raises(ValueError, match="fpu_reduction"):
            puct(fpu="network", fpu_reduction=bad)
    with pytest.raises(ValueError, match="fpu_reduction"):
        puct(fpu_reduction=0.2, normalize_q=True)


@pytest.mark.parametrize("name", ["puct", "muzero_puct", "gumbel"])
def test_value_signs_follow_player_to_move_not_alternation(name):
    env = _two_moves_then_opponent()
    sel = {
        "puct": puct(dirichlet_fraction=0.0),
        "muzero_puct": muzero_puct(dirichlet_fraction=0.0),
        "gumbel": gumbel(gumbel_scale=0.0),
    }[name]
    s = make_search(env, uniform_eval_fn(2), selector=sel, num_simulations=16, max_nodes=17)
    st0, _ = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 1))
    _, out = jax.jit(s.search)(s.init(1), None, st0, jax.random.PRNGKey(0))
    assert out.action.tolist() == [1]
    assert float(out.q_values[0, 1]) > float(out.q_values[0, 0])


@pytest.fixture(scope="module")
def c4_search(connect_four):
    s = make_search(
        connect_four, linear_eval_fn(7), selector=puct(), num_simulations=24, max_nodes=20
    )
    return s, jax.jit(s.search), jax.jit(s.advance)


@given(
    seed=st.integers(0, 10_000),
    moves=st.lists(st.integers(0, 6), max_size=6),
    full_column=st.sampled_from([None, 0, 3, 6]),
)
def test_invariants_hold_for_any_seed_and_position(
    c4_search, connect_four, seed, moves, full_column
):
    s, search, advance = c4_search
    if full_column is not None:  # six discs in one column (alternating: nobody wins there)
        moves = [full_column] * 6 + [m for m in moves if m != full_column]
    states = play(connect_four, moves, batch=3)
    params = linear_params(connect_four, seed % 7)
    tree, out = search(s.init(3), params, states, jax.random.PRNGKey(seed), 1.0)
    mask = np.asarray(jax.vmap(connect_four.metadata)(states).action_mask)
    assert (full_column is None) or not mask[:, full_column].any()  # an illegal move exists
    w = np.asarray(out.action_weights)
    assert np.all(w[~mask] == 0), "illegal actions get zero weight"
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
    assert np.all(mask[np.arange(3), np.asarray(out.action)]), "chosen move is legal"
    visits = np.asarray(tree.visits[:, 0])
    full = np.asarray(out.full_events)
    # root visits = 1 (its own evaluation) + simulations; children receive those that expanded
    assert np.all(visits == 1 + 24)
    assert np.all(np.asarray(out.visit_counts).sum(-1) <= 24)
    assert np.all(np.asarray(out.visit_counts).sum(-1) + full >= 24 - full)
    # after reuse: parents and children agree, visits are consistent
    t2 = advance(tree, out.action)
    nf = np.asarray(t2.next_free)
    ch = np.asarray(t2.children)
    par = np.asarray(t2.parent)
    vis = np.asarray(t2.visits)
    for g in range(3):
        assert nf[g] == 0 or vis[g, 0] == np.asarray(out.visit_counts)[g, int(out.action[g])]
        for n in range(nf[g]):
            for a in range(7):
                c = ch[g, n, a]
                if c >= 0:
                    assert c < nf[g] and par[g, c] == n
            if n > 0:
                assert 0 <= par[g, n] < n
                assert vis[g, n] >= 1


def test_subtree_reuse_keeps_visits_and_search_adds_simulations(c4_search, connect_four):
    s, search, advance = c4_search
    states = play(connect_four, [], batch=2)
    params = linear_params(connect_four)
    tree, out = search(s.init(2), params, states, jax.random.PRNGKey(0))
    a = out.action
    kept = np.asarray(out.visit_counts)[np.arange(2), np.asarray(a)]
    tree = advance(tree, a)
    nxt, _ = compiled_steps(connect_four)[2](states, a, jax.random.split(jax.random.PRNGKey(0), 2))
    tree, _out2 = search(tree, params, nxt, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(np.asarray(tree.visits[:, 0]), kept + 24)


def test_full_tree_stops_expanding_and_reports_it(connect_four):
    s = make_search(
        connect_four, linear_eval_fn(7), selector=puct(), num_simulations=30, max_nodes=8
    )
    states = play(connect_four, [], batch=2)
    tree, out = jax.jit(s.search)(
        s.init(2), linear_params(connect_four), states, jax.random.PRNGKey(0)
    )
    assert np.all(np.asarray(tree.next_free) == 8)
    assert np.all(np.asarray(out.full_events) > 0)
    assert np.all(np.asarray(tree.visits[:, 0]) == 31)
    np.testing.assert_allclose(np.asarray(out.tree_fullness), 1.0)


def test_second_call_does_not_recompile_and_same_key_same_result(c4_search, connect_four):
    s, search, _ = c4_search
    states = play(connect_four, [3], batch=3)
    p = linear_params(connect_four)
    # the same call signature each time (a default argument and an explicit one are two entries
    # of jit's cache whichever test in this module made them first)
    _, o1 = search(s.init(3), p, states, jax.random.PRNGKey(5), 0.0)
    n = search._cache_size()
    _, _o2 = search(s.init(3), p * 1.01, states, jax.random.PRNGKey(5), 0.5)
    _, o3 = search(s.init(3), p, states, jax.random.PRNGKey(5), 0.0)
    assert search._cache_size() == n
    np.testing.assert_array_equal(np.asarray(o1.visit_counts), np.asarray(o3.visit_counts))


def test_gumbel_target_treats_network_output_as_logits_once(tic_tac_toe):
    logits = jnp.array([[2.0, 1.0, 0.0, -1.0, 0.5, 0.0, 0.0, 0.0, 0.0]])

    def eval_fn(params, obs, key):
        return jnp.broadcast_to(logits, (obs.shape[0], 9)), jnp.zeros((obs.shape[0],))

    s = make_search(
        tic_tac_toe, eval_fn, selector=gumbel(gumbel_scale=0.0), num_simulations=1, max_nodes=4
    )
    states = play(tic_tac_toe, [], batch=1)
    # one simulation, value 0 everywhere: completed Q is constant, so the target is softmax(logits)
    _, out = jax.jit(s.search)(s.init(1), None, states, jax.random.PRNGKey(0))
    np.testing.assert_allclose(
        np.asarray(out.action_weights[0]), np.asarray(jax.nn.softmax(logits[0])), rtol=1e-5
    )


def test_illegal_actions_never_chosen_even_without_visits(tic_tac_toe):
    # A network that puts all its prior mass on the occupied squares.
    def eval_fn(params, obs, key):
        logit = jnp.where(
            obs[..., 0].reshape(obs.shape[0], 9) + obs[..., 1].reshape(obs.shape[0], 9) > 0,
            50.0,
            0.0,
        )
        return logit, jnp.zeros((obs.shape[0],))

    s = make_search(
        tic_tac_toe, eval_fn, selector=puct(dirichlet_fraction=0.0), num_simulations=1, max_nodes=2
    )
    states = play(tic_tac_toe, [0, 4, 8], batch=1)
    _, out = jax.jit(s.search)(s.init(1), None, states, jax.random.PRNGKey(0), 0.0)
    assert int(out.action[0]) not in (0, 4, 8)
    assert float(out.action_weights[0, jnp.array([0, 4, 8])].sum()) == 0.0
    # and with no visited child at all (the weights fall back to the prior): a legal move
    from turbozero.search.selector import NodeView, visit_policy

    mask = jnp.array([[False, True, True, False]])
    root = NodeView(
        prior_logits=jnp.array([[50.0, 0.0, 1.0, 50.0]]),
        prior_probs=jnp.array([[0.0, 0.25, 0.75, 0.0]]),
        mask=mask,
        child_visits=jnp.zeros((1, 4), jnp.int32),
        child_q=jnp.zeros((1, 4)),
        node_visits=jnp.ones((1,), jnp.int32),
        node_value=jnp.zeros((1,)),
        raw_value=jnp.zeros((1,)),
    )
    weights, greedy = visit_policy(root)
    assert weights.tolist() == [[0.0, 0.25, 0.75, 0.0]] and greedy.tolist() == [2]


def test_the_most_visited_move_breaks_ties_by_the_prior_then_the_first_index():
    """Rollout search whose tried moves all lost once has many children at one visit: the move
    played is the likeliest of them, not the lowest-numbered (which biased `mcts:N` on hex)."""
    from turbozero.search.forced import pruned_visit_policy
    from turbozero.search.selector import NodeView, most_visited, visit_policy

    def root(visits, probs, mask=(True, True, True, True, True)):
        B = len(visits)
        return NodeView(
            prior_logits=jnp.log(jnp.array(probs)),
            prior_probs=jnp.array(probs),
            mask=jnp.array([mask] * B),
            child_visits=jnp.array(visits, jnp.int32),
            child_q=jnp.zeros((B, 5)),
            node_visits=jnp.ones((B,), jnp.int32),
            node_value=jnp.zeros((B,)),
            raw_value=jnp.zeros((B,)),
        )

    flat = [0.2] * 5
    view = root(
        [[1, 1, 1, 0, 1], [1, 3, 1, 3, 0], [2, 2, 2, 2, 2]],
        [[0.1, 0.2, 0.1, 0.5, 0.1], [0.1, 0.1, 0.1, 0.6, 0.1], flat],
    )
    # the likeliest among the most visited (not the likeliest unvisited); equal priors: the first
    assert most_visited(view).tolist() == [1, 3, 0]
    assert visit_policy(view)[1].tolist() == [1, 3, 0]
    assert pruned_visit_policy(view, view.prior_probs, view.child_q, lambda v, p: p, 1.0)[
        1
    ].tolist() == [1, 3, 0]
    # an illegal child is never the answer, however visited or likely
    illegal = root([[0, 5, 1, 1, 0]], [[0.1, 0.6, 0.1, 0.1, 0.1]], (True, False, True, True, True))
    assert most_visited(illegal).tolist() == [2]


@pytest.mark.parametrize("name", ["puct", "muzero_puct"])
def test_a_network_giving_nan_values_never_makes_the_search_step_an_illegal_move(tic_tac_toe, name):
    from turbozero.search.tree import ILLEGAL

    def eval_fn(params, obs, key):
        return jnp.zeros((obs.shape[0], 9)), jnp.full((obs.shape[0],), jnp.nan)

    rule = {"puct": puct, "muzero_puct": muzero_puct}[name](dirichlet_fraction=0.0)
    s = make_search(tic_tac_toe, eval_fn, selector=rule, num_simulations=20, max_nodes=32)
    states = play(tic_tac_toe, [0, 4, 8], batch=1)  # squares 0, 4, 8 taken below the root too
    tree, out = jax.jit(s.search)(s.init(1), None, states, jax.random.PRNGKey(0), 0.0)
    allocated = int(tree.next_free[0])
    if name == "puct":  # unvisited moves keep finite scores: the walk goes below the root
        assert allocated > 2
    children = np.asarray(tree.children[0, :allocated])
    assert np.all(children[:, [0, 4, 8]] == ILLEGAL)
    assert int(out.action[0]) not in (0, 4, 8)


@pytest.mark.parametrize("bad", ["value", "logits"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_gumbel_with_a_nan_network_never_chooses_an_illegal_move(tic_tac_toe, bad, temperature):
    def eval_fn(params, obs, key):
        B = obs.shape[0]
        logits = jnp.full((B, 9), jnp.nan) if bad == "logits" else jnp.zeros((B, 9))
        value = jnp.full((B,), jnp.nan) if bad == "value" else jnp.zeros((B,))
        return logits, value

    s = make_search(
        tic_tac_toe,
        eval_fn,
        selector=gumbel(max_num_considered_actions=4),
        num_simulations=8,
        max_nodes=9,
    )
    states = play(tic_tac_toe, [0, 4], batch=2)  # squares 0 and 4 are taken
    _, out = jax.jit(s.search)(s.init(2), None, states, jax.random.PRNGKey(0), temperature)
    assert not set(np.asarray(out.action).tolist()) & {0, 4}


def test_high_temperature_never_samples_a_move_with_zero_weight(tic_tac_toe):
    s = make_search(
        tic_tac_toe,
        uniform_eval_fn(9),
        selector=puct(dirichlet_fraction=0.0),
        num_simulations=3,
        max_nodes=4,
    )
    states = play(tic_tac_toe, [], batch=16)
    run = jax.jit(s.search)
    for seed in range(4):
        _, out = run(s.init(16), None, states, jax.random.PRNGKey(seed), 100.0)
        chosen = np.take_along_axis(
            np.asarray(out.action_weights), np.asarray(out.action)[:, None], 1
        )
        assert np.all(chosen > 0)  # 3 simulations visit 3 of the 9 moves: the others never


def _reusing_search(tic_tac_toe):
    """Parameters, a 16-simulation PUCT search that keeps subtrees, and its jitted `search`."""
    params = linear_params(tic_tac_toe, seed=5, scale=1.0)
    s = make_search(
        tic_tac_toe,
        linear_eval_fn(9),
        selector=puct(dirichlet_fraction=0.0),
        num_simulations=16,
        max_nodes=40,
    )
    return params, s, jax.jit(s.search)


def test_a_tree_whose_root_allows_other_moves_is_started_afresh(tic_tac_toe):
    """A kept tree that does not belong to the given states (e.g. a reset forgotten after an
    episode ended) is not searched: its row starts afresh, so no illegal move is played."""
    params, s, run = _reusing_search(tic_tac_toe)
    tree, out = run(s.init(8), params, play(tic_tac_toe, [4], batch=8), jax.random.PRNGKey(0))
    tree = jax.jit(s.advance)(tree, out.action)
    other = play(tic_tac_toe, [4, 6, 0, 1, 2], batch=8)  # not the position the tree advanced to
    tree, out = run(tree, params, other, jax.random.PRNGKey(1))
    taken = [4, 6, 0, 1, 2]
    assert not set(np.asarray(out.action).tolist()) & set(taken)
    assert float(out.action_weights[:, jnp.array(taken)].sum()) == 0.0
    assert np.all(np.asarray(out.visit_counts).sum(axis=1) == 16)  # a fresh tree's 16


def test_a_search_that_does_not_reuse_trees_starts_afresh_on_every_call(tic_tac_toe):
    params = linear_params(tic_tac_toe, seed=5, scale=1.0)
    g = make_search(
        tic_tac_toe,
        linear_eval_fn(9),
        selector=gumbel(max_num_considered_actions=4),
        num_simulations=8,
        max_nodes=9,
    )
    states = play(tic_tac_toe, [4], batch=4)
    search = jax.jit(g.search)
    t1, o1 = search(g.init(4), params, states, jax.random.PRNGKey(0))
    t2, o2 = search(t1, params, states, jax.random.PRNGKey(0))  # no advance in between
    np.testing.assert_array_equal(np.asarray(o1.visit_counts), np.asarray(o2.visit_counts))
    np.testing.assert_array_equal(np.asarray(o1.action), np.asarray(o2.action))
    assert int(o2.full_events.sum()) == 0


def test_actions_and_temperatures_of_the_wrong_shape_are_refused(tic_tac_toe):
    s = make_search(
        tic_tac_toe, uniform_eval_fn(9), selector=puct(), num_simulations=2, max_nodes=4
    )
    states = play(tic_tac_toe, [], batch=4)
    with pytest.raises(ValueError, match=r"temperature must be a scalar or have shape \(4,\)"):
        s.search(s.init(4), None, states, jax.random.PRNGKey(0), jnp.ones((3,)))
    with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
        s.advance(s.init(4), jnp.zeros((3,), jnp.int32))
    assert s.init(np.int64(2)).batch_size == 2  # NumPy integers are integers
    assert (
        make_search(
            tic_tac_toe,
            uniform_eval_fn(9),
            selector=puct(),
            num_simulations=2,
            max_nodes=np.int64(8),
        ).max_nodes
        == 8
    )


def test_done_flags_of_the_wrong_shape_are_refused(tic_tac_toe):
    s = make_search(
        tic_tac_toe, uniform_eval_fn(9), selector=puct(), num_simulations=2, max_nodes=4
    )
    for done in (jnp.zeros((4, 1), bool), jnp.zeros((3,), bool)):
        with pytest.raises(ValueError, match=r"done must have shape \(4,\)"):
            s.reset(s.init(4), done)
    assert s.reset(s.init(4), jnp.ones((4,), bool)).batch_size == 4


def test_tree_bytes_is_what_the_trees_take(tic_tac_toe):
    from turbozero.search import init_tree, tree_bytes

    def nbytes(tree):
        return sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree))

    for env in (tic_tac_toe, envs.make("connect_four")):
        assert tree_bytes(env, 3, 5) == nbytes(init_tree(env, batch_size=3, max_nodes=5))
    # by hand for tic-tac-toe (9 actions, 2 players), 3 games of 5 nodes, 4-byte numbers:
    # edge rows 3 x 9, edge statistics 9 x 2, node statistics 2, node row 2 + 2, links 4, the
    # packed state W words per node, and one next-free count per game
    from turbozero.search.tree import state_codec

    width = state_codec(tic_tac_toe).width
    assert width is not None
    per_node = 3 * 9 + 9 * 2 + 2 + (2 + 2) + 4 + width
    assert tree_bytes(tic_tac_toe, 3, 5) == 4 * (3 * 5 * per_node + 3)

    # a state holding a typed PRNG key (NumPy cannot read its dtype)
    def init(key):
        return {"k": key, "t": jnp.int32(0)}, StepMetadata(
            rewards=jnp.zeros(1),
            action_mask=jnp.ones(3, bool),
            terminated=jnp.bool_(False),
            cur_player_id=jnp.int32(0),
            step=jnp.int32(0),
        )

    def step(state, action):
        t = state["t"] + 1
        return {**state, "t": t}, StepMetadata(
            rewards=jnp.ones(1),
            action_mask=jnp.ones(3, bool),
            terminated=t >= 3,
            cur_player_id=jnp.int32(0),
            step=t,
        )

    keyed = envs.from_functions(
        init_fn=lambda key: init(jax.random.key(0)),
        step_fn=step,
        observe_fn=lambda s: jnp.zeros(1),
        name="keyed",
    )
    assert tree_bytes(keyed, 2, 4) == nbytes(init_tree(keyed, batch_size=2, max_nodes=4))


def test_evaluation_selector_has_no_root_noise(tic_tac_toe):
    """Without noise a search is the same for every key (the game is deterministic); with
    it, the keys change the visits."""
    states = play(tic_tac_toe, [4], batch=4)
    for rule in (puct(), muzero_puct(), gumbel(max_num_considered_actions=4)):
        outs = {}
        for noisy, selector in (("noisy", rule), ("quiet", rule.without_noise())):
            s = make_search(
                tic_tac_toe, linear_eval_fn(9), selector=selector, num_simulations=16, max_nodes=17
            )
            params = linear_params(tic_tac_toe, 1)
            search = jax.jit(s.search)
            outs[noisy] = [
                np.asarray(search(s.init(4), params, states, jax.random.PRNGKey(k))[1].visit_counts)
                for k in (0, 1)
            ]
        np.testing.assert_array_equal(*outs["quiet"])
        assert not np.array_equal(*outs["noisy"]), rule.name


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(num_simulations=0), "num_simulations"),
        (dict(max_nodes=1), "max_nodes"),
        (dict(max_nodes=2**24 + 1), r"max_nodes must be an int >= 2 and <= 16777216"),
        (dict(discount=0.0), "discount"),
        (dict(levels_per_iteration=0), "levels_per_iteration"),
        (dict(chance_widening=1.5), r"chance_widening must be in \[0, 1\]"),
    ],
)
def test_bad_search_arguments_name_the_argument(tic_tac_toe, kwargs, name):
    base = dict(selector=puct(), num_simulations=4, max_nodes=8)
    with pytest.raises(ValueError, match=name):
        make_search(tic_tac_toe, uniform_eval_fn(9), **{**base, **kwargs})


def test_bad_selector_arguments_name_the_argument():
    with pytest.raises(ValueError, match="dirichlet_fraction"):
        puct(dirichlet_fraction=1.5)
    with pytest.raises(ValueError, match="c_puct"):
        puct(c_puct=0.0)
    with pytest.raises(ValueError, match="max_num_considered_actions"):
        gumbel(max_num_considered_actions=0)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: puct(dirichlet_alpha=math.inf), "dirichlet_alpha"),  # its draw never ended
        (lambda: puct(dirichlet_alpha=1e300), "dirichlet_alpha"),  # inf in float32
        (lambda: puct(c_puct=math.inf), "c_puct"),
        (lambda: muzero_puct(pb_c_base=math.inf), "pb_c_base"),
        (lambda: muzero_puct(pb_c_init=math.nan), "pb_c_init"),
        (lambda: gumbel(gumbel_scale=math.nan), "gumbel_scale"),
        (lambda: gumbel(value_scale=math.inf), "value_scale"),
        (lambda: gumbel(maxvisit_init=math.nan), "maxvisit_init"),
        (lambda: gumbel(max_num_considered_actions=2.5), "max_num_considered_actions"),
        (lambda: gumbel(max_num_considered_actions=True), "max_num_considered_actions"),
    ],
)
def test_selector_settings_must_be_finite_numbers_in_range(make, name):
    with pytest.raises(ValueError, match=rf"{name} must be a"):
        make()


def test_numpy_integers_are_accepted_where_ints_are_asked():
    g = gumbel(max_num_considered_actions=np.int64(4))
    assert g.options["max_num_considered_actions"] == 4


@pytest.mark.parametrize("temperature", [math.nan, math.inf, jnp.array([0.0, math.nan])])
def test_a_temperature_that_is_not_a_finite_number_is_refused(tic_tac_toe, temperature):
    s = make_search(
        tic_tac_toe, uniform_eval_fn(9), selector=puct(), num_simulations=2, max_nodes=4
    )
    states = play(tic_tac_toe, [], batch=2)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        s.search(s.init(2), None, states, jax.random.PRNGKey(0), temperature)


def test_negative_temperature_and_wrong_policy_size_are_refused(tic_tac_toe):
    s = make_search(
        tic_tac_toe, uniform_eval_fn(9), selector=puct(), num_simulations=2, max_nodes=4
    )
    states = play(tic_tac_toe, [], batch=1)
    with pytest.raises(ValueError, match="temperature"):
        s.search(s.init(1), None, states, jax.random.PRNGKey(0), -1.0)
    bad = make_search(
        tic_tac_toe, uniform_eval_fn(7), selector=puct(), num_simulations=2, max_nodes=4
    )
    with pytest.raises(ValueError, match="num_actions"):
        bad.search(bad.init(1), None, states, jax.random.PRNGKey(0))


def test_trees_and_states_of_different_batch_sizes_are_refused(tic_tac_toe):
    s = make_search(
        tic_tac_toe, uniform_eval_fn(9), selector=puct(), num_simulations=2, max_nodes=4
    )
    states = play(tic_tac_toe, [], batch=2)
    with pytest.raises(ValueError, match=r"\[2\] games .* made for 3"):
        s.search(s.init(3), None, states, jax.random.PRNGKey(0))
    for bad in (0, -1, 2.0):
        with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
            s.init(bad)


def _codec_env(state):
    """A stand-in Env whose `init` returns `state` (the codec only reads `init`'s shapes)."""
    import dataclasses

    base = envs.make("tic_tac_toe")
    return dataclasses.replace(base, init=lambda key: (state, base.init(key)[1]))


def test_packed_states_round_trip_exactly_for_every_leaf_type():
    from turbozero.search.tree import state_codec

    state = {
        "flag": jnp.array([True, False, True]),
        "small": jnp.array([-3, 7], jnp.int8),
        "half": jnp.array([1.5, -2.25], jnp.float16),
        "brain": jnp.array([0.1, -7.0], jnp.bfloat16),
        "tiny": jnp.array([[0.5, -2.0], [448.0, 0.0]], jnp.float8_e4m3fn),
        "count": jnp.array(123456, jnp.int32),
        "word": jnp.array([4_000_000_000], jnp.uint32),
        "value": jnp.array([[np.pi, -0.0], [np.inf, 1e-30]], jnp.float32),
    }
    codec = state_codec(_codec_env(state))
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)  # leading axes are kept
    rows = codec.pack(batch)
    assert rows.dtype == jnp.int32 and rows.shape == (2, codec.width)
    back = codec.unpack(rows)
    for a, b in zip(jax.tree.leaves(batch), jax.tree.leaves(back), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))
    for game in ("connect_four", "othello", "go_9x9"):
        env = envs.make(game)
        states = play(env, [], batch=2)
        codec = state_codec(env)
        back = jax.jit(lambda s, codec=codec: codec.unpack(codec.pack(s)))(states)
        for a, b in zip(jax.tree.leaves(states), jax.tree.leaves(back), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_states_with_typed_keys_are_stored_unpacked():
    from turbozero.search.tree import state_codec

    codec = state_codec(_codec_env({"key": jax.random.key(0), "x": jnp.zeros(3)}))
    assert codec.width is None
    state = {"key": jax.random.key(1), "x": jnp.ones(3)}
    assert codec.unpack(codec.pack(state)) is state


@pytest.mark.parametrize("name", ["puct", "muzero_puct", _OPTIMIZED_GUMBEL])
def test_walk_compaction_changes_no_result(connect_four, name):
    """Batches of 32 games finish their deep walks in 8 gathered lanes: same trees and outputs
    as the plain batch-synchronous walk, full trees included."""
    B = 32
    keys = jax.random.split(jax.random.PRNGKey(5), B)

    def random_position(key):
        state, md = connect_four.init(key)
        for i in range(4):
            k = jax.random.fold_in(key, i)
            action = jax.random.categorical(k, jnp.where(md.action_mask, 0.0, -jnp.inf))
            state, md = connect_four.step(state, action, k)
        return state

    states = jax.jit(jax.vmap(random_position))(keys)
    params = linear_params(connect_four, 3)
    rule = RULES[name]()

    def run(speed):
        s = make_search(
            connect_four,
            linear_eval_fn(7),
            selector=rule,
            num_simulations=48,
            max_nodes=40,
            speed=speed,
        )
        search = jax.jit(s.search)
        args = (s.init(B), params, states, jax.random.PRNGKey(1), 1.0)
        return search(*args), search.lower(*args).as_text()

    (tree_a, out_a), text_a = run(SpeedPaths())
    (tree_b, out_b), text_b = run(SpeedPaths(compact_walks=False, compact_root_evaluations=False))
    assert text_a != text_b  # two different programs were compared
    assert int(jnp.max(out_a.max_depth)) >= 3  # deep walks happened
    assert_same_pytrees((tree_a, out_a), (tree_b, out_b))


def test_few_empty_roots_are_evaluated_alone_with_the_same_result(connect_four):
    """With 64 games, up to 8 empty trees are evaluated as a batch of 8 (more: all 64)."""
    B = 64
    states = play(connect_four, [3, 3], batch=B)
    params = linear_params(connect_four, 4)
    done = jnp.arange(B) % 16 == 3  # four games restart

    def run(speed):
        s = make_search(
            connect_four,
            linear_eval_fn(7),
            selector=puct(),
            num_simulations=16,
            max_nodes=64,
            speed=speed,
        )
        search = jax.jit(s.search)
        tree, out = search(s.init(B), params, states, jax.random.PRNGKey(1), 1.0)
        tree = jax.jit(lambda t, a, d: s.reset(s.advance(t, a), d))(tree, out.action, done)
        nxt, _ = compiled_steps(connect_four)[2](
            states, out.action, jax.random.split(jax.random.PRNGKey(0), B)
        )
        args = (tree, params, nxt, jax.random.PRNGKey(2), 1.0)
        return search(*args), search.lower(*args).as_text()

    (tree_a, out_a), text_a = run(SpeedPaths())
    (tree_b, out_b), text_b = run(SpeedPaths(compact_root_evaluations=False))
    assert text_a != text_b  # two different programs were compared
    for a, b in zip(
        jax.tree.leaves((tree_a, out_a)), jax.tree.leaves((tree_b, out_b)), strict=True
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(out_a.visit_counts), np.asarray(out_b.visit_counts))


def test_step_outputs_computed_once_change_no_result(connect_four):
    """The conditional that keeps XLA:CPU from recomputing the expansion's step in every consumer
    is in the compiled search (on CPU only), and the trees and outputs equal those without it."""
    B = 16
    states = play(connect_four, [3, 2], batch=B)
    params = linear_params(connect_four, 4)

    def run(speed):
        s = make_search(
            connect_four,
            linear_eval_fn(7),
            selector=puct(),
            num_simulations=24,
            max_nodes=32,
            speed=speed,
        )
        search = jax.jit(s.search)
        args = (s.init(B), params, states, jax.random.PRNGKey(1), 1.0)
        text = search.lower(*args).compile().as_text()
        return search(*args), text.count("conditional(")

    (tree_a, out_a), conds_a = run(SpeedPaths())
    (tree_b, out_b), conds_b = run(SpeedPaths(step_buffers=False))
    assert conds_a == conds_b + (1 if jax.default_backend() == "cpu" else 0)
    assert_same_pytrees((tree_a, out_a), (tree_b, out_b))


@pytest.mark.parametrize("name", ["puct", "muzero_puct", "gumbel"])
def test_the_compiled_search_writes_its_trees_in_place_without_copying_them(name):
    """XLA:CPU's compiled search (empty trees built, then searched) copies no `[B, N, ...]` tree
    array except the constants the empty trees are built from: a copy inside the simulation
    loop would make every simulation's cost grow with `max_nodes`."""
    if jax.default_backend() != "cpu":
        pytest.skip("the check reads XLA:CPU's compiled program")
    env = envs.make("connect_four")
    B, N = 8, 37
    s = make_search(
        env,
        linear_eval_fn(env.num_actions),
        selector=RULES[name](),
        num_simulations=16,
        max_nodes=N,
    )
    states = play(env, [3], batch=B)

    def run(params, states, key):
        return s.search(s.init(B), params, states, key)

    lowered = jax.jit(run).lower(linear_params(env, 5), states, jax.random.PRNGKey(0))
    text = lowered.compile().as_text()
    copies = re.findall(rf"= \w+\[{B},{N}[,\]][^ ]* copy\(([^)]*)\)", text)
    assert copies, "no copy of a tree-shaped array found at all: the pattern no longer matches"
    assert all("%constant" in operand for operand in copies), copies


@pytest.mark.parametrize(
    ("game", "moves", "batch", "name"),
    [
        ("connect_four", [3, 3, 2], 8, "puct"),  # the whole walk in one loop
        ("connect_four", [3, 3, 2], 32, "muzero_puct"),  # compacted walks
        ("tic_tac_toe", [0, 4, 8, 2], 32, "gumbel"),  # walks that end at finished games
    ],
)
def test_several_levels_per_loop_iteration_change_no_result(name, game, moves, batch):
    """Two or four tree levels per iteration of the walk's and the backup's loops (four is the
    default off the CPU) give the same trees and outputs as one, full trees included. Each kind
    of walk is checked with one of the three rules: the levels are the walk's and the backup's,
    which the rules share (a rule only scores the children of one node)."""
    env = envs.make(game)
    states = play(env, moves, batch=batch)
    params = linear_params(env, 5)
    rule = RULES[name]()

    def run(levels):
        s = make_search(
            env,
            linear_eval_fn(env.num_actions),
            selector=rule,
            num_simulations=40,
            max_nodes=24 if game == "connect_four" else 12,  # full trees
            levels_per_iteration=levels,
        )
        search = jax.jit(s.search)
        args = (s.init(batch), params, states, jax.random.PRNGKey(3), 1.0)
        return search(*args), search.lower(*args).as_text()

    (tree_a, out_a), text_a = run(1)
    assert int(jnp.max(out_a.max_depth)) >= (3 if game == "connect_four" else 2)
    assert int(jnp.max(out_a.full_events)) > 0
    if game == "tic_tac_toe":
        assert bool(jnp.any(tree_a.terminal))
    for levels in (2, 4):
        (tree_b, out_b), text_b = run(levels)
        assert text_a != text_b  # two different programs were compared
        assert_same_pytrees((tree_a, out_a), (tree_b, out_b))


def test_compiler_options_add_loop_command_buffers_on_cuda_only(monkeypatch):
    """`compiler_options()` is empty except on CUDA (found from the first device's platform
    version when the backend is "gpu"), where it asks XLA to record `while_loop`s and `cond`s into
    command buffers with names XLA accepts (a wrong name fails to compile)."""
    for backend in ("cpu", "rocm", "tpu"):
        assert compiler_options(backend) == {}
    if jax.default_backend() == "cpu":
        assert compiler_options() == {}
    options = compiler_options("cuda")
    assert set(options) == {"xla_gpu_enable_command_buffer"}
    assert {"WHILE", "CONDITIONAL", "FUSION"} <= set(
        options["xla_gpu_enable_command_buffer"].split(",")
    )

    class Client:
        def __init__(self, version):
            self.platform_version = version

    class Device:
        def __init__(self, version):
            self.client = Client(version)

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    for version, expected in (("cuda 13000", options), ("rocm 6.4", {}), ("", {})):
        monkeypatch.setattr(jax, "devices", lambda v=version: [Device(v)])
        assert compiler_options() == expected
        assert compiler_options("gpu") == expected
    monkeypatch.undo()

    def doubling(x):
        return jax.lax.while_loop(lambda c: c < 10, lambda c: c * 2, x)

    assert int(jax.jit(doubling, compiler_options=options)(1)) == 16
    wrong = {"xla_gpu_enable_command_buffer": "WHILE,LOOPS"}
    with pytest.raises(jax.errors.JaxRuntimeError, match="LOOPS"):
        jax.jit(doubling, compiler_options=wrong)(1)


def test_a_tree_whose_root_holds_another_position_with_the_same_moves_is_started_afresh(
    tic_tac_toe,
):
    """X in the centre and O in a corner, or the other way round: the same legal moves and the
    same player to move, but not the same position. The kept tree (advanced to the first) is
    not searched from the second: the search equals a fresh tree's."""
    params, s, run = _reusing_search(tic_tac_toe)
    tree, out = run(s.init(4), params, play(tic_tac_toe, [4], batch=4), jax.random.PRNGKey(0))
    tree = jax.jit(s.advance)(tree, jnp.full((4,), 6, jnp.int32))
    assert np.all(np.asarray(tree.next_free) > 1)  # the move's subtree was kept
    swapped = play(tic_tac_toe, [6, 4], batch=4)
    _, kept = run(tree, params, swapped, jax.random.PRNGKey(1))
    _, fresh = run(s.init(4), params, swapped, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(np.asarray(kept.visit_counts), np.asarray(fresh.visit_counts))
    assert np.all(np.asarray(kept.visit_counts).sum(axis=1) == 16)
    # the position the tree was advanced to keeps its visits
    _, same = run(tree, params, play(tic_tac_toe, [4, 6], batch=4), jax.random.PRNGKey(1))
    assert np.all(np.asarray(same.visit_counts).sum(axis=1) > 16)


def test_stored_states_compare_bit_for_bit_row_by_row():
    from turbozero.search.tree import same_states

    a = {
        "x": jnp.array([[1.0, jnp.nan], [2.0, 3.0], [0.0, 0.0]]),
        "k": jax.random.split(jax.random.key(0), 3),
        "n": jnp.array([1, 2, 3], jnp.int32),
    }
    b = {
        "x": jnp.array([[1.0, jnp.nan], [2.0, 3.5], [0.0, 0.0]]),
        "k": a["k"].at[2].set(jax.random.key(9)),
        "n": jnp.array([1, 2, 3], jnp.int32),
    }
    assert same_states(a, b).tolist() == [True, False, False]
    assert same_states(a, a).tolist() == [True, True, True]


@pytest.mark.parametrize("name", ["puct", _OPTIMIZED_GUMBEL])
def test_a_games_search_draws_from_its_own_key_whatever_else_is_in_the_batch(tic_tac_toe, name):
    """One key per game: the games of a batch searched apart (two devices' halves) give what
    they give searched together, noise and sampled moves included; one key is split into
    one per game; a batch of keys of another size is refused by name."""
    s = make_search(
        tic_tac_toe,
        linear_eval_fn(9),
        selector=RULES[name](),
        num_simulations=12,
        max_nodes=13,
    )
    run = jax.jit(s.search)
    states = jax.tree_util.tree_map(
        lambda *xs: jnp.stack(xs), *(play(tic_tac_toe, m, 1) for m in ([], [4], [0, 4], [8]))
    )
    states = jax.tree_util.tree_map(lambda x: x[:, 0], states)
    p = linear_params(tic_tac_toe)
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    _, whole = run(s.init(4), p, states, keys, 1.0)
    halves = []
    for part in (slice(0, 2), slice(2, 4)):
        sub = jax.tree_util.tree_map(lambda x, part=part: x[part], states)
        halves.append(run(s.init(2), p, sub, keys[part], 1.0)[1])
    joined = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), *halves)
    assert_same_pytrees(whole, joined)
    # the keys matter (noise, sampled moves): other keys search otherwise
    _, other = run(s.init(4), p, states, jax.random.split(jax.random.PRNGKey(8), 4), 1.0)
    assert not (
        np.array_equal(np.asarray(other.action_weights), np.asarray(whole.action_weights))
        and np.array_equal(np.asarray(other.action), np.asarray(whole.action))
    )
    # one key is one key per game, split
    _, one = run(s.init(4), p, states, jax.random.PRNGKey(7), 1.0)
    assert_same_pytrees(one, whole)
    with pytest.raises(ValueError, match=r"key must be one PRNG key or one per game \(4\)"):
        s.search(s.init(4), p, states, keys[:3])
