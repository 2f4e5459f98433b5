"""The environment contract: ids, conformance check, users' own games."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.games import opening
from turbozero import envs
from turbozero.types import StepMetadata


@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four", "2048"])
def test_conformance_check_passes_on_advertised_games(game):
    envs.check(envs.make(game), batch_size=2, num_steps=12)


def test_unknown_id_lists_close_matches():
    with pytest.raises(ValueError, match="Did you mean 'connect_four'"):
        envs.make("conect_four")


def test_imperfect_information_game_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="imperfect information"):
        envs.make("kuhn_poker")


def test_step_metadata_truncated_defaults_to_false():
    md = StepMetadata(
        rewards=jnp.zeros(2), action_mask=jnp.ones(3, bool), terminated=False, cur_player_id=0
    )
    assert not bool(md.truncated)


def _counter_game(*, bad: str = ""):
    """A 1-player game: count to 3 by choosing action 1; action 0 ends the game."""

    def md(count, done, reward):
        mask = jnp.ones((2,), bool)
        if bad == "no_legal_action":
            mask = jnp.zeros((2,), bool)
        rewards = jnp.array([reward], jnp.float32)
        if bad == "reward_after_termination":
            rewards = jnp.where(done, 1.0, rewards)
        player = jnp.int32(5 if bad == "player_out_of_range" else 0)
        return StepMetadata(
            rewards=rewards, action_mask=mask, terminated=done, cur_player_id=player, step=count
        )

    def init(key):
        return (jnp.int32(0), jnp.bool_(False)), md(jnp.int32(0), jnp.bool_(False), 0.0)

    def step(state, action):
        count, was_done = state
        count = count + 1
        done = was_done | (action == 0) | (count >= 3)
        reward = jnp.where(done & ~was_done, 1.0, 0.0)
        return (count, done), md(count, done, reward)

    def observe(state):
        return jnp.stack([state[0], 3 - state[0]]).astype(jnp.float32)

    return envs.from_functions(init_fn=init, step_fn=step, observe_fn=observe, name=bad or "ok")


def test_users_game_with_tutorial_two_argument_step_passes():
    env = _counter_game()
    assert env.num_players == 1 and env.num_actions == 2 and env.deterministic
    envs.check(env, batch_size=2, num_steps=6)


def _paying_after_the_end():
    """An adapter (not built by `from_functions`, which holds finished games) that pays a reward
    on every step, finished game or not."""
    ok = _counter_game()

    def step(state, action, key):
        new, md = ok.step(state, action, key)
        md = md.replace(rewards=jnp.ones_like(md.rewards))
        return new.replace(metadata=md), md

    return dataclasses.replace(ok, name="paying", step=step)


@pytest.mark.parametrize(
    "rule", ["no_legal_action", "reward_after_termination", "player_out_of_range"]
)
def test_check_names_the_violated_rule(rule):
    env = _paying_after_the_end() if rule == "reward_after_termination" else None
    with pytest.raises(envs.EnvCheckError) as info:
        envs.check(env or _counter_game(bad=rule), batch_size=2, num_steps=6)
    assert rule in info.value.violations
    if rule == "player_out_of_range":  # a one-player game: how a second player is declared
        assert "return rewards of shape [2]" in info.value.violations[rule]


def _uncounted():
    """An adapter whose metadata step never moves from 0."""
    ok = _counter_game()

    def step(state, action, key):
        new, md = ok.step(state, action, key)
        md = md.replace(step=jnp.int32(0))
        return new.replace(metadata=md), md

    return dataclasses.replace(ok, name="uncounted", step=step)


def _moving_after_the_end():
    """An adapter whose finished games keep counting (their observation changes)."""
    ok = _counter_game()

    def step(state, action, key):
        new, md = ok.step(state, action, key)
        over = state.metadata.terminated
        count = jnp.where(over, state.inner[0] + 1, new.inner[0])
        return new.replace(inner=(count, new.inner[1])), md

    return dataclasses.replace(ok, name="moving", step=step)


@pytest.mark.parametrize(
    "make, rule",
    [(_uncounted, "step_not_counted"), (_moving_after_the_end, "state_changed_after_end")],
)
def test_check_names_uncounted_steps_and_finished_games_that_move(make, rule):
    with pytest.raises(envs.EnvCheckError) as info:
        envs.check(make(), batch_size=2, num_steps=6)
    assert rule in info.value.violations


def test_users_games_have_their_steps_counted_by_the_adapter():
    """`_game`'s step_fn never sets `step` (default 0): the adapter counts moves itself, so
    self-play's `max_episode_steps` and temperature schedule see them."""
    env = _game()
    state, md = env.init(jax.random.PRNGKey(0))
    for expected in (1, 2, 3):
        state, md = env.step(state, jnp.int32(0), jax.random.PRNGKey(1))
        assert int(md.step) == expected
    envs.check(env, batch_size=2, num_steps=4)


