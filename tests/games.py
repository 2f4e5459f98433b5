"""Pieces of the tiny hand-written games the tests build with `envs.from_functions`."""

from __future__ import annotations

import jax.numpy as jnp

from turbozero.envs.core import StepMetadata


def opening(num_players: int, num_actions: int) -> StepMetadata:
    """A game's start: no rewards yet, every action legal, not over, player 0 to move."""
    return StepMetadata(
        rewards=jnp.zeros((num_players,)),
        action_mask=jnp.ones((num_actions,), bool),
        terminated=jnp.bool_(False),
        cur_player_id=jnp.int32(0),
    )
