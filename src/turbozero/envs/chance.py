"""Games with chance: a step split at its chance event, for searches that branch on outcomes.

A game that draws randomness in `step` may expose where it does on `Env.chance`:

    afterstate = decide(state, action)                  # the decision, before any randomness
    probabilities(afterstate) -> [C] float32            # the chance event's outcome distribution
    (state, StepMetadata) = resolve(afterstate, outcome)  # outcome: int32 [] in [0, C)
    sample_outcome(afterstate, key) -> int32 []          # the outcome `step` draws from `key`

so that `step(state, action, key) == resolve(a, sample_outcome(a, key))` with
`a = decide(state, action)`, bit for bit, state and metadata. `C = num_outcomes` is fixed per
game; outcomes the afterstate cannot have get probability zero.

**No chance event.** An afterstate with nothing left to draw (the decision ended the game, the
game was already over, backgammon's mover moves again) puts all its probability on outcome 0,
and `resolve(afterstate, 0)` is the next state. `has_chance_event(probabilities)` tells the two
apart: a chance event never gives outcome 0 probability one.

**Rewards** are reported where the ordinary step reports them: in `resolve`'s metadata, the whole
step's rewards (the decision's, such as 2048's merges, and any the outcome adds).

Afterstates are fixed-shape pytrees of each game's own type (a search stores them in its tree
as it stores states); `afterstate_shape(env)` gives their layout. Shape letters: `C` outcomes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp

from turbozero.types import Array, PRNGKey, PyTree, StepMetadata

if TYPE_CHECKING:
    from turbozero.envs.core import Env

Afterstate = Any  # a game's afterstate pytree (fixed shapes)
DecideFn = Callable[[PyTree, Array], Afterstate]
ProbabilitiesFn = Callable[[Afterstate], Array]
ResolveFn = Callable[[Afterstate, Array], tuple[PyTree, StepMetadata]]
SampleOutcomeFn = Callable[[Afterstate, PRNGKey], Array]


class Chance(NamedTuple):
    """A game's step split at its chance event (see the module docstring).

    Attributes:
        num_outcomes: `C`, the number of outcomes of every chance event of the game.
        decide: `decide(state, action) -> afterstate`, the move before any randomness.
        probabilities: `probabilities(afterstate) -> [C]` float32, non-negative, summing to one;
            one-hot on outcome 0 when the afterstate has no chance event.
        resolve: `resolve(afterstate, outcome) -> (state, StepMetadata)`, the state the outcome
            leads to, with the whole step's metadata (rewards, terminated, step count, ...).
        sample_outcome: `sample_outcome(afterstate, key) -> int32 []`, the outcome the game's
            `step` draws from `key` (`key` consumed); 0 when there is no chance event.
    """

    num_outcomes: int
    decide: DecideFn
    probabilities: ProbabilitiesFn
    resolve: ResolveFn
    sample_outcome: SampleOutcomeFn


def step_with_outcome(env: Env) -> Callable[..., tuple[PyTree, StepMetadata, Array, Array]]:
    """`step(state, action, key) -> (state, meta, outcome, drawn)`: `env.step`, stepped through
    its chance split where the game has one (the same step bit for bit), so that the outcome
    drawn from `key` is known (the play page and the game records show it); `drawn` says
    whether an outcome fell. Games without chance: outcome 0, never drawn."""
    chance = env.chance
    if chance is None:

        def step(state: PyTree, action: Any, key: Any) -> Any:
            state, meta = env.step(state, action, key)
            return state, meta, jnp.int32(0), jnp.bool_(False)

        return step

    def chance_step(state: PyTree, action: Any, key: Any) -> Any:
        after = chance.decide(state, action)
        outcome = chance.sample_outcome(after, key)
        state, meta = chance.resolve(after, outcome)
        return state, meta, outcome, has_chance_event(chance.probabilities(after))

    return chance_step


def without_chance(env: Env) -> Env:
    """`env` with its chance split hidden: searches then step it as any game whose `step` draws
    its own randomness, one sampled outcome per edge and no subtree reuse (the search setting
    `chance="sampled"`, the baseline that chance nodes are measured against)."""
    if env.chance is None:
        return env
    return dataclasses.replace(env, chance=None, deterministic=False)


def has_chance_event(probabilities: Array) -> Array:
    """`[...]` bool from `[..., C]` probabilities: whether an afterstate has a chance event
    (False when all the mass is on outcome 0: then `resolve(afterstate, 0)` is the next state)."""
    return probabilities[..., 0] < 1


def no_chance_event(num_outcomes: int) -> Array:
    """`[C]` float32: the probabilities of an afterstate without a chance event."""
    return jnp.zeros((num_outcomes,), jnp.float32).at[0].set(1.0)


def sample_from_probabilities(probabilities: Array, key: PRNGKey) -> Array:
    """`int32 []`: an outcome drawn from `[C]` probabilities (`key` consumed); the default
    `sample_outcome` of games whose `step` is built from their split."""
    logits = jnp.log(jnp.asarray(probabilities, jnp.float32))
    return jax.random.categorical(key, logits).astype(jnp.int32)


def step_through(chance: Chance, state: PyTree, action: Array, key: PRNGKey) -> Any:
    """The ordinary step made of the split: `resolve(a, sample_outcome(a, key))`,
    `a = decide(state, action)`."""
    afterstate = chance.decide(state, action)
    return chance.resolve(afterstate, chance.sample_outcome(afterstate, key))


def afterstate_shape(env: Env) -> PyTree:
    """The `jax.ShapeDtypeStruct` pytree of one afterstate of `env` (which must have chance),
    traced from `decide(init(key), 0)`: what a search allocates to store afterstates."""
    if env.chance is None:
        raise ValueError(f"{env.name!r} has no chance split (env.chance is None)")
    state = jax.eval_shape(env.init, jax.random.PRNGKey(0))[0]
    return jax.eval_shape(env.chance.decide, state, jax.ShapeDtypeStruct((), jnp.int32))


def validate_chance(chance: Any, *, name: str, deterministic: bool) -> None:
    """Raise unless `chance` is a `Chance` with callable functions and `num_outcomes >= 1`, of
    a game whose step is not marked deterministic (run by `Env` on construction)."""
    if not isinstance(chance, Chance):
        raise TypeError(f"Env.chance must be a turbozero.envs.Chance or None for {name!r}")
    C = chance.num_outcomes
    if isinstance(C, bool) or not isinstance(C, int) or C < 1:
        raise ValueError(f"chance.num_outcomes must be an int >= 1, got {C!r} for {name!r}")
    for fn_name in ("decide", "probabilities", "resolve", "sample_outcome"):
        if not callable(getattr(chance, fn_name)):
            raise TypeError(f"chance.{fn_name} must be callable for {name!r}")
    if deterministic:
        raise ValueError(
            f"{name!r} has a chance split but deterministic=True: its step draws the chance "
            f"outcome from its key, so it is not deterministic"
        )
