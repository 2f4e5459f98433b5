"""The Anakin PPO learner: acting, learning and evaluation as pure functions to compile at the top.

Letters: `E` environments per seed (and device), `T` rollout steps, `U` updates per call,
`K` epochs per update, `N` minibatches per epoch, `M` minibatch size (`T * E = N * M`),
`A` discrete actions, `D` continuous action dimension, `K'` and `C` a multi-discrete action's
components and the largest one's size, `O` observation shape, `V` evaluation episodes.

    ppo = make_ppo(PPOConfig(...))            # or make_ppo(env="gymnax:CartPole-v1", num_envs=8)
    state = jax.jit(ppo.init)(key)
    update = jax.jit(ppo.update)
    state, metrics = update(state)            # runs config.num_updates_per_eval updates
    stats = jax.jit(ppo.evaluate)(state.params, state.obs_stats, key)

One update (`train_step`) strings the named steps together:

    rollout               T steps of the E environments with the acting policy: Transition [T, E]
    estimate_advantages   truncated GAE and value targets [T, E], standardised
    update_epochs         K epochs of N shuffled minibatches of M: losses, gradients, Adam steps

Every step is a top-level function of the static `LearnerSpec` (environment, networks, optimizer,
configuration) and of explicit state; `make_ppo` validates its arguments (`validate_ppo_args`) and
binds the spec into the `PPO` functions.

The policy loss is the clipped surrogate, the KL-penalised one or Discovered Policy Optimisation's
(`config.loss`); the action head (`config.action_head`, see `turbozero.ppo.networks`) decides
what the rollout samples and stores (the head's raw action) and `env_action` what the environment
receives.

Seeds in parallel: `jax.vmap(ppo.init)(keys)` and `jax.jit(jax.vmap(ppo.update))(states)`.

Devices: `make_ppo(config, axis_name="device")` averages gradients (`lax.pmean`), merges observation
statistics and standardises advantages over that named axis, so `update` can run under `shard_map`
over a `Mesh` (or `pmap`) with replicated parameters and per-device environments. `init` derives
the parameters from `key` alone and folds the device index into the environment keys.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from turbozero import struct
from turbozero.config import ConfigError, suggest
from turbozero.envs import make
from turbozero.envs.core import Env
from turbozero.ppo import normalize as obs_norm
from turbozero.ppo.autoreset import AutoResetEnv, AutoResetState, make_autoreset
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.distributions import (
    MASKED_LOGIT,
    Distribution,
    MultiCategorical,
    TanhGaussian,
    mask_policy,
    per_sample,
    ravel_components,
    scale_to_bounds,
    squash_to_bounds,
)
from turbozero.ppo.gae import truncated_gae
from turbozero.ppo.losses import (
    clipped_value_loss,
    dpo_loss,
    entropy_bonus,
    ppo_clip_loss,
    ppo_kl_penalty_loss,
)
from turbozero.ppo.networks import (
    BOUNDED_HEADS,
    CONTINUOUS_HEADS,
    ActorCritic,
    ActorCriticParams,
    make_actor_critic,
)
from turbozero.struct import pytree_bytes
from turbozero.types import Array, PRNGKey, PyTree

FRESH_AHEAD_BYTES = 64 * 2**20  # draw a rollout's restart states ahead when they fit in this


# ------------------------------------------------------------------------------------- types


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
    action: Array  # the head's raw action: [E] int32, [E, D] float32 or [E, K'] int32
    action_noise: Array | None  # [E, D] the sample's standard normal noise (tanh_gaussian only)
    log_prob: Array  # [E]
    value: Array  # [E]
    reward: Array  # [E]
    terminated: Array  # [E] bool
    truncated: Array  # [E] bool
    next_obs: Array | None  # [E, *O] true next observation (unnormalised; dropped for the epochs)
    action_mask: Array | None  # [E, A] bool, [E, n_1, ..., n_K'] for multi_discrete (discrete only)
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
    dpo_alpha: Array | float
    dpo_beta: Array | float


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


class LearnerSpec(NamedTuple):
    """The static pieces every learner function reads (built once by `make_learner_spec`).

    Attributes:
        config: the configuration (sizes, options, default hyperparameters).
        env: the one-player environment.
        autoreset: `env` with finished episodes restarting at once (single-environment functions).
        network: the actor-critic functions.
        optimizer: the transformation of both networks' gradients (each has its own state).
        axis_name: the named axis (devices) over which gradients and statistics are averaged,
            or None.
        head: the action head (`config.action_head` with "auto" resolved; see
            `turbozero.ppo.networks.HEADS`).
        action_low, action_high: `[D]` (or broadcastable) bounds Gaussian actions are clipped
            to before stepping (and the bounded heads' box), or None.
        fresh_ahead: draw the states finished episodes restart from ahead of the rollout's loop
            (True) or inside it from their keys (False; the same states, less memory).
    """

    config: PPOConfig
    env: Env
    autoreset: AutoResetEnv
    network: ActorCritic
    optimizer: optax.GradientTransformation
    axis_name: str | None
    head: str
    action_low: Array | None
    action_high: Array | None
    fresh_ahead: bool


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
            action_mask=None) -> actions [B] or [B, D]` (environment-ready, see `env_action`).
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


class RolloutInputs(NamedTuple):
    """The randomness of a rollout, drawn ahead of its loop (leaves `[T, E, ...]`)."""

    # [T, E, A] (categorical) or [T, E, K', C] (multi_discrete) standard Gumbel, [T, E, D]
    # standard normal (Gaussian heads) action noise, or [T] keys (beta: its draws need the
    # parameters)
    noise: Array
    step_keys: Array  # [T, E] keys of the environment steps
    fresh: PyTree  # [T, E, ...] states finished episodes restart from (their keys, if not ahead)


class Batch(NamedTuple):
    """What the epochs learn from (leaves `[T * E, ...]`, or `[M, ...]` for a minibatch)."""

    transitions: Transition  # without `raw_obs` and `next_obs`
    advantages: Array  # [T * E]
    targets: Array  # [T * E] value targets


class EpochCarry(NamedTuple):
    """What the epochs' minibatch steps change."""

    params: ActorCriticParams
    actor_opt_state: PyTree
    critic_opt_state: PyTree


class EvalCarry(NamedTuple):
    """The evaluation loop's state (`V` episodes)."""

    states: PyTree  # [V, ...] environment states (finished ones frozen)
    returns: Array  # [V] float32 undiscounted returns so far
    lengths: Array  # [V] int32 steps taken before the episode ended
    done: Array  # [V] bool
    step: Array  # [] int32 loop iterations
    key: PRNGKey


# ------------------------------------------------------------------------------------- acting


def head_mask(spec: LearnerSpec, mask: Array | None) -> Array | None:
    """The legal actions `mask [B, A]` in the form the head masks (`mask_policy`): unchanged, or
    for the multi-discrete head shaped by its components, `[B, n_1, ..., n_K']`."""
    if mask is None or spec.head != "multi_discrete":
        return mask
    assert spec.env.action_components is not None
    return jnp.reshape(mask, (*mask.shape[:-1], *spec.env.action_components))


def _flatten_time(x: Array) -> Array:
    return jnp.reshape(x, (x.shape[0] * x.shape[1], *x.shape[2:]))


def _pmean(spec: LearnerSpec, tree: PyTree) -> PyTree:
    return tree if spec.axis_name is None else jax.lax.pmean(tree, spec.axis_name)


def _varying(spec: LearnerSpec, tree: PyTree) -> PyTree:
    """Mark per-device values as varying over `spec.axis_name` (shard_map's type check)."""
    axis_name = spec.axis_name
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


def normalize_observations(
    spec: LearnerSpec, obs_stats: obs_norm.RunningStats, observations: Array
) -> Array:
    """`observations [..., *O]` as float32, standardised and clipped when the config says so."""
    if not spec.config.normalize_observations:
        return observations.astype(jnp.float32)
    return obs_norm.normalize(obs_stats, observations, clip=spec.config.obs_clip)


def env_action(spec: LearnerSpec, action: Array) -> Array:
    """The environment's action of the head's raw `action`: a Gaussian sample `[..., D]`
    clipped to the bounds, a tanh-Gaussian's pre-squash one squashed into them, a Beta's
    `[0, 1]` one scaled to them, multi-discrete components `[..., K']` as their flat index;
    categorical indices unchanged."""
    low, high = spec.action_low, spec.action_high
    if spec.head == "tanh_gaussian":
        assert low is not None and high is not None
        return squash_to_bounds(action, low, high)
    if spec.head == "beta":
        assert low is not None and high is not None
        return scale_to_bounds(action, low, high)
    if spec.head == "multi_discrete":
        assert spec.env.action_components is not None
        return ravel_components(action, spec.env.action_components)
    return clip_to_bounds(spec, action)


def clip_to_bounds(spec: LearnerSpec, action: Array) -> Array:
    """`action [..., D]` clipped to the environment's bounds (discrete actions unchanged)."""
    low, high = spec.action_low, spec.action_high
    if spec.env.continuous and low is not None and high is not None:
        return jnp.clip(action, low, high)
    return action


def action_masks(spec: LearnerSpec, env_states: PyTree) -> Array | None:
    """`[B, A]` legal actions of a batch of environment states (None for continuous actions)."""
    if spec.env.continuous:
        return None
    return jax.vmap(spec.env.metadata)(env_states).action_mask


def act(
    spec: LearnerSpec,
    params: ActorCriticParams,
    obs_stats: obs_norm.RunningStats,
    observations: Array,
    key: PRNGKey,
    *,
    greedy: bool = False,
    action_mask: Array | None = None,
) -> Array:
    """Environment-ready actions of the policy.

    Args:
        spec: the learner's static pieces.
        params: the networks' variables.
        obs_stats: observation statistics (read when normalising).
        observations: `[B, *O]` raw observations.
        key: consumed by sampling (unused when `greedy`).
        greedy: the policy's mode instead of a sample.
        action_mask: `[B, A]` legal actions (discrete actions only).

    Returns:
        `[B]` int32 or `[B, D]` float32 environment actions (`env_action`).
    """
    obs = normalize_observations(spec, obs_stats, observations)
    dist = mask_policy(spec.network.policy(params.actor, obs), head_mask(spec, action_mask))
    return env_action(spec, dist.mode() if greedy else dist.sample(key))


def random_actions(spec: LearnerSpec, mask: Array | None, key: PRNGKey, *, num: int) -> Array:
    """`num` uniformly random legal environment actions (to warm up the observation
    statistics); multi-discrete ones uniform over the legal flat actions.

    Args:
        spec: the learner's static pieces.
        mask: `[num, A]` legal actions (discrete actions only).
        key: consumed.
        num: how many actions.

    Returns:
        `[num]` int32 legal actions, or `[num, D]` float32 ones: uniform between finite bounds;
        a half-open or open side (jumanji's and users' spaces may have them) gets a standard
        normal step away from the finite bound, if any.
    """
    if not spec.env.continuous:
        assert mask is not None
        return jax.random.categorical(key, jnp.where(mask, 0.0, MASKED_LOGIT)).astype(jnp.int32)
    low, high, dim = spec.action_low, spec.action_high, spec.env.num_actions
    gauss_key, key = jax.random.split(key)
    gauss = jax.random.normal(gauss_key, (num, dim))
    if low is None or high is None:
        return gauss
    lo, hi = jnp.broadcast_to(low, (dim,)), jnp.broadcast_to(high, (dim,))
    finite_lo, finite_hi = jnp.isfinite(lo), jnp.isfinite(hi)
    both = finite_lo & finite_hi
    uniform = jax.random.uniform(
        key, (num, dim), minval=jnp.where(both, lo, 0.0), maxval=jnp.where(both, hi, 1.0)
    )
    one_sided = jnp.where(finite_lo, lo + jnp.abs(gauss), hi - jnp.abs(gauss))
    return jnp.where(both, uniform, jnp.where(finite_lo | finite_hi, one_sided, gauss))


# ------------------------------------------------------------------------------------- init


def init(spec: LearnerSpec, key: PRNGKey) -> LearnerState:
    """A fresh learner: parameters, optimizer states, `E` environments, observation statistics.

    Args:
        spec: the learner's static pieces.
        key: consumed; under `spec.axis_name` the parameters come from it alone (the same on
            every device) and the environments from it and the device index.

    Returns:
        the learner state before its first update.
    """
    cfg = spec.config
    param_key, env_key, warm_key, state_key = jax.random.split(key, 4)
    if spec.axis_name is not None:  # same parameters on every device, different environments
        index = jax.lax.axis_index(spec.axis_name)
        env_key = jax.random.fold_in(env_key, index)
        warm_key = jax.random.fold_in(warm_key, index)
        state_key = jax.random.fold_in(state_key, index)
    env_state = _varying(
        spec, jax.vmap(spec.autoreset.init)(jax.random.split(env_key, cfg.num_envs))
    )
    params = spec.network.init(param_key, env_state.observation)
    stats = obs_norm.init_stats(spec.env.observation_shape)
    if cfg.normalize_observations and cfg.obs_norm_warmup_steps > 0:
        stats = warmup_stats(spec, stats, warm_key)
    return LearnerState(
        params=params,
        actor_opt_state=spec.optimizer.init(params.actor),
        critic_opt_state=spec.optimizer.init(params.critic),
        obs_stats=stats,
        env_state=env_state,
        key=state_key,
        update_step=jnp.int32(0),
    )


def warmup_stats(
    spec: LearnerSpec, stats: obs_norm.RunningStats, key: PRNGKey
) -> obs_norm.RunningStats:
    """`stats` merged with the observations of `obs_norm_warmup_steps` random-action steps of
    `E` separate environments (`key` is consumed)."""
    cfg = spec.config
    init_key, run_key = jax.random.split(key)
    warm = _varying(spec, jax.vmap(spec.autoreset.init)(jax.random.split(init_key, cfg.num_envs)))
    _, observations = jax.lax.scan(
        functools.partial(warmup_step, spec),
        warm,
        jax.random.split(run_key, cfg.obs_norm_warmup_steps),
    )
    observations = jnp.concatenate([warm.observation[None], observations])
    return obs_norm.update(stats, observations, axis_name=spec.axis_name)


def warmup_step(
    spec: LearnerSpec, env_state: AutoResetState, key: PRNGKey
) -> tuple[AutoResetState, Array]:
    """One random-action step of the `E` environments; returns them and their observations
    `[E, *O]` (`key` is consumed)."""
    num = spec.config.num_envs
    action_key, step_key = jax.random.split(key)
    action = random_actions(spec, action_masks(spec, env_state.env_state), action_key, num=num)
    env_state, _ = jax.vmap(spec.autoreset.step)(
        env_state, clip_to_bounds(spec, action), jax.random.split(step_key, num)
    )
    return env_state, env_state.observation


# ------------------------------------------------------------------------------------- update


def update(
    spec: LearnerSpec, state: LearnerState, hyperparams: Hyperparams | None = None
) -> tuple[LearnerState, dict[str, Array]]:
    """`U = num_updates_per_eval` training steps in one loop.

    Args:
        spec: the learner's static pieces.
        state: the learner state.
        hyperparams: the update's numbers; None takes the config's (as Python floats).

    Returns:
        the state after `U` updates and the metrics of each (every one `[U]`).
    """
    hp = hyperparams_of(spec.config) if hyperparams is None else hyperparams
    return jax.lax.scan(
        lambda s, _: train_step(spec, s, hp), state, None, spec.config.num_updates_per_eval
    )


def train_step(
    spec: LearnerSpec, state: LearnerState, hp: Hyperparams
) -> tuple[LearnerState, dict[str, Array]]:
    """One PPO update: a rollout, its advantages, then `K` epochs of minibatch steps.

    The observation statistics learn the rollout's observations after the epochs have learnt
    from it with the statistics it was acted with.

    Args:
        spec: the learner's static pieces.
        state: the learner state; its key is consumed (the next one is returned).
        hp: the update's numbers.

    Returns:
        the next state and scalar metrics: the losses' means over the epochs, episodes finished in
        the rollout (averaged over devices) and their mean return and length, the mean value.
    """
    cfg = spec.config
    key, rollout_key, epoch_key = jax.random.split(state.key, 3)
    env_state, traj = rollout(spec, state.params, state.obs_stats, state.env_state, rollout_key)
    advantages, targets = estimate_advantages(spec, state.params.critic, state.obs_stats, traj, hp)
    stats = state.obs_stats
    if cfg.normalize_observations:
        assert traj.raw_obs is not None
        stats = obs_norm.update(stats, traj.raw_obs, axis_name=spec.axis_name)
    batch = jax.tree.map(
        _flatten_time, Batch(traj._replace(raw_obs=None, next_obs=None), advantages, targets)
    )
    start = EpochCarry(state.params, state.actor_opt_state, state.critic_opt_state)
    learnt, info = update_epochs(spec, start, batch, epoch_key, hp)
    metrics = update_metrics(spec, traj, info)
    new = LearnerState(
        params=learnt.params,
        actor_opt_state=learnt.actor_opt_state,
        critic_opt_state=learnt.critic_opt_state,
        obs_stats=stats,
        env_state=env_state,
        key=key,
        update_step=state.update_step + 1,
    )
    return new, metrics


def rollout(
    spec: LearnerSpec,
    params: ActorCriticParams,
    obs_stats: obs_norm.RunningStats,
    env_state: AutoResetState,
    key: PRNGKey,
) -> tuple[AutoResetState, Transition]:
    """`T` steps of the `E` environments with the acting policy.

    The rollout's randomness is drawn in bulk before its loop (on CPU each draw inside the loop
    would be a small loop of its own): the action noise, the steps' keys and, when
    `spec.fresh_ahead`, the states that finished episodes restart from.

    Args:
        spec: the learner's static pieces.
        params: the acting parameters.
        obs_stats: the acting observation statistics.
        env_state: `[E]` environments.
        key: consumed.

    Returns:
        the environments after `T` steps and the `Transition` of every step (leaves `[T, E, ...]`).
    """
    T, E = spec.config.rollout_length, spec.config.num_envs
    noise_key, step_key, reset_key = jax.random.split(key, 3)
    noise = action_noise(spec, noise_key, T=T, E=E)
    step_keys = jax.random.split(step_key, (T, E))
    reset_keys = jax.random.split(reset_key, (T, E))
    if spec.fresh_ahead:
        fresh = jax.vmap(functools.partial(_restart_states, spec))(reset_keys)
    else:
        fresh = reset_keys  # drawn inside the loop
    inputs = RolloutInputs(noise, step_keys, fresh)
    return jax.lax.scan(functools.partial(rollout_step, spec, params, obs_stats), env_state, inputs)


def action_noise(spec: LearnerSpec, key: PRNGKey, *, T: int, E: int) -> Array:
    """The randomness of `T` steps' actions of `E` environments for the head's `sample_with`
    (see `RolloutInputs.noise`); `key` is consumed."""
    if spec.head == "beta":
        return jax.random.split(key, T)
    if spec.head == "multi_discrete":
        sizes = spec.env.action_components
        assert sizes is not None
        return jax.random.gumbel(key, (T, E, len(sizes), max(sizes)))
    shape = (T, E, spec.env.num_actions)
    if spec.head in CONTINUOUS_HEADS:
        return jax.random.normal(key, shape)
    return jax.random.gumbel(key, shape)


def _restart_states(spec: LearnerSpec, keys: Array) -> PyTree:
    """`[E, ...]` fresh environment states from `keys [E]`."""
    return jax.vmap(lambda k: spec.env.init(k)[0])(keys)


def rollout_step(
    spec: LearnerSpec,
    params: ActorCriticParams,
    obs_stats: obs_norm.RunningStats,
    env_state: AutoResetState,
    inputs: RolloutInputs,
) -> tuple[AutoResetState, Transition]:
    """One step of the `E` environments with the acting policy (`inputs` leaves `[E, ...]`)."""
    fresh = inputs.fresh if spec.fresh_ahead else _restart_states(spec, inputs.fresh)
    raw = env_state.observation
    obs = normalize_observations(spec, obs_stats, raw)
    mask = head_mask(spec, action_masks(spec, env_state.env_state))
    dist = mask_policy(spec.network.policy(params.actor, obs), mask)
    action = dist.sample_with(inputs.noise)
    log_prob = dist.log_prob(action)
    value = spec.network.value(params.critic, obs)
    env_state, out = jax.vmap(spec.autoreset.step_from)(
        env_state, env_action(spec, action), inputs.step_keys, fresh
    )
    transition = Transition(
        obs=obs,
        raw_obs=raw if spec.config.normalize_observations else None,
        action=action,
        action_noise=inputs.noise if spec.head == "tanh_gaussian" else None,
        log_prob=log_prob,
        value=value,
        reward=out.reward,
        terminated=out.terminated,
        truncated=out.truncated,
        next_obs=out.next_observation,
        action_mask=mask,
        old_policy=per_sample(dist) if spec.config.loss == "kl_penalty" else None,
        episode_return=out.episode_return,
        episode_length=out.episode_length,
    )
    return env_state, transition


def estimate_advantages(
    spec: LearnerSpec,
    critic_params: PyTree,
    obs_stats: obs_norm.RunningStats,
    traj: Transition,
    hp: Hyperparams,
) -> tuple[Array, Array]:
    """Truncated GAE of a rollout (see `turbozero.ppo.gae`), bootstrapped from the values of the
    true next observations, advantages standardised over the batch (and devices) if configured.

    Args:
        spec: the learner's static pieces.
        critic_params: the critic's variables the rollout acted with.
        obs_stats: the observation statistics the rollout acted with.
        traj: the rollout, leaves `[T, E, ...]`.
        hp: the update's numbers (`gamma`, `gae_lambda`, `reward_scale`).

    Returns:
        `[T, E]` advantages and `[T, E]` value targets.
    """
    assert traj.next_obs is not None
    next_obs = normalize_observations(spec, obs_stats, _flatten_time(traj.next_obs))
    next_values = spec.network.value(critic_params, next_obs).reshape(traj.value.shape)
    advantages, targets = truncated_gae(
        traj.reward * hp.reward_scale,
        traj.value,
        next_values,
        traj.terminated,
        traj.truncated,
        gamma=hp.gamma,
        gae_lambda=hp.gae_lambda,
    )
    if spec.config.standardize_advantages:
        mean = _pmean(spec, jnp.mean(advantages))
        var = _pmean(spec, jnp.mean(jnp.square(advantages - mean)))
        advantages = (advantages - mean) / jnp.sqrt(var + 1e-8)
    return advantages, targets


def update_epochs(
    spec: LearnerSpec, carry: EpochCarry, batch: Batch, key: PRNGKey, hp: Hyperparams
) -> tuple[EpochCarry, dict[str, Array]]:
    """`K` epochs, each `N` gradient steps on shuffled minibatches of `M` from `batch`.

    Args:
        spec: the learner's static pieces.
        carry: the parameters and optimizer states to learn.
        batch: leaves `[T * E, ...]`.
        key: consumed by the shuffles.
        hp: the update's numbers.

    Returns:
        the learnt parameters and optimizer states, and the losses' information `[K, N]`.
    """
    epoch = functools.partial(run_epoch, spec, batch, hp)
    return jax.lax.scan(epoch, carry, jax.random.split(key, spec.config.epochs))


def run_epoch(
    spec: LearnerSpec, batch: Batch, hp: Hyperparams, carry: EpochCarry, key: PRNGKey
) -> tuple[EpochCarry, dict[str, Array]]:
    """One pass over `batch` (leaves `[T * E, ...]`) in `N` shuffled minibatches of `M`
    (`key` is consumed); returns the learnt carry and the losses' information `[N]`."""
    cfg = spec.config
    # One sort of random 32-bit keys (ties, rare, keep index order): a permutation in one round
    # where `jax.random.permutation` takes two.
    perm = jnp.argsort(jax.random.bits(key, (cfg.batch_size,)))
    shuffled = jax.tree.map(
        lambda x: jnp.take(x, perm, axis=0).reshape(
            (cfg.num_minibatches, cfg.minibatch_size, *x.shape[1:])
        ),
        batch,
    )
    return jax.lax.scan(functools.partial(minibatch_step, spec, hp), carry, shuffled)


def minibatch_step(
    spec: LearnerSpec, hp: Hyperparams, carry: EpochCarry, minibatch: Batch
) -> tuple[EpochCarry, dict[str, Array]]:
    """One Adam step of the actor and of the critic on `minibatch` (leaves `[M, ...]`).

    Gradients are clipped by global norm (in the optimizer), averaged over `spec.axis_name`, and
    the steps scaled by the members' learning rates.

    Returns:
        the new parameters and optimizer states, and scalar losses, KL and gradient norms.
    """
    params = carry.params
    actor_grads, actor_info = jax.grad(functools.partial(actor_loss, spec), has_aux=True)(
        params.actor, minibatch.transitions, minibatch.advantages, hp
    )
    critic_grads, critic_info = jax.grad(functools.partial(critic_loss, spec), has_aux=True)(
        params.critic, minibatch.transitions, minibatch.targets, hp
    )
    actor_grads, critic_grads = _pmean(spec, (actor_grads, critic_grads))
    opt = spec.optimizer
    actor_updates, actor_opt_state = opt.update(actor_grads, carry.actor_opt_state, params.actor)
    critic_updates, critic_opt_state = opt.update(
        critic_grads, carry.critic_opt_state, params.critic
    )
    actor_updates = jax.tree.map(lambda u: u * hp.actor_lr, actor_updates)
    critic_updates = jax.tree.map(lambda u: u * hp.critic_lr, critic_updates)
    params = ActorCriticParams(
        optax.apply_updates(params.actor, actor_updates),
        optax.apply_updates(params.critic, critic_updates),
    )
    info = {
        **actor_info,
        **critic_info,
        "actor_grad_norm": optax.tree.norm(actor_grads),
        "critic_grad_norm": optax.tree.norm(critic_grads),
    }
    return EpochCarry(params, actor_opt_state, critic_opt_state), info


def actor_loss(
    spec: LearnerSpec,
    actor_params: PyTree,
    transitions: Transition,
    advantages: Array,
    hp: Hyperparams,
) -> tuple[Array, dict[str, Array]]:
    """The policy's loss on `transitions` (leaves `[M, ...]`) with `advantages [M]`: the clipped
    surrogate, the KL-penalised one or DPO's, minus the entropy bonus; and its parts."""
    dist = mask_policy(spec.network.policy(actor_params, transitions.obs), transitions.action_mask)
    log_prob = dist.log_prob(transitions.action)
    if spec.config.loss == "clip":
        loss, info = ppo_clip_loss(log_prob, transitions.log_prob, advantages, clip_eps=hp.clip_eps)
    elif spec.config.loss == "dpo":
        loss, info = dpo_loss(
            log_prob, transitions.log_prob, advantages, alpha=hp.dpo_alpha, beta=hp.dpo_beta
        )
    else:
        kl = policy_kl(dist, transitions)
        loss, info = ppo_kl_penalty_loss(
            log_prob, transitions.log_prob, advantages, kl, kl_coef=hp.kl_coef
        )
    entropy = policy_entropy(dist, transitions)
    total = loss + entropy_bonus(entropy, coef=hp.ent_coef)
    return total, {"actor_loss": loss, "entropy": jnp.mean(entropy), **info}


def policy_entropy(dist: Distribution, transitions: Transition) -> Array:
    """`[M]` entropy of the policy at `transitions`' observations: closed forms, except the
    tanh-Gaussian's one-sample estimate at the current policy's reparameterised sample of the
    acting sample's noise (see `TanhGaussian.entropy`) and the masked multi-discrete head's
    components' entropies given the earlier components of the action taken."""
    if isinstance(dist, TanhGaussian):
        return dist.entropy(transitions.action_noise)
    if isinstance(dist, MultiCategorical):
        return dist.entropy(transitions.action)
    return dist.entropy()


def policy_kl(dist: Distribution, transitions: Transition) -> Array:
    """`[M]` KL(acting policy || `dist`) at `transitions`' observations (closed forms; the masked
    multi-discrete head's components given the earlier components of the action taken)."""
    old = transitions.old_policy
    assert old is not None and type(old) is type(dist)
    if isinstance(old, MultiCategorical):
        return old.kl(dist, transitions.action)  # type: ignore[arg-type]
    return old.kl(dist)  # type: ignore[arg-type]


def critic_loss(
    spec: LearnerSpec,
    critic_params: PyTree,
    transitions: Transition,
    targets: Array,
    hp: Hyperparams,
) -> tuple[Array, dict[str, Array]]:
    """The critic's weighted clipped value loss on `transitions` (leaves `[M, ...]`) with value
    `targets [M]`; and the unweighted loss."""
    values = spec.network.value(critic_params, transitions.obs)
    loss = clipped_value_loss(values, transitions.value, targets, clip_eps=hp.value_clip_eps)
    return hp.vf_coef * loss, {"value_loss": loss}


def update_metrics(
    spec: LearnerSpec, traj: Transition, info: Mapping[str, Array]
) -> dict[str, Array]:
    """Scalar metrics of one update, averaged over `spec.axis_name`.

    Args:
        spec: the learner's static pieces.
        traj: the rollout, leaves `[T, E, ...]`.
        info: the losses' information, each `[K, N]`.

    Returns:
        the mean of each `info` entry; `episodes`, the episodes that ended in the rollout (per
        device: may be a fraction, e.g. 1 of 4 devices), their mean `episode_return` and
        `episode_length` (0 without episodes), and `value_mean`.
    """
    done = (traj.terminated | traj.truncated).astype(jnp.float32)
    episodes = _pmean(spec, jnp.sum(done))
    metrics = {k: _pmean(spec, jnp.mean(v)) for k, v in info.items()}
    metrics.update(
        episodes=episodes,
        episode_return=_per_episode(_pmean(spec, jnp.sum(done * traj.episode_return)), episodes),
        episode_length=_per_episode(_pmean(spec, jnp.sum(done * traj.episode_length)), episodes),
        value_mean=_pmean(spec, jnp.mean(traj.value)),
    )
    return metrics


def _per_episode(total: Array, episodes: Array) -> Array:
    return jnp.where(episodes > 0, total / jnp.where(episodes > 0, episodes, 1.0), 0.0)


# ------------------------------------------------------------------------------------- evaluate


def evaluate(
    spec: LearnerSpec,
    params: ActorCriticParams,
    obs_stats: obs_norm.RunningStats,
    key: PRNGKey,
    *,
    num_episodes: int | None = None,
) -> dict[str, Array]:
    """Episodes of fresh environments played by the policy (greedy if `eval_greedy`).

    Args:
        spec: the learner's static pieces.
        params: the networks' variables.
        obs_stats: observation statistics (read when normalising).
        key: consumed.
        num_episodes: `V`, static; default `config.eval_episodes`.

    Returns:
        scalar `return_mean`, `return_std`, `return_min`, `return_max` and `length_mean` of the
        `V` episodes, and `finished`, the fraction that ended within `eval_max_steps` (the
        others' returns are partial).
    """
    n = spec.config.eval_episodes if num_episodes is None else int(num_episodes)
    init_key, run_key = jax.random.split(key)
    states, md = jax.vmap(spec.env.init)(jax.random.split(init_key, n))
    returns = jnp.zeros((n,), jnp.float32)
    done = md.terminated | md.truncated
    start = EvalCarry(states, returns, jnp.zeros((n,), jnp.int32), done, jnp.int32(0), run_key)
    end = jax.lax.while_loop(
        functools.partial(_evaluating, spec),
        functools.partial(evaluation_step, spec, params, obs_stats),
        start,
    )
    ret, length = end.returns, end.lengths.astype(jnp.float32)
    return {
        "return_mean": jnp.mean(ret),
        "return_std": jnp.std(ret),
        "return_min": jnp.min(ret),
        "return_max": jnp.max(ret),
        "length_mean": jnp.mean(length),
        "finished": jnp.mean(end.done.astype(jnp.float32)),
    }


def _evaluating(spec: LearnerSpec, carry: EvalCarry) -> Array:
    return (carry.step < spec.config.eval_max_steps) & ~jnp.all(carry.done)


def evaluation_step(
    spec: LearnerSpec,
    params: ActorCriticParams,
    obs_stats: obs_norm.RunningStats,
    carry: EvalCarry,
) -> EvalCarry:
    """One step of the `V` evaluation episodes; finished ones no longer count."""
    n = carry.returns.shape[0]
    key, act_key, step_key = jax.random.split(carry.key, 3)
    mask = action_masks(spec, carry.states)
    obs = jax.vmap(spec.env.observe)(carry.states)
    action = act(
        spec, params, obs_stats, obs, act_key, greedy=spec.config.eval_greedy, action_mask=mask
    )
    states, md = jax.vmap(spec.env.step)(carry.states, action, jax.random.split(step_key, n))
    live = ~carry.done
    return EvalCarry(
        states=states,
        returns=carry.returns + jnp.where(live, md.rewards[:, 0], 0.0),
        lengths=carry.lengths + live.astype(jnp.int32),
        done=carry.done | md.terminated | md.truncated,
        step=carry.step + 1,
        key=key,
    )


def absolute_evaluate(ppo: PPO) -> Callable[..., dict[str, Array]]:
    """`evaluate` with `absolute_eval_factor` times as many episodes (for the best parameters)."""
    return functools.partial(
        ppo.evaluate, num_episodes=ppo.config.eval_episodes * ppo.config.absolute_eval_factor
    )


# ------------------------------------------------------------------------------------- factory


def validate_ppo_args(
    config: PPOConfig | None, env: Env | str | None, overrides: Mapping[str, Any]
) -> tuple[PPOConfig, Env]:
    """Check `make_ppo`'s arguments and resolve them into a configuration and an environment.

    Raises:
        turbozero.config.ConfigError: for an unknown field, a value out of range, or an action
            head that does not fit the environment's actions (`resolve_action_head`).
        ValueError: for an environment with more than one player.
    """
    overrides = dict(overrides)
    if isinstance(env, str):
        overrides["env"] = env
        env = None
    names = [f.name for f in dataclasses.fields(PPOConfig)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        hints = "".join(suggest(k, names) for k in unknown)
        raise ConfigError(f"unknown PPOConfig keys {unknown}.{hints}")
    if config is None:
        config = PPOConfig(**overrides)
    elif overrides:
        config = dataclasses.replace(config, **overrides)
    if env is None:
        env = make(config.env, one_hot=config.one_hot_observations)
    if env.num_players != 1:
        raise ValueError(
            f"env must have num_players == 1 for PPO, got {env.num_players} ({env.name})"
        )
    resolve_action_head(config.action_head, env)
    return config, env


def resolve_action_head(action_head: str, env: Env) -> str:
    """The head `action_head` names for `env`: "auto" is "categorical" for discrete actions and
    "gaussian" for continuous ones.

    Raises:
        turbozero.config.ConfigError: naming the head and what the environment's actions lack.
    """

    if action_head == "auto":
        return "gaussian" if env.continuous else "categorical"
    kind = "continuous" if env.continuous else "discrete"
    if (action_head in CONTINUOUS_HEADS) != env.continuous:
        fits = "'gaussian', 'tanh_gaussian', 'beta'" if env.continuous else "'categorical'"
        if not env.continuous and env.action_components is not None:
            fits += ", 'multi_discrete'"
        raise ConfigError(
            f"action_head={action_head!r} does not fit {env.name!r}, whose actions are {kind}: "
            f"use 'auto' or one of {fits}"
        )
    if action_head in BOUNDED_HEADS:
        low, high = _bounds(env)
        if low is None or high is None or not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ConfigError(
                f"action_head={action_head!r} needs finite action bounds, and {env.name!r} has "
                f"action_low={env.action_low!r}, action_high={env.action_high!r}: use "
                f"'gaussian' (clipped to whatever bounds there are)"
            )
        if not (low < high).all():
            raise ConfigError(
                f"action_head={action_head!r} needs action_low < action_high, and {env.name!r} "
                f"has action_low={env.action_low!r}, action_high={env.action_high!r}"
            )
    if action_head == "multi_discrete" and env.action_components is None:
        raise ConfigError(
            f"action_head='multi_discrete' needs an environment whose actions are made of "
            f"components (Env.action_components, e.g. jumanji's MultiDiscreteArray); "
            f"{env.name!r} has {env.num_actions} plain discrete actions: use 'categorical'"
        )
    return action_head


def _bounds(env: Env) -> tuple[np.ndarray | None, np.ndarray | None]:
    """`env`'s action bounds as `[D]` float32 arrays (None where it has none)."""
    dim = (env.num_actions,)
    return tuple(  # type: ignore[return-value]
        None if b is None else np.broadcast_to(np.asarray(b, np.float32), dim)
        for b in (env.action_low, env.action_high)
    )


def make_learner_spec(config: PPOConfig, env: Env, *, axis_name: str | None = None) -> LearnerSpec:
    """The static pieces of a learner for a checked `config` and `env` (see `validate_ppo_args`).

    The optimizer is Adam at a learning rate of 1 (decaying linearly to 0 over the run's
    optimizer steps with `lr_schedule="linear"`) after global-norm clipping; the update scales
    its step by the member's rate. Restart states are drawn ahead of the rollout's loop when
    the `T * E` states of all `num_seeds` seeds fit in `FRESH_AHEAD_BYTES` (the seeds' programs
    are vmapped, so all of theirs are held at once).
    """
    head = resolve_action_head(config.action_head, env)
    low, high = _bounds(env) if head in BOUNDED_HEADS else (None, None)
    network = make_actor_critic(
        action_dim=env.num_actions,
        continuous=env.continuous,
        actor_hidden=config.actor_hidden,
        critic_hidden=config.critic_hidden,
        activation=config.activation,
        layer_norm=config.layer_norm,
        init_log_std=config.init_log_std,
        head=None if config.action_head == "auto" else head,
        action_low=None if low is None else low.tolist(),
        action_high=None if high is None else high.tolist(),
        action_components=env.action_components if head == "multi_discrete" else None,
    )
    steps = config.num_updates * config.epochs * config.num_minibatches
    schedule = optax.linear_schedule(1.0, 0.0, steps) if config.lr_schedule == "linear" else 1.0
    optimizer = optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm), optax.adam(schedule, eps=config.adam_eps)
    )
    state_bytes = pytree_bytes(jax.eval_shape(lambda k: env.init(k)[0], jax.random.PRNGKey(0)))
    restarts = config.rollout_length * config.num_envs * config.num_seeds
    return LearnerSpec(
        config=config,
        env=env,
        autoreset=make_autoreset(env),
        network=network,
        optimizer=optimizer,
        axis_name=axis_name,
        head=head,
        action_low=None if env.action_low is None else jnp.asarray(env.action_low, jnp.float32),
        action_high=None if env.action_high is None else jnp.asarray(env.action_high, jnp.float32),
        fresh_ahead=restarts * state_bytes <= FRESH_AHEAD_BYTES,
    )


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
    config, env = validate_ppo_args(config, env, overrides)
    spec = make_learner_spec(config, env, axis_name=axis_name)
    return PPO(
        init=functools.partial(init, spec),
        update=functools.partial(update, spec),
        evaluate=functools.partial(evaluate, spec),
        act=functools.partial(act, spec),
        network=spec.network,
        env=env,
        config=config,
        hyperparams=hyperparams_of(config),
    )


