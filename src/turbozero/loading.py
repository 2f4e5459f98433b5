"""`turbozero.load_agent`: any run directory (AlphaZero or PPO) to a ready agent.

Sits on top of both algorithms (like the CLI); library modules do not import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turbozero.io.rundir import RunDir, find_run_dir


def run_algorithm(path: str | Path) -> tuple[RunDir, str]:
    rd = find_run_dir(path)
    return rd, str(rd.read_json("config.json").get("algorithm", "alphazero"))


def load_agent(
    path: str | Path,
    num_simulations: int | None = None,
    temperature: float = 0.0,
    *,
    which: str = "best",
    env: Any = None,
    module: Any = None,
) -> Any:
    """A ready agent (with `.env`, `.act(states, key)`, `.policy(states, key)`) from a run.

    Args:
        path: a run directory (its best checkpoint, or the latest with `which="latest"`) or one
            checkpoint directory inside it.
        num_simulations: AlphaZero search simulations per move, >= 1 (default: the run's
            setting).
        temperature: AlphaZero move temperature (0 = best move); PPO agents act greedily at 0
            and sample otherwise.
        which: "best" or "latest".
        env, module: AlphaZero runs whose game or flax network was given from Python (the
            tutorial's `Trainer`): pass the same game and network (`trainer.env`, `trainer.nn`).
    """
    _, algorithm = run_algorithm(path)
    if algorithm == "ppo":
        from turbozero.ppo.load import load_agent as load_ppo

        return load_ppo(path, which=which, sample=temperature > 0)
    from turbozero.alphazero.load import load_agent as load_az

    return load_az(path, num_simulations, temperature, which=which, env=env, module=module)
