"""Hand-built one-decision games with chance, whose expected values are known exactly, for tests
of searches with chance nodes.

Each game: one player picks an action `a`, then outcome `o` is drawn with probability
`probabilities[a, o]`, the player receives `rewards[a, o]` and the game ends. The value of
action `a` is `expected[a] = sum_o probabilities[a, o] * rewards[a, o]`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from turbozero import envs
from turbozero.types import StepMetadata

# Dice: every action leads to a roll of one three-sided die, p = [0.5, 0.3, 0.2].
DICE_PROBABILITIES = np.array([[0.5, 0.3, 0.2]] * 3, np.float32)
DICE_REWARDS = np.array(
    [
        [1.0, 1.0, 1.0],  # 0: safe, expected 1.0
        [0.0, 2.0, 4.0],  # 1: best in expectation, 1.4
        [3.0, 0.0, -1.0],  # 2: best on the likeliest outcome (3 with p=0.5), expected 1.3
    ],
    np.float32,
)

# Gamble: action 0 pays 1 for sure (no chance event: all probability on outcome 0); action 1
# pays 10 with p = 0.15, else 0 (expected 1.5). A search that draws one outcome per edge and
# trusts it prefers action 1 only when it drew the 10: with probability 0.15.
GAMBLE_PROBABILITIES = np.array([[1.0, 0.0], [0.85, 0.15]], np.float32)
GAMBLE_REWARDS = np.array([[1.0, 0.0], [0.0, 10.0]], np.float32)
GAMBLE_SINGLE_SAMPLE_PICKS_BEST = 0.15


class ChanceGame(NamedTuple):
    """A one-decision game with chance and what a search should find in it.

    Attributes:
        env: the game (`from_functions` with `decide_fn`/`probabilities_fn`/`resolve_fn`).
        probabilities: `[A, C]` outcome probabilities after each action.
        rewards: `[A, C]` reward of each action and outcome.
        expected: `[A]` float64, each action's expected reward (its exact value).
        best_action: the action of highest expected reward.
    """

    env: envs.Env
    probabilities: np.ndarray
    rewards: np.ndarray
    expected: np.ndarray
    best_action: int


class _State(NamedTuple):
    over: jnp.ndarray  # [] bool


class _Afterstate(NamedTuple):
    action: jnp.ndarray  # [] int32


def make_chance_game(name: str, probabilities: np.ndarray, rewards: np.ndarray) -> ChanceGame:
    """The one-decision game of `[A, C]` outcome `probabilities` and `rewards`."""
    A = probabilities.shape[0]
    probs_table, reward_table = jnp.asarray(probabilities), jnp.asarray(rewards)

    def metadata(reward, over):
        return StepMetadata(
            rewards=jnp.reshape(jnp.asarray(reward, jnp.float32), (1,)),
            action_mask=jnp.ones((A,), bool),
            terminated=jnp.asarray(over, bool),
            cur_player_id=jnp.int32(0),
        )

    def init_fn(key):
        return _State(jnp.bool_(False)), metadata(0.0, False)

    def decide_fn(state, action):
        return _Afterstate(jnp.asarray(action, jnp.int32))

    def probabilities_fn(after):
        return probs_table[after.action]

    def resolve_fn(after, outcome):
        return _State(jnp.bool_(True)), metadata(reward_table[after.action, outcome], True)

    def observe_fn(state):
        return state.over.astype(jnp.float32)[None]

    env = envs.from_functions(
        init_fn=init_fn,
        observe_fn=observe_fn,
        decide_fn=decide_fn,
        probabilities_fn=probabilities_fn,
        resolve_fn=resolve_fn,
        name=name,
    )
    expected = (probabilities.astype(np.float64) * rewards).sum(-1)
    return ChanceGame(env, probabilities, rewards, expected, int(np.argmax(expected)))


def dice_game() -> ChanceGame:
    """Three actions, a three-sided die: expected [1.0, 1.4, 1.3], best action 1."""
    return make_chance_game("chance:dice", DICE_PROBABILITIES, DICE_REWARDS)


def gamble_game() -> ChanceGame:
    """1 for sure against 10 with p=0.15: expected [1.0, 1.5], best action 1."""
    return make_chance_game("chance:gamble", GAMBLE_PROBABILITIES, GAMBLE_REWARDS)
