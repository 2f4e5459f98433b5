"""PPO throughput: environment steps per second on gymnax CartPole-v1.

Network 64-64 tanh, 128-step rollouts, 4 epochs, 4 minibatches; one row per (num_envs, seeds).
`steps_per_s` excludes compilation (best of a few calls after a warm-up call);
`steps_per_s_with_compile` counts the first call, compile included.

The peer is rejax's PPO with the same settings (its evaluations switched off; its timed call also
initialises the agent, which is small next to the updates). rejax 0.1.3 needs gymnax 0.0.9, which
our environment does not have, so the peer runs in a side virtual environment, `.venv-bench`:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install rejax==0.1.3 gymnax==0.0.9

When rejax is not importable here, this script runs its peer part (`--peer-only`) with
`.venv-bench/bin/python` (or `--peer-python`, or `$TURBOZERO_BENCH_PYTHON`) after our rows are
measured, one at a time; without such an interpreter the peer fields are null.

    python bench/ppo.py [--envs 4,64,1024] [--seeds 1,16] [--updates 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, emit

ENV = "CartPole-v1"
ROOT = Path(__file__).resolve().parent.parent
SIDE_VENV_PYTHON = ROOT / ".venv-bench" / "bin" / "python"
SIDE_VENV_HOWTO = (
    "python3 -m venv .venv-bench && .venv-bench/bin/pip install rejax==0.1.3 gymnax==0.0.9"
)


def ours(num_envs: int, seeds: int, updates: int, repeats: int) -> dict[str, float]:
    from turbozero.ppo import PPOConfig, make_ppo

    cfg = PPOConfig(
        env=f"gymnax:{ENV}",
        num_envs=num_envs,
        rollout_length=128,
        epochs=4,
        num_minibatches=4,
        num_updates=updates * (repeats + 2),
        num_updates_per_eval=updates,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
        activation="tanh",
        actor_lr=2.5e-4,
        critic_lr=2.5e-4,
    )
    ppo = make_ppo(cfg)
    steps = updates * cfg.batch_size * seeds
    states = jax.block_until_ready(
        jax.jit(jax.vmap(ppo.init))(jax.random.split(jax.random.PRNGKey(0), seeds))
    )
    update = jax.jit(jax.vmap(ppo.update))
    start = time.perf_counter()
    states, metrics = jax.block_until_ready(update(states))
    with_compile = steps / (time.perf_counter() - start)
    box = {"states": states, "metrics": metrics}

    def call():
        box["states"], box["metrics"] = update(box["states"])
        return box["metrics"]

    seconds = best_time(call, repeats=repeats)
    final_return = float(np.mean(np.asarray(box["metrics"]["episode_return"])[:, -1]))
    return {
        "steps_per_s": steps / seconds,
        "steps_per_s_with_compile": with_compile,
        "final_return": final_return,
    }


def peer(num_envs: int, seeds: int, updates: int, repeats: int) -> float:
    """rejax PPO steps per second (compile excluded); rejax must be importable."""
    import jax.numpy as jnp
    import rejax

    total = updates * num_envs * 128
    algo = rejax.PPO.create(
        env=ENV,
        num_envs=num_envs,
        num_steps=128,
        num_epochs=4,
        num_minibatches=4,
        total_timesteps=total,
        eval_freq=total,
        skip_initial_evaluation=True,
        learning_rate=2.5e-4,
        agent_kwargs={"hidden_layer_sizes": (64, 64), "activation": "tanh"},
    )
    algo = algo.replace(eval_callback=lambda algo, ts, rng: jnp.zeros(()))  # time updates only
    train = jax.jit(jax.vmap(algo.train))
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    seconds = best_time(lambda: train(keys), repeats=repeats)
    return total * seeds / seconds


def rejax_importable() -> bool:
    try:
        import rejax  # noqa: F401
    except Exception:  # any import failure (missing, or broken by our gymnax) means "not here"
        return False
    return True


def peer_rates(
    grid: list[tuple[int, int]], args: argparse.Namespace
) -> tuple[dict[tuple[int, int], float | None], str | None]:
    """Peer steps per second for every (seeds, num_envs), here or in the side interpreter, and a
    note when there is no peer."""
    if rejax_importable():
        return {g: peer(g[1], g[0], args.updates, args.repeats) for g in grid}, None
    python = args.peer_python or os.environ.get("TURBOZERO_BENCH_PYTHON") or SIDE_VENV_PYTHON
    if not Path(python).exists():
        return {g: None for g in grid}, (
            "rejax is not importable here (rejax 0.1.3 needs gymnax 0.0.9); peer fields are "
            f"null. To measure the peer without touching this environment: {SIDE_VENV_HOWTO}"
        )
    cmd = [
        str(python),
        str(Path(__file__).resolve()),
        "--peer-only",
        f"--envs={args.envs}",
        f"--seeds={args.seeds}",
        f"--updates={args.updates}",
        f"--repeats={args.repeats}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {g: None for g in grid}, f"the peer failed in {python}:\n{done.stderr[-2000:]}"
    rates: dict[tuple[int, int], float | None] = {g: None for g in grid}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rates[(row["seeds"], row["num_envs"])] = row["peer_steps_per_s"]
    return rates, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--envs", default="4,64,1024")
    parser.add_argument("--seeds", default="1,16")
    parser.add_argument("--updates", type=int, default=10, help="updates per compiled call")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--peer-python", help="interpreter with rejax (default .venv-bench)")
    parser.add_argument("--peer-only", action="store_true", help="only the rejax rows")
    parser.add_argument("--no-peer", action="store_true", help="only our rows")
    args = parser.parse_args()
    grid = [
        (int(s), int(e)) for s in args.seeds.split(",") for e in args.envs.split(",")
    ]  # (seeds, num_envs)
    if args.peer_only:
        for seeds, num_envs in grid:
            rate = peer(num_envs, seeds, args.updates, args.repeats)
            emit({"num_envs": num_envs, "seeds": seeds, "peer_steps_per_s": rate})
        return
    rows = {g: ours(g[1], g[0], args.updates, args.repeats) for g in grid}  # peer after: no overlap
    if args.no_peer:
        rates: dict[tuple[int, int], float | None] = {g: None for g in grid}
    else:
        rates, note = peer_rates(grid, args)
        if note:
            print(f"bench/ppo.py: {note}", file=sys.stderr)
    for (seeds, num_envs), row in rows.items():
        rate = rates[(seeds, num_envs)]
        emit(
            {
                "env": f"gymnax:{ENV}",
                "num_envs": num_envs,
                "seeds": seeds,
                "steps_per_s": round(row["steps_per_s"], 1),
                "steps_per_s_with_compile": round(row["steps_per_s_with_compile"], 1),
                "peer_steps_per_s": None if rate is None else round(rate, 1),
                "ratio": None if rate is None else round(row["steps_per_s"] / rate, 3),
                "final_return": round(row["final_return"], 2),
            }
        )


if __name__ == "__main__":
    main()
