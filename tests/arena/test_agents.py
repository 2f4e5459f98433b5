"""Agents: interface, legal-move handling, the perfect tic-tac-toe table."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero import envs
from turbozero.arena import Agent, make_agent, network_agent, perfect_agent, random_agent
from turbozero.games.tic_tac_toe import ILLEGAL, solve_tic_tac_toe


def bias_eval_fn(params, observations, key):
    """A fake network: logits are a learned bias plus noise; value is zero."""
    del observations
    batch = params["bias"].shape[0]
    noise = 0.01 * jax.random.normal(key, (batch, params["bias"].shape[-1]))
    return params["bias"] + noise, jnp.zeros(batch)


def batch_after_moves(env, key, num_games, num_moves):
    """`num_games` random positions `num_moves` moves in (some may be over)."""
    agent = random_agent(env)

    @jax.jit
    def play(key):
        state, md = jax.vmap(env.init)(jax.random.split(key, num_games))
        for t in range(num_moves):
            action = agent.act(state, jax.random.fold_in(key, t))
            state, md = jax.vmap(env.step)(state, action, jax.random.split(key, num_games))
        return state, md

    return play(key)


def test_agent_params_are_the_only_leaves(tic_tac_toe):
    agent = network_agent(tic_tac_toe, bias_eval_fn, {"bias": jnp.zeros((4, 9))})
    leaves = jax.tree_util.tree_leaves(agent)
    assert len(leaves) == 1 and leaves[0].shape == (4, 9)
    assert isinstance(jax.tree_util.tree_map(lambda x: x + 1, agent), Agent)


def test_network_agent_with_same_config_has_equal_policy_fn(tic_tac_toe):
    a = network_agent(tic_tac_toe, bias_eval_fn, {"bias": jnp.zeros((4, 9))})
    b = network_agent(tic_tac_toe, bias_eval_fn, {"bias": jnp.ones((4, 9))})
    assert a.policy_fn == b.policy_fn and hash(a.policy_fn) == hash(b.policy_fn)


@pytest.mark.parametrize("sample", [False, True])
def test_network_agent_gives_illegal_actions_zero_weight_and_never_picks_them(tic_tac_toe, sample):
    key = jax.random.PRNGKey(3)
    state, md = batch_after_moves(tic_tac_toe, key, 16, 4)
    bias = jnp.tile(jnp.arange(9.0)[None] * 5.0, (16, 1))  # prefers high, often occupied, cells
    agent = network_agent(tic_tac_toe, bias_eval_fn, {"bias": bias}, sample=sample)
    out = agent.policy(state, key)
    live = ~np.asarray(md.terminated)
    mask = np.asarray(md.action_mask)[live]
    weights = np.asarray(out.weights)[live]
    action = np.asarray(out.action)[live]
    assert (
        out.action.dtype == jnp.int32 and out.weights.shape == (16, 9) and out.value.shape == (16,)
    )
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert np.all(weights[~mask] == 0)
    assert np.all(mask[np.arange(len(action)), action])
    if not sample:  # argmax: the highest legal cell
        np.testing.assert_array_equal(action, 8 - np.argmax(mask[:, ::-1], axis=-1))


def test_random_agent_is_uniform_over_legal_actions(tic_tac_toe):
    state, md = batch_after_moves(tic_tac_toe, jax.random.PRNGKey(5), 8, 3)
    out = random_agent(tic_tac_toe).policy(state, jax.random.PRNGKey(0))
    mask = np.asarray(md.action_mask)
    live = ~np.asarray(md.terminated)
    expected = mask / mask.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(out.weights)[live], expected[live], rtol=1e-6)


def test_perfect_table_knows_that_an_edge_reply_to_the_centre_loses():
    q = solve_tic_tac_toe()
    assert np.all(q[0] == 0)  # the empty board is a draw whatever the first move
    centre_taken = 2 * 3**4  # opponent's mark in the centre, mover to play
    expected = np.array([[0, -1, 0], [-1, ILLEGAL, -1], [0, -1, 0]])
    np.testing.assert_array_equal(q[centre_taken].reshape(3, 3), expected)


def test_perfect_agent_completes_its_own_line(tic_tac_toe):
    # Mover X on 0 and 1, O on 3 and 4: X must play 2 (value +1 from the mover's perspective).
    env = tic_tac_toe

    @jax.jit
    def policy(key):
        state, _ = env.init(key)
        for action in (0, 3, 1, 4):
            state, _ = env.step(state, jnp.int32(action), key)
        states = jax.tree_util.tree_map(lambda x: x[None], state)
        return perfect_agent(env).policy(states, key)

    out = policy(jax.random.PRNGKey(1))
    assert int(out.action[0]) == 2 and float(out.value[0]) == 1.0
    np.testing.assert_allclose(np.asarray(out.weights[0]), np.eye(9)[2])


def test_perfect_agent_refuses_games_without_a_perfect_player():
    with pytest.raises(ValueError, match=r"no perfect player for 'othello'.*tic_tac_toe"):
        perfect_agent(envs.make("othello"))


def test_factories_validate_arguments(tic_tac_toe):
    with pytest.raises(ValueError, match="temperature"):
        network_agent(tic_tac_toe, bias_eval_fn, None, temperature=0.0)
    with pytest.raises(ValueError, match="eval_fn"):
        network_agent(tic_tac_toe, "not a function", None)
    with pytest.raises(ValueError, match="name"):
        make_agent(bias_eval_fn, None, name="")
    with pytest.raises(ValueError, match="hashable"):
        make_agent(_Unhashable(), None, name="x")


class _Unhashable:
    __hash__ = None

    def __call__(self, params, states, key):
        raise NotImplementedError


def test_network_agent_refuses_a_network_sized_for_another_game(tic_tac_toe):
    def seven(params, observations, key):
        return jnp.zeros((observations.shape[0], 7)), jnp.zeros(observations.shape[0])

    with pytest.raises(ValueError, match=r"expected \(2, 9\) logits"):
        network_agent(tic_tac_toe, seven, None)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        network_agent(tic_tac_toe, bias_eval_fn, None, temperature=float("nan"))


def test_alphazero_agent_refuses_node_and_simulation_counts_out_of_range(tic_tac_toe):
    from turbozero.arena import alphazero_agent

    def uniform(params, observations, key):
        return jnp.zeros((observations.shape[0], 9)), jnp.zeros(observations.shape[0])

    with pytest.raises(ValueError, match="max_nodes must be an int >= 2, got 0"):
        alphazero_agent(tic_tac_toe, uniform, None, num_simulations=8, max_nodes=0)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        alphazero_agent(tic_tac_toe, uniform, None, num_simulations=8, temperature=float("nan"))


def test_search_agents_refuse_more_simulations_than_a_tree_holds_in_a_game_with_chance():
    """A game with chance needs two nodes a simulation: the count is refused by its own name,
    not as a `max_nodes` the caller never gave."""
    from turbozero.arena import alphazero_agent, rollout_mcts_agent
    from turbozero.search.search import MAX_NODES

    game = envs.make("2048")
    half = (MAX_NODES - 1) // 2
    says = f"num_simulations must be an int >= 1 and <= {half}, got {half + 1}"
    with pytest.raises(ValueError, match=says):
        alphazero_agent(game, lambda *a: None, None, num_simulations=half + 1)
    with pytest.raises(ValueError, match=says):
        rollout_mcts_agent(game, num_simulations=half + 1)


def test_rollout_mcts_breaks_ties_between_equal_moves_at_random(tic_tac_toe):
    """With a uniform prior every unvisited move scores the same; the rollout agent must not try
    them in the game's numbering (on hex, `mcts:100` played four moves in five on the top row).
    From the empty board with two simulations, the first index rule picks move 0 in every game."""
    from turbozero.arena import rollout_mcts_agent

    agent = rollout_mcts_agent(tic_tac_toe, num_simulations=2)
    state, _ = jax.vmap(tic_tac_toe.init)(jax.random.split(jax.random.PRNGKey(0), 64))
    moves = np.asarray(agent.act(state, jax.random.PRNGKey(1)))
    counts = np.bincount(moves, minlength=9)
    assert (counts > 0).sum() >= 7, counts  # every cell about 7 times in 64
    assert counts.max() <= 20, counts


def test_one_masked_softmax_decides_the_rows_without_weight_for_search_and_agents():
    import jax.numpy as jnp
    import numpy as np

    from turbozero.arena import agents
    from turbozero.search import selector

    assert agents.masked_softmax is selector.masked_softmax  # one definition
    logits = jnp.array([[1.0, 2.0, 3.0], [jnp.nan, jnp.nan, 0.0], [1.0, 2.0, 3.0]])
    mask = jnp.array([[True, False, True], [True, True, False], [False, False, False]])
    weights = np.asarray(agents.masked_softmax(logits, mask))
    np.testing.assert_allclose(weights[0], [1 / (1 + np.e**2), 0.0, np.e**2 / (1 + np.e**2)])
    assert weights[1].tolist() == [0.5, 0.5, 0.0]  # a NaN network: uniform over legal moves
    assert weights[2].tolist() == [0.0, 0.0, 0.0]  # no legal move: no weight, never NaN


def test_a_search_agents_act_is_one_compiled_program_with_the_policys_moves(tic_tac_toe):
    """`Agent.act` compiles the policy once per batch shape (run op by op, a search compiled
    hundreds of small programs on a loaded agent's first move) and plays the policy's moves."""
    from turbozero.arena.agents import action_program
    from turbozero.arena.search_agents import alphazero_agent

    def eval_fn(params, obs, key):
        return jnp.zeros((obs.shape[0], 9)), jnp.zeros((obs.shape[0],))

    agent = alphazero_agent(tic_tac_toe, eval_fn, None, num_simulations=4)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    states = jax.jit(jax.vmap(lambda k: tic_tac_toe.init(k)[0]))(keys)
    key = jax.random.PRNGKey(1)
    moves = agent.act(states, key)
    program = action_program(agent.policy_fn)
    assert program._cache_size() == 1
    agent.act(states, jax.random.PRNGKey(2))
    assert program._cache_size() == 1
    expected = jax.jit(lambda s, k: agent.policy(s, k).action)(states, key)
    np.testing.assert_array_equal(np.asarray(moves), np.asarray(expected))