def test_users_steps_after_the_end_are_held_by_the_adapter():
    """A user's `step_fn` that keeps paying after the game ended: `from_functions` keeps the
    finished game's state and pays nothing, as the contract says."""
    envs.check(_counter_game(bad="reward_after_termination"), batch_size=2, num_steps=6)


def test_a_scalar_reward_in_a_two_player_game_is_refused():
    def init(key):
        return jnp.int32(0), opening(2, 2)

    def step(state, action):
        md = StepMetadata(
            rewards=jnp.float32(1.0),
            action_mask=jnp.ones((2,), bool),
            terminated=jnp.bool_(True),
            cur_player_id=jnp.int32(1),
        )
        return state + 1, md

    with pytest.raises(ValueError, match=r"step_fn of 'duel' returns rewards of shape \(\)"):
        envs.from_functions(
            init_fn=init, step_fn=step, observe_fn=lambda s: jnp.zeros((1,)), name="duel"
        )


def test_check_names_a_step_that_cannot_be_traced():
    env = _counter_game()

    def broken_step(state, action, key):
        raise RuntimeError("boom")

    bad = envs.Env(
        name="broken",
        num_players=1,
        num_actions=2,
        observation_shape=(2,),
        init=env.init,
        step=broken_step,
        observe=env.observe,
        metadata=env.metadata,
    )
    with pytest.raises(envs.EnvCheckError) as info:
        envs.check(bad)
    assert "step_not_jittable" in info.value.violations


@pytest.mark.parametrize("part", ["observe", "metadata"])
def test_an_observe_or_metadata_that_cannot_be_traced_is_named_as_a_rule(part):
    env = _counter_game()

    def broken(state):
        raise RuntimeError("boom")

    bad = dataclasses.replace(env, **{part: broken})
    with pytest.raises(envs.EnvCheckError) as info:
        envs.check(bad)
    assert list(info.value.violations) == [f"{part}_not_jittable"]
    assert "boom" in info.value.violations[f"{part}_not_jittable"]


def test_three_player_games_are_refused():
    env = _counter_game()
    with pytest.raises(ValueError, match="num_players"):
        envs.Env(
            name="x",
            num_players=3,
            num_actions=2,
            observation_shape=(2,),
            init=env.init,
            step=env.step,
            observe=env.observe,
            metadata=env.metadata,
        )


def test_pgx_metadata_matches_the_state(connect_four):
    state, md = connect_four.init(jax.random.PRNGKey(0))
    assert md.rewards.shape == (2,) and md.action_mask.shape == (7,)
    state, md = connect_four.step(state, jnp.int32(3), jax.random.PRNGKey(1))
    assert int(md.step) == 1 and int(md.cur_player_id) == int(state.current_player)


def test_a_box_of_several_dimensions_is_a_flat_action_for_the_policy(monkeypatch):
    """A `[1, 1]` box (here Pendulum's torque, reshaped): the policy sees `(1,)` actions and
    flat bounds; the environment receives its own shape."""
    import gymnax
    from gymnax.environments import spaces

    real, params = gymnax.make("Pendulum-v1")
    received = []

    class Boxed:
        def __getattr__(self, name):
            return getattr(real, name)

        def action_space(self, params):
            return spaces.Box(-2.0, 2.0, (1, 1))

        def step_env(self, key, state, action, params):
            received.append(action.shape)
            return real.step_env(key, state, action.reshape(1), params)

    monkeypatch.setattr(gymnax, "make", lambda name: (Boxed(), params))
    env = envs.make("gymnax:Pendulum-v1")
    assert env.action_shape == (1,) and env.action_low.shape == (1,)
    state, _ = env.init(jax.random.PRNGKey(0))
    env.step(state, jnp.array([0.5]), jax.random.PRNGKey(1))
    assert received == [(1, 1)]


