"""Forced playouts and policy-target pruning (`puct(forced_playouts=k)`, KataGo's scheme)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.search.helpers import bandit, linear_eval_fn, linear_params, play
from turbozero.search import make_search, muzero_puct, puct

LOGITS = [1.5, 0.5, 0.0, -1.0]  # the network's prior: arm 0 liked most, arm 3 least


def _fixed_eval_fn(logits):
    def eval_fn(params, obs, key):
        return jnp.broadcast_to(jnp.asarray(logits), (obs.shape[0], len(logits))), jnp.zeros(
            (obs.shape[0],)
        )

    return eval_fn


def _reference(rewards, logits, sims, c, k):
    """Plain-Python PUCT with forced playouts on a bandit (root value 0), then the pruned
    target: visits and target weights."""
    p = np.exp(np.array(logits, np.float64))
    p /= p.sum()
    A = len(rewards)
    n, w = [0] * A, [0.0] * A

    def score(a, total, visits):
        q = w[a] / n[a] if n[a] else 0.0
        return q + c * p[a] * math.sqrt(total) / (1 + visits)

    for _ in range(sims):
        total = 1 + sum(n)
        forced = [n[a] < math.sqrt(k * p[a] * total) for a in range(A)]
        a = int(np.argmax([score(a, total, n[a]) + 1e4 * forced[a] for a in range(A)]))
        n[a] += 1
        w[a] += rewards[a]
    total = 1 + sum(n)
    best = int(np.argmax(n))
    top = score(best, total, n[best])
    kept = []
    for a in range(A):
        if a == best:
            kept.append(n[a])
            continue
        q, numerator = w[a] / n[a] if n[a] else 0.0, c * p[a] * math.sqrt(total)
        needed = math.ceil(numerator / (top - q) - 1) if top > q else n[a]
        floor = max(n[a] - math.floor(math.sqrt(k * p[a] * total)), 0)
        m = min(max(floor, needed, 0), n[a])
        kept.append(0 if m <= 1 else m)
    return n, np.array(kept) / sum(kept)


def _bandit_search(rule, rewards, sims):
    env = bandit(rewards)
    s = make_search(
        env, _fixed_eval_fn(LOGITS), selector=rule, num_simulations=sims, max_nodes=sims + 1
    )
    states, _ = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 1))
    return jax.jit(s.search)(s.init(1), None, states, jax.random.PRNGKey(0))[1]


@pytest.mark.parametrize("k", [1.0, 2.0, 4.0])
def test_forced_visits_and_the_pruned_target_follow_katagos_rule_on_a_bandit(k):
    """Visit by visit as the plain-Python rule: a child with fewer than sqrt(k * P * N) visits
    is chosen first; the target then takes back every forced visit that PUCT would not have
    spent, and drops children left with one."""
    rewards = [0.3, 0.8, 0.1, 0.2]
    out = _bandit_search(puct(c_puct=1.0, dirichlet_fraction=0.0, forced_playouts=k), rewards, 48)
    visits, weights = _reference(rewards, LOGITS, 48, 1.0, k)
    assert out.visit_counts[0].tolist() == visits
    np.testing.assert_allclose(np.asarray(out.action_weights[0]), weights, atol=1e-6)
    assert int(out.action[0]) == int(np.argmax(visits))


def test_forced_playouts_spend_visits_that_plain_puct_does_not_and_the_target_removes_them():
    rewards = [0.3, 0.8, 0.1, 0.2]
    plain = _bandit_search(puct(c_puct=1.0, dirichlet_fraction=0.0), rewards, 48)
    forced = _bandit_search(
        puct(c_puct=1.0, dirichlet_fraction=0.0, forced_playouts=2.0), rewards, 48
    )
    # the least-liked arm (prior 0.06) is owed sqrt(2 * 0.06 * 49) = 2.4 visits
    assert int(forced.visit_counts[0, 3]) > int(plain.visit_counts[0, 3])
    assert float(forced.action_weights[0, 3]) == 0.0
    share = forced.visit_counts[0] / forced.visit_counts[0].sum()
    assert float(forced.action_weights[0, 1]) > float(share[1])  # the best arm keeps its visits


@pytest.mark.parametrize("make", [puct, muzero_puct], ids=["puct", "muzero_puct"])
def test_every_legal_root_child_is_visited_and_the_target_is_a_distribution(make, tic_tac_toe):
    states = play(tic_tac_toe, [4, 0], batch=3)
    s = make_search(
        tic_tac_toe,
        linear_eval_fn(9),
        selector=make(forced_playouts=2.0),
        num_simulations=32,
        max_nodes=40,
    )
    params = linear_params(tic_tac_toe, 3, scale=2.0)
    out = jax.jit(s.search)(s.init(3), params, states, jax.random.PRNGKey(1))[1]
    visits, weights = np.asarray(out.visit_counts), np.asarray(out.action_weights)
    legal = np.ones((3, 9), bool)
    legal[:, [4, 0]] = False  # the squares played
    assert (visits[legal] >= 1).all() and (visits[~legal] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    assert (weights[~legal] == 0).all()
    best = visits.argmax(-1)
    assert (weights.argmax(-1) == best).all()


@pytest.mark.parametrize("make", [puct, muzero_puct], ids=["puct", "muzero_puct"])
def test_the_noise_free_rule_plays_without_forced_playouts(make):
    rule = make(forced_playouts=2.0)
    assert rule.options["forced_playouts"] == 2.0
    quiet = rule.without_noise()
    assert quiet.options["forced_playouts"] == 0.0 and quiet.options["dirichlet_fraction"] == 0.0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "2"])
def test_forced_playouts_must_be_a_finite_number_at_least_zero(bad):
    for make in (puct, muzero_puct):
        with pytest.raises(ValueError, match="forced_playouts must be a finite number >= 0"):
            make(forced_playouts=bad)
