"""Rules of the AlphaZero loss."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.alphazero.test_selfplay_and_trainer import TINY
from turbozero.alphazero.losses import az_loss, two_hot
from turbozero.nets import PolicyValueMLP, init_params


@pytest.fixture(scope="module")
def setup():
    net = PolicyValueMLP(num_actions=4, hidden=(16,))
    params = init_params(net, jnp.zeros((6,)), jax.random.PRNGKey(0))
    k = jax.random.split(jax.random.PRNGKey(1), 3)
    mask = jnp.array([[True, True, False, True]] * 8)
    policy = jax.nn.softmax(jax.random.normal(k[0], (8, 4)) + jnp.where(mask, 0, -1e9))
    batch = dict(
        observation=jax.random.normal(k[1], (8, 6)),
        policy=policy,
        mask=mask,
        outcome=jnp.sign(jax.random.normal(k[2], (8,))),
        valid=jnp.ones((8,), bool),
    )
    return net, params, batch


def test_a_loss_step_reduces_the_loss_on_a_fixed_batch(setup):
    net, params, batch = setup
    opt = optax.adam(1e-2)
    loss_fn = lambda p: az_loss(p, batch, apply_fn=net.apply)[0]  # noqa: E731
    state = opt.init(params)
    before = float(jax.jit(loss_fn)(params))

    @jax.jit
    def step(params, state):
        upd, state = opt.update(jax.grad(loss_fn)(params), state)
        return optax.apply_updates(params, upd), state

    for _ in range(20):
        params, state = step(params, state)
    assert float(jax.jit(loss_fn)(params)) < before


def test_masked_actions_get_zero_gradient(setup):
    net, params, batch = setup

    def from_logits(logits):
        def apply_fn(p, x, train=True):
            return logits, jnp.zeros((x.shape[0],))

        return az_loss(params, batch, apply_fn=apply_fn, l2=0.0)[0]

    g = jax.grad(from_logits)(jnp.zeros((8, 4)))
    assert np.all(np.asarray(g)[:, 2] == 0.0)
    assert np.any(np.asarray(g)[:, 0] != 0.0)


@pytest.mark.parametrize("bins", [0, 5])
def test_invalid_rows_do_not_count(setup, bins):
    """Rows marked invalid change no term of the loss, whatever they hold (MSE and
    categorical value losses alike)."""
    net, params, batch = setup
    if bins:
        net = PolicyValueMLP(num_actions=4, hidden=(16,), value_bins=bins)
        params = init_params(net, jnp.zeros((6,)), jax.random.PRNGKey(0))
    support = jnp.linspace(-1.0, 1.0, bins) if bins else None

    def terms(b):
        m = az_loss(params, b, apply_fn=net.apply, value_support=support)[1][0]
        return {k: float(m[k]) for k in ("loss", "policy_loss", "value_loss", "value_mae")}

    full = terms(batch)
    half = dict(batch, valid=batch["valid"].at[4:].set(False))
    garbage = dict(
        half,
        policy=half["policy"].at[4:].set(0.0),
        outcome=half["outcome"].at[4:].set(7.0),
        observation=half["observation"].at[4:].set(100.0),
    )
    a, b = terms(half), terms(garbage)
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=1e-6), k
    assert full["policy_loss"] != pytest.approx(a["policy_loss"])
    assert full["value_loss"] != pytest.approx(a["value_loss"])


def test_rows_with_an_all_zero_policy_target_train_the_value_alone(setup):
    """A row without a policy target (playout cap randomisation's cheap searches) adds to the
    value loss and leaves the policy loss the mean over the rows that have one."""
    net, params, batch = setup

    def terms(b):
        m = az_loss(params, b, apply_fn=net.apply)[1][0]
        return {k: float(m[k]) for k in ("policy_loss", "value_loss")}

    first_half = dict(batch, **{k: v[:4] for k, v in batch.items()})
    no_target = dict(batch, policy=batch["policy"].at[4:].set(0.0))
    assert terms(no_target)["policy_loss"] == pytest.approx(terms(first_half)["policy_loss"])
    assert terms(no_target)["value_loss"] == pytest.approx(terms(batch)["value_loss"])
    assert terms(no_target)["value_loss"] != pytest.approx(terms(first_half)["value_loss"])


def test_value_targets_are_divided_by_value_scale(setup):
    """A one-player score of 50 with `value_scale=100` is the network target 0.5."""
    _, params, batch = setup

    def constant(v):
        def apply_fn(p, x, train=True):
            return jnp.zeros((x.shape[0], 4)), jnp.full((x.shape[0],), v)

        return apply_fn

    scored = dict(batch, outcome=jnp.full((8,), 50.0))
    loss = az_loss(params, scored, apply_fn=constant(0.5), value_scale=100.0, l2=0.0)
    assert float(loss[1][0]["value_loss"]) == pytest.approx(0.0, abs=1e-12)
    off = az_loss(params, scored, apply_fn=constant(0.4), value_scale=100.0, l2=0.0)
    assert float(off[1][0]["value_loss"]) == pytest.approx(0.01, rel=1e-4)


def test_two_hot_puts_mass_on_the_two_neighbouring_bins():
    support = jnp.linspace(-1.0, 1.0, 5)
    out = np.asarray(two_hot(jnp.array([0.25, -1.0, 1.0]), support))
    np.testing.assert_allclose(out[0], [0, 0, 0.5, 0.5, 0])
    np.testing.assert_allclose(out[1], [1, 0, 0, 0, 0])
    np.testing.assert_allclose(out[2], [0, 0, 0, 0, 1])
    np.testing.assert_allclose(out.sum(-1), 1.0)


@pytest.mark.parametrize("kind", ["mlp", "resnet"])
def test_one_player_value_heads_are_unbounded_and_two_player_heads_tanh(kind):
    """One-player returns (scaled by `value_scale`) can exceed 1: neither scalar head may squash
    them through tanh; two-player outcomes stay in [-1, 1]."""

    from turbozero import envs
    from turbozero.alphazero import AlphaZeroConfig, NetworkConfig
    from turbozero.alphazero.learner import make_network

    net = NetworkConfig(kind=kind, hidden=(8,), num_blocks=1, num_channels=4, value_bins=0)
    for name, bounded in (("2048", False), ("tic_tac_toe", True)):
        env = envs.make(name)
        module = make_network(AlphaZeroConfig(env=name, network=net), env)
        obs = jax.jit(lambda key, env=env: env.observe(env.init(key)[0])[None])(
            jax.random.PRNGKey(0)
        )
        params = jax.jit(module.init)(jax.random.PRNGKey(1), obs)
        # a value head whose last layer is scaled up: tanh would clip it to 1
        params = jax.tree_util.tree_map(lambda x: x * 50.0, params)
        _, value = jax.jit(module.apply)(params, jnp.ones_like(obs) * 3.0)
        assert (float(jnp.max(jnp.abs(value))) <= 1.0) == bounded, (kind, name, value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(num_actions=0), "num_actions must be an int >= 1, got 0"),
        (dict(num_actions=3, hidden=(0,)), r"hidden \(each width\) must be an int >= 1"),
        (dict(num_actions=3, value_bins=1), "value_bins must be 0"),
        (dict(num_actions=2.5), "num_actions must be an int"),
    ],
)
def test_mlp_settings_out_of_range_are_refused_when_built(kwargs, message):
    from turbozero.nets import PolicyValueMLP

    with pytest.raises(ValueError, match=message):
        PolicyValueMLP(**kwargs)


def test_resnet_sizes_must_be_ints():
    from turbozero.nets import AZResnetConfig

    with pytest.raises(ValueError, match=r"num_channels must be an int >= 1, got 16\.5"):
        AZResnetConfig(policy_head_out_size=9, num_channels=16.5)
    with pytest.raises(ValueError, match=r"num_blocks must be an int >= 0, got 1\.5"):
        AZResnetConfig(policy_head_out_size=9, num_blocks=1.5)


def test_the_resnet_heads_have_alphago_zeros_widths():
    """The heads' 1x1 convolutions have 2 policy and 1 value channels (and the dense layers that
    read them their sizes): the parameter tree of every run written before."""
    from turbozero.nets import AZResnet, AZResnetConfig

    boards = jnp.zeros((1, 6, 7, 2))
    net = AZResnet(AZResnetConfig(policy_head_out_size=7, num_channels=8))
    params = jax.eval_shape(net.init, jax.random.PRNGKey(0), boards)["params"]
    shapes = {k: v["kernel"].shape for k, v in params.items() if "kernel" in v}
    assert shapes["Conv_1"] == (1, 1, 8, 2) and shapes["Dense_0"] == (6 * 7 * 2, 7)
    assert shapes["Conv_2"] == (1, 1, 8, 1) and shapes["Dense_1"] == (6 * 7 * 1, 8)
    assert "BatchNorm_0" in params["_Norm_0"]
    with pytest.raises(ValueError, match=r"norm must be 'batch', got 'layer'"):
        AZResnetConfig(policy_head_out_size=7, norm="layer")


def test_the_resnet_value_and_policy_depend_on_the_board():
    """A norm over the heads' 1- and 2-channel maps must keep the board in them (layer norm
    over the channels alone normalised the value's map to zero: every board got the same value,
    and no gradient reached the observation)."""
    from turbozero.nets import AZResnet, AZResnetConfig

    net = AZResnet(AZResnetConfig(policy_head_out_size=9, num_blocks=1, num_channels=8))
    boards = jax.random.normal(jax.random.PRNGKey(0), (5, 3, 3, 2))
    params = jax.jit(net.init)(jax.random.PRNGKey(1), boards)
    logits, value = jax.jit(net.apply)(params, boards)
    assert float(jnp.std(value)) > 1e-4
    assert float(jnp.min(jnp.std(logits, axis=0))) > 1e-4

    def total_value(boards):
        return jnp.sum(net.apply(params, boards)[1])

    assert float(jnp.max(jnp.abs(jax.jit(jax.grad(total_value))(boards)))) > 0.0


def test_value_targets_mix_the_outcome_with_the_root_value_by_the_configured_weight():
    from turbozero.alphazero.learner import value_target
    from turbozero.config import ConfigError

    outcome = jnp.array([1.0, -1.0, 0.0])
    root = jnp.array([0.5, 0.0, -0.5])
    assert value_target(outcome, root, 0.0) is outcome  # AlphaZero's target, unchanged
    np.testing.assert_allclose(value_target(outcome, root, 0.5), [0.75, -0.5, -0.25])
    np.testing.assert_allclose(value_target(outcome, root, 1.0), root)
    with pytest.raises(ConfigError, match=r"root_value_weight must be .*\[0, 1\]"):
        TINY.with_overrides(["root_value_weight=1.5"])


def test_a_trainer_with_root_value_targets_learns_from_the_stored_root_values():
    """The memory keeps each position's root value; with weight 1 the value head is trained
    towards it, so the value loss differs from the outcome-only trainer's on the same data."""
    from turbozero.alphazero import make_alphazero

    losses = []
    for weight in (0.0, 1.0):
        az = make_alphazero(TINY.with_overrides([f"root_value_weight={weight}"]))
        state = az.init(jax.random.PRNGKey(0))
        state, _ = jax.jit(az.collect, static_argnums=1)(state, 18)
        _, metrics = jax.jit(az.train_steps, static_argnums=1)(state, 1)
        losses.append(float(metrics["value_loss"]))
    assert losses[0] != losses[1]


def test_the_learning_rate_warms_up_linearly_then_stays():
    from turbozero.alphazero.learner import learning_rate_schedule
    from turbozero.config import ConfigError

    assert learning_rate_schedule(TINY) == TINY.learning_rate  # the class default: constant
    lr = 0.002
    warm = learning_rate_schedule(
        TINY.with_overrides([f"learning_rate={lr}", "lr_warmup_steps=10"])
    )
    np.testing.assert_allclose(
        [float(warm(0)), float(warm(5)), float(warm(10)), float(warm(110))],
        [0, lr / 2, lr, lr],
        rtol=1e-5,
        atol=1e-12,
    )
    with pytest.raises(ConfigError, match="lr_warmup_steps"):
        TINY.with_overrides(["lr_warmup_steps=-1"])
