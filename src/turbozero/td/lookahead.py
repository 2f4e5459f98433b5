"""A two-player dice game's search at play over afterstate values: 1 ply, gnubg's sense.

At 0 ply (`TDPolicy`) the mover keeps the play whose afterstate its value network rates best.
At 1 ply each play still in doubt is rated instead by what the opponent can do to it: for each
of the opponent's rolls (backgammon's 21), the opponent's best reply at 0 ply (both halves of a
double), and the mover's expected points are minus the mean of the opponent's over the rolls
(`TDRules.results` are symmetric). A play is in doubt when the 0-ply ranking keeps it among the
first `CANDIDATES` plays and within `WINDOW` points of the best (gnubg's filter before its
1-ply search); a turn with one such play is played at once.

Work follows the plays in doubt, not the batch's padding: the candidates of the whole batch are
gathered in front and searched `CHUNK` at a time in a `lax.while_loop`, and of each search's
replies (`N` listed per roll, most of them invalid) only the valid ones reach the network, again
packed in front and rated `RATE_CHUNK` at a time. A game's listed plays that do not end the turn
(the first half of a double, `TDRules.turn_ends`) are chosen at 0 ply.

Shape letters: `B` states, `N` plays a turn, `K` rolls, `M` afterstates, `F` features.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import AgentOutput
from turbozero.struct import pytree_bytes
from turbozero.td.rules import TDRules
from turbozero.types import Array, Params, PRNGKey, PyTree

#: plays the 0-ply ranking keeps for the search (gnubg's filter keeps 8 ...)
CANDIDATES = 8
#: ... within this many points of the 0-ply best (... within 0.16)
WINDOW = 0.16
#: candidate afterstates searched at once (each lists and rates every reply to every roll)
CHUNK = 4
#: valid afterstates the network rates at once
RATE_CHUNK = 4096


def packed_map(fn: Any, items: PyTree, mask: Array, chunk: int, fill: Array) -> Array:
    """`fn` of the items where `mask`, `chunk` at a time, the others `fill`.

    Args:
        fn: `fn(items [chunk, ...]) -> [chunk]` float32.
        items: a pytree of `[M, ...]` arrays.
        mask: `[M]` bool, the items to compute.
        chunk: items per call of `fn` (a multiple of it is padded onto `M`).
        fill: `[M]` float32, the result where `mask` is false.

    Returns:
        `[M]`: `fn`'s values where `mask`, else `fill`; `fn` runs `ceil(mask.sum() / chunk)`
        times.
    """
    M = mask.shape[0]
    pad = -M % chunk
    # the items to compute first, in their order (a scatter: sorting M items cost more)
    slot = jnp.where(mask, jnp.cumsum(mask) - 1, M + pad)
    order = jnp.zeros(M + pad, jnp.int32).at[slot].set(jnp.arange(M, dtype=jnp.int32), mode="drop")
    count = mask.sum()

    def body(carry: tuple[Array, Array]) -> tuple[Array, Array]:
        start, out = carry
        index = jax.lax.dynamic_slice(order, (start,), (chunk,))
        values = fn(jax.tree.map(lambda x: x[index], items)).astype(out.dtype)
        keep = start + jnp.arange(chunk) < count
        return start + chunk, out.at[index].set(jnp.where(keep, values, out[index]))

    start = jnp.zeros((), jnp.int32)
    _, out = jax.lax.while_loop(lambda c: c[0] < count, body, (start, fill.astype(jnp.float32)))
    return out


def rated(equity: Any, boards: Array, valid: Array) -> Array:
    """`[M]` the `equity` of the `valid` afterstates among `boards` `[M, *]`, -inf elsewhere;
    only the valid ones reach the network."""
    return packed_map(
        equity, boards, valid, min(RATE_CHUNK, valid.shape[0]), jnp.full(valid.shape, -jnp.inf)
    )


def best_replies(
    rules: TDRules, equity: Any, boards: Array, dice: Array
) -> tuple[Array, Array, Array]:
    """Each (half) turn's best play at 0 ply: `(afterstates [M, *], equities [M], played [M])`
    of the positions `boards` `[M, *]` (the mover to play) with rolls `dice` `[M, 2]`; where no
    play is valid, the board itself and its own equity as an afterstate."""
    plays, _, valid = jax.vmap(rules.plays)(boards, dice)  # [M, N, *], [M, N]
    M, N = valid.shape
    scores = rated(equity, plays.reshape(M * N, *plays.shape[2:]), valid.reshape(-1))
    scores = scores.reshape(M, N)
    index = jnp.argmax(scores, axis=1)
    played = valid.any(axis=1)
    after = jnp.where(
        played.reshape((-1,) + (1,) * (boards.ndim - 1)), plays[jnp.arange(M), index], boards
    )
    value = jnp.where(played, scores[jnp.arange(M), index], equity(after))
    return after, value, played


def reply_values(
    rules: TDRules, equity: Any, rolls: np.ndarray, weights: np.ndarray, boards: Array
) -> Array:
    """`[M]` the 1-ply expected points of afterstates `boards` `[M, *]` for the player who just
    moved: minus the mean, over the opponent's `rolls` `[K, 2]` weighted `weights` `[K]`, of the
    equity of the opponent's best reply (a double's two halves each best at 0 ply); a won
    afterstate's own points."""
    M, K = boards.shape[0], rolls.shape[0]
    over, index = jax.vmap(rules.result)(boards)
    results = jnp.asarray(rules.results, jnp.float32)
    opponent = jax.vmap(rules.flip)(boards)
    start = jnp.repeat(opponent, K, axis=0)  # [M * K, *]
    dice = jnp.tile(jnp.asarray(rolls), (M, 1))
    after, value, _ = best_replies(rules, equity, start, dice)
    with jax.ensure_compile_time_eval():  # (which rolls play twice: known before tracing)
        twice = np.flatnonzero(np.asarray(jax.vmap(rules.again)(jnp.asarray(rolls))))
    if twice.size:  # the second half of each double, from the first's best afterstate
        rows = (np.arange(M)[:, None] * K + twice[None, :]).reshape(-1)
        done = jax.vmap(rules.result)(after[rows])[0]
        _, value2, _ = best_replies(rules, equity, after[rows], dice[rows])
        value = value.at[rows].set(jnp.where(done, value[rows], value2))
    mean = value.reshape(M, K) @ jnp.asarray(weights, jnp.float32)
    return jnp.where(over, results[index], -mean)


