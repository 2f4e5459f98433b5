"""Environments: the adapter contract (with its chance split), pgx/gymnax/jumanji adapters, users'
games, conformance."""

from turbozero.envs.chance import Chance, has_chance_event
from turbozero.envs.check import RULES, EnvCheckError, check
from turbozero.envs.core import Env
from turbozero.envs.custom import GameAfterstate, GameState, from_functions
from turbozero.envs.pgx import from_pgx
from turbozero.envs.registry import GAMES, make
from turbozero.types import StepMetadata

__all__ = [
    "GAMES",
    "RULES",
    "Chance",
    "Env",
    "EnvCheckError",
    "GameAfterstate",
    "GameState",
    "StepMetadata",
    "check",
    "from_functions",
    "from_pgx",
    "has_chance_event",
    "make",
]
