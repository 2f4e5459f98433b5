"""Agents from TD run directories: `load_agent` for the arena, `turbozero eval` and the play page.

loaded = load_agent("runs/backgammon-...")       # the best network
result = play_match(loaded.env, loaded.agent, make_opponent(loaded.env, "pubeval"), key,
                    num_games=100)
"""

from __future__ import annotations

import os

import numpy as np

import turbozero.envs
from turbozero.arena.agents import LoadedAgent
from turbozero.io.checkpoint import check_which, restore_checkpoint
from turbozero.io.experiment import read_run_config
from turbozero.io.rundir import find_run_dir
from turbozero.td.config import MAX_DEPTH, MAX_DEPTH_TWO_PLAYERS
from turbozero.td.learner import abstract_checkpoint, make_td, td_agent
from turbozero.td.solo import SoloTD
from turbozero.validate import check_count


def load_agent(
    path: str | os.PathLike[str],
    *,
    which: str = "best",
    step: int | None = None,
    depth: int | None = None,
) -> LoadedAgent:
    """Restore a TD agent from a run directory written by `train_td`.

    Args:
        path: the run directory.
        which: "best" (the network with the most points a game against the first evaluation
            opponent; the latest before any evaluation) or "latest" (the one being trained at
            the checkpoint).
        step: checkpoint step (epoch) to load; None takes the newest.
        depth: chance layers looked ahead at play: a one-player game's (2048's) 0 (1 ply) to
            `MAX_DEPTH`; a two-player game's 0 or 1 (the opponent's best reply to each roll,
            gnubg's 1 ply); None: the run's `eval_depth`.

    Raises:
        FileNotFoundError: no run directory or no checkpoint in it.
        ValueError: not a TD run, or `which` or `depth` out of range.
    """

    check_which(which)
    if depth is not None:
        depth = check_count("depth", depth, low=0, high=MAX_DEPTH)
    run = find_run_dir(path)
    config, _ = read_run_config(run, "td")
    td = make_td(config)
    if depth is not None and not isinstance(td, SoloTD) and depth > MAX_DEPTH_TWO_PLAYERS:
        raise ValueError(
            f"depth must be in [0, {MAX_DEPTH_TWO_PLAYERS}] for {config.env!r}, a two-player "
            f"game (1: the opponent's best reply to each roll), got {depth}"
        )
    ckpt, _, step = restore_checkpoint(run.checkpoints, abstract_checkpoint(td), step=step)
    # (before its first evaluation a run has no best: its network as trained so far)
    evaluated = bool(np.isfinite(np.asarray(ckpt.best_points)))
    params = ckpt.best_params if which == "best" and evaluated else ckpt.learner.params
    env = turbozero.envs.make(config.env)
    name = f"td:{config.env}:{which}@{step}" + (f":depth{depth}" if depth else "")
    agent = td_agent(td, env, params, name=name, depth=depth)
    return LoadedAgent(agent, env, config, run.path, step, "td")
