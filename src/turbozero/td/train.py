"""`train_td`: the run hooks of TD learning for the experiment runner (`turbozero.io.experiment`).

Each epoch runs `steps_per_epoch` turns of every game in one compiled call. Every `eval_every`
epochs (and when the run stops) the network plays `eval_games` games against each of
`eval_opponents` (colours alternating) and, with `eval_accuracy`, is judged by the game's
move-quality measure (backgammon: gnubg's error rate); the network with the most points a game
against the first opponent is kept as the best. A one-player game (2048) plays `eval_games`
games alone, `eval_depth` chance layers ahead, and keeps the network of the best mean score. A
checkpoint holds `CheckpointState` (`turbozero.td.learner`), so a resumed run continues
exactly; Ctrl-C or SIGTERM finishes the epoch, saves and returns.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax

import turbozero.envs
from turbozero.arena.agents import random_agent
from turbozero.arena.match import (
    MatchResult,
    match_memory_bytes,
    play_match,
    play_opponents,
    random_scores,
    solo_row,
)
from turbozero.arena.opponents import make_opponent
from turbozero.arena.records import records_page, write_records
from turbozero.gamespec import game_spec
from turbozero.io.experiment import Run, RunHooks
from turbozero.td.config import TDConfig
from turbozero.td.learner import (
    CheckpointState,
    epoch_metrics,
    initial_checkpoint,
    keep_best,
    make_td,
    td_agent,
    training_bytes,
)
from turbozero.td.solo import SoloTD

ALGORITHM = "td"
#: an evaluation game's moves recorded (for RUN/games/latest.html) up to this many: far past
#: any game's end (a backgammon game takes a few hundred of pgx's single-die moves)
RECORDED_MOVES = 10_000
#: a one-player game's recorded games, likewise (2048 games reaching 16384 take about 8,000)
SOLO_RECORDED_MOVES = 20_000
#: settings a resumed TD run may change, from its groups (`TDConfig.RESUME_MAY_CHANGE` and the
#: shared ones'): where it stops and logs, its checkpoints, and its evaluation's size and schedule
RESUME_MAY_CHANGE = TDConfig.resume_may_change()


class TDRun(RunHooks):
    """TD's steps in the experiment runner: an epoch is one compiled call of `steps_per_epoch`
    turns of every game; an evaluation plays the opponents and keeps the best network. `train`
    (`train_td`) stops after `num_epochs` epochs in all (default `config.num_epochs`)."""

    name = ALGORITHM
    config_class = TDConfig
    stop_argument = "num_epochs"
    resume_may_change = RESUME_MAY_CHANGE

    def __init__(self, config: TDConfig):

        super().__init__(config)
        self.td = make_td(config)
        self.env = turbozero.envs.make(config.env)
        self.num_players = self.env.num_players
        self.steps_per_epoch = config.num_games * config.steps_per_epoch  # turns
        self.epochs = config.num_epochs
        spec = game_spec(config.env)
        self.judge = spec.judge if spec is not None and config.eval_accuracy else None
        self.positions: Any = None
        self.games_dir: Path | None = None  # RUN/games on the process that writes the run
        # built once, so that every evaluation reuses one compiled match per opponent
        self.opponents = {name: make_opponent(self.env, name) for name in config.eval_opponents}
        self.agent = td_agent(self.td, self.env, None, name="td")
        #: random play's score against each opponent (`eval/NAME/random_score`), the baseline
        #: each evaluation line carries; played once per process from a key of the seed
        self.baseline: dict[str, float] | None = None

    def memory(self) -> tuple[int, str, str]:
        """The checkpoint state twice (the compiled epoch's input and output) and the larger of
        a step's and an evaluation match's work."""
        games, agent = self.config.eval_games, self.agent
        matches = [match_memory_bytes(self.env, [agent, o], games) for o in self.opponents.values()]
        if self.num_players == 1:
            matches.append(match_memory_bytes(self.env, [agent], games))
        what = "the TD run (network, Adam, the games and an evaluation's or a step's work)"
        nbytes = 2 * self.state_bytes() + max(training_bytes(self.td), *matches)
        return nbytes, what, "lower num_games, hidden or eval_games"

    def describe(self) -> str:
        cfg = self.config
        if isinstance(self.td, SoloTD) and cfg.value_net == "ntuple":
            tuples = cfg.ntuples or self.td.rules.tuples
            net = f"n-tuple network ({len(tuples)} tuples of {len(tuples[0])} cells)"
        else:
            net = f"value net {tuple(cfg.hidden)}"
        depth = f", play {cfg.eval_depth} chance layers ahead" if cfg.eval_depth else ""
        return (
            f"{cfg.num_games} games x {cfg.steps_per_epoch} turns/epoch, {net}, "
            f"{cfg.num_epochs} epochs{depth}"
        )

    def start(self, run: Run) -> None:
        self.games_dir = run.dir.games if run.primary else None
        if self.judge is not None:
            self.positions = self.judge.positions(self.env, self.config.eval_accuracy_positions, 0)

    def initial_state(self) -> CheckpointState:
        return initial_checkpoint(self.td)

    def epoch(self, run: Run, state: CheckpointState, epoch: int) -> tuple[CheckpointState, dict]:
        """`steps_per_epoch` turns of every game, in one compiled call."""
        steps = (self.config.steps_per_epoch,)
        (learner, metrics), seconds, row = self.timed_call(
            run, self.td.train, state.learner, static=steps
        )
        self.final_metrics = epoch_metrics(metrics)
        row = {"turns_per_s": self.steps_per_epoch / max(seconds, 1e-9), **row}
        return state._replace(learner=learner), {**row, **self.final_metrics}

    def evaluation(self, state: CheckpointState) -> tuple[CheckpointState, dict[str, Any]]:
        """The network against every opponent (and the judge's positions), every `eval_every`
        epochs, the last one and when time is up (`evaluation_due`); keeps the best."""
        cfg = self.config
        eval_key, key = jax.random.split(state.eval_key)
        agent = self.agent.replace(params=state.learner.params)
        if self.num_players == 1:
            row = self.solo_evaluation(agent, key)
            state = keep_best(state._replace(eval_key=eval_key), row["eval/score"])
            return state, {**row, "best_score": float(state.best_points)}
        row, results = play_opponents(
            self.env, agent, self.opponents, key, games=cfg.eval_games, judge=self.judge,
            positions=self.positions, max_steps=RECORDED_MOVES,
        )  # fmt: skip
        # (the records at the run's end: drawing a backgammon game's positions takes ~10 s)
        if (
            self.final_evaluation
            and self.games_dir
            and cfg.eval_record_games
            and self.env.render_svg
        ):
            write_records(
                self.games_dir,
                records_page(self.env, results, cfg.eval_record_games, f"{self.env.name}: td"),
            )
        if self.baseline is None:  # (from a key of the seed: the run's own keys untouched)
            key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 7)
            self.baseline = random_scores(
                self.env, self.opponents, key,
                lambda a, b, k: play_match(self.env, a, b, k, num_games=cfg.eval_games),
            )  # fmt: skip
        row.update(self.baseline)
        points = row[f"eval/{cfg.eval_opponents[0]}/points"]
        state = keep_best(state._replace(eval_key=eval_key), points)
        return state, {**row, "best_points": float(state.best_points)}

    def solo_evaluation(self, agent: Any, key: Any) -> dict[str, Any]:
        """A one-player game's evaluation: `eval_games` games played to their end, their mean
        and median score, the game's figures (2048: the share reaching each tile), the time a
        move took, and the random policy's mean score beside them (played once)."""
        cfg = self.config
        start = time.perf_counter()
        r = play_match(self.env, agent, None, key, num_games=cfg.eval_games)
        row: dict[str, Any] = solo_row(r, time.perf_counter() - start)
        if self.final_evaluation and self.games_dir and cfg.eval_record_games:
            self.write_solo_records(agent, key)
        if self.baseline is None:  # (from a key of the seed: the run's own keys untouched)
            k = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 7)
            randomly = play_match(
                self.env, random_agent(self.env), None, k, num_games=cfg.eval_games
            )
            self.baseline = {"eval/random/return": float(randomly.mean_return_a)}
        row.update(self.baseline)
        return row

    def write_solo_records(self, agent: Any, key: Any) -> None:
        """RUN/games/latest.html: `eval_record_games` games of the evaluation's agent, their
        moves recorded (games of their own: the evaluation's run unrecorded, to their end)."""
        if self.games_dir is None or not self.env.render_svg:
            return
        games = self.config.eval_record_games
        recorded: MatchResult = play_match(
            self.env, agent, None, jax.random.fold_in(key, 1), num_games=games,
            max_steps=SOLO_RECORDED_MOVES,
        )  # fmt: skip
        title = f"{self.env.name}: td"
        write_records(self.games_dir, records_page(self.env, {"solo": recorded}, games, title))

    def progress(self, state: CheckpointState, epoch: int) -> dict[str, Any]:
        """The turns played and the best network's points: the summary holds them beside
        `final_metrics` (the last epoch's loss and finished games) and `eval` (the last
        evaluation), and so does a checkpoint's side record."""
        return {"turns": self.env_steps(epoch), "best_points": float(state.best_points)}


#: train a TD value network; returns the summary (`RunHooks.train`)
train_td = TDRun.train
