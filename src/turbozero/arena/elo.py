"""Elo ratings fitted by maximum likelihood over all games at once (Bradley-Terry).

Model: player `i` scores against player `j` with expectation

    E[score_i] = 1 / (1 + 10 ** ((r_j - r_i) / 400)) = sigmoid((r_i - r_j) / SCALE),

`SCALE = 400 / ln(10)`; a draw counts as half a win in the likelihood. Games are first summed
into per-pair counts (exact in floating point), so the fit does not depend on the order of the
games, unlike sequential Elo updates. Ratings are found by Newton's method with backtracking.

Ratings are only defined up to a common shift. With `anchors` some players' ratings are fixed
and the others are fitted around them; without, the ratings are centred on zero. In both cases a
weak Gaussian prior (`prior_sd` Elo around the centre) keeps ratings finite for players who won
or lost every game and for players who never met the others.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from turbozero.arena.match import MatchResult
from turbozero.validate import check_number

SCALE = 400.0 / math.log(10.0)  # Elo points per logit


def _aggregate(games: Iterable[Sequence[float]], num_players: int) -> tuple[np.ndarray, ...]:
    """`[n, n]` games played and score won by row against column."""
    played = np.zeros((num_players, num_players))
    scored = np.zeros((num_players, num_players))
    for g, game in enumerate(games):
        if len(game) != 3:
            raise ValueError(f"games[{g}] must be (player_i, player_j, score_i), got {game!r}")
        i, j, s = int(game[0]), int(game[1]), float(game[2])
        if not (0 <= i < num_players and 0 <= j < num_players):
            raise ValueError(f"games[{g}] players must be in [0, {num_players}), got {game!r}")
        if i == j:
            raise ValueError(f"games[{g}] pairs player {i} with itself")
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"games[{g}] score must be in [0, 1] (1 win, 0.5 draw), got {s}")
        played[i, j] += 1
        played[j, i] += 1
        scored[i, j] += s
        scored[j, i] += 1.0 - s
    return played, scored


def _log_sigmoid(z: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -z)


def _check_anchor(player: object, rating: object) -> None:
    if not (isinstance(rating, numbers.Real) and math.isfinite(rating)):
        raise ValueError(f"anchors values must be finite ratings, got {rating!r} for {player!r}")


def fit_elo(
    games: Iterable[Sequence[float]],
    *,
    num_players: int,
    anchors: Mapping[int, float] | None = None,
    prior_sd: float = 2000.0,
    max_iterations: int = 100,
    tolerance: float = 1e-9,
) -> np.ndarray:
    """Maximum-likelihood Elo ratings.

    Args:
        games: `(player_i, player_j, score_i)` triples, `score_i` 1 for a win of `i`, 0.5 for a
            draw, 0 for a loss (any value in [0, 1] is accepted).
        num_players: >= 1, players are `0 .. num_players - 1`.
        anchors: `{player: rating}` fixed ratings; None centres the ratings on zero.
        prior_sd: > 0, standard deviation in Elo of the weak Gaussian prior around the centre
            (zero, or the mean anchor rating).
        max_iterations: >= 1 Newton steps at most.
        tolerance: > 0, stop when no rating moves by more than this (in Elo).

    Returns:
        `[num_players]` float64 ratings in Elo points.

    Raises:
        ValueError: for an out-of-range argument or a malformed game.

    Example:
        ```python
        # player 0 scored 2.5 of 3 against player 1, who is pinned at 0
        ratings = fit_elo([(0, 1, 1.0), (0, 1, 0.5), (1, 0, 0.0)], num_players=2, anchors={1: 0.0})
        ```
    """
    if not isinstance(num_players, int) or num_players < 1:
        raise ValueError(f"num_players must be an int >= 1, got {num_players!r}")
    check_number("prior_sd", prior_sd, low=0.0, strict=True)
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    anchors = dict(anchors or {})
    for p in anchors:
        if not 0 <= p < num_players:
            raise ValueError(f"anchors keys must be players in [0, {num_players}), got {p}")
        _check_anchor(p, anchors[p])
    played, scored = _aggregate(games, num_players)

    x = np.zeros(num_players)  # ratings in logits
    for p, r in anchors.items():
        x[p] = r / SCALE
    centre = np.mean(list(anchors.values())) / SCALE if anchors else 0.0
    free = np.array([p for p in range(num_players) if p not in anchors], dtype=int)
    x[free] = centre
    ridge = (SCALE / prior_sd) ** 2

    def loss(x: np.ndarray) -> float:
        diff = x[:, None] - x[None, :]
        nll = -(scored * _log_sigmoid(diff)).sum()  # each pair appears in both orders
        return float(nll + 0.5 * ridge * np.sum((x[free] - centre) ** 2))

    current = loss(x)
    for _ in range(max_iterations):
        if free.size == 0:
            break
        diff = x[:, None] - x[None, :]
        prob = 1.0 / (1.0 + np.exp(-diff))
        grad = (played * prob - scored).sum(axis=1) + ridge * (x - centre)
        w = played * prob * (1.0 - prob)
        hess = np.diag(w.sum(axis=1)) - w + ridge * np.eye(num_players)
        g, h = grad[free], hess[np.ix_(free, free)]
        direction = np.linalg.solve(h, g)
        step = 1.0
        while True:
            candidate = x.copy()
            candidate[free] -= step * direction
            value = loss(candidate)
            if value <= current + 1e-4 * step * -float(g @ direction) or step < 1e-8:
                break
            step *= 0.5
        x, current = candidate, value
        if np.max(np.abs(step * direction)) * SCALE < tolerance:
            break
    return x * SCALE


@dataclasses.dataclass(frozen=True)
class EloPool:
    """Results accumulated over a run, by player name; `add_*` return a new pool.

    Example:
        ```python
        pool = EloPool(anchors={"random": 0.0})
        pool = pool.add_match(play_match(env, agent, random_agent(env), key, num_games=64))
        pool.ratings()  # {"network": ..., "random": 0.0}
        ```
    """

    anchors: Mapping[str, float] = dataclasses.field(default_factory=dict)
    names: tuple[str, ...] = ()
    games: tuple[tuple[int, int, float], ...] = ()

    def __post_init__(self) -> None:
        for name, rating in self.anchors.items():
            _check_anchor(name, rating)

    def _with_names(self, *names: str) -> tuple[EloPool, list[int]]:
        known = list(self.names)
        for n in names:
            if n not in known:
                known.append(n)
        pool = dataclasses.replace(self, names=tuple(known))
        return pool, [known.index(n) for n in names]

    def add_game(self, name_i: str, name_j: str, score_i: float) -> EloPool:
        """Record one game of `name_i` against `name_j` (score 1, 0.5 or 0 for `name_i`)."""
        if name_i == name_j:
            raise ValueError(f"a player cannot play itself: {name_i!r}")
        if not 0.0 <= score_i <= 1.0:  # NaN included
            raise ValueError(f"score_i must be in [0, 1] (1 win, 0.5 draw, 0 loss), got {score_i}")
        pool, (i, j) = self._with_names(name_i, name_j)
        return dataclasses.replace(pool, games=(*self.games, (i, j, float(score_i))))

    def add_record(self, name_i: str, name_j: str, wins: int, draws: int, losses: int) -> EloPool:
        """Record `wins`, `draws` and `losses` of `name_i` against `name_j` at once (one copy
        of the games, where `add_game` per game copies them each time)."""
        if name_i == name_j:
            raise ValueError(f"both players are named {name_i!r}; give them distinct names")
        counts = {"wins": wins, "draws": draws, "losses": losses}
        for name, count in counts.items():
            if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
                raise ValueError(f"{name} must be an int >= 0, got {count!r}")
        pool, (i, j) = self._with_names(name_i, name_j)
        new = [(i, j, 1.0)] * int(wins) + [(i, j, 0.5)] * int(draws) + [(i, j, 0.0)] * int(losses)
        return dataclasses.replace(pool, games=(*self.games, *new))

    def add_match(self, result: MatchResult) -> EloPool:
        """Record every game of a two-player match under the agents' names."""
        if not result.name_b:
            raise ValueError("add_match needs a two-player match (result.name_b is empty)")
        return self.add_record(
            result.name_a, result.name_b, result.wins, result.draws, result.losses
        )

    def ratings(self, *, prior_sd: float = 2000.0) -> dict[str, float]:
        """`{name: Elo}` fitted by `fit_elo` on every game so far (anchors included)."""
        pool, _ = self._with_names(*self.anchors)
        anchors = {pool.names.index(n): r for n, r in self.anchors.items()}
        ratings = (
            fit_elo(pool.games, num_players=len(pool.names), anchors=anchors, prior_sd=prior_sd)
            if pool.names
            else np.zeros(0)
        )
        return {n: float(r) for n, r in zip(pool.names, ratings, strict=True)}