# ---------------------------------------------------------------- what a run's checkpoint holds


class CheckpointState(NamedTuple):
    """What a PPO checkpoint holds (`S` seeds; every leaf has a leading `[S]` axis but the key).

    Attributes:
        learner: the seed-batched `LearnerState`.
        best_params: each seed's parameters with the highest mean evaluation return so far.
        best_obs_stats: the observation statistics those parameters were evaluated with.
        best_return: `[S]` that evaluation return (-inf before the first evaluation).
        eval_key: PRNG key consumed by the next evaluation.
    """

    learner: LearnerState
    best_params: ActorCriticParams
    best_obs_stats: obs_norm.RunningStats
    best_return: Array
    eval_key: PRNGKey


def seed_keys(config: PPOConfig) -> tuple[PRNGKey, Array]:
    """The evaluation key and the `[S]` initialisation keys of a run."""
    keys = jax.random.split(jax.random.PRNGKey(config.seed), config.num_seeds + 1)
    return keys[0], keys[1:]


def initial_checkpoint(ppo: PPO) -> CheckpointState:
    """The `CheckpointState` a run starts from (`jit` it: it initialises every seed)."""
    eval_key, keys = seed_keys(ppo.config)
    learner = jax.vmap(ppo.init)(keys)
    return CheckpointState(
        learner=learner,
        best_params=learner.params,
        best_obs_stats=learner.obs_stats,
        best_return=jnp.full((ppo.config.num_seeds,), -jnp.inf, jnp.float32),
        eval_key=eval_key,
    )


