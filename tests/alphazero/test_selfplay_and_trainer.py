"""Self-play records what happened; the trainer compiles once and refuses bad configs."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from turbozero.alphazero import AlphaZeroConfig, NetworkConfig, SearchConfig, make_alphazero
from turbozero.config import ConfigError

TINY = AlphaZeroConfig(
    env="tic_tac_toe",
    num_games=8,
    network=NetworkConfig(kind="mlp", hidden=(16,)),
    search=SearchConfig(num_simulations=8, max_nodes=12),
    temperature_moves=9,
    max_episode_steps=9,
    memory_capacity=16,
    train_batch_size=16,
    collection_steps_per_epoch=9,
    train_steps_per_epoch=2,
    warmup_steps=0,
    num_epochs=2,
    eval_games=4,
)


@pytest.fixture(scope="module")
def compiled():
    az = make_alphazero(TINY)
    collect = jax.jit(az.collect, static_argnums=1)
    train_steps = jax.jit(az.train_steps, static_argnums=1)
    state = az.init(jax.random.PRNGKey(0))
    return az, collect, train_steps, state


def test_selfplay_targets_sum_to_one_and_masks_match_the_board(compiled):
    az, collect, _, state = compiled
    state, metrics = collect(state, 9)
    mem = state.selfplay.memory
    exp = jax.tree_util.tree_map(np.asarray, mem.experience)
    stored = np.asarray(mem.positions_added) > 0
    assert stored
    obs, policy, mask = exp["observation"], exp["policy"], exp["mask"]
    written = np.abs(policy).sum(-1) > 0
    np.testing.assert_allclose(policy[written].sum(-1), 1.0, rtol=1e-5)
    # legal = empty squares: neither plane of the observation is set
    empty = (obs[..., 0] + obs[..., 1]).reshape(*obs.shape[:2], 9) == 0
    np.testing.assert_array_equal(mask[written], empty[written])
    assert np.all(policy[written][~mask[written]] == 0)
    assert float(metrics["episodes"]) > 0
    # every position written has a target (an all-zero policy would be filtered out above)
    assert int(written.sum()) == int(np.sum(mem.positions_added)) == TINY.num_games * 9


def test_the_two_players_outcomes_in_one_episode_are_opposite(compiled):
    """Tic-tac-toe self-play: within an episode each player has one outcome, the other's
    negated."""
    az, collect, _, state = compiled
    state, _ = collect(state, 9)
    mem = jax.tree_util.tree_map(np.asarray, state.selfplay.memory)
    assigned = mem.assigned
    outcome, player = mem.outcome, mem.player
    assert assigned.any()
    # within one finished episode of one game, the two players' outcomes are opposite
    for g in range(TINY.num_games):
        for ep in np.unique(mem.episode_id[g][assigned[g]]):
            sel = assigned[g] & (mem.episode_id[g] == ep)
            by_player = {p: set(outcome[g][sel & (player[g] == p)].tolist()) for p in (0, 1)}
            for p in (0, 1):
                assert len(by_player[p]) <= 1
            if by_player[0] and by_player[1]:
                assert by_player[0].pop() == -by_player[1].pop()


def test_hot_functions_compile_once_per_run(compiled):
    az, collect, train_steps, state = compiled
    state, _ = collect(state, 9)
    state, _ = train_steps(state, 2)
    n_collect, n_train = collect._cache_size(), train_steps._cache_size()
    for _ in range(2):
        state, _ = collect(state, 9)
        state, m = train_steps(state, 2)
    assert (collect._cache_size(), train_steps._cache_size()) == (n_collect, n_train)
    assert np.isfinite(float(m["loss"]))


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("search.selector=pucct", "search.selector"),
        ("num_games=0", "num_games"),
        ("search.dirichlet_fraction=2", "search.dirichlet_fraction"),
        ("eval_opponents=perfekt", "eval_opponents"),
        ("colection_steps_per_epoch=3", "collection_steps_per_epoch"),
        ("seed=-2147483649", "seed"),
        ("seed=99999999999999999999999", "seed"),
        ("search.chance=expectimax", "search.chance"),
        ("search.chance_widening=1.5", "search.chance_widening"),
        ("search.fast_simulations=8", "search.fast_simulations"),  # must be below 8
        ("search.full_fraction=0", "search.full_fraction"),
        ("search.forced_playouts=-1", "search.forced_playouts"),
        ("opening_moves=-1", "opening_moves"),
        ("search.selector=gumbel search.forced_playouts=2", "search.forced_playouts applies"),
        ("search.fpu=parent", "search.fpu"),
        ("search.selector=muzero_puct search.fpu=node", "search.fpu=node and"),
        ("search.fpu_reduction=-0.1", "search.fpu_reduction"),
        ("search.fpu_reduction=3", "search.fpu_reduction"),
        ("search.selector=gumbel search.fpu_reduction=0.2", "search.fpu_reduction=0.2 apply"),
    ],
)
def test_config_errors_name_the_key_and_choices(override, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        TINY.with_overrides(override.split())


def test_the_configured_rule_gets_forced_playouts_and_plays_without_them():
    from turbozero.alphazero.learner import make_selector

    for selector in ("puct", "muzero_puct"):
        cfg = TINY.with_overrides([f"search.selector={selector}", "search.forced_playouts=2"])
        rule = make_selector(cfg.search)
        assert rule.options["forced_playouts"] == 2.0
        assert rule.without_noise().options["forced_playouts"] == 0.0
    assert make_selector(TINY.search).options["forced_playouts"] == 0.0  # the class default


def test_the_configured_rule_values_unvisited_moves_as_search_fpu_says_in_play_too():
    from turbozero.alphazero.learner import make_selector

    rule = make_selector(
        TINY.with_overrides(["search.fpu=network", "search.fpu_reduction=0.25"]).search
    )
    assert rule.options["fpu"] == rule.without_noise().options["fpu"] == "network"
    assert rule.options["fpu_reduction"] == rule.without_noise().options["fpu_reduction"] == 0.25
    assert make_selector(TINY.search).options["fpu"] == "network"  # the default under puct
    gumbel = TINY.with_overrides(["search.selector=gumbel"]).search
    assert "fpu" not in make_selector(gumbel).options  # (its own rule for unvisited moves)
    assert make_selector(TINY.search).options["fpu_reduction"] == 0.0


@pytest.mark.parametrize("bins", ["-3", "1"])
def test_a_bad_value_bins_is_one_line_naming_the_setting_like_every_other(bins, capsys):
    from turbozero.cli import main

    assert main(["config", "tic_tac_toe", "--set", f"network.value_bins={bins}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: network.value_bins must be 0 (a scalar value) or >= 2 (categorical bins), "
        f"got {bins}"
    ]


def test_unknown_key_gets_a_suggestion():
    with pytest.raises(ConfigError, match="Did you mean 'num_games'"):
        TINY.with_overrides(["num_gmes=3"])


def _endless_walk():
    """One player, two moves, reward 1 per move, never over (only truncation ends it)."""
    import jax.numpy as jnp

    from tests.games import opening
    from turbozero import envs
    from turbozero.envs.core import StepMetadata

    def init(key):
        return jnp.int32(0), opening(1, 2)

    def step(state, action):
        return state + 1, StepMetadata(
            rewards=jnp.ones((1,)),
            action_mask=jnp.ones((2,), bool),
            terminated=jnp.bool_(False),
            cur_player_id=jnp.int32(0),
            step=state + 1,
        )

    return envs.from_functions(
        init_fn=init, step_fn=step, observe_fn=lambda s: jnp.zeros((1,)), name="walk"
    )


def test_a_truncated_episode_is_closed_with_the_value_of_the_state_reached_once_discounted():
    """Network value 4 everywhere, discount 0.5, one Gumbel simulation, cut after one move.

    The move the search visited leads to a child valued 4: the position's return is
    1 + 0.5 * 4 = 3 (not 1 + 0.5 * 0.5 * 4, the search's Q discounted again). A move it never
    visited (sampled at temperature 1 from the improved policy) has no Q; the root's value, 3.5
    (its own 4 and the simulation's 1 + 0.5 * 4), stands in for the move's return."""
    import jax.numpy as jnp

    from turbozero.alphazero.selfplay import make_selfplay
    from turbozero.memory import make_episode_buffer
    from turbozero.search import gumbel, make_search

    env = _endless_walk()
    B = 32

    def eval_fn(params, obs, key):
        return jnp.zeros((obs.shape[0], 2)), jnp.full((obs.shape[0],), 4.0)

    search = make_search(
        env, eval_fn, selector=gumbel(), num_simulations=1, max_nodes=4, discount=0.5
    )
    memory = make_episode_buffer(
        num_games=B,
        capacity=2,
        sample_size=4,
        num_players=1,
        discount=0.5,
        truncation="bootstrap",
    )

    def outcomes(temperature_moves):
        sp = make_selfplay(
            search,
            memory,
            batch_size=B,
            max_episode_steps=1,
            temperature=1.0,
            temperature_moves=temperature_moves,
        )
        state, metrics = jax.jit(sp.step)(
            sp.init(jax.random.PRNGKey(0)), None, jax.random.PRNGKey(1)
        )
        assert float(metrics["truncated"]) == B
        mem = jax.tree_util.tree_map(np.asarray, state.memory)
        assert mem.assigned.sum() == B
        return set(np.round(mem.outcome[mem.assigned], 5).tolist())

    assert outcomes(0) == {3.0}  # the best move: the one simulated
    sampled = outcomes(1)
    assert 3.5 in sampled and sampled <= {3.0, 3.5}


def _player_zero_wins():
    """Two players alternate three moves (either action); then player 0 has won, whatever
    was played."""
    import jax.numpy as jnp

    from tests.games import opening
    from turbozero import envs
    from turbozero.envs.core import StepMetadata

    def init(key):
        return jnp.int32(0), opening(2, 2)

    def step(t, action):
        t = t + 1
        over = t >= 3
        return t, StepMetadata(
            rewards=jnp.where(over, jnp.array([1.0, -1.0]), 0.0),
            action_mask=jnp.ones((2,), bool),
            terminated=over,
            cur_player_id=t % 2,
            step=t,
        )

    return envs.from_functions(
        init_fn=init, step_fn=step, observe_fn=lambda t: jnp.zeros((1,)), name="zero_wins"
    )


def test_each_position_gets_the_result_of_the_player_who_moved_there():
    """Positions where player 0 moved get +1, player 1's get -1 (a swap of the mover, e.g. the
    player after the move, flips every value target)."""
    import jax.numpy as jnp

    from turbozero.alphazero.selfplay import make_selfplay
    from turbozero.memory import make_episode_buffer
    from turbozero.search import make_search, puct

    env = _player_zero_wins()

    def eval_fn(params, obs, key):
        return jnp.zeros((obs.shape[0], 2)), jnp.zeros((obs.shape[0],))

    search = make_search(env, eval_fn, selector=puct(), num_simulations=4, max_nodes=8)
    memory = make_episode_buffer(num_games=4, capacity=8, sample_size=4, num_players=2)
    sp = make_selfplay(search, memory, batch_size=4, max_episode_steps=10)
    state, metrics = jax.jit(sp.collect, static_argnames="num_steps")(
        sp.init(jax.random.PRNGKey(0)), None, jax.random.PRNGKey(1), num_steps=6
    )
    assert float(metrics["episodes"]) == 8  # two whole games in each of the four rows
    mem = jax.tree_util.tree_map(np.asarray, state.memory)
    held = mem.assigned
    player, outcome, t = mem.player[held], mem.outcome[held], mem.step_index[held]
    mover = t % 2  # the game's rule, not what self-play recorded
    assert sorted(np.unique(mover).tolist()) == [0, 1]
    np.testing.assert_array_equal(player, mover)
    np.testing.assert_array_equal(outcome, np.where(mover == 0, 1.0, -1.0))


def test_selfplay_refuses_a_memory_or_fast_search_built_for_other_games_or_trees(
    tic_tac_toe, connect_four
):
    from turbozero.alphazero.selfplay import make_selfplay
    from turbozero.memory import make_episode_buffer
    from turbozero.search import make_search, puct

    def eval_fn(params, obs, key):
        return jax.numpy.zeros((obs.shape[0], 9)), jax.numpy.zeros((obs.shape[0],))

    search = make_search(tic_tac_toe, eval_fn, selector=puct(), num_simulations=2, max_nodes=4)
    kw = dict(batch_size=8, max_episode_steps=9)
    for games, players in ((4, 2), (8, 1)):
        memory = make_episode_buffer(
            num_games=games, capacity=4, sample_size=2, num_players=players
        )
        with pytest.raises(ValueError, match="memory was built for num_games="):
            make_selfplay(search, memory, **kw)
    memory = make_episode_buffer(
        num_games=8, capacity=4, sample_size=2, num_players=2, discount=0.9
    )
    with pytest.raises(ValueError, match=r"memory discounts outcomes by 0\.9 but the search by"):
        make_selfplay(search, memory, **kw)
    memory = make_episode_buffer(num_games=8, capacity=4, sample_size=2, num_players=2)
    with pytest.raises(ValueError, match="temperature must be a finite number >= 0"):
        make_selfplay(search, memory, temperature=float("nan"), **kw)
    wider = make_search(tic_tac_toe, eval_fn, selector=puct(), num_simulations=1, max_nodes=5)
    with pytest.raises(ValueError, match=r"same max_nodes as search \(4\), got max_nodes=5"):
        make_selfplay(search, memory, fast_search=wider, **kw)
    other = make_search(connect_four, eval_fn, selector=puct(), num_simulations=1, max_nodes=4)
    with pytest.raises(ValueError, match="fast_search must search the same env as search"):
        make_selfplay(search, memory, fast_search=other, **kw)


def test_a_train_batch_larger_than_memory_is_refused_naming_train_batch_size():
    big = TINY.with_overrides(["train_batch_size=100000"])
    with pytest.raises(ConfigError, match=r"train_batch_size must be at most num_games \* "):
        make_alphazero(big)


def test_a_train_step_on_a_memory_with_nothing_finished_changes_nothing(compiled):
    """Before any episode ends the sample has no valid row: its loss is 0, but the L2 term,
    Adam's moments and batch statistics would still have moved the network."""
    _, _, train_steps, state = compiled
    assert not int(state.selfplay.memory.positions_sampleable)
    after, metrics = train_steps(state, 2)
    assert float(metrics["policy_loss"]) == float(metrics["value_loss"]) == 0.0
    for before_leaf, after_leaf in zip(
        jax.tree_util.tree_leaves((state.params, state.opt_state)),
        jax.tree_util.tree_leaves((after.params, after.opt_state)),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(before_leaf), np.asarray(after_leaf))


def test_gating_without_best_among_the_opponents_is_refused_for_a_new_run(systems, tmp_path):
    """Gating compares the score against the best network, which is played only when "best"
    is an evaluation opponent: without it the threshold would be silently ignored. (A run
    written before this check must still load, so it is made when a run starts.)"""
    from turbozero.alphazero import train

    cfg = TINY.with_overrides(["gating_threshold=0.55"])
    with pytest.raises(ValueError, match=r"gating_threshold=0\.55 .* 'best' in eval_opponents"):
        train(cfg, tmp_path / "run", progress=False, systems=systems)
    assert not (tmp_path / "run").exists()
    TINY.with_overrides(["gating_threshold=0.55", "eval_opponents=random,best"]).check_new_run()


@pytest.mark.parametrize(
    "setting", ["eval_opponents=best", "elo_pool_size=2", "eval_opponents=mcts:8"]
)
def test_a_one_player_game_refuses_opponents_it_would_ignore(systems, tmp_path, setting):
    """A one-player game's evaluation plays the network alone: other agents, an Elo pool or
    gating would be accepted and never used."""
    from turbozero.alphazero import train

    cfg = TINY.with_overrides(["env=2048", "max_episode_steps=20", setting])
    name = setting.split("=")[0]
    with pytest.raises(ValueError, match=rf"{name}=.* '2048' is a one-player game"):
        train(cfg, tmp_path / "run", progress=False, systems=systems)
    assert not (tmp_path / "run").exists()
    TINY.with_overrides(["env=2048"]).check_new_run(1)  # "random", the default, is let be


@pytest.mark.parametrize(("chance", "searched_chance"), [("nodes", True), ("sampled", False)])
def test_search_chance_setting_picks_chance_nodes_or_one_sampled_outcome_per_edge(
    chance, searched_chance
):
    cfg = AlphaZeroConfig(
        env="2048",
        num_games=2,
        network=NetworkConfig(kind="mlp", hidden=(8,)),
        search=SearchConfig(selector="muzero_puct", num_simulations=4, max_nodes=9, chance=chance),
        memory_capacity=8,
        train_batch_size=4,
    )
    az = make_alphazero(cfg)
    assert az.env.chance is not None  # self-play and evaluation step the game itself
    search = az.selfplay.search
    assert (search.env.chance is not None) == searched_chance
    assert search.reuse == searched_chance  # reuse through the chance node; none when sampled


def test_search_chance_widening_and_discount_reach_self_play_and_the_evaluation():
    """The evaluation searches as self-play does: a network that learnt discounted values is
    judged by a search that backs them up with the same discount."""
    from turbozero.alphazero.evaluate import Evaluator

    cfg = AlphaZeroConfig(
        env="2048",
        num_games=2,
        network=NetworkConfig(kind="mlp", hidden=(8,)),
        search=SearchConfig(
            selector="muzero_puct",
            num_simulations=4,
            max_nodes=9,
            chance_widening=0.5,
            discount=0.97,
        ),
        memory_capacity=8,
        train_batch_size=4,
        eval_opponents=(),
    )
    az = make_alphazero(cfg)
    evaluated = Evaluator(az)._agent.policy_fn.search.spec
    for spec in (az.selfplay.search.spec, evaluated):
        assert (spec.chance_widening, spec.discount) == (0.5, 0.97)
    plain = make_alphazero(AlphaZeroConfig(env="2048", eval_opponents=()))
    assert plain.selfplay.search.spec.chance_widening == 1
    assert Evaluator(plain)._agent.policy_fn.search.spec.discount == 1.0


def test_playout_cap_randomisation_keeps_policy_targets_of_full_searches_only():
    """With `search.fast_simulations`, each self-play step is searched in full with
    probability `full_fraction` (the whole batch at once), otherwise with the cheap search,
    which adds no root noise; a cheap search's positions keep their value targets and get an
    all-zero policy target (no policy loss)."""
    cfg = TINY.with_overrides(["search.fast_simulations=2", "search.full_fraction=0.5"])
    az = make_alphazero(cfg)
    fast = az.selfplay.fast_search
    assert fast is not None and fast.num_simulations == 2
    assert fast.max_nodes == az.selfplay.search.max_nodes
    assert fast.selector.options["dirichlet_fraction"] == 0.0  # the full search's: 0.25
    assert make_alphazero(TINY).selfplay.fast_search is None  # the default: every move in full
    state = az.init(jax.random.PRNGKey(0))
    state, _ = jax.jit(az.collect, static_argnums=1)(state, 9)
    mem = jax.tree_util.tree_map(np.asarray, state.selfplay.memory)
    policy = mem.experience["policy"][:, :9]  # [B, 9 steps, A]
    full = policy.sum(-1) > 0
    assert np.all(full == full[:1])  # one draw per step for the whole batch
    assert full[0].any() and (~full[0]).any()  # both kinds among the 9 steps (this seed)
    np.testing.assert_allclose(policy[full].sum(-1), 1.0, rtol=1e-5)
    assert mem.assigned[:, :9][~full].any()  # cheap positions still get value targets


def test_self_play_stores_the_roots_mean_values_and_logs_their_sum():
    az = make_alphazero(TINY)
    state = az.init(jax.random.PRNGKey(0))
    state, metrics = jax.jit(az.collect, static_argnums=1)(state, 3)
    stored = np.asarray(state.selfplay.memory.experience["root_value"][:, :3])
    assert np.all(np.abs(stored) <= 1) and np.any(stored != 0)
    np.testing.assert_allclose(metrics["root_value_sum"], stored.sum(), rtol=1e-5)


def test_opening_moves_start_games_after_random_legal_moves_that_never_end_them(tic_tac_toe):
    """With `opening_moves=K` every game (the first and each after a reset) starts from the
    position after 0..K uniformly random legal moves; without it, from `env.init` on the same
    keys as before the option existed."""
    from turbozero.alphazero.selfplay import make_selfplay
    from turbozero.memory import make_episode_buffer
    from turbozero.search import make_search, puct

    def eval_fn(params, obs, key):
        return jax.numpy.zeros((obs.shape[0], 9)), jax.numpy.zeros((obs.shape[0],))

    search = make_search(tic_tac_toe, eval_fn, selector=puct(), num_simulations=2, max_nodes=4)
    memory = make_episode_buffer(num_games=64, capacity=16, sample_size=2, num_players=2)
    kw = dict(batch_size=64, max_episode_steps=9)
    key = jax.random.PRNGKey(3)
    plain = make_selfplay(search, memory, **kw).init(key).env_states
    fresh, _ = jax.vmap(tic_tac_toe.init)(jax.random.split(key, 64))
    for a, b in zip(
        jax.tree_util.tree_leaves(plain), jax.tree_util.tree_leaves(fresh), strict=True
    ):
        np.testing.assert_array_equal(a, b)

    selfplay = make_selfplay(search, memory, opening_moves=7, **kw)
    step = jax.jit(selfplay.step)
    state = selfplay.init(key)

    def moves_made(state):
        obs = np.asarray(jax.vmap(tic_tac_toe.observe)(state.env_states))
        md = jax.vmap(tic_tac_toe.metadata)(state.env_states)
        assert not np.asarray(md.terminated).any()
        pieces = obs.reshape(64, -1).sum(-1)
        np.testing.assert_array_equal(np.asarray(md.step), pieces)  # one piece per move
        return pieces

    first = moves_made(state)
    assert first.max() <= 7 and len(set(first.tolist())) >= 6  # 0..7, uniformly (this key)
    restarts = []
    for k in range(12):
        before = moves_made(state)
        state, _ = step(state, None, jax.random.fold_in(key, k))
        after = moves_made(state)
        restarts += after[after != before + 1].tolist()  # games that ended and were reset
    assert len(restarts) >= 64 and max(restarts) <= 7 and len(set(restarts)) >= 6
    with pytest.raises(ValueError, match="opening_moves"):
        make_selfplay(search, memory, opening_moves=-1, **kw)
