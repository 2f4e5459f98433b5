"""The Anakin PPO learner: acting, learning and evaluation as pure functions to compile at the top.

Letters: `E` environments per seed (and device), `T` rollout steps, `U` updates per call,
`M` minibatch size, `A` discrete actions, `O` observation shape.

    ppo = make_ppo(PPOConfig(...))            # or make_ppo(env="gymnax:CartPole-v1", num_envs=8)
    state = jax.jit(ppo.init)(key)
    update = jax.jit(ppo.update)
    state, metrics = update(state)            # runs config.num_updates_per_eval updates
    stats = jax.jit(ppo.evaluate)(state.params, state.obs_stats, key)

Seeds in parallel: `jax.vmap(ppo.init)(keys)` and `jax.jit(jax.vmap(ppo.update))(states)`.

Devices: `make_ppo(config, axis_name="device")` averages gradients (`lax.pmean`), merges observation
statistics and standardises advantages over that named axis, so `update` can run under `shard_map`
over a `Mesh` (or `pmap`) with replicated parameters and per-device environments. `init` derives
the parameters from `key` alone and folds the device index into the environment keys.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from turbozero import struct
from turbozero.envs.core import Env
from turbozero.ppo import normalize as obs_norm
from turbozero.ppo.autoreset import AutoResetState, make_autoreset
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.gae import truncated_gae
from turbozero.ppo.losses import (
    clipped_value_loss,
    entropy_bonus,
    ppo_clip_loss,
    ppo_kl_penalty_loss,
)
from turbozero.ppo.networks import (
    ActorCritic,
    ActorCriticParams,
    Categorical,
    DiagGaussian,
    Distribution,
    make_actor_critic,
)
from turbozero.types import Array, PRNGKey, PyTree

MASKED_LOGIT = -1e9
FRESH_AHEAD_BYTES = 64 * 2**20  # draw a rollout's restart states ahead when they fit in this


@struct.dataclass
class LearnerState(struct.Struct):
    """Everything an Anakin PPO run carries from one update to the next (checkpoint this).

    Attributes:
        params: actor and critic variables.
        actor_opt_state, critic_opt_state: the two optax states.
        obs_stats: running observation statistics (`[*O]`; unused unless normalising).
        env_state: `AutoResetState` of the `E` training environments (leaves `[E, ...]`).
        key: PRNG key consumed by the next update.
        update_step: `[]` int32 updates done so far.
    """

    params: ActorCriticParams
    actor_opt_state: PyTree
    critic_opt_state: PyTree
    obs_stats: obs_norm.RunningStats
    env_state: AutoResetState
    key: PRNGKey
    update_step: Array


class Transition(NamedTuple):
    """One rollout step of the `E` environments (leaves `[E, ...]`, stacked to `[T, E, ...]`)."""

    obs: Array  # [E, *O] observation the policy saw (normalised when normalising)
    raw_obs: Array | None  # [E, *O] unnormalised observation (only when normalising)
    action: Array  # [E] int32 or [E, D] float32 (unclipped sample)
    log_prob: Array  # [E]
    value: Array  # [E]
    reward: Array  # [E]
    terminated: Array  # [E] bool
    truncated: Array  # [E] bool
    next_obs: Array | None  # [E, *O] true next observation (unnormalised; dropped for the epochs)
    action_mask: Array | None  # [E, A] bool (discrete actions only)
    old_policy: Distribution | None  # the acting distribution (KL-penalty loss only)
    episode_return: Array  # [E] return of the episode ending here (valid where done)
    episode_length: Array  # [E]


class Hyperparams(NamedTuple):
    """The numbers of the update that may differ between agents trained in one program.

    `update(state, hyperparams)` reads them as (traced) values, so a `vmap` over a stacked
    `Hyperparams` `[G]` (with states `[G]`) trains a grid of agents at once, as a `vmap` over
    keys trains seeds. `ppo.hyperparams` holds the config's; `_replace` and `stack_hyperparams`
    make others. The learning rates scale the optimizer's step, whose linear decay (its
    fraction of the run) is the config's for every member.
    """

    actor_lr: Array | float
    critic_lr: Array | float
    ent_coef: Array | float
    vf_coef: Array | float
    clip_eps: Array | float
    kl_coef: Array | float
    value_clip_eps: Array | float
    gamma: Array | float
    gae_lambda: Array | float
    reward_scale: Array | float


def hyperparams_of(cfg: PPOConfig) -> Hyperparams:
    """The config's `Hyperparams` (Python floats)."""
    return Hyperparams(*(float(getattr(cfg, name)) for name in Hyperparams._fields))


