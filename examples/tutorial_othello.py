"""The "How to turbozero" tutorial with its import paths changed; besides, `env_name="othello"`
names the game in the run directory, two flags choose tiny sizes and the run directory, and the
training runs only when the file is run (not imported), so that `rebuild=` can name this file's
`tutorial_env` and `tutorial_optimizer`: `turbozero eval`, `play` and `train --resume`, given
`--trust-run`, then rebuild the game and the optimizer made here (the network and the loss are
recorded by themselves).

`python examples/tutorial_othello.py` runs it at the tutorial's sizes; `--toy` runs a tiny version
(used by the test suite); `--out DIR` chooses the run directory.
"""

import argparse
import os
import sys
from functools import partial

import turbozero

turbozero.configure()  # before any JAX computation; pgx's import starts JAX (docs/runs.md)

import jax
import optax
import pgx

from turbozero import envs
from turbozero.io import enable_compilation_cache
from turbozero.tutorial import (
    MCTS,
    AlphaZero,
    ApproxEloTester,
    AZResnet,
    AZResnetConfig,
    EpisodeReplayBuffer,
    PUCTSelector,
    StepMetadata,
    Trainer,
    az_default_loss_fn,
    make_nn_eval_fn,
)

enable_compilation_cache()  # compiled programs kept on disk between runs, as the CLI does

parser = argparse.ArgumentParser()
parser.add_argument(
    "--toy", action="store_true", help="tiny sizes (about two minutes on 2 cores, for tests)"
)
parser.add_argument("--out", default=None, help="run directory")
args = parser.parse_args(sys.argv[1:] if __name__ == "__main__" else [])
toy = args.toy

env = pgx.make("othello")


def step_fn(state, action):
    new_state = env.step(state, action)
    return new_state, StepMetadata(
        rewards=new_state.rewards,
        action_mask=new_state.legal_action_mask,
        terminated=new_state.terminated,
        cur_player_id=new_state.current_player,
        step=new_state._step_count,
    )


def init_fn(key):
    state = env.init(key)
    return state, StepMetadata(
        rewards=state.rewards,
        action_mask=state.legal_action_mask,
        terminated=state.terminated,
        cur_player_id=state.current_player,
        step=state._step_count,
    )


resnet = AZResnet(
    AZResnetConfig(
        model_type="resnet",
        policy_head_out_size=env.num_actions,
        num_blocks=1 if toy else 2,
        num_channels=4,
    )
)


def state_to_nn_input(state):
    return state.observation


az_evaluator = AlphaZero(MCTS)(
    eval_fn=make_nn_eval_fn(resnet, state_to_nn_input),
    num_iterations=4 if toy else 25,
    max_nodes=8 if toy else 50,
    branching_factor=env.num_actions,
    action_selector=PUCTSelector(),
)

replay_memory = EpisodeReplayBuffer(capacity=64 if toy else 1000)


def tutorial_env():
    """The game as the Trainer builds it from the functions above (for `rebuild`)."""
    return envs.from_functions(
        init_fn=init_fn, step_fn=step_fn, observe_fn=state_to_nn_input, name="custom:othello"
    )


def tutorial_optimizer():
    return optax.adam(1e-4)


if __name__ == "__main__":  # (imported for its recipes, it trains nothing)
    trainer = Trainer(
        train_batch_size=16,
        env_step_fn=step_fn,
        env_init_fn=init_fn,
        loss_fn=partial(az_default_loss_fn, l2_reg_lambda=0.0001),
        nn=resnet,
        optimizer=tutorial_optimizer(),
        state_to_nn_input_fn=state_to_nn_input,
        evaluator=az_evaluator,
        testers=[
            ApproxEloTester(
                total_epochs=10,
                episodes_per_opponent=2 if toy else 20,
                num_opponents=2 if toy else 5,
                rating_optim_steps=5000,
                rating_optim_lr=10000,
            )
        ],
        memory_buffer=replay_memory,
        batch_size=4 if toy else 16,
        max_episode_steps=128,
        warmup_steps=0 if toy else 10,
        collection_steps_per_epoch=70 if toy else 10,
        train_steps_per_epoch=2 if toy else 10,
        ckpt_dir=args.out,
        env_name="othello",
        rebuild={
            "env": f"{os.path.abspath(__file__)}:tutorial_env",
            "optimizer": f"{os.path.abspath(__file__)}:tutorial_optimizer",
        },
    )

    output = trainer.train_loop(key=jax.random.PRNGKey(0), num_epochs=2 if toy else 10)
