"""The jumanji adapter: its conformance, the games marked deterministic, flat multi-discrete
actions and users' reward functions."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero import envs
from turbozero.envs.jumanji import DETERMINISTIC

pytest.importorskip("jumanji")

#: the games of the AlphaZero presets; the other marked games are checked by `make check`
PRESET_GAMES = ("Minesweeper-v0", "Maze-v0")


def _play_random(env, state, md, key, num_steps):
    """`num_steps` uniformly random legal moves from `state` (under `lax.scan`): the states."""

    def body(carry, k):
        state, md = carry
        k_act, k_step = jax.random.split(k)
        action = jax.random.categorical(k_act, jnp.where(md.action_mask, 0.0, -jnp.inf))
        state, md = env.step(state, action.astype(jnp.int32), k_step)
        return (state, md), state

    return jax.lax.scan(body, (state, md), jax.random.split(key, num_steps))[1]


@pytest.mark.parametrize("game", PRESET_GAMES)
def test_conformance_check_passes_on_the_preset_puzzles(game):
    envs.check(envs.make(f"jumanji:{game}"), batch_size=2, num_steps=24)


def test_conformance_check_passes_with_a_users_reward():
    envs.check(
        envs.make("jumanji:Minesweeper-v0", reward_fn="uncovered_share"), batch_size=2, num_steps=24
    )


def _marked(game):
    return game if game in PRESET_GAMES else pytest.param(game, marks=pytest.mark.slow)


@pytest.mark.parametrize("game", [_marked(g) for g in sorted(DETERMINISTIC)])
def test_marked_games_step_alike_whatever_key_their_state_holds(game):
    """jumanji keeps its randomness in the state: a game marked deterministic must play the
    same moves into the same states when the key held in its state (and the key `step` is
    given) is another."""
    env = envs.make(f"jumanji:{game}")
    assert env.deterministic

    @jax.jit
    def both(key):
        state, md = env.init(key)
        other = state.replace(inner=state.inner.replace(key=jax.random.fold_in(key, 7)))
        a = _play_random(env, state, md, jax.random.fold_in(key, 1), 24)
        b = _play_random(env, other, md, jax.random.fold_in(key, 1), 24)

        def without_key(s):
            return s.replace(inner=s.inner.replace(key=jnp.zeros_like(s.inner.key)))

        return jax.vmap(without_key)(a), jax.vmap(without_key)(b), state.inner.key, other.inner.key

    a, b, key_a, key_b = both(jax.random.PRNGKey(0))
    assert not np.array_equal(key_a, key_b)
    for path, x, y in zip(
        [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(a)],
        jax.tree_util.tree_leaves(a),
        jax.tree_util.tree_leaves(b),
        strict=True,
    ):
        np.testing.assert_array_equal(x, y, err_msg=f"{game}: {path} depends on the state's key")


def test_games_whose_steps_draw_from_the_states_key_are_not_marked():
    """2048's new tile comes from the key in its state: marking it would let subtree reuse keep
    the tile one draw gave."""
    env = envs.make("jumanji:Game2048-v1")
    assert not env.deterministic
    state, md = env.init(jax.random.PRNGKey(0))
    other = state.replace(inner=state.inner.replace(key=jax.random.PRNGKey(99)))
    legal = int(jnp.argmax(md.action_mask))
    a, _ = env.step(state, jnp.int32(legal), jax.random.PRNGKey(0))
    b, _ = env.step(other, jnp.int32(legal), jax.random.PRNGKey(0))
    assert not np.array_equal(a.inner.board, b.inner.board)


@pytest.mark.parametrize(
    ("game", "components"),
    [("Minesweeper-v0", (10, 10)), ("Sudoku-very-easy-v0", (9, 9, 9)), ("Snake-v1", None)],
)
def test_action_components_are_the_multi_discrete_sizes_raveled_row_major(game, components):
    env = envs.make(f"jumanji:{game}")
    assert env.action_components == components
    if components is None:
        return
    assert math.prod(components) == env.num_actions
    # the flat index of a joint action steps the cell jumanji's own action names
    jumanji_env = env.raw
    state, _ = env.init(jax.random.PRNGKey(0))
    joint = jnp.array([c - 1 for c in components], jnp.int32) // 2
    flat = jnp.ravel_multi_index(tuple(joint), components, mode="clip")
    ours, _ = env.step(state, flat.astype(jnp.int32), jax.random.PRNGKey(0))
    theirs, _ = jumanji_env.step(state.inner, joint)
    np.testing.assert_array_equal(ours.inner.board, theirs.board)


def test_action_components_must_multiply_to_the_number_of_actions():
    env = envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match=r"action_components=\(3, 4\) must be the component"):
        dataclasses.replace(env, action_components=(3, 4))
    assert dataclasses.replace(env, action_components=(3, 3)).action_components == (3, 3)


def _first_clicks(env, cells):
    state, md = env.init(jax.random.PRNGKey(1))  # mines at 3, 11, 18, 54, 70, 86, 88, 93-95
    rewards = []
    for cell in cells:
        state, md = env.step(state, jnp.int32(cell), jax.random.PRNGKey(0))
        rewards.append(float(md.rewards[0]))
    return state, rewards


def test_uncovered_share_rewards_each_move_with_the_safe_share_of_the_board_uncovered():
    env = envs.make("jumanji:Minesweeper-v0", reward_fn="uncovered_share")
    state, rewards = _first_clicks(env, [0, 1, 2, 3])  # three safe cells, then a mine
    assert rewards == pytest.approx([0.01, 0.02, 0.03, 0.03])
    assert bool(state.metadata.terminated)
    plain = envs.make("jumanji:Minesweeper-v0")
    assert _first_clicks(plain, [0, 1, 2, 3])[1] == [1.0, 1.0, 1.0, 0.0]  # jumanji's own


def test_reward_fn_of_jumanjis_two_argument_form_sees_the_state_before_the_move():
    """The notebook's `reward_fn(state, action)` (jumanji's `RewardFn`): the board before the
    move, and the action as jumanji's `[row, col]`."""
    seen = []

    def notebook_reward(state, action):
        seen.append(action.shape)
        return jnp.mean(state.board >= 0) + 10.0 * action[1]

    env = envs.make("jumanji:Minesweeper-v0", reward_fn=notebook_reward)
    _, rewards = _first_clicks(env, [0, 1, 2])
    assert rewards == pytest.approx([0.0, 10.01, 20.02])
    assert (2,) in seen


