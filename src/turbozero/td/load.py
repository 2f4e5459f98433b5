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
from turbozero.td.learner import abstract_checkpoint, make_td, td_agent


def load_agent(
    path: str | os.PathLike[str], *, which: str = "best", step: int | None = None
) -> LoadedAgent:
    """Restore a TD agent from a run directory written by `train_td`.

    Args:
        path: the run directory.
        which: "best" (the network with the most points a game against the first evaluation
            opponent; the latest before any evaluation) or "latest" (the one being trained at
            the checkpoint).
        step: checkpoint step (epoch) to load; None takes the newest.

    Raises:
        FileNotFoundError: no run directory or no checkpoint in it.
        ValueError: not a TD run, or `which` out of range.
    """

    check_which(which)
    run = find_run_dir(path)
    config, _ = read_run_config(run, "td")
    td = make_td(config)
    ckpt, _, step = restore_checkpoint(run.checkpoints, abstract_checkpoint(td), step=step)
    # (before its first evaluation a run has no best: its network as trained so far)
    evaluated = bool(np.isfinite(np.asarray(ckpt.best_points)))
    params = ckpt.best_params if which == "best" and evaluated else ckpt.learner.params
    env = turbozero.envs.make(config.env)
    agent = td_agent(td, env, params, name=f"td:{config.env}:{which}@{step}")
    return LoadedAgent(agent, env, config, run.path, step, "td")
