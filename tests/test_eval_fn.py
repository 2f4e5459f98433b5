"""`turbozero.nets.make_eval_fn`: a flax module as the search's batched `eval_fn`."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero.nets import init_params, make_eval_fn


class Bins(nn.Module):
    """Logits `[B, 3]` and value-bin logits `[B, 2]`, both linear in the input."""

    @nn.compact
    def __call__(self, x, train=False):
        return nn.Dense(3)(x), nn.Dense(2)(x)


def test_a_binned_value_is_its_expectation_over_the_bins_after_the_input_transform():
    module = Bins()
    params = init_params(module, jnp.zeros(4), jax.random.PRNGKey(0))
    observations = jax.random.normal(jax.random.PRNGKey(1), (5, 2))

    def doubled(o):
        return jnp.concatenate([o, 2 * o])

    fn = make_eval_fn(module, doubled, value_support=[-1.0, 1.0])
    logits, value = jax.jit(fn)(params, observations, jax.random.PRNGKey(2))
    want_logits, bins = module.apply(params, jax.vmap(doubled)(observations))
    np.testing.assert_allclose(logits, want_logits, atol=1e-6)
    np.testing.assert_allclose(value, jnp.tanh((bins[:, 1] - bins[:, 0]) / 2), atol=1e-6)


@pytest.mark.parametrize(
    ("support", "says"),
    [
        ([[0.0, 1.0]], r"got shape \(1, 2\)"),
        ([1.0], r"got shape \(1,\)"),
        ([0.0, float("nan")], "with NaN or inf"),
    ],
)
def test_a_value_support_that_is_not_a_row_of_finite_bins_is_refused(support, says):
    with pytest.raises(ValueError, match="value_support must be a row .* " + says):
        make_eval_fn(Bins(), value_support=support)


def test_an_input_transform_that_is_not_a_function_is_refused():
    with pytest.raises(ValueError, match="state_to_input must be a function or None"):
        make_eval_fn(Bins(), "planes")  # type: ignore[arg-type]
