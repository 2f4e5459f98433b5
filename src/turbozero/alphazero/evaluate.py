"""Testers run during training: baselines, "vs best" (optional gating), approximate Elo over a
pool of past networks, move accuracy against a solver, and game records of the last evaluation.
One-player games report the searched agent's mean return (`eval/return`) and the network's
alone, its most likely legal move at each step (`eval/network/return`): a search that steps the
game's true state may see what the player cannot (Minesweeper's mines), the network does not.
Two-player games with "network" among `eval_opponents` also play the searched agent against its
own network without search (`eval/network/win`, `draw`, `loss`). Games with `env.episode_stats`
also report each figure of the searched agent's games, its mean
over games (`eval/<name>`) and its largest (`eval/<name>/max`): 2048's tiles.

The tester state (best parameters, Elo pool and its games) is saved in checkpoints so a resumed
run evaluates exactly as an uninterrupted one.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.alphazero.learner import AlphaZeroSystem, Systems
from turbozero.arena import (
    Agent,
    EloPool,
    MatchResult,
    alphazero_agent,
    network_agent,
    play_match,
)
from turbozero.arena.agents import random_agent
from turbozero.arena.match import match_memory_bytes, match_row, random_scores, solo_row
from turbozero.arena.opponents import make_opponent
from turbozero.arena.records import records_page, write_records
from turbozero.envs.core import Env
from turbozero.gamespec import Judge, game_spec
from turbozero.types import Params, PRNGKey

ANCHOR = "random"  # the random player is fixed at Elo 0 when it is an opponent


def accuracy_set(env: Env, num_positions: int) -> Any:
    """The positions `eval_accuracy` measures on, from the game's judge (`GameSpec.judge`):
    solver-labelled ones (tic-tac-toe, Connect Four) or, in backgammon, positions whose every
    play gnubg scored."""
    return _judge(env).positions(env, num_positions, 0)


def accuracy_metrics(env: Env, agent: Agent, positions: Any, key: PRNGKey) -> dict[str, float]:
    """The agent's figures on `accuracy_set`'s positions: `eval/accuracy/result`, `.../best`
    and `.../positions` against a solver; `eval/gnubg/error_rate` (millipoints per move),
    `.../best` and `.../positions` in backgammon."""
    return _judge(env).measure(env, agent, positions, key)


def _judge(env: Env) -> Judge:
    spec = game_spec(env.name)
    if spec is None or spec.judge is None:
        raise ValueError(f"nothing judges the moves of {env.name!r} (its GameSpec has no judge)")
    return spec.judge


def _searched_agent(az: AlphaZeroSystem, simulations: int) -> Agent:
    """The evaluations' agent of `az` (no parameters yet)."""
    search = az.selfplay.search  # its game: chance split hidden when "sampled"
    return alphazero_agent(
        search.env,
        az.eval_fn,
        None,
        num_simulations=simulations,
        selector=search.selector,
        chance_widening=az.config.search.chance_widening,
        discount=search.discount,
        name="current",
    )


