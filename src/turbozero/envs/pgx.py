"""Adapter for pgx games (pgx >= 2: `env.step(state, action, key)`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import pgx

from turbozero.envs.chance import Chance, no_chance_event
from turbozero.envs.core import Env, check_discrete_action
from turbozero.gamespec import game_spec
from turbozero.types import Array, PRNGKey, StepMetadata

REFUSED: dict[str, str] = {
    "kuhn_poker": "imperfect information",
    "leduc_holdem": "imperfect information",
    "sparrow_mahjong": "imperfect information and more than two players",
}


class ChanceRules(NamedTuple):
    """One pgx game's `_step` cut at its draw (for games not over, legal actions or not), from
    the game's file (`GameSpec.chance`): `split_pgx_step` applies the rules common to every pgx
    game around it.

    Attributes:
        num_outcomes: `C`.
        decide: `decide(state, action) -> (state, chance)`: pgx's step up to the draw (the step
            count already advanced), and `[]` bool whether the draw happens.
        probabilities: `probabilities(state) -> [C]` float32 of the draw, for a state `decide`
            returned with `chance` True.
        resolve: `resolve(state, outcome) -> state`: pgx's step from the draw on.
        sample: `sample(state, key) -> int32 []`: the outcome pgx's step draws from `key`, with
            the same `jax.random` calls on the same key as pgx's (a split step equals pgx's).
    """

    num_outcomes: int
    decide: Callable[[Any, Array], tuple[Any, Array]]
    probabilities: Callable[[Any], Array]
    resolve: Callable[[Any, Array], Any]
    sample: Callable[[Any, PRNGKey], Array]


def pgx_metadata(state: pgx.State) -> StepMetadata:
    """The contract's metadata read off a pgx state."""
    return StepMetadata(
        rewards=state.rewards,
        action_mask=state.legal_action_mask,
        terminated=state.terminated,
        cur_player_id=jnp.asarray(state.current_player, jnp.int32),
        step=jnp.asarray(state._step_count, jnp.int32),
        truncated=state.truncated,
    )


class PgxAfterstate(NamedTuple):
    """A pgx game's position after a decision, before its chance event.

    Attributes:
        state: the pgx state as the step leaves it before the draw: the decision's rewards and
            the step count are final; what the outcome decides (the board's new tile or the
            dice, legal moves, the end of the game, the observation) is not yet.
        chance: `[]` bool, whether a chance event follows.
        illegal: `[]` bool, the action was illegal: after the step pgx ends the game with the
            mover's penalty.
    """

    state: pgx.State
    chance: Array
    illegal: Array


def split_pgx_step(env: pgx.Env, rules: ChanceRules) -> Chance:
    """`Chance` for a pgx game from its `_step` cut at the draw: pgx's `Env.step` rules around it
    (a finished game keeps its state with zero rewards; an illegal action ends the game with a
    penalty; terminal states have every action marked legal; the observation is recomputed)."""

    def decide(state: pgx.State, action: Array) -> PgxAfterstate:
        check_discrete_action(str(env.id), action)
        done = state.terminated | state.truncated
        decided, chance = rules.decide(state.replace(_step_count=state._step_count + 1), action)
        held = state.replace(rewards=jnp.zeros_like(state.rewards))
        decided = jax.tree.map(lambda h, d: jnp.where(done, h, d), held, decided)
        return PgxAfterstate(decided, chance & ~done, ~state.legal_action_mask[action])

    def probabilities(after: PgxAfterstate) -> Array:
        none = no_chance_event(rules.num_outcomes)
        return jnp.where(after.chance, rules.probabilities(after.state), none)

    def sample_outcome(after: PgxAfterstate, key: PRNGKey) -> Array:
        return jnp.where(after.chance, rules.sample(after.state, key), 0).astype(jnp.int32)

    def resolve(after: PgxAfterstate, outcome: Array) -> tuple[pgx.State, StepMetadata]:
        mover = after.state.current_player
        state = jax.lax.cond(
            after.chance, lambda: rules.resolve(after.state, outcome), lambda: after.state
        )
        state = jax.lax.cond(
            after.illegal, lambda: env._step_with_illegal_action(state, mover), lambda: state
        )
        state = jax.lax.cond(
            state.terminated,
            lambda: state.replace(legal_action_mask=jnp.ones_like(state.legal_action_mask)),
            lambda: state,
        )
        state = state.replace(observation=env.observe(state))
        return state, pgx_metadata(state)

    return Chance(rules.num_outcomes, decide, probabilities, resolve, sample_outcome)


def pgx_chance(env: pgx.Env) -> Chance | None:
    """The chance split of a pgx game whose file has one (2048, backgammon), else None."""
    spec = game_spec(str(env.id))
    if spec is None or spec.chance is None:
        return None
    return split_pgx_step(env, spec.chance())


def pgx_episode_stats(env: pgx.Env) -> Callable[[pgx.State], dict[str, Array]] | None:
    """`Env.episode_stats` of the pgx games whose file has figures beyond the return (2048's
    tiles)."""
    spec = game_spec(str(env.id))
    return None if spec is None or spec.episode_stats is None else spec.episode_stats()


def from_pgx(env: pgx.Env, *, name: str | None = None) -> Env:
    """Wrap a `pgx.Env` in the contract."""
    env_id = name or str(env.id)

    def init(key):
        state = env.init(key)
        return state, pgx_metadata(state)

    def step(state, action, key):
        check_discrete_action(env_id, action)
        state = env.step(state, action, key)
        return state, pgx_metadata(state)

    def observe(state):
        return state.observation

    def render_svg(state) -> str:
        from pgx._src.visualizer import Visualizer  # host side only

        state = jax.tree.map(jnp.asarray, state)  # (drawings index with `.at`: jax arrays)
        spec = game_spec(env_id)
        page = None if spec is None else spec.page
        eagerly = jax.disable_jit() if page is not None and page.draw_eagerly else nullcontext()
        with eagerly:
            svg: str = Visualizer(color_theme="light").get_dwg(states=state).tostring()
        return svg if page is None or page.redraw is None else page.redraw(svg)

    # pgx's `num_actions` and `observation_shape` each run `init` op by op (a hundred small
    # programs compiled per game); the shapes of a traced `init` say the same
    start = jax.eval_shape(env.init, jax.random.PRNGKey(0))
    return Env(
        name=env_id,
        num_players=int(env.num_players),
        num_actions=int(start.legal_action_mask.shape[0]),
        observation_shape=tuple(int(d) for d in start.observation.shape),
        init=init,
        step=step,
        observe=observe,
        metadata=pgx_metadata,
        deterministic=not _stochastic(env),  # by pgx's id, whatever the name
        chance=pgx_chance(env),
        render_svg=render_svg,
        raw=env,
        episode_stats=pgx_episode_stats(env),
    )


def _stochastic(env: pgx.Env) -> bool:
    spec = game_spec(str(env.id))
    return spec is not None and spec.stochastic


def make_pgx(env_id: str) -> Env:
    """A pgx game by id, refusing the ones we do not support with the reason."""
    if env_id in REFUSED:
        raise ValueError(f"pgx game {env_id!r} is not supported yet: {REFUSED[env_id]}")
    return from_pgx(pgx.make(env_id), name=env_id)  # type: ignore[arg-type]
