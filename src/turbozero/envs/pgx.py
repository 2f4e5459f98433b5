"""Adapter for pgx games (pgx >= 2: `env.step(state, action, key)`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import pgx

from turbozero.envs.chance import Chance, no_chance_event
from turbozero.envs.core import Env, check_discrete_action
from turbozero.types import Array, PRNGKey, StepMetadata

if TYPE_CHECKING:
    from turbozero.envs.pgx_chance import ChanceRules

# pgx games we advertise, with one line each; imperfect-information and 3+-player games are refused.
PGX_GAMES: dict[str, str] = {
    "tic_tac_toe": "Tic-tac-toe, 3x3 (2 players, 9 actions)",
    "connect_four": "Connect Four, 6x7 (2 players, 7 actions)",
    "othello": "Othello, 8x8 (2 players, 65 actions incl. pass)",
    "hex": "Hex, 11x11 (2 players, 122 actions incl. swap)",
    "go_9x9": "Go, 9x9 (2 players, 82 actions incl. pass)",
    "go_19x19": "Go, 19x19 (2 players, 362 actions incl. pass)",
    "animal_shogi": "Animal shogi, 3x4 (2 players)",
    "gardner_chess": "Gardner minichess, 5x5 (2 players)",
    "chess": "Chess (2 players)",
    "shogi": "Shogi (2 players)",
    "backgammon": "Backgammon (2 players, dice as chance events: 36 ordered rolls)",
    "2048": "2048 (1 player, 4 actions, new tiles as chance events: 16 cells x {2, 4})",
    "minatar-asterix": "MinAtar Asterix (1 player)",
    "minatar-breakout": "MinAtar Breakout (1 player)",
    "minatar-freeway": "MinAtar Freeway (1 player)",
    "minatar-seaquest": "MinAtar Seaquest (1 player)",
    "minatar-space_invaders": "MinAtar Space Invaders (1 player)",
}
REFUSED: dict[str, str] = {
    "kuhn_poker": "imperfect information",
    "leduc_holdem": "imperfect information",
    "sparrow_mahjong": "imperfect information and more than two players",
}
STOCHASTIC = {
    "2048",
    "backgammon",
    "minatar-asterix",
    "minatar-breakout",
    "minatar-freeway",
    "minatar-seaquest",
    "minatar-space_invaders",
}

CHANCE_GAMES = ("2048", "backgammon")  # with a chance split (turbozero.envs.pgx_chance)


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
    """The chance split of a pgx game that has one (2048, backgammon), else None."""
    if str(env.id) not in CHANCE_GAMES:
        return None
    from turbozero.envs.pgx_chance import CHANCE_RULES  # imports those games' pgx modules

    return split_pgx_step(env, CHANCE_RULES[str(env.id)])


def pgx_episode_stats(env: pgx.Env) -> Callable[[pgx.State], dict[str, Array]] | None:
    """`Env.episode_stats` of the pgx games that have figures beyond the return (2048's tiles)."""
    if str(env.id) != "2048":
        return None
    from turbozero.envs.pgx_chance import stats_2048

    return stats_2048


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

        if str(env.id) == "backgammon":  # its drawing turns the board with `.at`: a jax array
            state = state.replace(_board=jnp.asarray(state._board))
        return Visualizer(color_theme="light").get_dwg(states=state).tostring()

    return Env(
        name=env_id,
        num_players=int(env.num_players),
        num_actions=int(env.num_actions),
        observation_shape=tuple(int(d) for d in env.observation_shape),
        init=init,
        step=step,
        observe=observe,
        metadata=pgx_metadata,
        deterministic=str(env.id) not in STOCHASTIC,  # by pgx's id, whatever the name
        chance=pgx_chance(env),
        render_svg=render_svg,
        raw=env,
        episode_stats=pgx_episode_stats(env),
    )


def make_pgx(env_id: str) -> Env:
    """A pgx game by id, refusing the ones we do not support with the reason."""
    if env_id in REFUSED:
        raise ValueError(f"pgx game {env_id!r} is not supported yet: {REFUSED[env_id]}")
    return from_pgx(pgx.make(env_id), name=env_id)  # type: ignore[arg-type]
