"""Go on pgx's 9x9 and 19x19 boards, and on 7x7 (pgx's Go at that size, which GNU Go also
plays): the drawing and move names (A..T without I, rows counted up from the bottom, as GTP
names them), the symmetries, the GTP engines (`gnugo:LEVEL`, `gtp:COMMAND`,
`turbozero.engines.gtp`) and the 7x7 and 9x9 presets. Komi 7.5 on every board, as pgx has it
and the GTP bridge sends it."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from turbozero.config import register_preset
from turbozero.engines.players import GNUGO, GTP
from turbozero.envs.pgx import from_pgx
from turbozero.gamespec import Board, Cell, GameSpec, go_label, register_game

if TYPE_CHECKING:
    from turbozero.envs.core import Env

SIZES = (7, 9, 19)
PGX_SIZES = (9, 19)  # the sizes `pgx.make` names; 7x7 is built with `pgx.go.Go(size=7)`


def go_cells(n: int) -> list[Cell]:
    """Stones on intersections, 25 apart, the first at (25, 25); action N*N is pass."""
    return [(r * n + c, 25.0 + 25.0 * c, 25.0 + 25.0 * r, 12.5) for r in range(n) for c in range(n)]


def make_small_go(size: int) -> Env:
    """pgx's Go on a `size` x `size` board (komi 7.5), named `go_{size}x{size}`."""
    import pgx.go

    env = from_pgx(pgx.go.Go(size=size, komi=7.5), name=f"go_{size}x{size}")
    return dataclasses.replace(env, render_svg=draw_go)


class _AsDrawable:
    """A Go state that pgx's drawing accepts at any size (it draws by the state's `_size`, but
    names only 9x9 and 19x19 among the ids it knows)."""

    env_id = "go_9x9"

    def __init__(self, state: Any):
        self._state = state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


def draw_go(state: Any) -> str:
    """pgx's drawing of a Go position of any board size (`Env.render_svg`)."""
    import jax
    import jax.numpy as jnp
    from pgx._src.visualizer import Visualizer

    state = jax.tree.map(jnp.asarray, state)
    visualizer = Visualizer(color_theme="light")
    configure = visualizer._set_config_by_state
    visualizer._set_config_by_state = lambda s: configure(_AsDrawable(s))  # type: ignore[method-assign]
    return visualizer.get_dwg(states=state).tostring()


GAMES = tuple(
    register_game(
        GameSpec(
            name=f"go_{n}x{n}",
            description=f"Go, {n}x{n} (2 players, {n * n + 1} actions incl. pass)",
            make_env=None if n in PGX_SIZES else functools.partial(make_small_go, n),
            board=Board(
                label=go_label(n),
                cells=functools.partial(go_cells, n),
                symmetry=("square", n),
                marks=("black", "white"),
                coordinates=True,
            ),
            engines={"gnugo": GNUGO, "gtp": GTP},
        )
    )
    for n in SIZES
)


register_preset(
    "go_9x9",
    "Go 9x9 (komi 7.5) on the default recipe: ResNet 4x32, 32 simulations, two hours on a 2-core "
    "CPU; evaluated against random and its own earlier networks (Elo), and by `bench/engines.py "
    "--go-run` against GNU Go levels 1 and 10 (Debian's gnugo)",
    algorithm="alphazero",
    base="board",
    settings={
        "env": "go_9x9",
        "max_episode_steps": 162,  # (pgx ends a 9x9 game after 2 * 81 moves)
        # 32 epochs of play kept: with the 8 symmetries the default 64 would take 2.9 GB
        "memory_capacity": 512,
        "truncation": "bootstrap",
        "augment": True,
        "max_wall_seconds": 7200.0,
        "eval_every": 25,
        "eval_opponents": ("random",),
    },
)


register_preset(
    "go_7x7",
    "Go 7x7 (komi 7.5) on the default recipe: ResNet 3x32, 32 simulations, two hours on a 2-core "
    "CPU; evaluated against random, and by `bench/engines.py --go-run` against GNU Go level 1 "
    "(Debian's gnugo)",
    algorithm="alphazero",
    # about 2 minutes on 2 cores
    quick=("num_epochs=40", "eval_every=20", "eval_games=16", "max_wall_seconds=240"),
    base="board",
    settings={
        "env": "go_7x7",
        "network": {"num_blocks": 3},
        "temperature_moves": 20,
        "max_episode_steps": 98,  # (pgx ends a 7x7 game after 2 * 49 moves)
        "memory_capacity": 512,
        "truncation": "bootstrap",
        "augment": True,
        "collection_steps_per_epoch": 16,
        "train_steps_per_epoch": 32,
        "max_wall_seconds": 7200.0,
        "eval_every": 25,
        "eval_simulations": 128,
        "eval_opponents": ("random",),
        "elo_pool_size": 0,  # (no earlier networks as opponents)
    },
)
