"""Conformance check: run any `Env` through the contract's rules and name every violation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.envs.core import Env
from turbozero.types import PRNGKey, PyTree
from turbozero.validate import check_count

# Stable names of the rules `check` verifies.
RULES = {
    "init_not_jittable": "init(key) must trace and run under jit and vmap",
    "step_not_jittable": "step(state, action, key) must trace and run under jit and vmap",
    "observe_not_jittable": "observe(state) must trace and run under jit and vmap",
    "metadata_not_jittable": "metadata(state) must trace and run under jit and vmap",
    "metadata_shapes": (
        "rewards [P] float, action_mask [A] bool, scalar terminated/truncated/player"
    ),
    "observation_shape": "observe(state) must have env.observation_shape",
    "unstable_state": "state shapes and dtypes must not change across steps",
    "step_not_counted": "metadata step must grow by one on every step of a game not over",
    "state_changed_after_end": "a game that is over must keep its position (its observation)",
    "reward_after_termination": (
        "rewards must be zero on steps taken after the game is over (terminated or truncated)"
    ),
    "no_legal_action": "a game that is not over must have at least one legal action",
    "player_out_of_range": "cur_player_id must be in [0, num_players)",
    "metadata_mismatch": "env.metadata(state) must equal what init/step returned",
    # games with a chance split (env.chance), checked on the states and actions of the games run
    "chance_not_jittable": (
        "chance.decide, probabilities, sample_outcome and resolve must trace and run under jit "
        "and vmap"
    ),
    "chance_shapes": (
        "probabilities(afterstate) must be float32 [C]; sample_outcome(afterstate, key) an "
        "integer scalar in [0, C)"
    ),
    "chance_negative_probability": "probabilities must be finite and >= 0",
    "chance_not_normalized": "probabilities must sum to one",
    "chance_resolve_mismatch": (
        "resolve(a, sample_outcome(a, key)) with a = decide(state, action) must equal "
        "step(state, action, key), state and metadata"
    ),
    "chance_sampler_mismatch": (
        "sample_outcome must draw from probabilities: never an outcome of probability zero, "
        "frequencies within six standard deviations"
    ),
    "chance_impossible_outcome": (
        "an outcome of positive probability must be one the step draws (none given enough "
        "probability to expect 20 of sample_outcome's draws may go undrawn)"
    ),
}
CHANCE_DRAWS = 1024  # sample_outcome draws per afterstate for the frequency rules


class EnvCheckError(ValueError):
    """Raised by `check` with every violated rule in `violations`."""

    def __init__(self, name: str, violations: dict[str, str]):
        self.violations = violations
        lines = "\n".join(f"  - {k}: {RULES[k]} ({v})" for k, v in violations.items())
        super().__init__(f"environment {name!r} violates the contract:\n{lines}")


def _sig(tree):
    return jax.tree_util.tree_map(lambda x: (tuple(x.shape), str(x.dtype)), tree)


def _random_actions(env: Env, action_mask: jax.Array, key: jax.Array) -> jax.Array:
    """`[B]` int32 legal moves (uniform over each row's mask; any move where none is legal), or
    for a continuous space `[B, *action_shape]` float32 actions, uniform within the bounds where
    they are finite and standard normal where they are not."""
    B = action_mask.shape[0]
    if not env.continuous:
        logits = jnp.where(action_mask, 0.0, -jnp.inf)
        logits = jnp.where(action_mask.any(-1, keepdims=True), logits, 0.0)
        return jax.random.categorical(key, logits).astype(jnp.int32)
    shape = (B, *(env.action_shape or ()))
    low = jnp.broadcast_to(
        jnp.asarray(-jnp.inf if env.action_low is None else env.action_low, jnp.float32), shape
    )
    high = jnp.broadcast_to(
        jnp.asarray(jnp.inf if env.action_high is None else env.action_high, jnp.float32), shape
    )
    k_u, k_n = jax.random.split(key)
    bounded = jnp.isfinite(low) & jnp.isfinite(high)
    uniform = jax.random.uniform(
        k_u, shape, jnp.float32, jnp.where(bounded, low, 0.0), jnp.where(bounded, high, 1.0)
    )
    normal = jnp.clip(jax.random.normal(k_n, shape, jnp.float32), low, high)
    return jnp.where(bounded, uniform, normal)


class _ChanceFns(NamedTuple):
    """A chance split's functions under `jit` and `vmap` over games (`draws`: over `[B, K]`
    keys, `K` draws per afterstate)."""

    decide: Callable[..., Any]
    probabilities: Callable[..., Any]
    sample: Callable[..., Any]
    draws: Callable[..., Any]
    resolve: Callable[..., Any]


def _trace_chance(env: Env, state: PyTree, action: jax.Array, keys: jax.Array) -> _ChanceFns:
    """`env.chance` compiled for a batch, traced once here (`chance_not_jittable` otherwise)."""
    assert env.chance is not None
    ch = env.chance
    fns = _ChanceFns(
        decide=jax.jit(jax.vmap(ch.decide)),
        probabilities=jax.jit(jax.vmap(ch.probabilities)),
        sample=jax.jit(jax.vmap(ch.sample_outcome)),
        draws=jax.jit(jax.vmap(jax.vmap(ch.sample_outcome, in_axes=(None, 0)))),
        resolve=jax.jit(jax.vmap(ch.resolve)),
    )
    try:
        after = jax.eval_shape(fns.decide, state, action)
        jax.eval_shape(fns.probabilities, after)
        outcome = jax.eval_shape(fns.sample, after, keys)
        jax.eval_shape(fns.resolve, after, outcome)
    except Exception as e:
        raise EnvCheckError(env.name, {"chance_not_jittable": f"{type(e).__name__}: {e}"}) from e
    return fns


def _differing_leaves(a: PyTree, b: PyTree) -> list[str]:
    """Paths of the leaves where two batches differ (NaN equal to NaN); ['structure'] when
    their structures do."""
    if str(jax.tree_util.tree_structure(a)) != str(jax.tree_util.tree_structure(b)):
        return ["structure"]

    def same(x: jax.Array, y: jax.Array) -> bool:
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        # (on the host: compared op by op on the device, each leaf's shape compiled a program)
        return x.shape == y.shape and np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)

    paths = jax.tree_util.tree_flatten_with_path(a)[0]
    return [
        jax.tree_util.keystr(path)
        for (path, x), y in zip(paths, jax.tree_util.tree_leaves(b), strict=True)
        if not same(x, y)
    ]


def _check_chance_step(
    fns: _ChanceFns,
    num_outcomes: int,
    state: PyTree,
    action: jax.Array,
    keys: jax.Array,
    stepped: PyTree,
    key: jax.Array,
) -> dict[str, str]:
    """The chance rules on one batch of (state, action, key) whose ordinary step gave `stepped`
    (`(state, metadata)`): the violations found."""
    found: dict[str, str] = {}
    B, C = action.shape[0], num_outcomes
    after = fns.decide(state, action)
    probs = fns.probabilities(after)
    outcome = fns.sample(after, keys)
    odtype = jnp.result_type(outcome)
    if (
        probs.shape != (B, C)
        or probs.dtype != jnp.float32
        or outcome.shape != (B,)
        or not jnp.issubdtype(odtype, jnp.integer)
        or bool(jnp.any((outcome < 0) | (outcome >= C)))
    ):
        found["chance_shapes"] = (
            f"probabilities {probs.dtype}{list(probs.shape[1:])} for C={C}; outcomes "
            f"{odtype}{list(outcome.shape[1:])} {np.asarray(outcome).tolist()}"
        )
        return found
    p = np.asarray(probs, np.float64)
    if not np.all(np.isfinite(p) & (p >= 0)):
        found["chance_negative_probability"] = f"min {np.nanmin(p):.3g}"
        return found
    total = p.sum(-1)
    if np.any(np.abs(total - 1) > 1e-5):
        found["chance_not_normalized"] = f"sums {np.round(total, 6).tolist()}"
    differ = _differing_leaves(fns.resolve(after, outcome), stepped)
    if differ:
        found["chance_resolve_mismatch"] = f"in {', '.join(differ[:4])}"
    draws = np.asarray(fns.draws(after, jax.random.split(key, (B, CHANCE_DRAWS))))
    counts = np.stack([np.bincount(d, minlength=C)[:C] for d in draws.clip(0, C - 1)])
    expected = CHANCE_DRAWS * p / np.where(total > 0, total, 1)[:, None]
    sd = np.sqrt(expected * (1 - expected / CHANCE_DRAWS))
    drawn_impossible = (counts > 0) & (p == 0)
    off = np.abs(counts - expected) > 6 * sd + 3
    if np.any(drawn_impossible | off):
        b, o = np.argwhere(drawn_impossible | off)[0]
        found["chance_sampler_mismatch"] = (
            f"outcome {o} of p={p[b, o]:.4g} drawn {counts[b, o]} times in {CHANCE_DRAWS}"
        )
    never = (p > 0) & (counts == 0) & (expected >= 20)
    if np.any(never):
        b, o = np.argwhere(never)[0]
        found["chance_impossible_outcome"] = (
            f"outcome {o} given p={p[b, o]:.4g}, never drawn in {CHANCE_DRAWS}"
        )
    return found


def _traced(env: Env, key: PRNGKey, batch_size: int) -> tuple[Any, Any, Any, Any]:
    """`(states, metadata, jitted batched step, traced chance split or None)` of `batch_size`
    games, or an `EnvCheckError` naming the function that cannot be traced."""
    try:
        init = jax.jit(jax.vmap(env.init))
        state, md = init(jax.random.split(key, batch_size))
    except Exception as e:
        raise EnvCheckError(env.name, {"init_not_jittable": f"{type(e).__name__}: {e}"}) from e
    try:
        step = jax.jit(jax.vmap(env.step))
        jax.eval_shape(
            step,
            state,
            _random_actions(env, md.action_mask, key),
            jax.random.split(key, batch_size),
        )
    except Exception as e:
        raise EnvCheckError(env.name, {"step_not_jittable": f"{type(e).__name__}: {e}"}) from e
    for name, fn in (("observe", env.observe), ("metadata", env.metadata)):
        try:
            jax.eval_shape(jax.vmap(fn), state)
        except Exception as e:
            rule = f"{name}_not_jittable"
            raise EnvCheckError(env.name, {rule: f"{type(e).__name__}: {e}"}) from e
    chance = None
    if env.chance is not None:
        chance = _trace_chance(
            env,
            state,
            _random_actions(env, md.action_mask, key),
            jax.random.split(key, batch_size),
        )
    return state, md, step, chance


def _metadata_shape_problems(md: Any, batch_size: int, P: int, A: int) -> list[str]:
    """What is wrong with the shapes and dtypes of a batch's metadata, one line each."""
    shapes = {
        "rewards": (md.rewards.shape, (batch_size, P)),
        "action_mask": (md.action_mask.shape, (batch_size, A)),
        "terminated": (md.terminated.shape, (batch_size,)),
        "truncated": (md.truncated.shape, (batch_size,)),
        "cur_player_id": (md.cur_player_id.shape, (batch_size,)),
    }
    bad = [f"{k} {got} != {want}" for k, (got, want) in shapes.items() if got != want]
    if md.action_mask.dtype != jnp.bool_:
        bad.append(f"action_mask dtype {md.action_mask.dtype}")
    return bad


