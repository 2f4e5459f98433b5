"""Matches: the rules listed in turbozero/arena/match.py, one test each."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero import envs
from turbozero.arena import (
    AgentOutput,
    make_agent,
    network_agent,
    perfect_agent,
    play_match,
    random_agent,
    replay_game,
)
from turbozero.arena.agents import legal_mask


@dataclasses.dataclass(frozen=True)
class FixedPreference:
    """Plays the lowest (or highest) legal action; deterministic."""

    env: envs.Env
    highest: bool = False

    def __call__(self, params, states, key):
        mask = legal_mask(self.env, states)
        order = jnp.arange(self.env.num_actions)
        score = jnp.where(mask, order if self.highest else -order, -jnp.inf)
        action = jnp.argmax(score, axis=-1).astype(jnp.int32)
        weights = jax.nn.one_hot(action, self.env.num_actions)
        return AgentOutput(action, weights, jnp.zeros(action.shape[0]))


@dataclasses.dataclass(frozen=True)
class AlwaysAction:
    """Always plays `action` (possibly illegal or out of range)."""

    num_actions: int
    action: int

    def __call__(self, params, states, key):
        batch = jax.tree_util.tree_leaves(states)[0].shape[0]
        action = jnp.full(batch, self.action, jnp.int32)
        return AgentOutput(action, jnp.zeros((batch, self.num_actions)), jnp.zeros(batch))


@dataclasses.dataclass(frozen=True)
class ActingOnly:
    """`FixedPreference`'s lowest legal move where a match says it moves (`takes_acting`), an
    illegal -1 elsewhere (the match must not use those)."""

    env: envs.Env
    takes_acting = True

    def __call__(self, params, states, key, acting=None):
        out = FixedPreference(self.env)(params, states, key)
        return out._replace(action=jnp.where(acting, out.action, -1))


class CountingEvalFn:
    """A fake network (bias logits) that counts how often it is traced."""

    def __init__(self):
        self.traces = 0

    def __call__(self, params, observations, key):
        self.traces += 1
        batch = observations.shape[0]
        logits = jnp.broadcast_to(params, (batch, params.shape[-1]))
        return logits + 0.1 * jax.random.normal(key, logits.shape), jnp.zeros(batch)


def assert_every_recorded_move_legal(env, result):
    """Replay all games of `result` in a batch and check each recorded action was legal."""

    @jax.jit
    def masks(keys, actions):
        def keys_at(t):
            return jax.vmap(jax.random.fold_in, (0, None))(keys, t)

        def body(carry, action_t):
            state, md, t = carry
            state, next_md = jax.vmap(env.step)(state, jnp.maximum(action_t, 0), keys_at(t + 1))
            return (state, next_md, t + 1), md.action_mask

        state, md = jax.vmap(env.init)(keys_at(0))
        return jax.lax.scan(body, (state, md, 0), actions)[1]

    actions = np.asarray(result.actions)
    mask = np.asarray(masks(jnp.asarray(result.game_keys), jnp.asarray(actions)))  # [T, G, A]
    live = actions >= 0
    chosen = np.take_along_axis(mask, np.maximum(actions, 0)[..., None], -1)[..., 0]
    assert np.all(chosen[live]), "an illegal move was recorded"


def test_random_play_shows_the_first_player_advantage(tic_tac_toe):
    # Known statistics of random tic-tac-toe: first player wins 58.5%, draws 12.7%.
    G = 1024
    r = play_match(
        tic_tac_toe,
        random_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(0),
        num_games=G,
    )
    first_wins = (r.as_first.wins + r.as_second.losses) / G
    assert abs(first_wins - 0.585) < 0.05
    assert abs(r.draws / G - 0.127) < 0.04
    assert r.illegal_moves == 0 and r.num_truncated == 0
    assert r.score_low < r.score < r.score_high
    assert 5 <= r.mean_length <= 9


def test_sides_are_swapped_between_halves(tic_tac_toe):
    low = make_agent(FixedPreference(tic_tac_toe), name="low")
    high = make_agent(FixedPreference(tic_tac_toe, highest=True), name="high")
    r = play_match(tic_tac_toe, low, high, jax.random.PRNGKey(1), num_games=8, max_steps=9)
    assert r.a_first.sum() == 4 and r.as_first.games == r.as_second.games == 4
    np.testing.assert_array_equal(r.actions[0], np.where(r.a_first, 0, 8))
    np.testing.assert_array_equal(r.actions[1], np.where(r.a_first, 8, 0))


def test_a_policy_that_takes_acting_is_told_the_games_it_moves_in(tic_tac_toe):
    low = make_agent(FixedPreference(tic_tac_toe), name="low")
    acting = make_agent(ActingOnly(tic_tac_toe), name="acting")
    high = make_agent(FixedPreference(tic_tac_toe, highest=True), name="high")
    key = jax.random.PRNGKey(1)
    want = play_match(tic_tac_toe, low, high, key, num_games=8, max_steps=9)
    got = play_match(tic_tac_toe, acting, high, key, num_games=8, max_steps=9)
    assert got.illegal_moves == 0  # every -1 fell where the other agent moved, or after the end
    np.testing.assert_array_equal(got.actions, want.actions)


def test_perfect_agent_never_loses_to_random_from_either_side(tic_tac_toe):
    r = play_match(
        tic_tac_toe,
        perfect_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(2),
        num_games=256,
    )
    assert r.losses == 0 and r.as_first.losses == 0 and r.as_second.losses == 0
    assert r.as_first.wins > r.as_first.games * 0.8
    assert r.illegal_moves == 0


def test_perfect_agent_draws_against_itself(tic_tac_toe):
    p = perfect_agent(tic_tac_toe)
    r = play_match(tic_tac_toe, p, p, jax.random.PRNGKey(3), num_games=64, max_steps=9)
    assert r.draws == 64 and r.illegal_moves == 0
    assert len({tuple(g) for g in r.actions.T}) > 8  # ties broken at random: diverse games


@pytest.mark.parametrize("env_id", ["tic_tac_toe", "connect_four", "othello"])
def test_random_and_network_agents_never_play_illegal_moves(env_id):
    env = envs.make(env_id)
    bias = jnp.arange(env.num_actions, dtype=jnp.float32)  # prefers the last actions
    net = network_agent(env, CountingEvalFn(), bias, sample=False, name="net")
    r = play_match(env, net, random_agent(env), jax.random.PRNGKey(4), num_games=4, max_steps=24)
    assert r.illegal_moves == 0
    assert_every_recorded_move_legal(env, r)


@pytest.mark.parametrize("action", [0, -1, 9])
def test_illegal_actions_are_counted_and_replaced_by_legal_ones(tic_tac_toe, action):
    bad = make_agent(AlwaysAction(9, action), name="bad")
    r = play_match(
        tic_tac_toe, bad, random_agent(tic_tac_toe), jax.random.PRNGKey(5), num_games=8, max_steps=9
    )
    assert r.illegal_moves_b == 0
    if action == 0:
        assert 0 < r.illegal_moves_a < (r.lengths.sum() + 8) // 2
    else:  # every move of the bad agent was illegal
        moves_a = np.where(r.a_first, (r.lengths + 1) // 2, r.lengths // 2)
        assert r.illegal_moves_a == moves_a.sum()
    assert_every_recorded_move_legal(tic_tac_toe, r)
    assert r.num_truncated == 0  # no game ended early by pgx's illegal-move penalty either


def test_opening_moves_are_random_and_not_charged_to_agents(tic_tac_toe):
    low = make_agent(FixedPreference(tic_tac_toe), name="low")
    high = make_agent(FixedPreference(tic_tac_toe, highest=True), name="high")
    plain = play_match(tic_tac_toe, low, high, jax.random.PRNGKey(6), num_games=16, max_steps=9)
    opened = play_match(
        tic_tac_toe, low, high, jax.random.PRNGKey(6), num_games=16, max_steps=9, opening_moves=2
    )
    assert len({tuple(g) for g in plain.actions.T}) == 2  # deterministic agents: two games
    assert len({tuple(g) for g in opened.actions.T}) > 4
    bad = make_agent(AlwaysAction(9, -1), name="bad")
    all_random = play_match(
        tic_tac_toe, bad, bad, jax.random.PRNGKey(6), num_games=16, max_steps=9, opening_moves=9
    )
    assert all_random.illegal_moves == 0


def test_pairs_of_games_share_their_random_openings_with_the_seats_swapped(tic_tac_toe):
    """Games 2k and 2k + 1 open with the same random moves, agent A first in one and second in
    the other, so that an opening that favours a side is played once from each seat."""
    bad = make_agent(AlwaysAction(9, -1), name="bad")
    r = play_match(
        tic_tac_toe, bad, bad, jax.random.PRNGKey(3), num_games=16, max_steps=9, opening_moves=3
    )
    openings = [tuple(g[:3]) for g in r.actions.T]
    assert all(openings[2 * k] == openings[2 * k + 1] for k in range(8))
    assert len(set(openings)) > 4  # and the pairs differ from each other
    assert list(r.a_first[::2]) == [True] * 8 and not r.a_first[1::2].any()
    assert (r.game_keys[::2] == r.game_keys[1::2]).all()


def test_max_steps_truncates_unfinished_games_as_draws(tic_tac_toe):
    r = play_match(
        tic_tac_toe,
        random_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(7),
        num_games=8,
        max_steps=3,
    )
    assert r.num_truncated == 8 and r.draws == 8
    assert np.all(r.lengths == 3) and r.actions.shape == (3, 8)


def test_second_match_with_new_params_does_not_recompile(tic_tac_toe):
    eval_fn = CountingEvalFn()
    opponent = random_agent(tic_tac_toe)
    key = jax.random.PRNGKey(8)
    first = network_agent(tic_tac_toe, eval_fn, jnp.arange(9.0), name="net")
    r1 = play_match(tic_tac_toe, first, opponent, key, num_games=8, max_steps=9)
    traces = eval_fn.traces
    second = network_agent(tic_tac_toe, eval_fn, -jnp.arange(9.0), name="net2")
    r2 = play_match(tic_tac_toe, second, opponent, key, num_games=8, max_steps=9)
    assert eval_fn.traces == traces
    assert not np.array_equal(r1.actions, r2.actions)  # the new params were used


def test_one_player_game_records_returns():
    env = envs.make("2048")
    r = play_match(env, random_agent(env), None, jax.random.PRNGKey(9), num_games=3, max_steps=6)
    assert r.returns.shape == (3, 1) and r.name_b == ""
    assert r.wins == r.draws == r.losses == 0 and np.isnan(r.score)
    assert r.mean_return_a == pytest.approx(r.returns[:, 0].mean())
    assert np.all(r.lengths <= 6) and r.illegal_moves == 0


@dataclasses.dataclass(frozen=True)
class ConstantTorque:
    """A continuous policy: the same float action `[B, 1]` everywhere."""

    torque: float

    def __call__(self, params, states, key):
        batch = jax.tree_util.tree_leaves(states)[0].shape[0]
        return AgentOutput(
            jnp.full((batch, 1), self.torque), jnp.zeros((batch, 1)), jnp.zeros(batch)
        )


def test_a_continuous_action_agent_plays_its_float_actions_as_given():
    env = envs.make("gymnax:Pendulum-v1")
    key = jax.random.PRNGKey(3)
    results = {
        torque: play_match(
            env, make_agent(ConstantTorque(torque), name="c"), None, key, num_games=2, max_steps=5
        )
        for torque in (0.0, 0.4, 1.7, -0.4)
    }
    for torque, r in results.items():
        assert r.actions.shape == (5, 2, 1) and r.actions.dtype == np.float32
        np.testing.assert_allclose(r.actions, torque, rtol=1e-6)
        assert r.illegal_moves == 0 and np.all(r.lengths == 5)

    # replayed by hand with the same per-game keys, the summed rewards agree
    def rollout(game_key, torque):
        def keys_at(t):
            return jax.random.fold_in(game_key, t)

        state, md = env.init(keys_at(0))
        total = 0.0
        for t in range(5):
            state, md = env.step(state, jnp.full((1,), torque, jnp.float32), keys_at(t + 1))
            total += float(md.rewards[0])
        return total

    r = results[0.4]
    expected = [rollout(jnp.asarray(k), 0.4) for k in r.game_keys]
    np.testing.assert_allclose(r.returns[:, 0], expected, rtol=1e-5)
    assert len({round(r.mean_return_a, 4) for r in results.values()}) == 4
    # a record replays whole: a negative torque is no end marker, a float is not truncated
    states = replay_game(env, results[-0.4], 1)
    assert len(states) == 6
    by_hand = env.init(jax.random.fold_in(jnp.asarray(results[-0.4].game_keys[1]), 0))[0]
    for t in range(5):
        key = jax.random.fold_in(jnp.asarray(results[-0.4].game_keys[1]), t + 1)
        by_hand, _ = env.step(by_hand, jnp.full((1,), -0.4, jnp.float32), key)
    for x, y in zip(jax.tree.leaves(states[-1]), jax.tree.leaves(by_hand), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)


def test_a_continuous_action_match_refuses_random_openings():
    env = envs.make("gymnax:Pendulum-v1")
    agent = make_agent(ConstantTorque(0.0), name="c")
    with pytest.raises(ValueError, match="opening_moves=0"):
        play_match(env, agent, None, jax.random.PRNGKey(0), num_games=2, opening_moves=1)


def test_play_match_validates_arguments(tic_tac_toe):
    a = random_agent(tic_tac_toe)
    key = jax.random.PRNGKey(0)
    for kwargs, name in [
        ({"num_games": 0}, "num_games"),
        ({"num_games": 3}, "num_games"),
        ({"num_games": 2, "max_steps": 0}, "max_steps"),
        ({"num_games": 2, "opening_moves": -1}, "opening_moves"),
    ]:
        with pytest.raises(ValueError, match=name):
            play_match(tic_tac_toe, a, a, key, **kwargs)
    with pytest.raises(ValueError, match="agent_b"):
        play_match(tic_tac_toe, a, None, key, num_games=2)


def test_matches_with_a_searching_agent_compile_with_the_search_compiler_options(monkeypatch):
    """A match compiles with `turbozero.search.compiler_options()` when an agent searches and
    without them otherwise: with options XLA rejects, only the search match fails to compile."""
    import turbozero.arena.match as match_module
    from turbozero.arena import rollout_mcts_agent

    env = envs.make("tic_tac_toe")
    wrong = {"xla_gpu_enable_command_buffer": "WHILE,LOOPS"}
    monkeypatch.setattr(match_module, "compiler_options", lambda: wrong)
    match_module._match_program.cache_clear()
    try:
        plain = play_match(
            env, random_agent(env), random_agent(env), jax.random.PRNGKey(0), num_games=2
        )
        assert plain.num_games == 2
        searching = rollout_mcts_agent(env, num_simulations=2)
        with pytest.raises(jax.errors.JaxRuntimeError, match="LOOPS"):
            play_match(env, searching, random_agent(env), jax.random.PRNGKey(0), num_games=2)
    finally:
        match_module._match_program.cache_clear()
