"""Searches with chance nodes (games with `env.chance`): expectimax values on games of known
expectations, the outcome-visit rule, impossible outcomes, reuse through a chance node, and
2048 and backgammon compiled at batch 8 (self-play on 2048)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.envs.chance_games import (
    DICE_PROBABILITIES,
    GAMBLE_SINGLE_SAMPLE_PICKS_BEST,
    dice_game,
    gamble_game,
    make_chance_game,
)
from tests.search.helpers import linear_eval_fn, linear_params, uniform_eval_fn
from turbozero import envs
from turbozero.search import gumbel, make_search, muzero_puct, puct, tree_bytes
from turbozero.search.tree import CHILD, E_VISITS, ILLEGAL, PRIOR, PROBS

RULES = {"puct": puct, "muzero_puct": muzero_puct, "gumbel": gumbel}
# All outcomes of every action get visited within 400 simulations, so the root's Q values are
# the exact expectations up to float32 rounding.
Q_TOLERANCE = 1e-5


def _search(env, rule: str, *, simulations: int, max_nodes: int, **kw):
    return make_search(
        env,
        uniform_eval_fn(env.num_actions),
        selector=RULES[rule](),
        num_simulations=simulations,
        max_nodes=max_nodes,
        **kw,
    )


def _starts(env, batch: int):
    return jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(0), batch))[0]


@pytest.fixture(scope="module")
def play2048():
    return envs.make("2048")


@pytest.mark.parametrize("widening", [1.0, 0.5])
@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("make_game", [dice_game, gamble_game], ids=["dice", "gamble"])
def test_root_values_converge_to_the_expectations_and_the_best_move_is_chosen(
    make_game, rule, widening
):
    """Exact wherever a move's chance node has visited every possible outcome: every move's
    with all outcomes open at once; under widening (w = 0.5) the best move's at least (a poor
    move may stay below it: the estimate from the outcomes it has seen keeps the selector
    away, and its chance node opens outcomes only as its visits grow)."""
    game = make_game()
    s = _search(game.env, rule, simulations=400, max_nodes=401, chance_widening=widening)
    tree, out = jax.jit(s.search)(s.init(4), None, _starts(game.env, 4), jax.random.PRNGKey(1))
    q = np.asarray(out.q_values)
    A = game.env.num_actions
    child = np.asarray(tree.children[:, 0, :A])
    outcome_visits = np.asarray(tree.edge_stats)[np.arange(4)[:, None], child, :, E_VISITS]
    possible = np.asarray(tree.edges)[np.arange(4)[:, None], child, CHILD] > ILLEGAL
    chance = np.asarray(tree.chance)[np.arange(4)[:, None], child]
    opened = ~chance | np.all((outcome_visits > 0) | ~possible, axis=-1)  # [4, A]
    assert opened[:, game.best_action].all()
    expected = np.broadcast_to(game.expected, q.shape)
    np.testing.assert_allclose(q[opened], expected[opened], atol=Q_TOLERANCE)
    assert opened.all() or widening < 1
    assert (np.asarray(out.action) == game.best_action).all()
    assert (np.asarray(out.max_depth) == 2).all()  # the root, a chance node, an outcome
    # every root child is a chance node, except the gamble's sure payout (no chance event)
    events = (game.probabilities[:, 0] < 1)[None, :]
    child = np.asarray(tree.children[:, 0, : game.env.num_actions])
    np.testing.assert_array_equal(
        np.asarray(tree.chance)[np.arange(4)[:, None], child], events.repeat(4, 0)
    )


def test_the_gamble_is_won_under_every_key_where_one_sample_per_edge_wins_with_p_015():
    """A search that draws one outcome per edge and trusts it picks the gamble (the better
    move, expected 1.5 against 1) only when it drew the 10: probability 0.15. Chance nodes
    weigh both outcomes by their probabilities: the better move under every key."""
    assert GAMBLE_SINGLE_SAMPLE_PICKS_BEST == 0.15
    game = gamble_game()
    B = 64
    for rule in RULES:
        s = _search(game.env, rule, simulations=400, max_nodes=401)
        keys = jax.random.split(jax.random.PRNGKey(7), B)
        _, out = jax.jit(s.search)(s.init(B), None, _starts(game.env, B), keys, 0.0)
        assert (np.asarray(out.action) == game.best_action).all(), rule


def _chance_nodes(tree):
    return [
        (b, n)
        for b, n in zip(*np.nonzero(np.asarray(tree.chance)), strict=True)
        if n < int(tree.next_free[b])
    ]


def test_outcome_visits_follow_the_probabilities():
    """At a chance node, the outcome whose visits lag its probability most is taken: every
    outcome's visits stay within one of its share, |n_o - p_o n| <= 1."""
    game = dice_game()
    s = _search(game.env, "puct", simulations=300, max_nodes=301)
    tree, _ = jax.jit(s.search)(s.init(2), None, _starts(game.env, 2), jax.random.PRNGKey(0))
    edges, stats = np.asarray(tree.edges), np.asarray(tree.edge_stats)
    nodes = _chance_nodes(tree)
    assert nodes and max(stats[b, n, :, E_VISITS].sum() for b, n in nodes) >= 100
    for b, n in nodes:
        p, visits = edges[b, n, PROBS], stats[b, n, :, E_VISITS]
        assert np.all(np.abs(visits - p * visits.sum()) <= 1.0 + 1e-6), (p, visits)


