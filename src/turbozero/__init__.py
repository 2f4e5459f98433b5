"""turbozero: vectorized AlphaZero and Anakin-style PPO in JAX."""

from turbozero import envs
from turbozero.types import EvalFn, StepMetadata

__version__ = "0.1.0"

__all__ = ["EvalFn", "StepMetadata", "__version__", "envs"]
