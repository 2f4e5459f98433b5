"""PPO throughput: environment steps per second on gymnax CartPole-v1.

Network 64-64 tanh, 128-step rollouts, 4 epochs, 4 minibatches; one row per environment count
(one seed), then one per seed count (`--seeds`) at `--seed-envs` environments each. Rows are
printed as they are measured (ours, then the peer, never overlapping).
`steps_per_s` excludes compilation (best of a few calls after a warm-up call);
`steps_per_s_with_compile` counts the first call, compile included.

Evaluation is on for both sides (`--eval-episodes`, default 128, rejax's own default; 0 switches
it off on both): one evaluation of that many greedy episodes per `--updates` updates, as a training
run with `eval_every` does. Our timed call is what our training loop does per evaluation period:
the compiled updates, the compiled evaluation, and fetching the metrics to the host for logging.
Evaluation steps are not counted as training steps. The peer is rejax's PPO with the same
settings (`eval_freq` = the steps of `--updates` updates; its timed call also initialises the
agent, which is small next to the updates). Ours continues training from call to call while
rejax's restarts, so our evaluations see longer (better) episodes: a cost on our side.

rejax 0.1.3 needs gymnax 0.0.9, which our environment does not have, so the peer runs in a side
virtual environment, `.venv-bench`:

    python3 -m venv .venv-bench && .venv-bench/bin/pip install rejax==0.1.3 gymnax==0.0.9

When rejax is not importable here, this script runs its peer part (`--peer-only`) with
`.venv-bench/bin/python` (or `--peer-python`, or `$TURBOZERO_BENCH_PYTHON`) after our rows are
measured, one at a time; without such an interpreter the peer fields are null.

    python bench/ppo.py [--envs 4,64,1024] [--seeds 16] [--seed-envs 4] [--updates 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import functools
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


def ours(
    num_envs: int, seeds: int, updates: int, repeats: int, eval_episodes: int
) -> dict[str, float]:
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
    evaluate = jax.jit(jax.vmap(functools.partial(ppo.evaluate, num_episodes=eval_episodes)))
    eval_keys = jax.random.split(jax.random.PRNGKey(1), seeds)
    box: dict = {"states": states}

    def call():
        box["states"], metrics = update(box["states"])
        if eval_episodes:
            metrics = (metrics, evaluate(box["states"].params, box["states"].obs_stats, eval_keys))
        box["metrics"] = jax.device_get(metrics)  # to the host, as logging does
        return box["metrics"]

    start = time.perf_counter()
    call()
    with_compile = steps / (time.perf_counter() - start)

    seconds = best_time(call, repeats=repeats)
    train_metrics = box["metrics"][0] if eval_episodes else box["metrics"]
    final_return = float(np.mean(np.asarray(train_metrics["episode_return"])[:, -1]))
    return {
        "steps_per_s": steps / seconds,
        "steps_per_s_with_compile": with_compile,
        "final_return": final_return,
    }


def peer(num_envs: int, seeds: int, updates: int, repeats: int, eval_episodes: int) -> float:
    """rejax PPO steps per second (compile excluded); rejax must be importable."""
    import jax.numpy as jnp
    import rejax
    from rejax.evaluate import evaluate

    total = updates * num_envs * 128
    algo = rejax.PPO.create(
        env=ENV,
        num_envs=num_envs,
        num_steps=128,
        num_epochs=4,
        num_minibatches=4,
        total_timesteps=total,
        eval_freq=total,
        skip_initial_evaluation=True,  # so: one evaluation, after the last update
        learning_rate=2.5e-4,
        agent_kwargs={"hidden_layer_sizes": (64, 64), "activation": "tanh"},
    )
    if eval_episodes:  # its default evaluation, with our episode count and the same step cap

        def eval_callback(algo, ts, rng):
            act = algo.make_act(ts)
            max_steps = algo.env_params.max_steps_in_episode
            return evaluate(act, rng, algo.env, algo.env_params, eval_episodes, max_steps)

        algo = algo.replace(eval_callback=eval_callback)
    else:
        algo = algo.replace(eval_callback=lambda algo, ts, rng: jnp.zeros(()))
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


def peer_rate(
    seeds: int, num_envs: int, args: argparse.Namespace
) -> tuple[float | None, str | None]:
    """Peer steps per second for one (seeds, num_envs), here or in the side interpreter, and a
    note when there is no peer."""
    if rejax_importable():
        return peer(num_envs, seeds, args.updates, args.repeats, args.eval_episodes), None
    python = args.peer_python or os.environ.get("TURBOZERO_BENCH_PYTHON") or SIDE_VENV_PYTHON
    if not Path(python).exists():
        return None, (
            "rejax is not importable here (rejax 0.1.3 needs gymnax 0.0.9); peer fields are "
            f"null. To measure the peer without touching this environment: {SIDE_VENV_HOWTO}"
        )
    cmd = [
        str(python),
        str(Path(__file__).resolve()),
        "--peer-only",
        f"--envs={num_envs}",
        f"--seeds={seeds}",
        f"--updates={args.updates}",
        f"--repeats={args.repeats}",
        f"--eval-episodes={args.eval_episodes}",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"the peer failed in {python}:\n{done.stderr[-2000:]}"
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            return float(json.loads(line)["peer_steps_per_s"]), None
    return None, f"the peer printed no row in {python}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--envs", default="4,64,1024")
    parser.add_argument("--seeds", default="16")
    parser.add_argument(
        "--seed-envs", type=int, default=4, help="environments per seed in the many-seed rows"
    )
    parser.add_argument("--updates", type=int, default=10, help="updates per compiled call")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--eval-episodes", type=int, default=128, help="per evaluation, both sides (0 = off)"
    )
    parser.add_argument("--peer-python", help="interpreter with rejax (default .venv-bench)")
    parser.add_argument("--peer-only", action="store_true", help="only the rejax rows")
    parser.add_argument("--no-peer", action="store_true", help="only our rows")
    args = parser.parse_args()
    # (seeds, num_envs): one seed at every environment count, then more seeds at --seed-envs
    grid = [(1, int(e)) for e in args.envs.split(",")]
    grid += [(int(s), args.seed_envs) for s in args.seeds.split(",") if int(s) != 1]
    if args.peer_only:  # every (seeds, num_envs) pair named; the parent process names one
        pairs = [(int(s), int(e)) for s in args.seeds.split(",") for e in args.envs.split(",")]
        for seeds, num_envs in pairs:
            rate = peer(num_envs, seeds, args.updates, args.repeats, args.eval_episodes)
            emit({"num_envs": num_envs, "seeds": seeds, "peer_steps_per_s": rate})
        return
    for seeds, num_envs in grid:  # ours, then the peer, one at a time: no overlap; a row each
        row = ours(num_envs, seeds, args.updates, args.repeats, args.eval_episodes)
        rate, note = (None, None) if args.no_peer else peer_rate(seeds, num_envs, args)
        if note:
            print(f"bench/ppo.py: {note}", file=sys.stderr)
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
                "eval_episodes": args.eval_episodes,
            }
        )


if __name__ == "__main__":
    main()
