"""Adapter for pgx games (pgx >= 2: `env.step(state, action, key)`)."""

from __future__ import annotations

import jax.numpy as jnp
import pgx

from turbozero.envs.core import Env, check_discrete_action
from turbozero.types import StepMetadata

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
    "backgammon": "Backgammon (2 players, dice sampled by the environment)",
    "2048": "2048 (1 player, 4 actions, tile spawns sampled by the environment)",
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
        deterministic=env_id not in STOCHASTIC,
        render_svg=render_svg,
        raw=env,
    )


def make_pgx(env_id: str) -> Env:
    """A pgx game by id, refusing the ones we do not support with the reason."""
    if env_id in REFUSED:
        raise ValueError(f"pgx game {env_id!r} is not supported yet: {REFUSED[env_id]}")
    return from_pgx(pgx.make(env_id), name=env_id)  # type: ignore[arg-type]