def _wide_game():
    """Two actions, then one of 9 outcomes of unequal probabilities."""
    p = np.arange(9, 0, -1, dtype=np.float32)
    probs = np.stack([p / p.sum(), p[::-1] / p.sum()])
    rewards = np.linspace(-1.0, 1.0, 18, dtype=np.float32).reshape(2, 9)
    return make_chance_game("wide", probs, rewards)


@pytest.mark.parametrize("widening", [0.0, 0.5])
@pytest.mark.parametrize("simulations", [8, 60])
def test_progressive_widening_opens_the_first_ceil_n_to_the_w_outcomes_of_the_drawn_order(
    simulations, widening
):
    """Under progressive widening a chance node with `n` visits has visited at most
    `ceil((n - 1) ** w)` outcomes (the count open at its last selection), and exactly the
    first ones of its drawn order (the `PRIOR` row); with w = 0 only one outcome ever."""
    game = _wide_game()
    s = _search(
        game.env,
        "puct",
        simulations=simulations,
        max_nodes=2 * simulations + 1,
        chance_widening=widening,
    )
    keys = jax.random.split(jax.random.PRNGKey(3), 8)
    tree, _ = jax.jit(s.search)(s.init(8), None, _starts(game.env, 8), keys, 0.0)
    edges, stats = np.asarray(tree.edges), np.asarray(tree.edge_stats)
    nodes = _chance_nodes(tree)
    most = 0
    for b, n in nodes:
        visits = stats[b, n, :, E_VISITS]
        total, visited = visits.sum(), np.flatnonzero(visits > 0)
        assert total >= 1
        most = max(most, len(visited))
        assert len(visited) <= np.ceil(max(total - 1.0, 1.0) ** widening), (total, visits)
        order = np.argsort(-edges[b, n, PRIOR], kind="stable")
        assert set(visited) == set(order[: len(visited)]), (edges[b, n, PRIOR], visits)
    if widening == 0.0:
        assert most == 1
    else:
        assert most >= (3 if simulations >= 60 else 2)


def test_under_widening_a_chance_nodes_first_outcome_is_drawn_by_its_probability():
    """The drawn order's first outcome (the one expanded with the chance node) is a draw in
    proportion to the probabilities, not always the likeliest: over 256 games x 3 actions of
    the dice game, each outcome comes first at about its probability."""
    game = dice_game()
    B = 256
    s = _search(game.env, "puct", simulations=3, max_nodes=7, chance_widening=0.5)
    keys = jax.random.split(jax.random.PRNGKey(11), B)
    tree, _ = jax.jit(s.search)(s.init(B), None, _starts(game.env, B), keys, 0.0)
    edges = np.asarray(tree.edges)
    firsts = [int(np.argmax(edges[b, n, PRIOR, :3])) for b, n in _chance_nodes(tree)]
    assert len(firsts) >= B
    share = np.bincount(firsts, minlength=3) / len(firsts)
    np.testing.assert_allclose(share, DICE_PROBABILITIES[0], atol=0.06)


def test_impossible_outcomes_are_never_visited_in_2048(play2048):
    """A new tile never lands on an occupied cell: the chance nodes' outcomes of probability
    zero are illegal edges, never expanded or visited, and the stored probabilities are those
    of the stored afterstate."""
    env = play2048
    s = make_search(
        env,
        linear_eval_fn(env.num_actions),
        selector=puct(),
        num_simulations=48,
        max_nodes=97,
    )
    B = 8
    tree, out = jax.jit(s.search)(
        s.init(B), linear_params(env), _starts(env, B), jax.random.PRNGKey(2)
    )
    edges, stats = np.asarray(tree.edges), np.asarray(tree.edge_stats)
    nodes = _chance_nodes(tree)
    assert len(nodes) >= B
    afters = s.spec.after_codec.unpack(tree.states[tuple(np.array(nodes).T)])
    probs = np.asarray(jax.vmap(env.chance.probabilities)(afters))
    occupied = np.asarray(afters.state._board) != 0  # [K, 16]
    for k, (b, n) in enumerate(nodes):
        np.testing.assert_allclose(edges[b, n, PROBS], probs[k], rtol=1e-6)
        impossible = probs[k] == 0
        np.testing.assert_array_equal(impossible, np.concatenate([occupied[k], occupied[k]]))
        assert (edges[b, n, CHILD][impossible] == ILLEGAL).all()
        assert (stats[b, n, impossible, E_VISITS] == 0).all()


