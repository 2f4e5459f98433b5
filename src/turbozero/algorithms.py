"""The algorithms a run is trained with, by name: one entry each, looked up here by the CLI,
`turbozero.load_agent`, run directories (`config.json`'s `"algorithm"`) and presets.

An entry names its parts as `"package.module:attribute"` strings, imported when first asked for
(as Python's entry points are): this module imports nothing of the algorithms, so every layer may
ask it which algorithms exist. Adding an algorithm is its own folder (a `Config` subclass, a
`train` and a `load_agent` with the signatures below) plus one `register_algorithm` call (for the
built-in three, one entry in `BUILTIN`).

    entry = algorithm("td")
    summary = entry.train()(entry.config_class()(), "runs/td-1", resume=False, preset=None)
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any


class UnknownAlgorithmError(ValueError):
    """A name no registered algorithm has (a run directory reading it says it is damaged)."""


@dataclasses.dataclass(frozen=True)
class AlgorithmEntry:
    """One algorithm.

    Attributes:
        name: its name in `config.json`, presets and messages (`alphazero`).
        title: its name in sentences (`AlphaZero`).
        config: `"module:Class"`, its `turbozero.config.Config` subclass.
        run: `"module:function"`, `run(config, run_dir, *, resume, preset, check_memory)
            -> summary`: a training run as the CLI's `train` starts it (with `trust`, where
            `opens_code`).
        load: `"module:function"`, `load(path, *, which, step, **options) -> LoadedAgent`.
        load_options: the options of `turbozero.load_agent` it takes beyond `which` (given
            others, `load_agent` refuses them by name, saying `plays`).
        plays: how its agent plays, said when an option it does not take is given.
        opens_code: its runs may name code of their own (parts given from Python) that a
            resumed run rebuilds: its `run` takes `trust` (`--trust-run`).
    """

    name: str
    title: str
    config: str
    run: str
    load: str
    load_options: tuple[str, ...]
    plays: str
    opens_code: bool = False

    def config_class(self) -> Any:
        """The config class (imported on first use)."""
        return _attribute(self.config)

    def run_function(self) -> Any:
        """`run(config, run_dir, *, resume, preset, check_memory)` (imported on first use)."""
        return _attribute(self.run)

    def load_function(self) -> Any:
        """`load(path, *, which, step, **options)` (imported on first use)."""
        return _attribute(self.load)


def _attribute(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


#: the algorithms turbozero ships
BUILTIN = (
    AlgorithmEntry(
        name="alphazero",
        title="AlphaZero",
        config="turbozero.alphazero.config:AlphaZeroConfig",
        run="turbozero.alphazero.train:run",
        load="turbozero.alphazero.load:load",
        load_options=(
            "num_simulations",
            "temperature",
            "weights",
            "env",
            "module",
            "trust",
            "search",
        ),
        plays="its network searches",
        opens_code=True,
    ),
    AlgorithmEntry(
        name="ppo",
        title="PPO",
        config="turbozero.ppo.config:PPOConfig",
        run="turbozero.ppo.train:train_ppo",
        load="turbozero.ppo.load:load",
        load_options=("temperature",),
        plays="it loads its own environment and networks and does not search",
    ),
    AlgorithmEntry(
        name="td",
        title="TD",
        config="turbozero.td.config:TDConfig",
        run="turbozero.td.train:train_td",
        load="turbozero.td.load:load_agent",
        load_options=("depth",),
        plays="its network rates each play; only a one-player game's looks ahead, by depth",
    ),
)

_REGISTRY: dict[str, AlgorithmEntry] = {entry.name: entry for entry in BUILTIN}


def register_algorithm(entry: AlgorithmEntry) -> AlgorithmEntry:
    """Add `entry` to the algorithms runs may name; a `ValueError` if its name is taken."""
    if entry.name in _REGISTRY and _REGISTRY[entry.name] != entry:
        raise ValueError(f"algorithm {entry.name!r} is registered already")
    _REGISTRY[entry.name] = entry
    return entry


def unregister_algorithm(name: str) -> None:
    """Remove the algorithm `name` registered with `register_algorithm` (not a built-in one)."""
    if any(entry.name == name for entry in BUILTIN):
        raise ValueError(f"{name!r} is a built-in algorithm")
    _REGISTRY.pop(name, None)


def algorithm_names() -> tuple[str, ...]:
    """The names of every registered algorithm, built-in first."""
    return tuple(_REGISTRY)


def algorithm(name: Any, *, where: str = "") -> AlgorithmEntry:
    """The entry of the algorithm `name`.

    Args:
        name: its name, as a run's `config.json` or a preset records it.
        where: what named it (a `config.json`'s path), for the message.

    Raises:
        UnknownAlgorithmError: no such algorithm (naming `where` and the known ones).
    """
    if isinstance(name, str) and name in _REGISTRY:
        return _REGISTRY[name]
    known = " or ".join(map(repr, _REGISTRY))
    named = f"{where} names" if where else "it names"
    raise UnknownAlgorithmError(
        f"{named} no algorithm turbozero knows ({name!r}; {known}): is it a turbozero run "
        f"directory?"
    )
