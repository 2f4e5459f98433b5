"""The weights' moving average (`ema_decay`, on by default): the trainer keeps it beside the
trained weights, and it, not the trained weights, plays: in evaluations and as the saved agent
(the run, its exact resume and the loaded agent: tests/alphazero/test_train_run.py; several
devices: tests/alphazero/test_durable.py), and in self-play with `ema_selfplay=true` (by default
self-play takes the trained weights)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tests.alphazero.test_selfplay_and_trainer import TINY
from turbozero.alphazero import make_alphazero
from turbozero.alphazero.learner import acting_params
from turbozero.config import ConfigError

EMA = TINY.with_overrides(["ema_decay=0.9", "ema_selfplay=true"])


def _close(a, b):
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6), a, b)


def _differ(a, b) -> bool:
    leaves = jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda x, y: np.any(x != y), a, b))
    return any(bool(x) for x in leaves)


@pytest.fixture(scope="module")
def trained():
    """An EMA trainer after one collection and three gradient steps, with the trained weights
    after each step."""
    az = make_alphazero(EMA)
    collect = jax.jit(az.collect, static_argnums=1)
    step = jax.jit(az.train_steps, static_argnums=1)
    state = az.init(jax.random.PRNGKey(0))
    state, _ = collect(state, 18)
    states = [state]
    for _ in range(3):
        state, _ = step(state, 1)
        states.append(state)
    return az, collect, states


def test_the_average_follows_the_trained_weights_with_a_warmed_up_decay(trained):
    """After step t the average is `d * average + (1 - d) * weights` with
    `d = min(ema_decay, (1 + t) / (10 + t))`: 0.1, 0.18, 0.25 for the first three steps."""
    _, _, states = trained
    expected = states[0].params
    _close(states[0].ema, expected)  # it starts at the initial weights
    for t, state in enumerate(states[1:]):
        d = min(0.9, (1 + t) / (10 + t))
        expected = jax.tree_util.tree_map(lambda e, p: d * e + (1 - d) * p, expected, state.params)
        _close(state.ema, expected)
    assert _differ(states[-1].ema, states[-1].params)


def test_self_play_plays_with_the_average_not_the_trained_weights(trained):
    az, collect, states = trained
    state = states[-1]
    key = jax.random.PRNGKey(7)
    with_ema, _ = collect(state.replace(key=key), 9)
    as_params, _ = collect(state.replace(key=key, params=state.ema, ema=None), 9)
    trained_weights, _ = collect(state.replace(key=key, ema=None), 9)
    _close(with_ema.selfplay.memory, as_params.selfplay.memory)
    assert _differ(with_ema.selfplay.memory, trained_weights.selfplay.memory)
    assert acting_params(state) is state.ema
    assert acting_params(state.replace(ema=None)) is state.params


def test_without_a_decay_there_is_no_average_and_the_state_holds_what_it_held_before():
    state = make_alphazero(TINY.with_overrides(["ema_decay=0"])).init(jax.random.PRNGKey(0))
    assert state.ema is None
    assert make_alphazero(TINY).init(jax.random.PRNGKey(0)).ema is not None  # the default
    with_ema = make_alphazero(EMA).init(jax.random.PRNGKey(0))
    n = len(jax.tree_util.tree_leaves(state))
    assert len(jax.tree_util.tree_leaves(with_ema)) == n + len(
        jax.tree_util.tree_leaves(state.params)
    )


@pytest.mark.parametrize("bad", ["ema_decay=1", "ema_decay=-0.1", "ema_decay=1.5"])
def test_a_decay_outside_zero_to_one_is_refused_naming_the_setting(bad):
    with pytest.raises(ConfigError, match=r"ema_decay must be .*\[0, 1\)"):
        TINY.with_overrides([bad])


def test_with_ema_selfplay_false_self_play_plays_the_trained_weights(trained):
    """The average still plays evaluations and the saved agent (`acting_params`); self-play
    takes the trained weights, as a run without an average does (reanalysis, off in `TINY`,
    is handed the same weights in `collect`)."""
    _, _, states = trained
    state = states[-1]
    az = make_alphazero(EMA.with_overrides(["ema_selfplay=false"]))
    collect = jax.jit(az.collect, static_argnums=1)
    key = jax.random.PRNGKey(7)
    trained_only, _ = collect(state.replace(key=key), 9)
    without_ema, _ = collect(state.replace(key=key, ema=None), 9)
    _close(trained_only.selfplay.memory, without_ema.selfplay.memory)
    assert acting_params(state) is state.ema


def test_ema_selfplay_true_without_an_average_is_refused_for_a_new_run_naming_both_settings():
    """A run recorded before the average was on by default holds `ema_decay=0` with
    `ema_selfplay=true` and still loads; a run about to start with them is told."""
    old = TINY.with_overrides(["ema_decay=0", "ema_selfplay=true"])  # (reads back as it was)
    with pytest.raises(ConfigError, match=r"ema_selfplay=true .* ema_decay in \(0, 1\)"):
        old.check_new_run(2)
    TINY.with_overrides(["ema_decay=0"]).check_new_run(2)  # (self-play takes the weights)
