"""turbozero: vectorized AlphaZero and Anakin-style PPO in JAX."""

from turbozero import xla_flags

xla_flags.configure()  # must precede any JAX computation: XLA reads XLA_FLAGS once

from turbozero.distributed import maybe_initialize_distributed

maybe_initialize_distributed()  # must precede any JAX computation (multi-host runs only)

# ruff: noqa: E402

from turbozero import envs
from turbozero.types import EvalFn, StepMetadata

__version__ = "0.1.0"


def load_agent(  # type: ignore[no-untyped-def]
    path, num_simulations=None, temperature=0.0, *, which="best", env=None, module=None
):
    """A ready agent from a run directory or checkpoint (see `turbozero.loading.load_agent`)."""
    from turbozero.loading import load_agent as _load

    return _load(path, num_simulations, temperature, which=which, env=env, module=module)


__all__ = ["EvalFn", "StepMetadata", "__version__", "envs", "load_agent"]
