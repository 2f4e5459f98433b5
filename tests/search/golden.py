"""Golden outputs of today's search, the guard rail for restructuring it: each selector, subtree
reuse on and off, tic-tac-toe and Connect Four, a full tree, fixed keys.

`python -m tests.search.golden` rewrites `data/golden_search.npz` (only when the search's
behaviour is meant to change: say so in the CHANGELOG); `test_golden.py` requires today's search
to reproduce it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PATH = Path(__file__).resolve().parent / "data" / "golden_search.npz"
FIELDS = (
    "action",
    "action_weights",
    "root_value",
    "q_values",
    "visit_counts",
    "max_depth",
    "tree_fullness",
    "full_events",
    "root_player",
)
#: (game, selector, reuse, max_nodes) with 16 simulations; max_nodes 10 fills the tree
CASES = [
    (game, selector, reuse, 17)
    for game in ("tic_tac_toe", "connect_four")
    for selector, reuse in (
        ("puct", False),
        ("puct", True),
        ("muzero_puct", False),
        ("muzero_puct", True),
        ("gumbel", False),
    )
] + [("connect_four", "puct", True, 10)]
BATCH, SIMULATIONS, MOVES = 8, 16, 3


def case_name(game: str, selector: str, reuse: bool, max_nodes: int) -> str:
    return f"{game}/{selector}/{'reuse' if reuse else 'fresh'}/{max_nodes}"


def run_case(game: str, selector: str, reuse: bool, max_nodes: int) -> dict[str, np.ndarray]:
    """`{field: [MOVES, ...]}`: three consecutive searches (temperature 1, so the sampled move is
    part of the output) from the start of `BATCH` games, each followed by its move."""
    import jax

    from tests.search.helpers import linear_eval_fn, linear_params
    from turbozero import envs
    from turbozero.search import gumbel, make_search, muzero_puct, puct

    env = envs.make(game)
    rule = {"puct": puct, "muzero_puct": muzero_puct, "gumbel": gumbel}[selector]()
    search = make_search(
        env,
        linear_eval_fn(env.num_actions),
        selector=rule,
        num_simulations=SIMULATIONS,
        max_nodes=max_nodes,
        reuse=reuse,
    )
    params = linear_params(env, seed=1)
    keys = jax.random.split(jax.random.PRNGKey(3), BATCH)
    states = jax.vmap(env.init)(keys)[0]
    run, advance = jax.jit(search.search), jax.jit(search.advance)
    step = jax.jit(jax.vmap(env.step))
    tree = search.init(BATCH)
    outs = []
    for t in range(MOVES):
        tree, out = run(tree, params, states, jax.random.PRNGKey(100 + t), 1.0)
        outs.append(jax.device_get(out))
        states = step(states, out.action, keys)[0]
        tree = advance(tree, out.action)
    return {f: np.stack([np.asarray(getattr(o, f)) for o in outs]) for f in FIELDS}


def main() -> None:
    import turbozero

    turbozero.configure()
    arrays = {}
    for case in CASES:
        for field, value in run_case(*case).items():
            arrays[f"{case_name(*case)}/{field}"] = value
    PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(PATH, **arrays)
    print(f"wrote {len(arrays)} arrays to {PATH}")


if __name__ == "__main__":
    main()
