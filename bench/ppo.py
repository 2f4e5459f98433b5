"""PPO throughput: environment steps per second on gymnax CartPole-v1.

Network 64-64 tanh, 128-step rollouts, 4 epochs, 4 minibatches; one row per (num_envs, seeds).
`steps_per_s` excludes compilation (best of a few calls after a warm-up call);
`steps_per_s_with_compile` counts the first call, compile included. The peer is rejax's PPO with
the same settings; rejax 0.1.3 needs gymnax 0.0.9, so it is usually absent from our environment
and its fields are then null.

    python bench/ppo.py [--envs 4,64,1024] [--seeds 1,16] [--updates 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import best_time, emit
from turbozero.ppo import PPOConfig, make_ppo

ENV = "CartPole-v1"


def ours(num_envs: int, seeds: int, updates: int, repeats: int) -> dict[str, float]:
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


def peer(num_envs: int, seeds: int, updates: int) -> float | None:
    """rejax PPO steps per second (compile excluded), or None when rejax is not importable."""
    try:
        import rejax
    except Exception:  # any import failure means "no peer"
        return None
    total = updates * num_envs * 128
    algo = rejax.PPO.create(
        env=ENV,
        num_envs=num_envs,
        num_steps=128,
        num_epochs=4,
        num_minibatches=4,
        total_timesteps=total,
        eval_freq=total,
        learning_rate=2.5e-4,
        agent_kwargs={"hidden_layer_sizes": (64, 64), "activation": "tanh"},
    )
    train = jax.jit(jax.vmap(algo.train))
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    seconds = best_time(lambda: train(keys), repeats=2)
    return total * seeds / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--envs", default="4,64,1024")
    parser.add_argument("--seeds", default="1,16")
    parser.add_argument("--updates", type=int, default=10, help="updates per compiled call")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    warned = False
    for seeds in (int(s) for s in args.seeds.split(",")):
        for num_envs in (int(e) for e in args.envs.split(",")):
            row = ours(num_envs, seeds, args.updates, args.repeats)
            peer_rate = peer(num_envs, seeds, args.updates)
            if peer_rate is None and not warned:
                print(
                    "bench/ppo.py: rejax is not importable (rejax 0.1.3 needs gymnax 0.0.9; "
                    "install it in a separate environment); peer fields are null",
                    file=sys.stderr,
                )
                warned = True
            emit(
                {
                    "env": f"gymnax:{ENV}",
                    "num_envs": num_envs,
                    "seeds": seeds,
                    "steps_per_s": round(row["steps_per_s"], 1),
                    "steps_per_s_with_compile": round(row["steps_per_s_with_compile"], 1),
                    "peer_steps_per_s": None if peer_rate is None else round(peer_rate, 1),
                    "ratio": None
                    if peer_rate is None
                    else round(row["steps_per_s"] / peer_rate, 3),
                    "final_return": round(row["final_return"], 2),
                }
            )


if __name__ == "__main__":
    main()