def stack_hyperparams(members: Sequence[Hyperparams]) -> Hyperparams:
    """`Hyperparams` of `[G]` float32 arrays from `G` members (for `vmap`).

    Raises:
        ValueError: for no members, or a value out of the range the config allows.
    """
    if not members:
        raise ValueError("stack_hyperparams needs at least one member")
    for m in members:  # the config's checks, by name
        PPOConfig(**{name: float(v) for name, v in m._asdict().items()})  # type: ignore[arg-type]
    return Hyperparams(
        *(jnp.asarray([float(m[i]) for m in members], jnp.float32) for i in range(len(members[0])))
    )


class PPO(NamedTuple):
    """The pure functions of a PPO learner (compile them at the top).

    Attributes:
        init: `init(key) -> LearnerState`; `key` is consumed.
        update: `update(state, hyperparams=None) -> (state, metrics)`; runs
            `num_updates_per_eval` updates; every metric is `[U]`; `hyperparams` default to
            `hyperparams` below (the config's), a `vmap` over stacked ones trains a grid.
        evaluate: `evaluate(params, obs_stats, key, *, num_episodes=None) -> dict` of episode
            return/length statistics over `num_episodes` (default `config.eval_episodes`) fresh
            evaluation environments, and `finished`, the fraction of episodes that ended within
            `eval_max_steps` (the others' returns are partial); `num_episodes` is static.
        act: `act(params, obs_stats, observations [B, *O], key, *, greedy=False,
            action_mask=None) -> actions [B] or [B, D]` (environment-ready: Gaussian samples are
            clipped to the action bounds).
        network: the actor-critic functions.
        env: the environment.
        config: the configuration.
        hyperparams: the config's `Hyperparams`.
    """

    init: Callable[[PRNGKey], LearnerState]
    update: Callable[..., tuple[LearnerState, dict[str, Array]]]
    evaluate: Callable[..., dict[str, Array]]
    act: Callable[..., Array]
    network: ActorCritic
    env: Env
    config: PPOConfig
    hyperparams: Hyperparams


def _mask_policy(dist: Distribution, mask: Array | None) -> Distribution:
    if mask is None or not isinstance(dist, Categorical):
        return dist
    return Categorical(jnp.where(mask, dist.logits, MASKED_LOGIT))


def _per_sample(dist: Distribution) -> Distribution:
    """`dist` with every field batched like its samples (`[E, ...]`), so that it can be stacked
    over time, flattened and shuffled with the rest of a rollout. A Gaussian head's shared
    log standard deviation `[D]` is broadcast to `[E, D]`."""
    if isinstance(dist, DiagGaussian):
        return DiagGaussian(dist.mean, jnp.broadcast_to(dist.log_std, dist.mean.shape))
    return dist


def _flatten_time(x: Array) -> Array:
    return jnp.reshape(x, (x.shape[0] * x.shape[1], *x.shape[2:]))