def _descendants(parent: np.ndarray, root: int, used: int) -> list[int]:
    keep = [root]
    for n in range(root + 1, used):
        if parent[n] in keep:
            keep.append(n)
    return keep


def test_reuse_through_a_chance_node_keeps_exactly_the_drawn_outcomes_subtree(play2048):
    env = play2048
    s = make_search(
        env,
        linear_eval_fn(env.num_actions),
        selector=puct(),
        num_simulations=64,
        max_nodes=129,
    )
    assert s.reuse  # the default for games with chance nodes
    B = 4
    params, states = linear_params(env), _starts(env, B)
    tree, out = jax.jit(s.search)(s.init(B), params, states, jax.random.PRNGKey(3))
    # the most visited outcome under the played move's chance node
    b = np.arange(B)
    chance = np.asarray(tree.children[b, 0, np.asarray(out.action)])
    assert np.asarray(tree.chance)[b, chance].all()
    outcome = np.argmax(np.asarray(tree.edge_stats)[b, chance, :, E_VISITS], axis=-1)
    kept = jax.jit(s.advance)(tree, out.action, jnp.asarray(outcome, jnp.int32))
    parent = np.asarray(tree.parent)
    for g in range(B):
        grandchild = int(tree.children[g, chance[g], outcome[g]])
        old = _descendants(parent[g], grandchild, int(tree.next_free[g]))
        assert int(kept.next_free[g]) == len(old)
        for field in ("node_stats", "node", "states", "edge_stats"):
            np.testing.assert_array_equal(
                np.asarray(getattr(kept, field))[g, : len(old)],
                np.asarray(getattr(tree, field))[g, old],
            )
        np.testing.assert_array_equal(
            np.asarray(kept.chance)[g, : len(old)], np.asarray(tree.chance)[g, old]
        )
    # an unknown outcome cannot be followed: those trees start afresh
    unknown = jax.jit(s.advance)(tree, out.action)
    assert (np.asarray(unknown.next_free) == 0).all()
    # the kept tree is the state's tree: the next search reuses its visits
    after = jax.vmap(env.chance.decide)(states, out.action)
    nxt, _ = jax.vmap(env.chance.resolve)(after, jnp.asarray(outcome, jnp.int32))
    tree2, _ = jax.jit(s.search)(kept, params, nxt, jax.random.PRNGKey(4))
    np.testing.assert_array_equal(
        np.asarray(tree2.visits[:, 0]), np.asarray(kept.visits[:, 0]) + s.num_simulations
    )


@pytest.mark.parametrize("game", ["2048", "backgammon"])
def test_a_compiled_search_plays_legal_moves_in_pgx_games_with_chance(game):
    env = envs.make(game)
    s = make_search(
        env,
        linear_eval_fn(env.num_actions),
        selector=gumbel(),
        num_simulations=16,
        max_nodes=33,
    )
    B = 8
    states = _starts(env, B)
    tree, out = jax.jit(s.search)(s.init(B), linear_params(env), states, jax.random.PRNGKey(5), 1.0)
    mask = np.asarray(jax.vmap(env.metadata)(states).action_mask)
    assert mask[np.arange(B), np.asarray(out.action)].all()
    assert out.action_weights.shape == (B, env.num_actions)
    assert (np.asarray(out.action_weights)[~mask] == 0).all()
    assert np.asarray(tree.chance).any() or game == "backgammon"
    assert tree_bytes(env, B, 33) > 0


def test_selfplay_runs_on_2048_with_chance_nodes(play2048):
    from turbozero.alphazero.selfplay import make_selfplay
    from turbozero.memory import make_episode_buffer

    env = play2048
    s = make_search(
        env, linear_eval_fn(env.num_actions), selector=puct(), num_simulations=64, max_nodes=129
    )
    memory = make_episode_buffer(num_games=4, capacity=16, sample_size=4, num_players=1)
    sp = make_selfplay(s, memory, batch_size=4, max_episode_steps=50)
    state, metrics = jax.jit(sp.collect, static_argnames="num_steps")(
        sp.init(jax.random.PRNGKey(0)), linear_params(env), jax.random.PRNGKey(1), num_steps=3
    )
    assert float(metrics["positions"]) == 12
    # the trees followed the drawn tiles: each kept root holds the game's state
    roots = s.spec.codec.unpack(state.tree.states[:, 0])
    kept = np.asarray(state.tree.next_free) > 0
    assert kept.any()
    np.testing.assert_array_equal(
        np.asarray(roots._board)[kept], np.asarray(state.env_states._board)[kept]
    )


def test_a_game_with_chance_needs_room_for_a_chance_node_and_its_outcome():
    env = dice_game().env
    with pytest.raises(ValueError, match="max_nodes must be >= 3"):
        _search(env, "puct", simulations=4, max_nodes=2)
