"""turbozero: vectorized AlphaZero and Anakin-style PPO in JAX.

`import turbozero` starts nothing: the environments (and pgx, whose import starts JAX) load when
first used, so `turbozero.configure()` can still set up the process first.
"""

from __future__ import annotations

import importlib
from typing import Any

from turbozero.runtime import configure
from turbozero.types import EvalFn, StepMetadata

__version__ = "0.1.0"


def load_agent(  # type: ignore[no-untyped-def]
    path,
    num_simulations=None,
    temperature=0.0,
    *,
    which="best",
    weights="playing",
    env=None,
    module=None,
    trust=False,
    search=None,
    depth=None,
):
    """A ready agent from a run directory or checkpoint (see `turbozero.loading.load_agent`)."""
    from turbozero.loading import load_agent as _load  # (the package root stays light)

    return _load(
        path,
        num_simulations,
        temperature,
        which=which,
        weights=weights,
        env=env,
        module=module,
        trust=trust,
        search=search,
        depth=depth,
    )


def __getattr__(name: str) -> Any:
    if name == "envs":  # (loaded on first use: see the module docstring)
        return importlib.import_module("turbozero.envs")
    raise AttributeError(f"module 'turbozero' has no attribute {name!r}")


__all__ = ["EvalFn", "StepMetadata", "__version__", "configure", "envs", "load_agent"]