def make_ppo(
    config: PPOConfig | None = None,
    /,
    *,
    env: Env | str | None = None,
    axis_name: str | None = None,
    **overrides: Any,
) -> PPO:
    """Build the PPO learner for `config` (or `PPOConfig(**overrides)`).

    Args:
        config: the configuration; keyword `overrides` replace some of its fields.
        env: an `Env` to use instead of `turbozero.envs.make(config.env)` (one player), or an
            environment id, which then overrides `config.env`.
        axis_name: a named axis (e.g. ``"device"``) over which gradients, observation statistics
            and advantage statistics are averaged; `update` must then run inside a mapping
            (`shard_map`, `pmap`, or `vmap` with that `axis_name`) that binds it.
        **overrides: `PPOConfig` fields.

    Raises:
        turbozero.config.ConfigError: for an unknown field or a value out of range.
        ValueError: for an environment with more than one player.
    """
    if isinstance(env, str):
        overrides["env"] = env
        env = None
    names = [f.name for f in dataclasses.fields(PPOConfig)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        from turbozero.config import ConfigError, suggest

        hints = "".join(suggest(k, names) for k in unknown)
        raise ConfigError(f"unknown PPOConfig keys {unknown}.{hints}")
    if config is None:
        config = PPOConfig(**overrides)
    elif overrides:
        config = dataclasses.replace(config, **overrides)
    if env is None:
        from turbozero.envs import make

        env = make(config.env)
    cfg = config
    auto = make_autoreset(env)
    continuous = env.continuous
    action_dim = env.num_actions
    network = make_actor_critic(
        action_dim=action_dim,
        continuous=continuous,
        actor_hidden=cfg.actor_hidden,
        critic_hidden=cfg.critic_hidden,
        activation=cfg.activation,
        layer_norm=cfg.layer_norm,
        init_log_std=cfg.init_log_std,
    )
    state_bytes = sum(
        math.prod(x.shape) * jnp.dtype(x.dtype).itemsize
        for x in jax.tree.leaves(jax.eval_shape(lambda k: env.init(k)[0], jax.random.PRNGKey(0)))
    )
    low = None if env.action_low is None else jnp.asarray(env.action_low, jnp.float32)
    high = None if env.action_high is None else jnp.asarray(env.action_high, jnp.float32)
    num_steps_opt = cfg.num_updates * cfg.epochs * cfg.num_minibatches

    def make_optimizer() -> optax.GradientTransformation:
        """Adam at a learning rate of 1 (decaying linearly to 0 over the run's optimizer steps
        with `lr_schedule="linear"`); the update scales its step by the member's rate."""
        schedule = (
            optax.linear_schedule(1.0, 0.0, num_steps_opt) if cfg.lr_schedule == "linear" else 1.0
        )
        return optax.chain(
            optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(schedule, eps=cfg.adam_eps)
        )

    actor_opt = critic_opt = make_optimizer()
    default_hp = hyperparams_of(cfg)

    def norm(stats: obs_norm.RunningStats, obs: Array) -> Array:
        if not cfg.normalize_observations:
            return obs.astype(jnp.float32)
        return obs_norm.normalize(stats, obs, clip=cfg.obs_clip)

    def env_action(action: Array) -> Array:
        if continuous and low is not None and high is not None:
            return jnp.clip(action, low, high)
        return action

    def varying(tree: PyTree) -> PyTree:
        """Mark per-device values as varying over `axis_name` (shard_map's type check)."""
        if axis_name is None or not hasattr(jax.lax, "pcast"):
            return tree

        def cast(x: Array) -> Array:
            try:
                return jax.lax.pcast(x, axis_name, to="varying")
            # already varying, or not inside shard_map (under `jit` of a named `vmap`, this
            # JAX's pcast fails an internal assertion rather than raise its ValueError)
            except (ValueError, AssertionError):
                return x

        return jax.tree.map(cast, tree)

    def masks_of(env_state: AutoResetState) -> Array | None:
        if continuous:
            return None
        return jax.vmap(env.metadata)(env_state.env_state).action_mask

    def random_actions(key: PRNGKey, mask: Array | None, n: int) -> Array:
        if not continuous:
            assert mask is not None
            return jax.random.categorical(key, jnp.where(mask, 0.0, MASKED_LOGIT)).astype(jnp.int32)
        gauss_key, key = jax.random.split(key)
        gauss = jax.random.normal(gauss_key, (n, action_dim))
        if low is None or high is None:
            return gauss
        # uniform between finite bounds; a half-open or open side (jumanji's and users' spaces
        # may have them) gets a standard normal step away from the finite bound, if any
        lo, hi = jnp.broadcast_to(low, (action_dim,)), jnp.broadcast_to(high, (action_dim,))
        finite_lo, finite_hi = jnp.isfinite(lo), jnp.isfinite(hi)
        both = finite_lo & finite_hi
        uniform = jax.random.uniform(
            key, (n, action_dim), minval=jnp.where(both, lo, 0.0), maxval=jnp.where(both, hi, 1.0)
        )
        one_sided = jnp.where(finite_lo, lo + jnp.abs(gauss), hi - jnp.abs(gauss))
        return jnp.where(both, uniform, jnp.where(finite_lo | finite_hi, one_sided, gauss))

    def act(
        params: ActorCriticParams,
        obs_stats: obs_norm.RunningStats,
        observations: Array,
        key: PRNGKey,
        *,
        greedy: bool = False,
        action_mask: Array | None = None,
    ) -> Array:
        dist = _mask_policy(
            network.policy(params.actor, norm(obs_stats, observations)), action_mask
        )
        return env_action(dist.mode() if greedy else dist.sample(key))

    # ----------------------------------------------------------------------------- init

    def init(key: PRNGKey) -> LearnerState:
        param_key, env_key, warm_key, state_key = jax.random.split(key, 4)
        if axis_name is not None:  # same parameters on every device, different environments
            index = jax.lax.axis_index(axis_name)
            env_key = jax.random.fold_in(env_key, index)
            warm_key = jax.random.fold_in(warm_key, index)
            state_key = jax.random.fold_in(state_key, index)
        env_state = varying(jax.vmap(auto.init)(jax.random.split(env_key, cfg.num_envs)))
        params = network.init(param_key, env_state.observation)
        stats = obs_norm.init_stats(env.observation_shape)
        if cfg.normalize_observations and cfg.obs_norm_warmup_steps > 0:
            stats = warmup_stats(stats, warm_key)
        return LearnerState(
            params=params,
            actor_opt_state=actor_opt.init(params.actor),
            critic_opt_state=critic_opt.init(params.critic),
            obs_stats=stats,
            env_state=env_state,
            key=state_key,
            update_step=jnp.int32(0),
        )

    def warmup_stats(stats: obs_norm.RunningStats, key: PRNGKey) -> obs_norm.RunningStats:
        """Statistics of observations from random actions in separate environments."""
        init_key, run_key = jax.random.split(key)
        warm = varying(jax.vmap(auto.init)(jax.random.split(init_key, cfg.num_envs)))

        def body(s: AutoResetState, k: PRNGKey) -> tuple[AutoResetState, Array]:
            ka, ks = jax.random.split(k)
            action = random_actions(ka, masks_of(s), cfg.num_envs)
            s, _ = jax.vmap(auto.step)(s, env_action(action), jax.random.split(ks, cfg.num_envs))
            return s, s.observation

        _, observations = jax.lax.scan(
            body, warm, jax.random.split(run_key, cfg.obs_norm_warmup_steps)
        )
        observations = jnp.concatenate([warm.observation[None], observations])
        return obs_norm.update(stats, observations, axis_name=axis_name)

    # ----------------------------------------------------------------------------- update

    def rollout(state: LearnerState, key: PRNGKey) -> tuple[AutoResetState, Transition]:
        params, stats = state.params, state.obs_stats
        T, E = cfg.rollout_length, cfg.num_envs
        # The rollout's randomness is drawn in bulk before its loop (on CPU each draw inside the
        # loop would be a small loop of its own): Gumbel or normal action noise, the steps' keys
        # and, when they are small, the states that finished episodes restart from.
        noise_key, step_key, reset_key = jax.random.split(key, 3)
        if continuous:
            noise = jax.random.normal(noise_key, (T, E, action_dim))
        else:
            noise = jax.random.gumbel(noise_key, (T, E, action_dim))
        step_keys = jax.random.split(step_key, (T, E))
        reset_keys = jax.random.split(reset_key, (T, E))
        # (per seed: the seeds' programs are vmapped, so all of theirs are held at once)
        fresh_ahead = T * E * state_bytes * cfg.num_seeds <= FRESH_AHEAD_BYTES
        restart = jax.vmap(lambda k: env.init(k)[0])
        fresh = jax.vmap(restart)(reset_keys) if fresh_ahead else reset_keys

        def env_step(
            env_state: AutoResetState, xs: tuple[Array, Array, PyTree]
        ) -> tuple[AutoResetState, Transition]:
            step_noise, keys, fresh_states = xs
            if not fresh_ahead:
                fresh_states = restart(fresh_states)  # here: the keys
            raw = env_state.observation
            obs = norm(stats, raw)
            mask = masks_of(env_state)
            dist = _mask_policy(network.policy(params.actor, obs), mask)
            action = dist.sample_with(step_noise)
            log_prob = dist.log_prob(action)
            value = network.value(params.critic, obs)
            env_state, out = jax.vmap(auto.step_from)(
                env_state, env_action(action), keys, fresh_states
            )
            transition = Transition(
                obs=obs,
                raw_obs=raw if cfg.normalize_observations else None,
                action=action,
                log_prob=log_prob,
                value=value,
                reward=out.reward,
                terminated=out.terminated,
                truncated=out.truncated,
                next_obs=out.next_observation,
                action_mask=mask,
                old_policy=_per_sample(dist) if cfg.loss == "kl_penalty" else None,
                episode_return=out.episode_return,
                episode_length=out.episode_length,
            )
            return env_state, transition

        return jax.lax.scan(env_step, state.env_state, (noise, step_keys, fresh))

    def pmean(x: PyTree) -> PyTree:
        return x if axis_name is None else jax.lax.pmean(x, axis_name)

    def actor_loss(actor_params: PyTree, mb: Transition, advantages: Array, hp: Hyperparams):
        dist = _mask_policy(network.policy(actor_params, mb.obs), mb.action_mask)
        log_prob = dist.log_prob(mb.action)
        if cfg.loss == "clip":
            loss, info = ppo_clip_loss(log_prob, mb.log_prob, advantages, clip_eps=hp.clip_eps)
        else:
            old = mb.old_policy
            assert old is not None
            if isinstance(old, Categorical):
                assert isinstance(dist, Categorical)
                kl = old.kl(dist)
            else:
                assert isinstance(dist, DiagGaussian)
                kl = old.kl(dist)
            loss, info = ppo_kl_penalty_loss(
                log_prob, mb.log_prob, advantages, kl, kl_coef=hp.kl_coef
            )
        entropy = dist.entropy()
        total = loss + entropy_bonus(entropy, coef=hp.ent_coef)
        return total, {"actor_loss": loss, "entropy": jnp.mean(entropy), **info}

    def critic_loss(critic_params: PyTree, mb: Transition, targets: Array, hp: Hyperparams):
        values = network.value(critic_params, mb.obs)
        loss = clipped_value_loss(values, mb.value, targets, clip_eps=hp.value_clip_eps)
        return hp.vf_coef * loss, {"value_loss": loss}

    def minibatch_step(carry, batch, hp: Hyperparams):
        params, actor_os, critic_os = carry
        mb, advantages, targets = batch
        actor_grads, actor_info = jax.grad(actor_loss, has_aux=True)(
            params.actor, mb, advantages, hp
        )
        critic_grads, critic_info = jax.grad(critic_loss, has_aux=True)(
            params.critic, mb, targets, hp
        )
        actor_grads, critic_grads = pmean((actor_grads, critic_grads))
        a_updates, actor_os = actor_opt.update(actor_grads, actor_os, params.actor)
        c_updates, critic_os = critic_opt.update(critic_grads, critic_os, params.critic)
        a_updates = jax.tree.map(lambda u: u * hp.actor_lr, a_updates)
        c_updates = jax.tree.map(lambda u: u * hp.critic_lr, c_updates)
        params = ActorCriticParams(
            optax.apply_updates(params.actor, a_updates),
            optax.apply_updates(params.critic, c_updates),
        )
        info = {
            **actor_info,
            **critic_info,
            "actor_grad_norm": optax.tree.norm(actor_grads),
            "critic_grad_norm": optax.tree.norm(critic_grads),
        }
        return (params, actor_os, critic_os), info

    def one_update(state: LearnerState, hp: Hyperparams) -> tuple[LearnerState, dict[str, Array]]:
        key, rollout_key, epoch_key = jax.random.split(state.key, 3)
        env_state, traj = rollout(state, rollout_key)
        stats = state.obs_stats
        assert traj.next_obs is not None
        next_values = network.value(
            state.params.critic, norm(stats, _flatten_time(traj.next_obs))
        ).reshape(traj.value.shape)
        advantages, targets = truncated_gae(
            traj.reward * hp.reward_scale,
            traj.value,
            next_values,
            traj.terminated,
            traj.truncated,
            gamma=hp.gamma,
            gae_lambda=hp.gae_lambda,
        )
        if cfg.standardize_advantages:
            mean = pmean(jnp.mean(advantages))
            var = pmean(jnp.mean(jnp.square(advantages - mean)))
            advantages = (advantages - mean) / jnp.sqrt(var + 1e-8)
        if cfg.normalize_observations:  # after learning on this batch with the acting statistics
            assert traj.raw_obs is not None
            stats = obs_norm.update(stats, traj.raw_obs, axis_name=axis_name)
        batch = jax.tree.map(
            _flatten_time, (traj._replace(raw_obs=None, next_obs=None), advantages, targets)
        )

        def epoch(carry, k):
            # One sort of random 32-bit keys (ties, rare, keep index order): a permutation, at
            # half the cost of `jax.random.permutation`'s two rounds at these sizes.
            perm = jnp.argsort(jax.random.bits(k, (cfg.batch_size,)))
            shuffled = jax.tree.map(
                lambda x: jnp.take(x, perm, axis=0).reshape(
                    (cfg.num_minibatches, cfg.minibatch_size, *x.shape[1:])
                ),
                batch,
            )
            return jax.lax.scan(functools.partial(minibatch_step, hp=hp), carry, shuffled)

        (params, actor_os, critic_os), info = jax.lax.scan(
            epoch,
            (state.params, state.actor_opt_state, state.critic_opt_state),
            jax.random.split(epoch_key, cfg.epochs),
        )
        done = (traj.terminated | traj.truncated).astype(jnp.float32)
        episodes = pmean(jnp.sum(done))  # per device: may be a fraction, e.g. 1 of 4 devices

        def per_episode(total: Array) -> Array:
            return jnp.where(episodes > 0, total / jnp.where(episodes > 0, episodes, 1.0), 0.0)

        metrics = {k: pmean(jnp.mean(v)) for k, v in info.items()}
        metrics.update(
            episodes=episodes,
            episode_return=per_episode(pmean(jnp.sum(done * traj.episode_return))),
            episode_length=per_episode(pmean(jnp.sum(done * traj.episode_length))),
            value_mean=pmean(jnp.mean(traj.value)),
        )
        new = LearnerState(
            params=params,
            actor_opt_state=actor_os,
            critic_opt_state=critic_os,
            obs_stats=stats,
            env_state=env_state,
            key=key,
            update_step=state.update_step + 1,
        )
        return new, metrics

    def update(
        state: LearnerState, hyperparams: Hyperparams | None = None
    ) -> tuple[LearnerState, dict[str, Array]]:
        hp = default_hp if hyperparams is None else hyperparams
        return jax.lax.scan(lambda s, _: one_update(s, hp), state, None, cfg.num_updates_per_eval)

    # ----------------------------------------------------------------------------- evaluate

    def evaluate(
        params: ActorCriticParams,
        obs_stats: obs_norm.RunningStats,
        key: PRNGKey,
        *,
        num_episodes: int | None = None,
    ) -> dict[str, Array]:
        n = cfg.eval_episodes if num_episodes is None else int(num_episodes)
        init_key, run_key = jax.random.split(key)
        states, md = jax.vmap(env.init)(jax.random.split(init_key, n))
        zeros = jnp.zeros((n,), jnp.float32)
        done0 = md.terminated | md.truncated

        def cond(carry):
            _, _, _, done, t, _ = carry
            return (t < cfg.eval_max_steps) & ~jnp.all(done)

        def body(carry):
            states, ret, length, done, t, k = carry
            k, ka, ks = jax.random.split(k, 3)
            mask = None if continuous else jax.vmap(env.metadata)(states).action_mask
            obs = jax.vmap(env.observe)(states)
            action = act(params, obs_stats, obs, ka, greedy=cfg.eval_greedy, action_mask=mask)
            states, md = jax.vmap(env.step)(states, action, jax.random.split(ks, n))
            live = ~done
            ret = ret + jnp.where(live, md.rewards[:, 0], 0.0)
            length = length + live.astype(jnp.int32)
            done = done | md.terminated | md.truncated
            return states, ret, length, done, t + 1, k

        _, ret, length, done, _, _ = jax.lax.while_loop(
            cond, body, (states, zeros, jnp.zeros((n,), jnp.int32), done0, jnp.int32(0), run_key)
        )
        length = length.astype(jnp.float32)
        return {
            "return_mean": jnp.mean(ret),
            "return_std": jnp.std(ret),
            "return_min": jnp.min(ret),
            "return_max": jnp.max(ret),
            "length_mean": jnp.mean(length),
            # episodes that ended within `eval_max_steps`; the others' returns are partial
            "finished": jnp.mean(done.astype(jnp.float32)),
        }

    return PPO(
        init=init,
        update=update,
        evaluate=evaluate,
        act=act,
        network=network,
        env=env,
        config=cfg,
        hyperparams=default_hp,
    )


def absolute_evaluate(ppo: PPO) -> Callable[..., dict[str, Array]]:
    """`evaluate` with `absolute_eval_factor` times as many episodes (for the best parameters)."""
    return functools.partial(
        ppo.evaluate, num_episodes=ppo.config.eval_episodes * ppo.config.absolute_eval_factor
    )
