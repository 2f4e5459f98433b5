"""Reanalyse gives stored positions the current network's search targets, and nothing else."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero.alphazero import AlphaZeroConfig, NetworkConfig, SearchConfig, make_alphazero
from turbozero.alphazero.learner import augmentations
from turbozero.alphazero.reanalyse import make_reanalyse, pick_held
from turbozero.config import ConfigError

# No root noise: a search of a position is then the same whatever its key and batch, so the
# rewritten targets can be checked against a search of each stored state on its own.
REANALYSED = AlphaZeroConfig(
    env="tic_tac_toe",
    num_games=8,
    network=NetworkConfig(kind="mlp", hidden=(16,)),
    search=SearchConfig(num_simulations=8, max_nodes=12, dirichlet_fraction=0.0),
    temperature_moves=9,
    max_episode_steps=9,
    memory_capacity=4,
    augment=True,  # tic-tac-toe's 7 symmetries: 8 copies, 32 slots per game
    train_batch_size=16,
    warmup_steps=0,
    reanalyse_positions=256,  # every slot, more than 3 steps fill
)


@pytest.fixture(scope="module")
def reanalysed():
    az = make_alphazero(REANALYSED)
    start = az.init(jax.random.PRNGKey(0))
    collect = jax.jit(az.selfplay.collect, static_argnames="num_steps")
    played, _ = collect(start.selfplay, start.params, jax.random.PRNGKey(1), num_steps=3)
    newer = az.init(jax.random.PRNGKey(7)).params  # another network
    memory, metrics = jax.jit(az.reanalyse.run)(played.memory, newer, jax.random.PRNGKey(2))
    return az, played.memory, memory, metrics, newer


def test_reanalysis_rewrites_each_held_positions_policy_and_root_value_with_the_new_network(
    reanalysed,
):
    """Every held slot's policy target is a fresh search of its stored state with the new
    network, mapped through the symmetry the copy was stored with, and its root value is that
    search's; outcomes, observations, masks and the stored states are left as they were."""
    az, before, after, metrics, newer = reanalysed
    held = np.asarray(before.episode_id >= 0)
    assert held.sum() == 3 * 8 * 8  # 3 moves, 8 games, 8 copies each
    assert float(metrics["reanalysed"]) == held.sum()
    B, C = held.shape
    flat = held.reshape(-1)

    def rows(leaf):
        return np.asarray(leaf).reshape(B * C, *leaf.shape[2:])[flat]

    states = jax.tree_util.tree_map(lambda x: jnp.asarray(rows(x)), before.experience["state"])
    search = az.selfplay.search
    init = search.init(int(flat.sum()))
    _, fresh = jax.jit(search.search)(init, newer, states, jax.random.PRNGKey(9))
    fns = [None, *augmentations(az.env)]
    symmetry = rows(before.experience["symmetry"])
    assert set(symmetry.tolist()) == set(range(8))
    obs = np.asarray(jax.vmap(az.env.observe)(states))  # as played: the copies' sources
    masks = np.asarray(jax.vmap(az.env.metadata)(states).action_mask)
    policies = np.asarray(fresh.action_weights)
    expected = np.stack(
        [
            p if k == 0 else np.asarray(fns[k](o, p, m)[1])
            for k, o, p, m in zip(symmetry, obs, policies, masks, strict=True)
        ]
    )
    np.testing.assert_allclose(rows(after.experience["policy"]), expected, atol=1e-6)
    np.testing.assert_allclose(rows(after.experience["root_value"]), fresh.root_value, atol=1e-6)
    assert not np.allclose(rows(before.experience["policy"]), expected)  # they were stale
    for name in ("observation", "mask", "symmetry"):
        np.testing.assert_array_equal(after.experience[name], before.experience[name])
    for a, b in zip(
        jax.tree_util.tree_leaves(after.experience["state"]),
        jax.tree_util.tree_leaves(before.experience["state"]),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    for name in ("outcome", "assigned", "player", "episode_id", "step_index"):
        np.testing.assert_array_equal(getattr(after, name), getattr(before, name))


def test_slots_holding_nothing_are_never_picked_nor_written(reanalysed):
    """With fewer held positions than `reanalyse_positions`, the empty slots keep their zeros
    and the metrics count only the held ones."""
    _, before, after, metrics, _ = reanalysed
    empty = np.asarray(before.episode_id < 0)
    assert empty.any()
    np.testing.assert_array_equal(np.asarray(after.experience["policy"])[empty], 0.0)
    np.testing.assert_array_equal(np.asarray(after.experience["root_value"])[empty], 0.0)
    assert float(metrics["reanalyse_targets"]) == float(metrics["reanalysed"])
    shift = float(metrics["reanalyse_policy_shift_sum"]) / float(metrics["reanalyse_targets"])
    assert 0.0 < shift <= 1.0  # a total variation distance

    index, valid = pick_held(before, jax.random.PRNGKey(4), num=32)
    assert len(set(np.asarray(index).tolist())) == 32 and bool(np.all(valid))
    assert np.all(np.asarray(before.episode_id >= 0).reshape(-1)[np.asarray(index)])


def test_a_reanalysis_of_r_positions_rewrites_r_slots_and_leaves_the_rest_bit_for_bit(
    reanalysed,
):
    """Fewer positions than memory holds: exactly the R picked slots change."""
    az, before, _, _, newer = reanalysed
    run = make_reanalyse(az.selfplay.search, num_positions=32, augment_fns=augmentations(az.env))
    after, metrics = jax.jit(run.run)(before, newer, jax.random.PRNGKey(5))
    assert float(metrics["reanalysed"]) == 32
    policy_changed = np.any(
        np.asarray(after.experience["policy"]) != np.asarray(before.experience["policy"]), -1
    )
    value_changed = np.asarray(after.experience["root_value"]) != np.asarray(
        before.experience["root_value"]
    )
    assert 0 < np.sum(policy_changed | value_changed) <= 32


def test_the_trainer_reanalyses_after_collecting_and_stores_states_only_when_asked():
    """`reanalyse_positions=R` adds a reanalysis of R positions to each collection (its
    counts in the metrics); the class default, 0, stores what self-play stored before (no
    states, so run directories of earlier versions resume)."""
    cfg = REANALYSED.with_overrides(["reanalyse_positions=64"])
    az = make_alphazero(cfg)
    state = az.init(jax.random.PRNGKey(0))
    state, metrics = jax.jit(az.collect, static_argnums=1)(state, 2)
    assert float(metrics["reanalysed"]) == 64  # 2 steps already hold 128 positions
    plain = make_alphazero(REANALYSED.with_overrides(["reanalyse_positions=0"]))
    assert plain.reanalyse is None
    assert AlphaZeroConfig().reanalyse_positions == 0
    example = plain.init(jax.random.PRNGKey(0)).selfplay.memory.experience
    assert set(example) == {"observation", "policy", "mask", "root_value"}


def test_reanalysis_settings_out_of_range_are_refused_by_name():
    """A count above what memory holds, a negative count, a count the devices do not divide,
    and a memory without states each get an error naming the setting."""
    with pytest.raises(ConfigError, match=r"reanalyse_positions must be at most .* = 256"):
        make_alphazero(REANALYSED.with_overrides(["reanalyse_positions=257"]))
    with pytest.raises((ConfigError, ValueError), match="reanalyse_positions"):
        REANALYSED.with_overrides(["reanalyse_positions=-1"])
    three_devices = types.SimpleNamespace(size=3)  # (only its size is read before the check)
    with pytest.raises(ConfigError, match="reanalyse_positions must be a multiple of the 3"):
        make_alphazero(REANALYSED.with_overrides(["reanalyse_positions=16"]), mesh=three_devices)
    az = make_alphazero(REANALYSED.with_overrides(["reanalyse_positions=0"]))
    with pytest.raises(ValueError, match="num_positions"):
        make_reanalyse(az.selfplay.search, num_positions=0)
    run = make_reanalyse(az.selfplay.search, num_positions=4).run
    memory = az.init(jax.random.PRNGKey(0)).selfplay.memory
    with pytest.raises(ValueError, match="store_states=True"):
        run(memory, None, jax.random.PRNGKey(0))
    stored = make_alphazero(REANALYSED).init(jax.random.PRNGKey(0)).selfplay.memory
    too_many = make_reanalyse(az.selfplay.search, num_positions=257).run
    with pytest.raises(ValueError, match="num_positions must be at most the 256 slots"):
        too_many(stored, None, jax.random.PRNGKey(0))
