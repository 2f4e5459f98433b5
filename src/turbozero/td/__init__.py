"""TD learning over afterstates: TD-Gammon's method for two-player dice games (backgammon), and
Szubert and Jaskowski's for one-player games with chance after the move (2048): `train_td`.

`config` (`TDConfig`), `rules` (`TDRules` and `SoloRules`, what a game's file gives), `learner`
(`make_td`, the compiled self-play and updates, `td_agent`), `solo` (the one-player learner and
its expectimax at play), `ntuple` (the n-tuple network), `train` (`train_td`, the run
directory), `load` (`load_agent`).
"""

from turbozero.td.config import TDConfig
from turbozero.td.learner import TD, TDState, make_td, td_agent
from turbozero.td.rules import SoloRules, TDRules
from turbozero.td.solo import SoloState, SoloTD

__all__ = [
    "TD",
    "SoloRules",
    "SoloState",
    "SoloTD",
    "TDConfig",
    "TDRules",
    "TDState",
    "make_td",
    "td_agent",
]
