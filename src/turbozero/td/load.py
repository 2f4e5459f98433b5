"""Agents from TD run directories: `load_agent` for the arena, `turbozero eval` and the play page.

loaded = load_agent("runs/backgammon-...")       # the best network
result = play_match(loaded.env, loaded.agent, make_opponent(loaded.env, "pubeval"), key,
                    num_games=100)
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from turbozero.arena.agents import Agent, AgentOutput
from turbozero.envs.core import Env, check_batched
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.rundir import RunDir
from turbozero.td.config import TDConfig
from turbozero.td.learner import make_td, td_agent
from turbozero.td.train import abstract_checkpoint, read_run_config
from turbozero.types import PRNGKey, PyTree

WHICH = ("best", "latest")


class LoadedAgent(NamedTuple):
    """A TD agent restored from a run, with its game and config.

    Attributes:
        agent: the `turbozero.arena.Agent` (params: the value network's variables).
        env: the game (`turbozero.envs.make(config.env)`).
        config: the run's `TDConfig`.
        step: the checkpoint step (epoch) it comes from.
    """

    agent: Agent
    env: Env
    config: TDConfig
    step: int

    def policy(self, states: PyTree, key: PRNGKey) -> AgentOutput:
        """`agent.policy` on `states` (batched on the leading axis); consumes `key`."""
        check_batched(self.env, states, "policy")
        return self.agent.policy(states, key)

    def act(self, states: PyTree, key: PRNGKey) -> Any:
        """`agent.act`: the actions `[B]` on `states`; consumes `key`."""
        check_batched(self.env, states, "act")
        return self.agent.act(states, key)


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
    import turbozero.envs

    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, got {which!r}")
    run = RunDir(path)
    config, _ = read_run_config(run)
    td = make_td(config)
    ckpt_io = Checkpointer(run.checkpoints, keep=None)
    try:
        step = ckpt_io.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {run.checkpoints}")
        ckpt, _ = ckpt_io.restore(abstract_checkpoint(td), step=step)
    finally:
        ckpt_io.close()
    # (before its first evaluation a run has no best: its network as trained so far)
    evaluated = bool(np.isfinite(np.asarray(ckpt.best_points)))
    params = ckpt.best_params if which == "best" and evaluated else ckpt.learner.params
    env = turbozero.envs.make(config.env)
    agent = td_agent(td, env, params, name=f"td:{config.env}:{which}@{step}")
    return LoadedAgent(agent=agent, env=env, config=config, step=int(step))
