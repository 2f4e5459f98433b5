"""Go on pgx's 9x9 and 19x19 boards: the drawing and move names (A..T without I, rows counted
up from the bottom, as GTP names them), the symmetries, the GTP engines (`gnugo:LEVEL`,
`gtp:COMMAND`, `turbozero.engines.gtp`) and the 9x9 preset."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from turbozero.config import register_preset
from turbozero.games.core import GO_LETTERS, Board, Cell, GameSpec, _register_builtin

if TYPE_CHECKING:
    from turbozero.alphazero.config import AlphaZeroConfig
    from turbozero.arena.agents import Agent
    from turbozero.envs.core import Env

SIZES = (9, 19)


def go_cells(n: int) -> list[Cell]:
    """Stones on intersections, 25 apart, the first at (25, 25); action N*N is pass."""
    return [(r * n + c, 25.0 + 25.0 * c, 25.0 + 25.0 * r, 12.5) for r in range(n) for c in range(n)]


def go_label(n: int) -> Callable[[int], str]:
    """Move names on an `n` x `n` board: "A9" top left on 9x9, "pass" for action N*N (the GTP
    vertex of the move)."""

    def label(action: int) -> str:
        return "pass" if action == n * n else f"{GO_LETTERS[action % n]}{n - action // n}"

    return label


def engine_agent(env: Env, spec: str) -> Agent:
    """`gnugo:LEVEL` or `gtp:COMMAND` as an agent (`turbozero.engines.players`)."""
    from turbozero.engines.players import go_engine_agent

    return go_engine_agent(env, spec)


GAMES = tuple(
    _register_builtin(
        GameSpec(
            name=f"go_{n}x{n}",
            description=f"Go, {n}x{n} (2 players, {n * n + 1} actions incl. pass)",
            board=Board(
                label=go_label(n),
                cells=functools.partial(go_cells, n),
                symmetry=("square", n),
                marks=("black", "white"),
                coordinates=True,
            ),
            engines={"gnugo": engine_agent, "gtp": engine_agent},
        )
    )
    for n in SIZES
)


@register_preset(
    "go_9x9",
    "Go 9x9, ResNet 6x64, 64 simulations, gumbel (a GPU-sized job; days on CPU)",
    algorithm="alphazero",
)
def preset() -> AlphaZeroConfig:
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig

    return AlphaZeroConfig(
        env="go_9x9",
        num_games=64,
        network=NetworkConfig(kind="resnet", num_blocks=6, num_channels=64),
        search=SearchConfig(selector="gumbel", num_simulations=64, max_nodes=65),
        temperature_moves=0,
        max_episode_steps=200,
        memory_capacity=256,
        truncation="bootstrap",
        augment=True,
        train_batch_size=512,
        num_epochs=200,
        eval_every=10,
        eval_opponents=("random", "best"),
    )
