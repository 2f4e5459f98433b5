"""The 1-ply search at play over afterstate values (`turbozero.td.lookahead`): its values
against an enumeration with the learner's own turn choice, its pick, its packing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import turbozero
from turbozero.config import ConfigError
from turbozero.td import TDConfig, make_td, td_agent
from turbozero.td.lookahead import CANDIDATES, WINDOW, packed_map, reply_values

TINY = TDConfig(num_games=8, hidden=(16,), eval_opponents=("pubeval",))


@pytest.fixture(scope="module")
def learner():
    """A small network with random weights everywhere (its result layer starts at zero)."""
    td = make_td(TINY)
    params = td.init(jax.random.PRNGKey(0)).params
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    noisy = [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    return td, jax.tree.unflatten(tree, noisy)


@pytest.fixture(scope="module")
def states():
    """12 states of random play, each with both dice of a non-double to play (mid-game)."""
    env = turbozero.envs.make("backgammon")
    key = jax.random.PRNGKey(2)
    state, md = jax.vmap(env.init)(jax.random.split(key, 64))
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(0)
    found = []
    for t in range(400):
        mask = np.asarray(md.action_mask)
        action = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in mask])
        keys = jax.random.split(jax.random.fold_in(key, t), 64)
        state, md = step(state, jnp.asarray(action), keys)
        dice = np.asarray(state._playable_dice)
        left = (dice >= 0).sum(1)
        fresh = (left == 2) & (dice[:, 0] != dice[:, 1]) & ~np.asarray(state.terminated)
        if t > 40 and t % 20 == 0:
            found += [jax.tree.map(lambda x, i=i: x[i], state) for i in np.flatnonzero(fresh)[:2]]
        if len(found) >= 12:
            break
    return jax.tree.map(lambda *x: jnp.stack(x), *found[:12])


@pytest.fixture(scope="module")
def plays(learner, states):
    """`(boards [12, N, 28], actions [12, N], valid [12, N])`: each state's plays (compiled:
    op by op they took 8 s)."""
    return jax.jit(jax.vmap(learner[0].rules.state_plays))(states)


def _enumerated(td, params, board) -> float:
    """The 1-ply value of one afterstate by a loop over the 21 rolls, each reply rated whole."""
    rules = td.rules
    result = jax.jit(rules.result)
    over, index = result(board)
    if bool(over):
        return rules.results[int(index)]
    opponent = jax.jit(rules.flip)(board)

    def choose(params, board, dice):  # the valid play of highest equity, rated one by one
        boards, _, valid = rules.plays(board, dice)
        scores = jnp.where(valid, td.equity(params, boards), -jnp.inf)
        return jnp.where(valid.any(), boards[jnp.argmax(scores)], board)

    turn = jax.jit(choose)
    equity = jax.jit(lambda b: td.equity(params, b[None])[0])
    total = 0.0
    for dice, weight in zip(rules.rolls, rules.roll_weights, strict=True):
        after = turn(params, opponent, jnp.asarray(dice))
        if dice[0] == dice[1] and not bool(result(after)[0]):
            after = turn(params, after, jnp.asarray(dice))
        total += weight * float(equity(after))
    return -total


def test_the_rolls_are_the_21_of_two_dice_with_their_probabilities(learner):
    rules = learner[0].rules
    assert len(rules.rolls) == 21 and abs(sum(rules.roll_weights) - 1) < 1e-9
    assert sum(w for d, w in zip(rules.rolls, rules.roll_weights, strict=True) if d[0] == d[1]) == (
        pytest.approx(6 / 36)
    )


def test_reply_values_are_the_enumerations(learner, plays):
    td, params = learner
    rules = td.rules
    boards, _, valid = plays
    # afterstates of several positions: a valid play of each, and a won board
    picks = [boards[i, int(np.flatnonzero(np.asarray(valid[i]))[-1])] for i in range(3)]
    won = np.array([0] * 26 + [15, -3], np.int32)
    won[2] = -12
    after = jnp.stack([*[p.astype(jnp.int32) for p in picks], jnp.asarray(won)])
    equity = lambda b: td.equity(params, b)  # noqa: E731
    got = jax.jit(lambda b: reply_values(rules, equity, rules.rolls, rules.roll_weights, b))(after)
    want = [_enumerated(td, params, b) for b in after]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    assert float(got[-1]) == 1.0  # the won board: its own points
    assert len({round(float(v), 4) for v in got[:3]}) == 3  # (a test that could fail)


def test_the_search_plays_the_candidate_of_best_reply_value(learner, states, plays):
    td, params = learner
    rules = td.rules
    env = turbozero.envs.make("backgammon")
    agent = td_agent(td, env, params, depth=1)
    acting = np.arange(12) != 5  # a match's other seat, in game 5: no work, no move
    out = jax.jit(agent.policy_fn)(params, states, jax.random.PRNGKey(0), acting=acting)
    assert int(out.action[5]) == rules.no_move and float(out.value[5]) == 0.0
    boards, actions, valid = plays
    every = np.asarray(jax.jit(jax.vmap(lambda b: td.equity(params, b)))(boards))  # [12, N]
    candidates = []  # each state's plays within the window of the 0-ply best, at most 8
    for i in range(boards.shape[0]):
        ok = np.flatnonzero(np.asarray(valid[i]))
        scores = every[i, ok]
        order = np.argsort(-scores, kind="stable")[:CANDIDATES]
        candidates.append(ok[order[scores[order[0]] - scores[order] <= WINDOW]])
    padded = np.stack([np.resize(c, CANDIDATES) for c in candidates])  # [B, 8] (repeats)
    rows = np.arange(boards.shape[0])[:, None]
    equity = lambda b: td.equity(params, b)  # noqa: E731
    search = jax.jit(lambda b: reply_values(rules, equity, rules.rolls, rules.roll_weights, b))
    values = np.asarray(search(boards[rows, padded].reshape(-1, 28))).reshape(padded.shape)
    differs = 0
    for i, c in enumerate(candidates):
        if i == 5:
            continue
        best = c[int(np.argmax(values[i, : len(c)]))] if len(c) > 1 else c[0]
        assert int(out.action[i]) == int(actions[i, best])
        if len(c) > 1:
            assert float(out.value[i]) == pytest.approx(values[i, : len(c)].max(), abs=1e-5)
        differs += int(best != c[0])
    assert differs >= 1  # the search changed some 0-ply choice


def test_packed_map_computes_the_masked_items_only():
    calls = []

    def fn(x):
        calls.append(x.shape)
        return x * 10.0

    items = jnp.arange(11.0)
    mask = jnp.asarray([i % 3 == 0 for i in range(11)])
    out = jax.jit(lambda i, m: packed_map(fn, i, m, 2, jnp.full(11, -1.0)))(items, mask)
    want = np.where(np.asarray(mask), np.arange(11.0) * 10, -1.0)
    np.testing.assert_array_equal(np.asarray(out), want)
    assert calls == [(2,)]  # traced once, for a chunk of 2


def test_depth_is_checked_by_name():
    with pytest.raises(ConfigError, match=r"eval_depth must be in \[0, 1\], got 2"):
        TDConfig(eval_depth=2)
