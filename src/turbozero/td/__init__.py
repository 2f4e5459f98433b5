"""TD learning over afterstates (TD-Gammon's method) for two-player dice games: `train_td`.

`config` (`TDConfig`), `rules` (`TDRules`, what a game's file gives), `learner` (`make_td`, the
compiled self-play and updates, `td_agent`), `train` (`train_td`, the run directory), `load`
(`load_agent`).
"""

from turbozero.td.config import TDConfig
from turbozero.td.learner import TD, TDState, make_td, td_agent
from turbozero.td.rules import TDRules

__all__ = ["TD", "TDConfig", "TDRules", "TDState", "make_td", "td_agent"]