def check(env: Env, *, batch_size: int = 4, num_steps: int = 64, seed: int = 0) -> None:
    """Run `batch_size` random games for `num_steps` steps and check the contract.

    Discrete games get uniformly random legal moves; continuous spaces get float actions of
    `env.action_shape` within `env.action_low` / `env.action_high`. A game with a chance split
    (`env.chance`) has it checked on every step taken: against the ordinary step for the key
    the step was given, and its sampler against its probabilities over `CHANCE_DRAWS` draws.

    Raises:
        EnvCheckError: listing each violated rule by its stable name (see `RULES`).
    """
    batch_size = check_count("batch_size", batch_size, low=1)
    num_steps = check_count("num_steps", num_steps, low=1)
    v: dict[str, str] = {}
    key = jax.random.PRNGKey(seed)
    state, md, step, chance = _traced(env, key, batch_size)
    observe = jax.jit(jax.vmap(env.observe))
    meta = jax.jit(jax.vmap(env.metadata))
    sig0 = _sig(state)
    P, A = env.num_players, env.num_actions
    done_before = np.zeros(batch_size, bool)
    prev_steps = np.zeros(batch_size, np.int64)
    prev_seen = np.zeros((batch_size, 0))
    for t in range(num_steps + 1):
        bad = _metadata_shape_problems(md, batch_size, P, A)
        if bad:
            v.setdefault("metadata_shapes", "; ".join(bad))
            break
        obs = observe(state)
        if tuple(obs.shape[1:]) != tuple(env.observation_shape):
            v.setdefault("observation_shape", f"{tuple(obs.shape[1:])} != {env.observation_shape}")
        if _sig(state) != sig0:
            v.setdefault("unstable_state", f"after step {t}")
        steps = np.asarray(md.step)
        if t > 0 and np.any(~done_before & (steps != prev_steps + 1)):
            v.setdefault("step_not_counted", f"step {prev_steps.tolist()} -> {steps.tolist()}")
        prev_steps = steps
        seen = np.asarray(obs, np.float64).reshape(batch_size, -1)
        if t > 0 and seen.shape == prev_seen.shape:
            moved = ~np.all((seen == prev_seen) | (np.isnan(seen) & np.isnan(prev_seen)), -1)
            if np.any(done_before & moved):
                v.setdefault("state_changed_after_end", f"at step {t}")
        prev_seen = seen
        rewards = np.asarray(md.rewards)
        if np.any(done_before & np.any(rewards != 0, axis=-1)):
            v.setdefault("reward_after_termination", f"at step {t}")
        over = np.asarray(md.terminated | md.truncated)
        mask = np.asarray(md.action_mask)
        if np.any(~over & ~mask.any(-1)):
            v.setdefault("no_legal_action", f"at step {t}")
        player = np.asarray(md.cur_player_id)
        if np.any(~over & ((player < 0) | (player >= P))):
            hint = (
                " (the game has 1 player; for two, return rewards of shape [2], from which "
                "from_functions reads the player count, or pass num_players=2)"
                if P == 1
                else ""
            )
            v.setdefault(
                "player_out_of_range", f"cur_player_id={player.tolist()} at step {t}{hint}"
            )
        md2 = meta(state)
        same = jax.tree_util.tree_all(
            jax.tree_util.tree_map(
                lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), md, md2
            )
        )
        if not same:
            v.setdefault("metadata_mismatch", f"at step {t}")
        if t == num_steps:
            break
        done_before |= np.asarray(md.terminated | md.truncated)
        key, k_act, k_step = jax.random.split(key, 3)
        action = _random_actions(env, md.action_mask, k_act)
        keys = jax.random.split(k_step, batch_size)
        before = state
        state, md = step(before, action, keys)
        if chance is not None and env.chance is not None:
            found = _check_chance_step(
                chance,
                env.chance.num_outcomes,
                before,
                action,
                keys,
                (state, md),
                jax.random.fold_in(k_step, 1),
            )
            for rule, detail in found.items():
                v.setdefault(rule, f"{detail} at step {t}")
            if "chance_shapes" in found:
                chance = None  # the other chance rules need the shapes right
    if v:
        raise EnvCheckError(env.name, v)
