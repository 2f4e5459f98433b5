"""Two building blocks of the search against the JAX idiom they replace, in the same run.

- `gamma`: the root noise's Gamma variates (`turbozero.search.noise.log_gamma`, bulk proposals)
  against `jax.random.gamma` (a rejection loop per sample), shape `[batch, actions]`.
- `gather`: one tree level's row gather through a flat index (`search.gather_rows`) against
  `x[b, node]`, from a tree `[batch, nodes, 3, actions]`, 200 levels in a `fori_loop`.

- `draw`: a pgx game's drawing (`Env.render_svg`) with JAX's compilation off against pgx's
  drawing as it runs (`Page.draw_eagerly` says which a game uses), for backgammon, othello, hex
  and go_9x9.

One JSON row each: `{"block", "shape", "ours_us", "peer_us", "ratio"}` (`ratio` = peer / ours,
> 1: ours faster; microseconds per call, best of `--repeats`); `draw` rows carry the game and
`eager_ms`, `compiled_ms`, `ratio` (compiled / eager) and the game's `draw_eagerly`.

    python bench/micro.py [--batch 256] [--actions 65] [--nodes 64] [--repeats 20]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pgx._src.visualizer import Visualizer

from common import best_time, emit, machine
from turbozero.gamespec import game_spec
from turbozero.search import noise
from turbozero.search.search import gather_rows

LEVELS = 200


def gather_loop(row_of):
    """`fn(tree, node)`: `LEVELS` dependent gathers of one row per game (each picks the next)."""

    def run(tree, node):
        B, N = tree.shape[:2]

        def body(i, carry):
            node, acc = carry
            row = row_of(tree, node)  # [B, 3, A]
            s = jnp.sum(row, axis=(1, 2))
            return (node + 7 + (s > 0).astype(jnp.int32) + i) % N, acc + s

        return jax.lax.fori_loop(0, LEVELS, body, (node, jnp.zeros((B,))))

    return jax.jit(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--actions", type=int, default=65)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)
    B, A, N = args.batch, args.actions, args.nodes

    ours = jax.jit(lambda k: noise.log_gamma(k, 0.3, (B, A)))
    peer = jax.jit(lambda k: jax.random.gamma(k, 0.3, (B, A)))
    key = jax.random.PRNGKey(0)
    t_ours = best_time(lambda: ours(key), repeats=args.repeats)
    t_peer = best_time(lambda: peer(key), repeats=args.repeats)
    emit(
        {
            "block": "gamma",
            "shape": [B, A],
            "ours_us": round(t_ours * 1e6, 1),
            "peer_us": round(t_peer * 1e6, 1),
            "ratio": round(t_peer / t_ours, 2),
        }
    )

    tree = jax.random.normal(jax.random.PRNGKey(1), (B, N, 3, A))
    node = jax.random.randint(jax.random.PRNGKey(2), (B,), 0, N)
    b = jnp.arange(B)
    flat = gather_loop(lambda t, n: gather_rows(t, b * N + n))
    pairs = gather_loop(lambda t, n: t[b, n])
    t_ours = best_time(lambda: flat(tree, node), repeats=args.repeats) / LEVELS
    t_peer = best_time(lambda: pairs(tree, node), repeats=args.repeats) / LEVELS
    emit(
        {
            "block": "gather",
            "shape": [B, N, 3, A],
            "ours_us": round(t_ours * 1e6, 1),
            "peer_us": round(t_peer * 1e6, 1),
            "ratio": round(t_peer / t_ours, 2),
        }
    )

    for game in ("backgammon", "othello", "hex", "go_9x9"):
        env = turbozero.envs.make(game)
        state = jax.tree.map(jnp.asarray, jax.jit(env.init)(jax.random.PRNGKey(0))[0])

        def compiled(state=state):
            return Visualizer(color_theme="light").get_dwg(states=state).tostring()

        def eager(state=state):
            with jax.disable_jit():
                return Visualizer(color_theme="light").get_dwg(states=state).tostring()

        times = {f: best_time(f, repeats=args.repeats) for f in (compiled, eager)}
        emit(
            {
                "block": "draw",
                "game": game,
                "eager_ms": round(times[eager] * 1e3, 2),
                "compiled_ms": round(times[compiled] * 1e3, 2),
                "ratio": round(times[compiled] / times[eager], 2),
                "draw_eagerly": game_spec(game).page.draw_eagerly,
            }
        )


if __name__ == "__main__":
    main()