@dataclasses.dataclass(frozen=True, eq=False)
class TDSearchPolicy:
    """`policy_fn(params, states [B], key) -> AgentOutput` of a TD value network searching 1
    ply (this module's doc): in each state of the game's `Env` the first action of its play of
    highest 1-ply equity, the `Env`'s no-move action where none is valid; `value` that equity
    (0-ply where the turn was played at once); with `acting` `[B]` bool, the no-move action
    and no work in the other states. Hashed by identity.

    Attributes:
        td: the TD learner (`turbozero.td.learner.TD`).
        num_actions: the `Env`'s.
    """

    value_unit: ClassVar[str] = "points"
    #: a match says which games it moves in (`turbozero.arena.agents.propose`): only those
    #: are rated and searched
    takes_acting: ClassVar[bool] = True

    td: Any
    num_actions: int

    def memory_bytes(self, states: PyTree) -> int:
        """Bytes one call works in for `states` `[B]` (shapes suffice): every state's plays
        listed, packed and rated in chunks, and one chunk of candidates' replies to every roll,
        listed and packed the same way."""
        rules = self.td.rules
        plays = jax.eval_shape(jax.vmap(rules.state_plays), states)
        rows = CHUNK * len(rules.rolls)
        replies = jax.eval_shape(
            jax.vmap(rules.plays),
            jax.ShapeDtypeStruct((rows, *np.shape(rules.start)), jnp.int32),
            jax.ShapeDtypeStruct((rows, 2), jnp.int32),
        )
        width = rules.num_features + sum(int(h) for h in self.td.config.hidden)
        packing = 3 * 4 * (plays[1].size + replies[1].size)  # order, scores, masks
        return (
            2 * (pytree_bytes(plays) + pytree_bytes(replies)) + packing + 2 * 4 * RATE_CHUNK * width
        )

    def __call__(
        self, params: Params, states: PyTree, key: PRNGKey, acting: Array | None = None
    ) -> AgentOutput:
        del key
        rules = self.td.rules
        equity = functools.partial(self.td.equity, params)
        boards, actions, valid = jax.vmap(rules.state_plays)(states)  # [B, N, *], [B, N]
        B, N = valid.shape
        if acting is not None:  # (the others' output is not used: the no-move action)
            valid = valid & acting[:, None]
        flat = boards.reshape(B * N, *boards.shape[2:])
        scores = rated(equity, flat, valid.reshape(-1)).reshape(B, N)
        C = min(CANDIDATES, N)
        top, index = jax.lax.top_k(scores, C)  # [B, C]
        playable = valid.any(axis=1)
        window = (top > -jnp.inf) & (top[:, :1] - top <= WINDOW)
        doubt = window & (window.sum(axis=1, keepdims=True) > 1)
        doubt = doubt & (playable & jax.vmap(rules.turn_ends)(states))[:, None]
        candidates = boards[jnp.arange(B)[:, None], index].reshape(B * C, *boards.shape[2:])
        search = functools.partial(reply_values, rules, equity, rules.rolls, rules.roll_weights)
        searched = packed_map(
            search, candidates, doubt.reshape(-1), CHUNK, jnp.full(B * C, -jnp.inf)
        ).reshape(B, C)
        searching = doubt.any(axis=1, keepdims=True)
        ranked = jnp.where(searching, jnp.where(doubt, searched, -jnp.inf), top)
        pick = jnp.argmax(ranked, axis=1)
        rows = jnp.arange(B)
        action = jnp.where(playable, actions[rows, index[rows, pick]], rules.no_move)
        value = jnp.where(playable, ranked[rows, pick], 0.0)
        weights = jax.nn.one_hot(action, self.num_actions, dtype=jnp.float32)
        return AgentOutput(action.astype(jnp.int32), weights, value)
