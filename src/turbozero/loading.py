"""`turbozero.load_agent`: any run directory (AlphaZero, PPO or TD) to a ready agent.

Sits on top of the algorithms (like the CLI), which it finds in `turbozero.algorithms`; library
modules do not import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turbozero.algorithms import algorithm
from turbozero.arena.agents import LoadedAgent
from turbozero.io.rundir import RunDir, find_run_dir, load_run_game
from turbozero.validate import check_count, check_number, is_digits


def run_algorithm(path: str | Path) -> tuple[RunDir, str]:
    """The run directory holding `path` and the algorithm its `config.json` names."""
    rd = find_run_dir(path)
    return rd, str(rd.read_config()["algorithm"])


def load_agent(
    path: str | Path,
    num_simulations: int | None = None,
    temperature: float = 0.0,
    *,
    which: str = "best",
    weights: str = "playing",
    env: Any = None,
    module: Any = None,
    trust: bool = False,
    search: Any = None,
    depth: int | None = None,
) -> LoadedAgent:
    """A ready agent (with `.env`, `.act(states, key)`, `.policy(states, key)`) from a run.

    Args:
        path: a run directory (its best checkpoint, or the latest with `which="latest"`) or one
            checkpoint directory inside it.
        num_simulations: AlphaZero search simulations per move, >= 1 (default: the run's
            setting).
        temperature: AlphaZero move temperature (0 = best move); PPO agents act greedily at 0
            and sample otherwise.
        which: "best" or "latest".
        weights: "playing" or, for AlphaZero runs, "trained": the weights the gradient steps
            produced rather than their moving average (from a training checkpoint; the two are
            the same without `ema_decay`; see `turbozero.alphazero.load.load_agent`).
        env, module: AlphaZero runs whose game or flax network was given from Python (the
            tutorial's `Trainer`): pass the same game and network (`trainer.env`, `trainer.nn`).
        trust: runs whose `config.json` names code of their own: a game's file or module
            (`turbozero train --game`), or, for AlphaZero, a part's rebuild recipe
            (`train(..., rebuild=...)`) or a `reward_fn`: import and call it (said first on
            stderr). Without it such a run is refused: a run directory is opened as data.
        search: AlphaZero runs: play settings of the search other than the run's, e.g.
            `{"c_puct": 2.0, "fpu": "node"}` (`turbozero.alphazero.load.PLAY_SEARCH_SETTINGS`).
        depth: TD runs of a one-player game with chance (2048): the chance layers its
            expectimax looks ahead at play, 0 (1 ply) to 2 (default: the run's `eval_depth`).
    """
    temperature = check_number("temperature", temperature, low=0.0)
    if weights not in ("playing", "trained"):
        raise ValueError(f"weights must be 'playing' or 'trained', got {weights!r}")
    if num_simulations is not None:
        num_simulations = check_count("num_simulations", num_simulations, low=1)
    if depth is not None:
        depth = check_count("depth", depth, low=0)
    rd, name = run_algorithm(path)
    load_run_game(rd, trust=trust)  # (a game of one's own: its file or module, with trust)
    entry = algorithm(name)
    given = {
        "num_simulations": num_simulations,
        "temperature": temperature or None,
        "weights": None if weights == "playing" else weights,
        "env": env,
        "module": module,
        "search": search or None,
        "depth": depth,
    }
    unused = [k for k, v in given.items() if v is not None and k not in entry.load_options]
    if unused:
        verb = "is" if len(unused) == 1 else "are"
        raise ValueError(
            f"{', '.join(unused)} {verb} not for {entry.title} runs: {str(rd.path)!r} is a "
            f"{entry.title} run ({entry.plays})"
        )
    options = {
        "num_simulations": num_simulations,
        "temperature": temperature,
        "weights": weights,
        "env": env,
        "module": module,
        "trust": trust,
        "search": search,
        "depth": depth,
    }
    options = {k: v for k, v in options.items() if k in entry.load_options}
    p = Path(path)
    # (a checkpoint directory inside the run names its step)
    step = int(p.name) if p.absolute() != rd.path.absolute() and is_digits(p.name) else None
    return entry.load_function()(path, which=which, step=step, **options)
