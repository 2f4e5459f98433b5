"""Run mctx's policies on the same game and network as our search (test oracle, bench peer)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx


def mctx_policy(env, eval_fn, *, kind: str, num_simulations: int, **kwargs):
    """`policy(params, states [B], key) -> mctx.PolicyOutput` for a two-player pgx-like env."""

    def masked(logits, mask):
        return jnp.where(
            mask, logits - jnp.max(logits, -1, keepdims=True), jnp.finfo(jnp.float32).min
        )

    def root_fn(params, states, key):
        md = jax.vmap(env.metadata)(states)
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        return mctx.RootFnOutput(
            prior_logits=masked(logits, md.action_mask), value=value, embedding=states
        ), md

    def recurrent_fn(params, key, action, states):
        B = action.shape[0]
        player = jax.vmap(env.metadata)(states).cur_player_id
        states, md = jax.vmap(env.step)(states, action, jax.random.split(key, B))
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        reward = md.rewards[jnp.arange(B), player]
        value = jnp.where(md.terminated, 0.0, value)
        discount = jnp.where(md.terminated, 0.0, -1.0)
        out = mctx.RecurrentFnOutput(
            reward=reward,
            discount=discount,
            prior_logits=masked(logits, md.action_mask),
            value=value,
        )
        return out, states

    def policy(params, states, key):
        k1, k2 = jax.random.split(key)
        root, md = root_fn(params, states, k1)
        fn = mctx.muzero_policy if kind == "muzero" else mctx.gumbel_muzero_policy
        return fn(
            params,
            k2,
            root,
            recurrent_fn,
            num_simulations,
            invalid_actions=~md.action_mask,
            **kwargs,
        )

    return policy
