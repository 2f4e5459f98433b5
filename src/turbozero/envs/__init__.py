"""Environments: the adapter contract, pgx/gymnax/jumanji adapters, users' games, conformance."""

from turbozero.envs.check import RULES, EnvCheckError, check
from turbozero.envs.core import Env
from turbozero.envs.custom import GameState, from_functions
from turbozero.envs.pgx import from_pgx
from turbozero.envs.registry import GAMES, make
from turbozero.types import StepMetadata

__all__ = [
    "GAMES",
    "RULES",
    "Env",
    "EnvCheckError",
    "GameState",
    "StepMetadata",
    "check",
    "from_functions",
    "from_pgx",
    "make",
]
