"""Arena: agents, matches played as one compiled program, Elo ratings and game records."""

from turbozero.arena.agents import (
    Agent,
    AgentOutput,
    LoadedAgent,
    PolicyFn,
    make_agent,
    network_agent,
    random_agent,
)
from turbozero.arena.elo import EloPool, fit_elo
from turbozero.arena.match import MatchResult, Record, play_match, wilson_interval
from turbozero.arena.perfect import perfect_agent, perfect_games
from turbozero.arena.records import render_game_svgs, replay_game
from turbozero.arena.search_agents import alphazero_agent, rollout_mcts_agent

__all__ = [
    "Agent",
    "AgentOutput",
    "EloPool",
    "LoadedAgent",
    "MatchResult",
    "PolicyFn",
    "Record",
    "alphazero_agent",
    "fit_elo",
    "make_agent",
    "network_agent",
    "perfect_agent",
    "perfect_games",
    "play_match",
    "random_agent",
    "render_game_svgs",
    "replay_game",
    "rollout_mcts_agent",
    "wilson_interval",
]