def _game(step_md=None, step_state=None, observe=None):
    """A one-player game whose step can be made to break the layout init_fn set."""

    def init(key):
        return {"t": jnp.int32(0)}, opening(1, 2)

    def step(state, action):
        new = step_state(state) if step_state else {"t": state["t"] + 1}
        return new, opening(1, 3 if step_md else 2)

    return envs.from_functions(
        init_fn=init,
        step_fn=step,
        observe_fn=observe or (lambda s: jnp.zeros((1,))),
        name="layout",
    )


def test_a_step_that_changes_the_layout_is_named_when_the_adapter_is_built():
    with pytest.raises(ValueError, match=r"returns a StepMetadata whose \(shape, dtype\) differ"):
        _game(step_md=True)
    with pytest.raises(ValueError, match="returns a state of another structure"):
        _game(step_state=lambda s: {"t": s["t"] + 1, "extra": jnp.int32(0)})
    with pytest.raises(ValueError, match=r"returns a state whose \(shape, dtype\) differ"):
        _game(step_state=lambda s: {"t": s["t"].astype(jnp.float32)})

    def branchy(state):
        if state["t"] > 0:  # Python control flow on a traced value
            return jnp.ones((1,))
        return jnp.zeros((1,))

    with pytest.raises(TypeError, match="observe_fn of 'layout' could not be traced"):
        _game(observe=branchy)


def test_check_steps_a_continuous_environment_with_float_actions_of_its_shape():
    env = envs.make("gymnax:Pendulum-v1")
    seen = []

    def step(state, action, key):
        seen.append((action.shape, str(action.dtype)))
        return env.step(state, action, key)

    envs.check(dataclasses.replace(env, step=step), batch_size=2, num_steps=4)
    assert seen and set(seen) == {((1,), "float32")}


def test_check_draws_continuous_actions_within_finite_bounds_and_normal_where_unbounded():
    from turbozero.envs.check import _random_actions

    env = dataclasses.replace(
        envs.make("gymnax:Pendulum-v1"),
        action_shape=(2,),
        num_actions=2,
        action_low=jnp.array([-2.0, -jnp.inf]),
        action_high=jnp.array([2.0, jnp.inf]),
    )
    a = _random_actions(env, jnp.ones((4096, 2), bool), jax.random.PRNGKey(0))
    assert a.shape == (4096, 2) and a.dtype == jnp.float32
    bounded, free = a[:, 0], a[:, 1]
    assert float(bounded.min()) >= -2.0 and float(bounded.max()) <= 2.0
    assert float(bounded.min()) < -1.9 and float(bounded.max()) > 1.9  # spans the box
    assert abs(float(free.std()) - 1.0) < 0.1 and float(jnp.abs(free).max()) > 2.5


def test_jumanji_joint_action_mask_is_raveled_row_major_like_the_actions():
    """Tetris: `[rotation, column]` actions and a `[4, 10]` mask of the same shape."""
    import jumanji

    env = envs.make("jumanji:Tetris-v0")
    _, ts = jumanji.make("Tetris-v0").reset(jax.random.PRNGKey(0))
    _, md = env.init(jax.random.PRNGKey(0))
    assert env.num_actions == 40
    assert jnp.array_equal(md.action_mask, jnp.ravel(ts.observation.action_mask))
    assert 0 < int(md.action_mask.sum()) < 40
    envs.check(env, batch_size=2, num_steps=4)