def abstract_checkpoint(ppo: PPO) -> Any:
    """Shapes and dtypes of a run's `CheckpointState` (nothing is computed); to restore into."""
    return jax.eval_shape(functools.partial(initial_checkpoint, ppo))


@jax.jit
def keep_best(ckpt: CheckpointState, returns: Array) -> CheckpointState:
    """Keep each seed's parameters whose evaluation beat its best so far; a NaN evaluation (a
    diverged seed) never counts as better and leaves the stored best return as it was."""
    better = returns > ckpt.best_return  # False for NaN

    def pick(new: Array, old: Array) -> Array:
        return jnp.where(better.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)

    params, stats = jax.tree.map(
        pick,
        (ckpt.learner.params, ckpt.learner.obs_stats),
        (ckpt.best_params, ckpt.best_obs_stats),
    )
    return ckpt._replace(
        best_params=params,
        best_obs_stats=stats,
        best_return=jnp.where(better, returns, ckpt.best_return),
    )


def make_seed_evaluation(
    ppo: PPO,
) -> Callable[[CheckpointState], tuple[CheckpointState, dict[str, Any]]]:
    """`evaluation(ckpt) -> (ckpt, row)`, a run's evaluation after an epoch: every seed's
    current parameters on `eval_episodes` fresh episodes (the `S` seeds in one compiled call,
    consuming the checkpoint's `eval_key`), each seed keeping its best (`keep_best`); the row is
    `eval_row`'s."""
    evaluate_seeds = jax.jit(jax.vmap(ppo.evaluate))

    def evaluation(ckpt: CheckpointState) -> tuple[CheckpointState, dict[str, Any]]:
        eval_key, key = jax.random.split(ckpt.eval_key)
        learner = ckpt.learner
        keys = jax.random.split(key, ppo.config.num_seeds)
        returns = evaluate_seeds(learner.params, learner.obs_stats, keys)
        ckpt = keep_best(ckpt._replace(eval_key=eval_key), returns["return_mean"])
        return ckpt, eval_row(returns)

    return evaluation