def test_reward_fn_by_import_path_and_the_general_form_get_both_states():
    env = envs.make("jumanji:Minesweeper-v0", reward_fn="turbozero.envs.jumanji:uncovered_share")
    assert _first_clicks(env, [0, 1])[1] == pytest.approx([0.01, 0.02])


@pytest.mark.parametrize(
    ("reward_fn", "error"),
    [
        ("uncovered", r"unknown reward_fn 'uncovered': registered ones are \['uncovered_share'\]"),
        ("no_such_module_zz:f", r"reward_fn 'no_such_module_zz:f' cannot be imported"),
        ("turbozero.envs.jumanji:nothing", r"cannot be imported \(AttributeError"),
        (42, "reward_fn must be callable, got int"),
        (lambda state: 0.0, r"takes 1 positional argument\(s\); it must take"),
        (lambda s, a, n: jnp.zeros(2), r"returns shape \(2,\) for jumanji:Minesweeper-v0"),
        (lambda s, a, n: s.no_such_field, "fails on jumanji:Minesweeper-v0's states"),
    ],
)
def test_bad_reward_fns_are_refused_when_the_adapter_is_built(reward_fn, error):
    with pytest.raises(ValueError, match=error):
        envs.make("jumanji:Minesweeper-v0", reward_fn=reward_fn)


def test_reward_fn_is_refused_for_games_that_are_not_jumanjis():
    with pytest.raises(ValueError, match="reward_fn is an option of jumanji's games"):
        envs.make("2048", reward_fn="uncovered_share")


def test_one_hot_turns_small_integer_fields_into_flags_and_keeps_the_others():
    plain = envs.make("jumanji:Minesweeper-v0")
    flags = envs.make("jumanji:Minesweeper-v0", one_hot=True)
    assert plain.observation_shape == (102,)  # board 10 x 10, num_mines, step_count
    assert flags.observation_shape == (1002,)  # the board's 10 values (-1 to 8) as flags
    key = jax.random.PRNGKey(4)
    s_plain, _ = plain.init(key)
    s_flags, _ = flags.init(key)
    for action in (0, 37, 99):
        s_plain, _ = plain.step(s_plain, jnp.int32(action), key)
        s_flags, _ = flags.step(s_flags, jnp.int32(action), key)
    board = np.asarray(plain.observe(s_plain))[:100].astype(int)
    cells = np.asarray(flags.observe(s_flags))[:1000].reshape(100, 10)
    np.testing.assert_array_equal(cells, np.eye(10)[board + 1])  # one flag, at value - (-1)
    np.testing.assert_array_equal(  # num_mines (0 to 99: too many values) stays a number
        np.asarray(flags.observe(s_flags))[1000:], np.asarray(plain.observe(s_plain))[100:]
    )


def test_one_hot_is_refused_for_games_that_are_not_jumanjis():
    with pytest.raises(ValueError, match="one_hot is an option of jumanji"):
        envs.make("gymnax:CartPole-v1", one_hot=True)