def test_jumanji_mask_per_component_gives_the_joint_mask_as_their_outer_product():
    """Cleaner: three agents with four moves each (`[4, 4, 4]`), a `[3, 4]` mask."""
    import jumanji

    env = envs.make("jumanji:Cleaner-v0")
    _, ts = jumanji.make("Cleaner-v0").reset(jax.random.PRNGKey(3))
    rows = np.asarray(ts.observation.action_mask)
    _, md = env.init(jax.random.PRNGKey(3))
    joint = np.array(
        [all(rows[i, c] for i, c in enumerate(np.unravel_index(a, (4, 4, 4)))) for a in range(64)]
    )
    assert env.num_actions == 64 and np.array_equal(np.asarray(md.action_mask), joint)
    envs.check(env, batch_size=2, num_steps=4)


def test_jumanji_rewards_per_agent_and_oversized_joint_spaces_are_refused_by_name():
    with pytest.raises(ValueError, match="LevelBasedForaging-v0' gives one reward per agent"):
        envs.make("jumanji:LevelBasedForaging-v0")
    with pytest.raises(ValueError, match="JobShop-v0' has 16,679,880,978,201 joint actions"):
        envs.make("jumanji:JobShop-v0")


def test_jumanji_mask_of_an_unreadable_size_is_refused_when_the_adapter_is_built(monkeypatch):
    import jumanji

    real = jumanji.make("Tetris-v0")

    class Trimmed:
        def __getattr__(self, name):
            return getattr(real, name)

        def reset(self, key):
            state, ts = real.reset(key)
            obs = ts.observation._replace(action_mask=ts.observation.action_mask[:, :7])
            return state, ts.replace(observation=obs)

    monkeypatch.setattr(jumanji, "make", lambda name: Trimmed())
    with pytest.raises(ValueError, match=r"action_mask has shape \(4, 7\), which is neither"):
        envs.make("jumanji:Tetris-v0")


def test_from_functions_refuses_a_num_actions_its_mask_does_not_have():
    with pytest.raises(ValueError, match=r"num_actions=5 but init_fn of 'layout' returns an"):
        envs.from_functions(
            init_fn=lambda key: ({"t": jnp.int32(0)}, opening(1, 3)),
            step_fn=lambda state, action: (state, opening(1, 3)),
            observe_fn=lambda s: jnp.zeros((1,)),
            num_actions=5,
            name="layout",
        )


@pytest.mark.parametrize("game", ["tic_tac_toe", "gymnax:CartPole-v1", "custom"])
def test_a_discrete_step_refuses_float_actions_when_traced(game):
    env = _game() if game == "custom" else envs.make(game)
    state, _ = env.init(jax.random.PRNGKey(0))
    with pytest.raises(TypeError, match=r"integer move indices.*got dtype float32"):
        jax.jit(env.step)(state, jnp.float32(0.9), jax.random.PRNGKey(1))
    env.step(state, 0, jax.random.PRNGKey(1))  # a Python int is a move index


def test_check_and_env_refuse_counts_that_are_not_ints():
    env = envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        envs.check(env, batch_size=0)
    with pytest.raises(ValueError, match="num_steps must be an int >= 1, got -3"):
        envs.check(env, num_steps=-3)
    with pytest.raises(ValueError, match=r"num_actions must be an int >= 1, got 2\.5"):
        dataclasses.replace(env, num_actions=2.5)
    with pytest.raises(ValueError, match="num_players must be 1 or 2"):
        dataclasses.replace(env, num_players=True)


def test_a_pgx_game_takes_its_shapes_from_a_traced_init_not_pgxs_eager_properties(monkeypatch):
    """pgx's `num_actions` and `observation_shape` run its `init` op by op (about a hundred
    small programs compiled a game); the wrapper reads both from a traced `init`, and they are
    the shapes of the state `init` returns."""
    import pgx
    import pgx.core

    from turbozero.envs.pgx import from_pgx

    def eager(self):
        raise AssertionError("pgx's property ran init op by op")

    raw = pgx.make("othello")
    monkeypatch.setattr(pgx.core.Env, "num_actions", property(eager))
    monkeypatch.setattr(pgx.core.Env, "observation_shape", property(eager))
    env = from_pgx(raw, name="othello")
    state, md = jax.jit(env.init)(jax.random.PRNGKey(0))
    assert env.num_actions == md.action_mask.shape[0] == 65
    assert env.observation_shape == tuple(env.observe(state).shape) == (8, 8, 2)