def absolute_entries(ppo: PPO, ckpt: CheckpointState) -> dict[str, Any]:
    """The "absolute metric" of a finished run, the entries its summary's `eval` adds: every
    seed's best parameters re-evaluated with `absolute_eval_factor` times `eval_episodes`
    episodes (`absolute_evaluate`, with the key the next evaluation would take), their seed means
    (`absolute`), each seed's mean return (`absolute_return_per_seed`, `[S]`) and the episodes
    a seed played (`absolute_episodes`)."""
    cfg = ppo.config
    _, key = jax.random.split(ckpt.eval_key)
    absolute = jax.jit(jax.vmap(absolute_evaluate(ppo)))(
        ckpt.best_params, ckpt.best_obs_stats, jax.random.split(key, cfg.num_seeds)
    )
    return {
        "absolute": seed_means(absolute),
        "absolute_return_per_seed": np.asarray(absolute["return_mean"]).tolist(),
        "absolute_episodes": cfg.eval_episodes * cfg.absolute_eval_factor,
    }


# ---------------------------------------------------------------- a run's rows, seed means


def seed_means(tree: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Seed means of a dict of arrays."""
    return {prefix + k: float(np.mean(np.asarray(v))) for k, v in tree.items()}


def epoch_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Seed-mean training metrics of one call (`[S, U]` leaves): the last update's losses, and
    episode statistics over every episode that finished during the call (NaN if none did)."""
    out = seed_means({k: np.asarray(v)[:, -1] for k, v in metrics.items()})
    episodes = np.asarray(metrics["episodes"])
    total = float(episodes.sum())
    for name in ("episode_return", "episode_length"):
        weighted = float((np.asarray(metrics[name]) * episodes).sum())
        out[name] = weighted / total if total > 0 else float("nan")
    out["episodes"] = total / episodes.shape[0]
    return out


def eval_row(metrics: dict[str, Any]) -> dict[str, Any]:
    """`eval/return` (the seeds' mean of each seed's mean episode return), the other statistics
    likewise as means over seeds of per-seed values (`eval/return_max` is the mean of each
    seed's best episode, not the best over all seeds), and `eval/return_per_seed`."""
    row = {
        ("eval/return" if k == "return_mean" else f"eval/{k}"): v
        for k, v in seed_means(metrics).items()
    }
    row["eval/return_per_seed"] = np.asarray(metrics["return_mean"]).tolist()
    return row