class Evaluator:
    """Plays the current network against the configured opponents (compiled once per run)."""

    def __init__(
        self,
        az: AlphaZeroSystem,
        *,
        decide: Callable[[bool], bool] = bool,
        systems: Systems | None = None,
    ):
        """`decide(better) -> better` settles whether a network becomes the best; training on
        several processes passes process 0's verdict to all (`train.agree`), so that every
        process keeps the same best network and saves it together. With `systems` (the cache
        `az` came from), a system built before plays with the agent made for it before, whose
        compiled matches are in memory."""
        cfg = az.config
        self.az = az
        self.decide = decide
        env = az.env
        self.sims = cfg.eval_simulations or cfg.search.num_simulations
        if systems is None:
            self._agent = _searched_agent(az, self.sims)
        else:
            self._agent = systems.agent(az, self.sims, lambda: _searched_agent(az, self.sims))
        self.opponents: dict[str, Agent] = {
            opp: make_opponent(env, opp)
            for opp in cfg.eval_opponents
            if opp not in ("best", "network")
        }
        self.positions = (
            accuracy_set(env, cfg.eval_accuracy_positions) if cfg.eval_accuracy else None
        )
        self.beside = concurrent.futures.ThreadPoolExecutor(1, "turbozero-accuracy")
        # tester state
        self.best_params: Params | None = None
        self.best_score = -np.inf  # the best's mean score against the fixed opponents
        self.best_name: str | None = None
        self.elo = EloPool(anchors={ANCHOR: 0.0} if "random" in self.opponents else {})
        self.pool: list[tuple[str, Params]] = []
        self.random_return: float | None = None  # a one-player game's baseline, played once
        self.random_row: dict[str, float] | None = None  # a two-player game's, likewise

    def agent(self, params: Params, name: str) -> Agent:
        return self._agent.replace(params=params, name=name)

    def memory_bytes(self) -> int:
        """Bytes the largest match of an evaluation works in (`match_memory_bytes`): the
        network against each opponent, or against a network (`best`, the Elo pool)."""
        cfg = self.az.config
        others = [*self.opponents.values(), self._agent]
        return max(
            match_memory_bytes(self.az.env, [self._agent, other], cfg.eval_games)
            for other in others
        )

    def _match(
        self, a: Agent, b: Agent | None, key: PRNGKey, games: int, *, networks: bool = False
    ) -> MatchResult:
        """`networks`: a match between two networks (vs best, Elo pool), whose searches make
        the same moves every time; they open with at least `eval_network_opening_moves` random
        moves, the same for both seat orders (`play_match` pairs its games)."""
        cfg = self.az.config
        opening = cfg.eval_opening_moves
        if networks:
            opening = max(opening, cfg.eval_network_opening_moves)
        return play_match(
            self.az.env,
            a,
            b,
            key,
            num_games=games,
            max_steps=cfg.max_episode_steps,
            opening_moves=opening,
        )

    def _random_return(self) -> float:
        """The random policy's mean return over `eval_games` games, the baseline a one-player
        run's returns are read against (played once per process, from a key of the seed alone:
        a resumed run reports the same value)."""
        if self.random_return is None:
            key = jax.random.fold_in(jax.random.PRNGKey(self.az.config.seed), 0x7A4D)
            r = self._match(random_agent(self.az.env), None, key, self.az.config.eval_games)
            self.random_return = float(r.mean_return_a)
        return self.random_return

    def _random_scores(self) -> dict[str, float]:
        """`{eval/NAME/random_score: random play's score}` against each fixed opponent other
        than random play itself, the baseline each match is read against (the epoch line's
        "(random play scores 0%)"); played once per process, from a key of the seed alone."""
        if self.random_row is None:
            key = jax.random.fold_in(jax.random.PRNGKey(self.az.config.seed), 0x7A4E)
            games = self.az.config.eval_games
            self.random_row = random_scores(
                self.az.env, self.opponents, key, lambda a, b, k: self._match(a, b, k, games)
            )
        return self.random_row

    def __call__(self, params: Params, epoch: int, key: PRNGKey, games_dir: Path | None) -> dict:
        """Evaluate `params`; update best and Elo; return metrics (keys `eval/...`, `elo`)."""
        cfg = self.az.config
        env = self.az.env
        me = f"epoch_{epoch}"
        current = self.agent(params, me)
        out: dict[str, Any] = {}
        records: dict[str, MatchResult] = {}
        if env.num_players == 1:
            start = time.perf_counter()
            r = self._match(current, None, key, cfg.eval_games)
            out.update(solo_row(r, time.perf_counter() - start))
            records["solo"] = r
            network = network_agent(env, self.az.eval_fn, params, name=f"{me}_network")
            r = self._match(network, None, jax.random.fold_in(key, 1), cfg.eval_games)
            out["eval/network/return"] = float(r.mean_return_a)
            out["eval/random/return"] = self._random_return()
            self._update_best(params, me, out["eval/score"], None, {})
        else:
            scores = []
            accuracy = None
            if self.positions is not None:  # (beside the games: each keeps about a core busy)
                accuracy = self.beside.submit(
                    accuracy_metrics, env, current, self.positions, jax.random.fold_in(key, 3000)
                )
            try:
                for i, (name, opp) in enumerate(self.opponents.items()):
                    r = self._match(current, opp, jax.random.fold_in(key, i), cfg.eval_games)
                    out.update(match_row(name, r))
                    if r.num_truncated:  # games cut off at max_episode_steps count as draws
                        out[f"eval/{name}/truncated"] = r.num_truncated / r.num_games
                    scores.append(r.score)
                    records[name] = r
                    if cfg.elo_pool_size:  # (the games are kept for the Elo fit only)
                        self.elo = self.elo.add_record(me, name, r.wins, r.draws, r.losses)
            except BaseException:
                if accuracy is not None:  # (its threads hold this process's buffers)
                    concurrent.futures.wait([accuracy])
                raise
            if accuracy is not None:
                out.update(accuracy.result())
            out.update(self._random_scores())
            if "network" in cfg.eval_opponents:  # the search's gain over its own network
                network = network_agent(env, self.az.eval_fn, params, name=f"{me}_network")
                r = self._match(current, network, jax.random.fold_in(key, 500), cfg.eval_games)
                out.update(match_row("network", r))
                records["network"] = r
            vs_best = None
            if "best" in cfg.eval_opponents and self.best_params is not None:
                best = self.agent(self.best_params, "best")
                r = self._match(
                    current, best, jax.random.fold_in(key, 1000), cfg.eval_games, networks=True
                )
                vs_best = r.score
                out["eval/best/score"] = vs_best
                records["best"] = r
            ratings: dict[str, float] = {}
            if cfg.elo_pool_size:
                for j, (name, p) in enumerate(self.pool):
                    r = self._match(
                        current,
                        self.agent(p, name),
                        jax.random.fold_in(key, 2000 + j),
                        cfg.elo_games_per_opponent,
                        networks=True,
                    )
                    self.elo = self.elo.add_record(me, name, r.wins, r.draws, r.losses)
                if self.elo.games:
                    ratings = self.elo.ratings()
                    out["elo"] = ratings.get(me, 0.0)
                    # how many games that rating rests on (a 1-1 start reads as elo=0)
                    index = self.elo.names.index(me)
                    out["elo/games"] = sum(index in (i, j) for i, j, _ in self.elo.games)
                self.pool = [*self.pool, (me, jax.tree_util.tree_map(jnp.copy, params))]
                self.pool = self.pool[-cfg.elo_pool_size :]
            if scores or vs_best is not None:
                out["eval/score"] = float(np.mean(scores)) if scores else vs_best
            fixed = float(np.mean(scores)) if scores else None
            if "eval/accuracy/result" in out:  # the solver's verdict ranks networks first
                fixed = out["eval/accuracy/result"]
            self._update_best(params, me, fixed, vs_best, ratings)
        if games_dir is not None and records and env.render_svg and cfg.eval_record_games:
            page = records_page(env, records, cfg.eval_record_games, f"{env.name}: {me}")
            write_records(games_dir, page)
        return out

    def _update_best(
        self,
        params: Params,
        me: str,
        score: float | None,
        vs_best: float | None,
        ratings: dict[str, float],
    ) -> None:
        """Make `params` (named `me`) the best if `better_than_best` says so."""
        better = better_than_best(
            has_best=self.best_params is not None,
            me=me,
            best_name=self.best_name,
            score=score,
            best_score=self.best_score,
            vs_best=vs_best,
            ratings=ratings,
            gating_threshold=self.az.config.gating_threshold,
        )
        better = bool(self.decide(bool(better)))
        self.improved = better
        if better:
            self.best_params = jax.tree_util.tree_map(jnp.copy, params)
            self.best_name = me
            self.best_score = -np.inf if score is None else score

    # -- checkpointing of the tester state -------------------------------------------------
    def state_tree(self, like_params: Params) -> dict[str, Any]:
        """The arrays to checkpoint (best and pool parameters)."""
        return {
            "best": self.best_params if self.best_params is not None else like_params,
            "pool": [p for _, p in self.pool],
        }

    def state_meta(self) -> dict[str, Any]:
        return {
            "has_best": self.best_params is not None,
            "best_score": float(self.best_score),
            "best_name": self.best_name,
            "pool_names": [n for n, _ in self.pool],
            "elo_names": list(self.elo.names),
            "elo_games": [list(g) for g in self.elo.games],
        }

    def like_tree(self, meta: dict[str, Any], like_params: Params) -> dict[str, Any]:
        return {"best": like_params, "pool": [like_params for _ in meta.get("pool_names", [])]}

    def restore(self, tree: dict[str, Any], meta: dict[str, Any]) -> None:
        self.best_params = tree["best"] if meta.get("has_best") else None
        self.best_score = meta.get("best_score", -np.inf)
        self.best_name = meta.get("best_name")
        self.pool = list(zip(meta.get("pool_names", []), tree["pool"], strict=True))
        self.elo = EloPool(
            anchors=self.elo.anchors,
            names=tuple(meta.get("elo_names", [])),
            games=tuple((int(i), int(j), float(s)) for i, j, s in meta.get("elo_games", [])),
        )


