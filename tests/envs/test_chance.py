"""Games with chance: the split step (decide, probabilities, resolve, sample_outcome) of pgx's
2048 and backgammon and of users' games, and the conformance check's chance rules."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.envs.chance_games import (
    GAMBLE_SINGLE_SAMPLE_PICKS_BEST,
    ChanceGame,
    dice_game,
    gamble_game,
)
from turbozero import envs
from turbozero.envs.chance import afterstate_shape, has_chance_event
from turbozero.search.tree import state_codec
from turbozero.types import StepMetadata


def _compiled(env):
    """`env` with its step and chance split compiled, so that the tests calling them one
    position at a time compile each once (op by op, pgx's backgammon compiles about a hundred
    programs a call); the rules they check are the same under `jax.jit`."""
    ch = env.chance
    chance = ch._replace(
        decide=jax.jit(ch.decide),
        probabilities=jax.jit(ch.probabilities),
        resolve=jax.jit(ch.resolve),
        sample_outcome=jax.jit(ch.sample_outcome),
    )
    return dataclasses.replace(env, init=jax.jit(env.init), step=jax.jit(env.step), chance=chance)


@pytest.fixture(scope="module")
def play2048():
    return _compiled(envs.make("2048"))


@pytest.fixture(scope="module")
def backgammon():
    return _compiled(envs.make("backgammon"))


def _trees_equal(a, b) -> bool:
    same = jax.tree.map(lambda x, y: np.array_equal(np.asarray(x), np.asarray(y), True), a, b)
    return all(jax.tree_util.tree_leaves(same))


def _split_step(env):
    """`step` and `resolve(a, sample_outcome(a, key))`, `a = decide(state, action)`, for a batch:
    pgx's result, and whether the split's equals it leaf for leaf (compared in the program)."""
    ch = env.chance

    def both(state, action, key):
        after = ch.decide(state, action)
        return env.step(state, action, key), ch.resolve(after, ch.sample_outcome(after, key))

    def compared(states, actions, keys):
        stepped, split = jax.vmap(both)(states, actions, keys)
        same = jax.tree.map(lambda x, y: jnp.array_equal(x, y, equal_nan=True), stepped, split)
        return stepped, jnp.all(jnp.stack(jax.tree_util.tree_leaves(same)))

    return jax.jit(compared)


@pytest.mark.parametrize("game, num_steps", [("2048", 40), ("backgammon", 60)])
def test_pgx_split_is_pgx_step_bit_for_bit(game, num_steps, request):
    """Random games, legal moves with now and then any move (an illegal one ends the game with
    pgx's penalty, after its draw): every state and metadata equal, leaf for leaf."""
    env = request.getfixturevalue({"2048": "play2048", "backgammon": "backgammon"}[game])
    both = _split_step(env)
    B = 8
    key = jax.random.PRNGKey(7)
    state, md = jax.jit(jax.vmap(env.init))(jax.random.split(key, B))
    for t in range(num_steps):
        key, k_act, k_any, k_step = jax.random.split(key, 4)
        allowed = md.action_mask | (jax.random.uniform(k_any, md.action_mask.shape) < 0.01)
        action = jax.random.categorical(k_act, jnp.where(allowed, 0.0, -jnp.inf))
        stepped, same = both(state, action.astype(jnp.int32), jax.random.split(k_step, B))
        assert bool(same), f"step {t}"
        state, md = stepped


@pytest.mark.parametrize("game", ["2048", "backgammon", "dice", "gamble"])
def test_conformance_check_passes_on_games_with_chance(game, request):
    if game in ("dice", "gamble"):
        env = {"dice": dice_game, "gamble": gamble_game}[game]().env
    else:
        env = request.getfixturevalue({"2048": "play2048", "backgammon": "backgammon"}[game])
    envs.check(env, batch_size=2, num_steps=12)


def _broken(env, **changes):
    return dataclasses.replace(env, chance=env.chance._replace(**changes))


def _check_violations(env, **kwargs) -> dict[str, str]:
    with pytest.raises(envs.EnvCheckError) as info:
        envs.check(env, **kwargs)
    return info.value.violations


def _uniform_cells_2048(after):
    """Probabilities blind to occupied cells: a 2 or a 4 on any of the 16 cells."""
    cells = jnp.full((16,), 1 / 16, jnp.float32)
    blind = jnp.concatenate([0.9 * cells, 0.1 * cells])
    return jnp.where(after.chance, blind, jnp.zeros(32).at[0].set(1.0))


@pytest.mark.parametrize("rule", ["not_normalized", "resolve_mismatch", "impossible_outcome"])
def test_check_names_a_broken_2048_split(play2048, rule):
    ch = play2048.chance
    if rule == "not_normalized":  # half the mass missing
        bad = _broken(play2048, probabilities=lambda a: 0.5 * ch.probabilities(a))
    elif rule == "resolve_mismatch":  # a 4 where the step put a 2, and the reverse
        bad = _broken(play2048, resolve=lambda a, o: ch.resolve(a, (o + 16) % 32))
    else:  # mass on occupied cells, which the step never fills
        bad = _broken(play2048, probabilities=_uniform_cells_2048)
    violations = _check_violations(bad, batch_size=2, num_steps=8)
    assert f"chance_{rule}" in violations
    if rule != "impossible_outcome":  # (whose sampler then also disagrees with probabilities)
        assert list(violations) == [f"chance_{rule}"]


def test_check_names_a_sampler_that_draws_impossible_outcomes(play2048):
    def anywhere(after, key):  # a cell of the 16, taken or not
        return jnp.where(after.chance, jax.random.randint(key, (), 0, 32), 0).astype(jnp.int32)

    violations = _check_violations(
        _broken(play2048, sample_outcome=anywhere), batch_size=2, num_steps=4
    )
    assert "chance_sampler_mismatch" in violations


def _dice_broken(part: str):
    env = dice_game().env
    ch = env.chance
    if part == "shapes":  # one outcome too many
        return _broken(env, probabilities=lambda a: jnp.append(ch.probabilities(a), 0.0))
    if part == "negative_probability":  # sums to one, but -0.3 on an outcome
        shift = jnp.array([0.3, -0.3, 0.0])
        return _broken(env, probabilities=lambda a: ch.probabilities(a) + shift)

    def python_branch(state, action):
        if action > 0:  # a Python branch on a traced action
            return ch.decide(state, action)
        return ch.decide(state, action)

    return _broken(env, decide=python_branch)


@pytest.mark.parametrize("rule", ["shapes", "negative_probability", "not_jittable"])
def test_check_names_a_broken_split_of_a_users_game(rule):
    violations = _check_violations(_dice_broken(rule), batch_size=4, num_steps=2)
    assert f"chance_{rule}" in violations
    if rule == "not_jittable":
        assert list(violations) == ["chance_not_jittable"]


@pytest.mark.parametrize("make_game", [dice_game, gamble_game], ids=["dice", "gamble"])
def test_chance_games_expected_values_are_what_their_split_gives(make_game):
    game: ChanceGame = make_game()
    ch = game.env.chance
    state, _ = game.env.init(jax.random.PRNGKey(0))
    A, C = game.probabilities.shape
    assert ch.num_outcomes == C
    for a in range(A):
        after = ch.decide(state, jnp.int32(a))
        p = np.asarray(ch.probabilities(after))
        np.testing.assert_array_equal(p, game.probabilities[a])
        rewards = [float(ch.resolve(after, jnp.int32(o))[1].rewards[0]) for o in range(C)]
        assert np.dot(p, rewards) == pytest.approx(game.expected[a], abs=1e-6)
    assert game.best_action == 1


def test_expected_values_by_hand():
    np.testing.assert_allclose(dice_game().expected, [1.0, 1.4, 1.3], atol=1e-6)
    np.testing.assert_allclose(gamble_game().expected, [1.0, 1.5], atol=1e-6)


def test_gamble_sure_action_has_no_chance_event_and_a_single_draw_rarely_finds_the_best():
    env = gamble_game().env
    ch = env.chance
    state, _ = env.init(jax.random.PRNGKey(0))
    sure, risky = ch.decide(state, jnp.int32(0)), ch.decide(state, jnp.int32(1))
    assert not bool(has_chance_event(ch.probabilities(sure)))
    assert float(ch.resolve(sure, jnp.int32(0))[1].rewards[0]) == 1.0
    assert bool(has_chance_event(ch.probabilities(risky)))
    keys = jax.random.split(jax.random.PRNGKey(1), 20_000)
    wins = jax.vmap(ch.sample_outcome, in_axes=(None, 0))(risky, keys) == 1
    assert float(wins.mean()) == pytest.approx(GAMBLE_SINGLE_SAMPLE_PICKS_BEST, abs=0.01)


def test_2048_outcomes_are_a_2_or_a_4_on_an_empty_cell(play2048):
    ch = play2048.chance
    state, md = jax.jit(play2048.init)(jax.random.PRNGKey(3))
    action = jnp.int32(int(np.argmax(np.asarray(md.action_mask))))
    after = jax.jit(ch.decide)(state, action)
    p = np.asarray(jax.jit(ch.probabilities)(after))
    assert p.shape == (32,) and p.dtype == np.float32
    empty = np.asarray(after.state._board) == 0
    n = empty.sum()
    np.testing.assert_allclose(p[:16], np.where(empty, 0.9 / n, 0.0), rtol=1e-6)
    np.testing.assert_allclose(p[16:], np.where(empty, 0.1 / n, 0.0), rtol=1e-6)
    assert p.sum() == pytest.approx(1.0, abs=1e-6)
    cell = int(np.flatnonzero(empty)[0])
    resolve = jax.jit(ch.resolve)
    four, _ = resolve(after, jnp.int32(16 + cell))
    assert int(four._board[cell]) == 2  # pgx stores log2: a 4
    two, _ = resolve(after, jnp.int32(cell))
    assert int(two._board[cell]) == 1


def test_2048_reward_of_the_merge_is_reported_by_resolve_whatever_the_tile(play2048):
    ch = play2048.chance
    state, _ = play2048.init(jax.random.PRNGKey(0))
    board = jnp.zeros(16, jnp.int32).at[0].set(1).at[1].set(1)  # two 2s side by side
    state = state.replace(_board=board, legal_action_mask=jnp.ones(4, bool))
    after = ch.decide(state, jnp.int32(0))  # left: they merge into a 4
    for outcome in (5, 16 + 7):
        _, md = ch.resolve(after, jnp.int32(outcome))
        assert float(md.rewards[0]) == 4.0 and int(md.step) == 1


def test_backgammon_rolls_only_when_the_turn_passes(backgammon):
    ch = backgammon.chance
    state, md = backgammon.init(jax.random.PRNGKey(0))
    assert int(state._dice[0]) != int(state._dice[1])  # pgx's opening roll is never a double
    first = jnp.int32(int(np.argmax(np.asarray(md.action_mask))))
    after = ch.decide(state, first)  # one die played, one left: the same player moves again
    np.testing.assert_array_equal(ch.probabilities(after), np.eye(36)[0])
    assert not bool(has_chance_event(ch.probabilities(after)))
    state, md = ch.resolve(after, jnp.int32(0))
    second = jnp.int32(int(np.argmax(np.asarray(md.action_mask))))
    after = ch.decide(state, second)  # both dice played: the turn passes and the dice roll
    np.testing.assert_allclose(ch.probabilities(after), np.full(36, 1 / 36), rtol=1e-6)
    mover = int(state.current_player)
    rolled = {}
    for d0, d1 in ((0, 3), (3, 0)):  # a 1 and a 4, in both orders
        rolled[d0, d1], rolled_md = ch.resolve(after, jnp.int32(6 * d0 + d1))
        assert int(rolled_md.cur_player_id) == 1 - mover
        np.testing.assert_array_equal(rolled[d0, d1]._dice, [d0, d1])
    # the two orders play alike: same board, same legal moves
    a, b = rolled[0, 3], rolled[3, 0]
    np.testing.assert_array_equal(a.legal_action_mask, b.legal_action_mask)
    np.testing.assert_array_equal(a.observation, b.observation)


@pytest.mark.parametrize("game", ["2048", "backgammon"])
def test_a_finished_game_has_no_chance_event_and_stays_as_it_is(game, request):
    env = request.getfixturevalue({"2048": "play2048", "backgammon": "backgammon"}[game])
    ch = env.chance
    state, _ = env.init(jax.random.PRNGKey(0))
    over = state.replace(  # as pgx leaves a finished game: every action marked legal
        terminated=jnp.bool_(True),
        rewards=jnp.ones_like(state.rewards),
        legal_action_mask=jnp.ones_like(state.legal_action_mask),
    )
    after = ch.decide(over, jnp.int32(0))
    assert not bool(has_chance_event(ch.probabilities(after)))
    assert int(ch.sample_outcome(after, jax.random.PRNGKey(1))) == 0
    resolved, md = ch.resolve(after, jnp.int32(0))
    stepped, _ = env.step(over, jnp.int32(0), jax.random.PRNGKey(1))
    assert _trees_equal(resolved, stepped)
    assert not np.any(np.asarray(md.rewards))


@pytest.mark.parametrize("game", ["2048", "backgammon", "dice"])
def test_afterstates_are_fixed_shape_pytrees_that_pack_into_tree_rows(game, request):
    """A search stores afterstates as it stores states: `state_codec`'s word rows hold them
    exactly (an env whose `init` returns an afterstate stands in for a codec of afterstates)."""
    if game == "dice":
        env = dice_game().env
    else:
        env = request.getfixturevalue({"2048": "play2048", "backgammon": "backgammon"}[game])
    ch = env.chance

    @jax.jit
    def afterstates(keys):
        state, md = jax.vmap(env.init)(keys)
        return jax.vmap(ch.decide)(state, jnp.argmax(md.action_mask, axis=-1).astype(jnp.int32))

    after = afterstates(jax.random.split(jax.random.PRNGKey(0), 3))
    shape = afterstate_shape(env)
    assert jax.tree_util.tree_structure(shape) == jax.tree_util.tree_structure(after)
    leaves = zip(jax.tree_util.tree_leaves(shape), jax.tree_util.tree_leaves(after), strict=True)
    for s, x in leaves:
        assert (s.shape, s.dtype) == (x.shape[1:], x.dtype)

    def init_after(key):
        s, m = env.init(key)
        return ch.decide(s, jnp.int32(0)), m

    codec = state_codec(dataclasses.replace(env, init=init_after))
    assert codec.width is not None
    assert _trees_equal(jax.jit(lambda x: codec.unpack(codec.pack(x)))(after), after)


def test_a_users_step_with_its_own_draw_is_checked_against_its_sampler():
    def md(reward, over):
        return StepMetadata(
            rewards=jnp.reshape(jnp.asarray(reward, jnp.float32), (1,)),
            action_mask=jnp.ones((2,), bool),
            terminated=jnp.asarray(over, bool),
            cur_player_id=jnp.int32(0),
        )

    def init_fn(key):
        return jnp.int32(0), md(0.0, False)

    def decide_fn(state, action):
        return jnp.asarray(action, jnp.int32)

    def probabilities_fn(action):
        return jnp.where(action == 1, jnp.array([0.5, 0.5]), jnp.array([1.0, 0.0]))

    def resolve_fn(action, outcome):
        return jnp.int32(1), md(outcome.astype(jnp.float32), True)

    def flip(action, key):  # the step's own draw: heads (1) with p = 0.5 after action 1
        return jnp.where(action == 1, jax.random.bernoulli(key).astype(jnp.int32), 0)

    def step_fn(state, action, key):
        return resolve_fn(action, flip(action, key))

    game = dict(
        init_fn=init_fn,
        step_fn=step_fn,
        observe_fn=lambda s: jnp.zeros((1,)),
        decide_fn=decide_fn,
        probabilities_fn=probabilities_fn,
        resolve_fn=resolve_fn,
        name="coin",
    )
    envs.check(envs.from_functions(**game, sample_fn=flip), batch_size=8, num_steps=2)
    # the default sampler (a draw from probabilities_fn) is not the step's draw
    violations = _check_violations(envs.from_functions(**game), batch_size=8, num_steps=2)
    assert list(violations) == ["chance_resolve_mismatch"]


def test_a_users_split_must_be_whole_and_the_game_not_deterministic():
    game = dice_game().env
    init_fn = game.init  # never traced: the arguments are refused first
    with pytest.raises(ValueError, match="gives decide_fn without probabilities_fn, resolve_fn"):
        envs.from_functions(init_fn=init_fn, observe_fn=game.observe, decide_fn=lambda s, a: a)
    with pytest.raises(TypeError, match="needs step_fn, or decide_fn"):
        envs.from_functions(init_fn=init_fn, observe_fn=game.observe)
    with pytest.raises(ValueError, match="deterministic=True"):
        dataclasses.replace(game, deterministic=True)


def test_2048_episode_stats_read_the_largest_tile_and_the_1024_and_2048_marks(play2048):
    state, _ = play2048.init(jax.random.PRNGKey(0))
    for exponents, tile, r1024, r2048 in (
        ([0] * 16, 0.0, 0.0, 0.0),
        ([1, 2] + [0] * 14, 4.0, 0.0, 0.0),
        ([9, 10] + [0] * 14, 1024.0, 1.0, 0.0),
        ([11, 3, 12] + [0] * 13, 4096.0, 1.0, 1.0),
    ):
        board = jnp.asarray(exponents, state._board.dtype)
        stats = play2048.episode_stats(state.replace(_board=board))
        assert float(stats["max_tile"]) == tile
        assert float(stats["reached_1024"]) == r1024
        assert float(stats["reached_2048"]) == r2048
    assert envs.make("backgammon").episode_stats is None


def test_play_match_reports_each_games_stats_from_its_last_state(play2048):
    from turbozero.arena import play_match
    from turbozero.arena.agents import random_agent

    r = play_match(play2048, random_agent(play2048), None, jax.random.PRNGKey(1), num_games=8)
    assert set(r.stats) == {"max_tile", *(f"reached_{2**e}" for e in (10, 11, 12, 13))}
    tiles = r.stats["max_tile"]
    assert tiles.shape == (8,) and np.all(tiles >= 4)
    assert np.all(np.log2(tiles) == np.round(np.log2(tiles)))  # powers of two
    # a game's score is the sum of its merges, and making the largest tile merged into it
    assert np.all(r.returns[:, 0] >= tiles)
    np.testing.assert_array_equal(r.stats["reached_1024"], (tiles >= 1024).astype(float))


def test_without_chance_hides_the_split_and_marks_the_game_random(play2048):
    from turbozero.envs.chance import without_chance

    sampled = without_chance(play2048)
    assert sampled.chance is None and not sampled.deterministic
    assert sampled.step is play2048.step and sampled.episode_stats is play2048.episode_stats
    tic = envs.make("tic_tac_toe")
    assert without_chance(tic) is tic