def better_than_best(
    *,
    has_best: bool,
    me: str,
    best_name: str | None,
    score: float | None,
    best_score: float,
    vs_best: float | None,
    ratings: dict[str, float],
    gating_threshold: float,
) -> bool:
    """Whether the network just evaluated (`me`) replaces the best one.

    Only measures taken against the same opponents are compared, in this order:
    1. gating (`gating_threshold > 0`) with a match against the best: its score vs the best
       must reach the threshold;
    2. both in the Elo fit: `me`'s rating at least the best's rating of the same fit (ratings
       are refitted at every evaluation, so a stored rating would drift);
    3. a fixed measure: the move accuracy against a solver where `eval_accuracy` is on, else
       the mean score against the fixed opponents (random, perfect, rollout MCTS; one-player
       games: the mean return): at least the best's when it was made best;
    4. a match against the best, ungated: a score of at least 0.5 (not worse head to head).
    The first evaluation makes the best; with none of these measures (no opponents and no Elo
    pool) every network evaluated becomes the best, so that "best" is the latest one rather
    than the first.
    """
    if not has_best:
        return True
    if gating_threshold and vs_best is not None:
        return vs_best >= gating_threshold
    if best_name is not None and me in ratings and best_name in ratings:
        return ratings[me] >= ratings[best_name]
    if score is not None:
        return score >= best_score
    if vs_best is not None:
        return vs_best >= 0.5
    return True
