"""Search throughput: our batched MCTS against mctx on the same game, network, batch and budget.

Both searches use the pgx game itself as the model (through our environment adapter) and the same
`eval_fn`; both get `max_nodes = simulations + 1`. Peers: `muzero_puct` and `puct` against
`mctx.muzero_policy`, `gumbel` against `mctx.gumbel_muzero_policy`. The floor is the work no
search can avoid: the roots' `eval_fn` call, then `simulations` iterations of one vmapped
`env.step` and one `eval_fn` call on the batch, in a `lax.fori_loop` under `jit`, with no tree
around them (the same `simulations + 1` network calls and `simulations` steps as a search).

One JSON row per (game, net, batch, selector, simulations). `*_sims_per_s` is
`batch * simulations / seconds` of one compiled call (compile excluded, best of `--repeats`);
`ours_max_depth` is the mean over the batch of the deepest node each game's search reached (each
simulation's walk lasts as many levels as the deepest path among the batch's games);
`ratio` is ours / mctx. `ours_cost_growth` and `mctx_cost_growth` are the cost per simulation at
this budget divided by the cost per simulation at the smallest budget of the same group.

Games with chance (`--chance`, or `--games 2048 backgammon`): our search with chance nodes
(`max_nodes = nodes_for(env, simulations) = 2 * simulations + 1`) against
`mctx.stochastic_muzero_policy` on the true game (`make_mctx_stochastic`: `env.chance.decide`
with the true outcome probabilities, then `env.chance.resolve`; `simulations + 1` nodes) for
every selector (mctx has no stochastic Gumbel policy, so gumbel is compared with it too). These
rows also time our search on `--reference` (connect_four), a deterministic game, with the same
net, batch, selector and simulations in the same rounds: `cost_per_sim_vs_deterministic` is our
chance search's cost per simulation over that one's (`deterministic_sims_per_s`). As a sanity
check both searches' moves must be legal and their root values agree roughly (batch means
`ours_root_value`, `mctx_root_value`; `root_value_correlation` over the positions), else a
warning on stderr. No speed targets apply to these rows.

    python bench/search.py [--quick | --chance] [--games connect_four othello 2048 backgammon]
        [--batch 64 256] [--sims 32 64 128] [--nets tiny resnet2x16 resnet6x64]
        [--selectors puct muzero_puct gumbel] [--positions 6] [--repeats 3]
        [--reference connect_four]
    python bench/search.py --judge ROWS.jsonl    # saved rows against today's targets

`--judge FILE` runs nothing: each row of an earlier run of this script (its JSON lines, e.g. from
a GPU machine) is printed again with the targets it misses today (`missed_targets`), judged
within its group (game, batch, net, selector) as a run would.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mctx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    SELECTOR_RULES,
    emit,
    fastest_floor,
    floor_programs,
    floor_simulations,
    interleaved_best_times,
    machine,
)
from turbozero import envs
from turbozero.arena.search_agents import nodes_for
from turbozero.envs.core import Env
from turbozero.nets import AZResnet, AZResnetConfig, PolicyValueMLP, init_params, make_eval_fn
from turbozero.search import compiler_options, make_search
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree

GAMES = ("connect_four", "othello")
NETS = ("tiny", "resnet2x16", "resnet6x64")
SELECTORS = tuple(SELECTOR_RULES)
PEER = {"puct": "muzero", "muzero_puct": "muzero", "gumbel": "gumbel"}
PEER_NAME = {"muzero": "mctx.muzero_policy", "gumbel": "mctx.gumbel_muzero_policy"}
CHANCE_QUICK = dict(
    games=["2048", "backgammon"],
    batch=[64],
    sims=[32, 64],
    nets=["tiny"],
    selectors=["muzero_puct", "gumbel"],
    repeats=3,
)
REFERENCE = "connect_four"  # the deterministic game the chance rows' cost is compared with
QUICK = dict(
    games=["connect_four"],
    batch=[64],
    sims=[32, 64],
    nets=["tiny", "resnet2x16"],
    selectors=["muzero_puct", "gumbel"],
    repeats=3,
)


def make_net(name: str, env: Env, key: PRNGKey) -> tuple[EvalFn, Params]:
    """The benchmark's networks: a tiny MLP and the AlphaZero ResNet at two sizes."""
    A = env.num_actions
    if name == "tiny":
        module: Any = PolicyValueMLP(num_actions=A, hidden=(32, 32))
    elif name.startswith("resnet"):
        blocks, channels = (int(x) for x in name.removeprefix("resnet").split("x"))
        module = AZResnet(
            AZResnetConfig(policy_head_out_size=A, num_blocks=blocks, num_channels=channels)
        )
    else:
        raise ValueError(f"net must be one of {NETS} or resnet<blocks>x<channels>, got {name!r}")
    example = env.observe(env.init(jax.random.PRNGKey(0))[0])
    return make_eval_fn(module), init_params(module, example, key)


#: The issue's speed targets (docs/benchmarks.md, "Targets").
TINY_RATIO, RESNET_RATIO, RESNET_FLOOR, COST_GROWTH = 2.0, 1.0, 1.15, 1.3


def missed_targets(row: dict[str, Any], base_sims: int) -> list[str]:
    """The speed targets `row` (one JSON row of this script) misses, each as a short text:
    the tiny network at least `TINY_RATIO` x mctx; a ResNet at least mctx's speed and within
    `RESNET_FLOOR` x the floor; the cost per simulation at 128 simulations within
    `COST_GROWTH` x that at 32 (judged on 128-simulation rows whose group started at
    `base_sims` = 32)."""
    missed = []
    if row["net"] == "tiny" and row["ratio"] < TINY_RATIO:
        missed.append(f"ours/mctx {row['ratio']:.2f} < {TINY_RATIO}")
    if row["net"].startswith("resnet"):
        if row["ratio"] < RESNET_RATIO:
            missed.append(f"ours/mctx {row['ratio']:.2f} < {RESNET_RATIO}")
        floor_ratio = row["floor_sims_per_s"] / row["ours_sims_per_s"]
        if floor_ratio > RESNET_FLOOR:
            missed.append(f"floor/ours {floor_ratio:.2f} > {RESNET_FLOOR}")
    growth = row["ours_cost_growth"]
    if row["simulations"] == 128 and base_sims == 32 and growth > COST_GROWTH:
        missed.append(f"cost growth {growth:.2f} > {COST_GROWTH}")
    return missed


def judge_rows(path: Path) -> None:
    """Each speed row in `path` (this script's output) again, with today's `missed_targets`."""
    import json

    lines = path.read_text().splitlines()
    rows = [json.loads(x) for x in lines if x.startswith("{") and '"floor_sims_per_s"' in x]
    base: dict[tuple, int] = {}
    for row in rows:
        group = (row["game"], row["batch"], row["net"], row["selector"])
        base[group] = min(base.get(group, row["simulations"]), row["simulations"])
    met = 0
    for row in rows:
        group = (row["game"], row["batch"], row["net"], row["selector"])
        missed = missed_targets(row, base[group])
        met += not missed
        emit({**row, "missed_targets": missed})
    print(f"# {met} of {len(rows)} rows meet every target", file=sys.stderr)


def speed_fields(
    t_ours: float,
    t_mctx: float,
    t_floor: float,
    batch: int,
    sims: int,
    base: dict[str, float] | None,
) -> tuple[dict[str, Any], dict[str, float]]:
    """A row's speed figures from the best times (seconds per search of the batch), and the
    per-simulation costs its `*_cost_growth` compare against (`base`; None: this row's own,
    the first of its group)."""
    per_sim = {"ours": t_ours / sims, "mctx": t_mctx / sims}
    base = base or per_sim
    work = batch * sims
    fields = {
        "ours_sims_per_s": round(work / t_ours, 1),
        "mctx_sims_per_s": round(work / t_mctx, 1),
        "floor_sims_per_s": round(work / t_floor, 1),
        "ratio": round(t_mctx / t_ours, 3),
        "ours_cost_growth": round(per_sim["ours"] / base["ours"], 3),
        "mctx_cost_growth": round(per_sim["mctx"] / base["mctx"], 3),
    }
    return fields, base


def random_positions(env: Env, batch: int, moves: int, key: PRNGKey) -> PyTree:
    """`[batch]` states after `moves` uniformly random legal moves (so the rows differ)."""

    def play(key):
        k_init, k_moves = jax.random.split(key)
        state, md = env.init(k_init)

        def body(i, carry):
            state, md = carry
            k_act, k_step = jax.random.split(jax.random.fold_in(k_moves, i))
            action = jax.random.categorical(k_act, jnp.where(md.action_mask, 0.0, -jnp.inf))
            return env.step(state, action, k_step)

        return jax.lax.fori_loop(0, moves, body, (state, md))[0]

    return jax.jit(jax.vmap(play))(jax.random.split(key, batch))


def make_ours(
    env: Env,
    eval_fn: EvalFn,
    *,
    selector: str,
    num_simulations: int,
    batch: int,
    levels_per_iteration: int | None = None,
    options: bool = True,
    max_nodes: int | None = None,
    root_value: bool = False,
):
    """`fn(params, states, key) -> (action, weights, max_depth)`: our search from empty trees,
    compiled (`max_depth [B]`: the deepest node each game's search reached), with
    `compiler_options()` unless `options` is False; `max_nodes` defaults to
    `num_simulations + 1` (mctx's fixed size). With `root_value`, the root values `[B]` (for
    the player to move) come fourth."""
    rule = SELECTOR_RULES[selector]()
    search = make_search(
        env,
        eval_fn,
        selector=rule,
        num_simulations=num_simulations,
        max_nodes=num_simulations + 1 if max_nodes is None else max_nodes,
        levels_per_iteration=levels_per_iteration,
    )

    def run(params, states, key):
        _, out = search.search(search.init(batch), params, states, key)
        if root_value:
            return out.action, out.action_weights, out.max_depth, out.root_value
        return out.action, out.action_weights, out.max_depth

    return jax.jit(run, compiler_options=compiler_options() if options else None)


def mctx_prior(logits: Array, mask: Array) -> Array:
    """`[B, A]` prior logits for mctx: shifted to a maximum of 0, illegal moves at the float32
    minimum (finite, as mctx masks them)."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(mask, logits, jnp.finfo(jnp.float32).min)


def make_mctx(env: Env, eval_fn: EvalFn, *, peer: str, num_simulations: int):
    """`fn(params, states, key) -> (action, weights)`: mctx over the same game and network.

    Two-player zero-sum: the reward is the mover's, the discount is -1 (0 after the end), and a
    terminal state's value is 0, as in our search.
    """

    def recurrent_fn(params, key, action, states):
        B = action.shape[0]
        mover = jax.vmap(env.metadata)(states).cur_player_id
        states, md = jax.vmap(env.step)(states, action, jax.random.split(key, B))
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        out = mctx.RecurrentFnOutput(
            reward=md.rewards[jnp.arange(B), mover],
            discount=jnp.where(md.terminated, 0.0, -1.0),
            prior_logits=mctx_prior(logits, md.action_mask),
            value=jnp.where(md.terminated, 0.0, value),
        )
        return out, states

    policy = mctx.muzero_policy if peer == "muzero" else mctx.gumbel_muzero_policy

    def run(params, states, key):
        k_root, k_search = jax.random.split(key)
        md = jax.vmap(env.metadata)(states)
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), k_root)
        root = mctx.RootFnOutput(
            prior_logits=mctx_prior(logits, md.action_mask), value=value, embedding=states
        )
        out = policy(
            params,
            k_search,
            root,
            recurrent_fn,
            num_simulations,
            invalid_actions=~md.action_mask,
        )
        return out.action, out.action_weights

    return jax.jit(run, compiler_options=compiler_options())


class StochasticState(NamedTuple):
    """A decision node's embedding in the stochastic mctx adapter."""

    state: PyTree  # [B, ...] the game's states
    value: Array  # [B] the network's value of the state, for its player to move
    player: Array  # [B] int32 the player to move


class StochasticAfterstate(NamedTuple):
    """A chance node's embedding in the stochastic mctx adapter."""

    afterstate: PyTree  # [B, ...] `env.chance.decide(state, action)`
    mover: Array  # [B] int32 the player who moved


def make_mctx_stochastic(env: Env, eval_fn: EvalFn, *, num_simulations: int):
    """`fn(params, states, key) -> (action, weights, root_value)`: `mctx.stochastic_muzero_policy`
    with the true game as its model, for games with chance (`env.chance`).

    Decision step: `afterstate = env.chance.decide(state, action)`, chance logits the log of
    `env.chance.probabilities(afterstate)` (impossible outcomes at the float32 minimum), and as the
    afterstate's value the network's value of the state the move was made from, for the mover
    (carried in the embedding, so that both searches make one network call per simulation; ours
    values a new chance node by its likeliest outcome's state, which it evaluates anyway).
    Chance step: `env.chance.resolve(afterstate, outcome)`, then `eval_fn` on the new state; the
    reward is the mover's, the discount 1 when the mover moves again (one-player games,
    backgammon's second move), -1 when the other player moves, 0 after the end, where a state's
    value is 0. mctx calls both steps on every simulation and keeps the one its node needs; a
    simulation adds one node, chance or decision, so `max_nodes = simulations + 1`.
    """
    assert env.chance is not None
    chance = env.chance
    A, C = env.num_actions, chance.num_outcomes

    def decision_fn(params, key, action, emb: StochasticState):
        # mctx runs this at chance nodes too (action >= A there) and drops the result
        action = jnp.clip(action, 0, A - 1)
        after = jax.vmap(chance.decide)(emb.state, action)
        probs = jax.vmap(chance.probabilities)(after).astype(jnp.float32)
        logits = jnp.where(probs > 0, jnp.log(probs), jnp.finfo(jnp.float32).min)
        out = mctx.DecisionRecurrentFnOutput(chance_logits=logits, afterstate_value=emb.value)
        return out, StochasticAfterstate(after, emb.player)

    def chance_fn(params, key, outcome, emb: StochasticAfterstate):
        outcome = jnp.clip(outcome, 0, C - 1).astype(jnp.int32)  # likewise at decision nodes
        states, md = jax.vmap(chance.resolve)(emb.afterstate, outcome)
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        player = md.cur_player_id.astype(jnp.int32)
        value = jnp.where(md.terminated, 0.0, value.astype(jnp.float32))
        same = player == emb.mover
        out = mctx.ChanceRecurrentFnOutput(
            action_logits=mctx_prior(logits, md.action_mask),
            value=value,
            reward=md.rewards[jnp.arange(outcome.shape[0]), emb.mover].astype(jnp.float32),
            discount=jnp.where(md.terminated, 0.0, jnp.where(same, 1.0, -1.0)),
        )
        return out, StochasticState(states, value, player)

    def run(params, states, key):
        k_root, k_search = jax.random.split(key)
        md = jax.vmap(env.metadata)(states)
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), k_root)
        value = jnp.where(md.terminated, 0.0, value.astype(jnp.float32))
        player = md.cur_player_id.astype(jnp.int32)
        root = mctx.RootFnOutput(
            prior_logits=mctx_prior(logits, md.action_mask),
            value=value,
            embedding=StochasticState(states, value, player),
        )
        out = mctx.stochastic_muzero_policy(
            params,
            k_search,
            root,
            decision_fn,
            chance_fn,
            num_simulations,
            invalid_actions=~md.action_mask,
        )
        return out.action, out.action_weights, out.search_tree.summary().value

    return jax.jit(run, compiler_options=compiler_options())


def make_floor(env: Env, eval_fn: EvalFn, *, num_simulations: int) -> dict[str, Callable]:
    """`{name: fn(params, states, key)}`: one `eval_fn` call on the given states (the roots),
    then `num_simulations` x (vmapped env.step + eval_fn), no tree (`common.floor_simulations`),
    compiled by `common.floor_programs` (time them all and keep the fastest)."""

    def run(params, states, key):
        mask = jax.vmap(env.metadata)(states).action_mask
        B = mask.shape[0]
        env_keys = jax.random.split(key, (num_simulations, B))  # drawn ahead, as a search can
        # The roots' evaluation, which every search here makes before its first simulation (ours
        # and mctx's alike): `simulations + 1` network calls in all. Its logits pick the first
        # iteration's moves, so it cannot be dropped.
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        logits = jnp.where(mask, logits.astype(jnp.float32), -1e9)
        return floor_simulations(
            env, eval_fn, params, states, mask, logits, value.astype(jnp.float32), env_keys, key
        )

    return floor_programs(run)


class References:
    """Our search on the deterministic `game` (random positions as in its own rows), compiled
    once per (net, batch, selector, simulations): what the chance rows are divided by."""

    def __init__(self, game: str, positions: int) -> None:
        self.game, self.positions = game, positions
        self.env = envs.make(game)
        if self.env.chance is not None or not self.env.deterministic:
            raise ValueError(f"--reference must be a deterministic game, got {game!r}")
        self.nets: dict[str, tuple[EvalFn, Params]] = {}
        self.states: dict[int, PyTree] = {}
        self.programs: dict[tuple[str, int, str, int], Callable[[], Any]] = {}

    def call(self, net: str, batch: int, selector: str, sims: int) -> Callable[[], Any]:
        """A no-argument call of the compiled reference search."""
        key = (net, batch, selector, sims)
        if key not in self.programs:
            if net not in self.nets:
                self.nets[net] = make_net(net, self.env, jax.random.PRNGKey(0))
            if batch not in self.states:
                self.states[batch] = random_positions(
                    self.env, batch, self.positions, jax.random.PRNGKey(2)
                )
            eval_fn, params = self.nets[net]
            fn = make_ours(self.env, eval_fn, selector=selector, num_simulations=sims, batch=batch)
            states = self.states[batch]
            self.programs[key] = lambda: fn(params, states, jax.random.PRNGKey(1))
        return self.programs[key]


def chance_rows(
    env: Env, game: str, args: argparse.Namespace, sims_sorted: list[int], references: References
) -> Iterator[dict[str, Any]]:
    """The rows of a game with chance: our search with chance nodes (`nodes_for(env, sims)`
    nodes) against `mctx.stochastic_muzero_policy` on the true game (`make_mctx_stochastic`,
    `sims + 1` nodes) for every selector, the floor, and our search on `references.game` with
    the same net, batch, selector and simulations timed in the same rounds."""
    for net in args.nets:
        eval_fn, params = make_net(net, env, jax.random.PRNGKey(0))
        for batch in args.batch:
            states = random_positions(env, batch, args.positions, jax.random.PRNGKey(2))
            mask = jax.vmap(env.metadata)(states).action_mask
            key = jax.random.PRNGKey(1)
            peers: dict[int, Callable] = {}
            floors: dict[int, dict[str, Callable]] = {}
            for selector in args.selectors:
                base: dict[str, float] = {}
                for sims in sims_sorted:
                    if sims not in floors:
                        floors[sims] = make_floor(env, eval_fn, num_simulations=sims)
                        peers[sims] = make_mctx_stochastic(env, eval_fn, num_simulations=sims)
                    nodes = nodes_for(env, sims)
                    ours = make_ours(
                        env,
                        eval_fn,
                        selector=selector,
                        num_simulations=sims,
                        batch=batch,
                        max_nodes=nodes,
                        root_value=True,
                    )
                    fns = {"ours": ours, "mctx": peers[sims], **floors[sims]}
                    calls: dict[str, Callable[[], Any]] = {
                        name: (lambda fn=fn: fn(params, states, key)) for name, fn in fns.items()
                    }
                    calls["reference"] = references.call(net, batch, selector, sims)
                    seconds = interleaved_best_times(calls, args.repeats)
                    t_ours, t_mctx = seconds["ours"], seconds["mctx"]
                    floor_name, t_floor = fastest_floor(seconds)
                    ours_out, mctx_out = ours(params, states, key), peers[sims](params, states, key)
                    label = f"{game} {net} batch {batch} {selector} {sims} simulations"
                    values = check_chance_outputs(label, mask, ours_out, mctx_out)
                    speed, base = speed_fields(t_ours, t_mctx, t_floor, batch, sims, base)
                    work = batch * sims
                    yield (
                        {
                            "game": game,
                            "batch": batch,
                            "simulations": sims,
                            "selector": selector,
                            "net": net,
                            **speed,
                            "peer": "mctx.stochastic_muzero_policy",
                            "ours_max_nodes": nodes,
                            "mctx_max_nodes": sims + 1,
                            "deterministic_game": references.game,
                            "deterministic_sims_per_s": round(work / seconds["reference"], 1),
                            "cost_per_sim_vs_deterministic": round(
                                t_ours / seconds["reference"], 3
                            ),
                            "ours_max_depth": round(float(jnp.mean(ours_out[2])), 2),
                            **values,
                            "floor_program": floor_name,
                        }
                    )


#: The chance rows' sanity check on root values (the two trees differ, so only roughly): the
#: correlation over the batch's positions at least this, ...
ROOT_VALUE_CORRELATION = 0.5
#: ... and the batch means within this share of the larger one (at least 1) of each other. On
#: 2048 mctx's mean is the lower: about half its simulations end at a chance node, valued at the
#: state before the move (no merge reward yet), and its tree reaches half as many moves deep.
ROOT_VALUE_GAP = 1 / 3


def check_chance_outputs(
    label: str, mask: Array, ours: tuple[Array, ...], theirs: tuple[Array, ...]
) -> dict[str, float]:
    """Warn on stderr unless both chance searches' moves are legal under the roots' `mask [B, A]`
    with no weight on illegal moves, and their root values `[B]` agree roughly
    (`ROOT_VALUE_CORRELATION`, `ROOT_VALUE_GAP`). `ours` is
    `(action, weights, max_depth, root_value)`, `theirs` `(action, weights, root_value)`.
    Returns the row's fields: both mean root values and their correlation."""
    for name, action, weights in (("ours", *ours[:2]), ("mctx", *theirs[:2])):
        legal = jnp.take_along_axis(mask, action[:, None], axis=-1)[:, 0]
        stray = float(jnp.max(jnp.sum(jnp.where(mask, 0.0, weights), axis=-1)))
        if not bool(jnp.all(legal)) or stray > 1e-6:
            print(
                f"# warning: {label}: {name} chose {int(jnp.sum(~legal))} illegal moves, "
                f"weight {stray:.2g} on illegal moves",
                file=sys.stderr,
                flush=True,
            )
    a, b = ours[3].astype(jnp.float32), theirs[2].astype(jnp.float32)
    mean_a, mean_b = float(jnp.mean(a)), float(jnp.mean(b))
    spread = float(jnp.std(a) * jnp.std(b))
    corr = float(jnp.mean((a - mean_a) * (b - mean_b))) / spread if spread > 0 else 1.0
    gap = abs(mean_a - mean_b) / max(1.0, abs(mean_a), abs(mean_b))
    if corr < ROOT_VALUE_CORRELATION or gap > ROOT_VALUE_GAP:
        print(
            f"# warning: {label}: root values differ: means ours {mean_a:.3f}, mctx "
            f"{mean_b:.3f}, correlation {corr:.2f}",
            file=sys.stderr,
            flush=True,
        )
    return {
        "ours_root_value": round(mean_a, 4),
        "mctx_root_value": round(mean_b, 4),
        "root_value_correlation": round(corr, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"a small subset (flags given override it): {QUICK}"
    )
    parser.add_argument(
        "--chance",
        action="store_true",
        help=f"the games with chance (flags given override it): {CHANCE_QUICK}",
    )
    parser.add_argument(
        "--reference",
        default=REFERENCE,
        help="the deterministic game whose search the chance rows' cost per simulation is "
        "divided by",
    )
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    parser.add_argument("--batch", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--sims", nargs="+", type=int, default=[32, 64, 128])
    parser.add_argument("--nets", nargs="+", default=list(NETS))
    parser.add_argument("--selectors", nargs="+", default=list(SELECTORS), choices=SELECTORS)
    parser.add_argument("--positions", type=int, default=6, help="random moves before the roots")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed rounds (ours, mctx, floor in turn) after a warm-up",
    )
    parser.add_argument("--judge", type=Path, help="saved rows to judge again; runs nothing")
    subset = parser.parse_known_args(argv)[0]
    if subset.judge is not None:
        judge_rows(subset.judge)
        return
    if subset.quick and subset.chance:
        parser.error("give --quick or --chance, not both")
    # a subset's values are defaults: flags given beside it override them
    parser.set_defaults(**(QUICK if subset.quick else CHANCE_QUICK if subset.chance else {}))
    args = parser.parse_args(argv)
    for name in ("batch", "sims"):
        if any(v < 1 for v in getattr(args, name)):
            parser.error(f"--{name} values must be >= 1, got {getattr(args, name)}")
    if args.repeats < 1 or args.positions < 0:
        parser.error("--repeats must be >= 1 and --positions >= 0")
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)

    sims_sorted = sorted(set(args.sims))
    rows = misses = unjudged = 0
    references = References(args.reference, args.positions)
    for game in args.games:
        env = envs.make(game)
        if env.chance is not None:
            for row in chance_rows(env, game, args, sims_sorted, references):
                unjudged += 1
                emit(row)
            continue
        for net in args.nets:
            eval_fn, params = make_net(net, env, jax.random.PRNGKey(0))
            for batch in args.batch:
                states = random_positions(env, batch, args.positions, jax.random.PRNGKey(2))
                key = jax.random.PRNGKey(1)
                peers: dict[tuple[str, int], Callable] = {}
                floors: dict[int, dict[str, Callable]] = {}
                for selector in args.selectors:
                    peer = PEER[selector]
                    base: dict[str, float] = {}
                    for sims in sims_sorted:
                        if sims not in floors:
                            floors[sims] = make_floor(env, eval_fn, num_simulations=sims)
                        if (peer, sims) not in peers:
                            peers[peer, sims] = make_mctx(
                                env, eval_fn, peer=peer, num_simulations=sims
                            )
                        ours = make_ours(
                            env, eval_fn, selector=selector, num_simulations=sims, batch=batch
                        )
                        fns = {"ours": ours, "mctx": peers[peer, sims], **floors[sims]}
                        seconds = interleaved_best_times(
                            {
                                name: (lambda fn=fn: fn(params, states, key))
                                for name, fn in fns.items()
                            },
                            args.repeats,
                        )
                        t_ours, t_mctx = seconds["ours"], seconds["mctx"]
                        floor_name, t_floor = fastest_floor(seconds)
                        depth = ours(params, states, jax.random.PRNGKey(1))[2]
                        speed, base = speed_fields(t_ours, t_mctx, t_floor, batch, sims, base)
                        row = {
                            "game": game,
                            "batch": batch,
                            "simulations": sims,
                            "selector": selector,
                            "net": net,
                            **speed,
                            "peer": PEER_NAME[peer],
                            "ours_max_depth": round(float(jnp.mean(depth)), 2),
                            "floor_program": floor_name,
                        }
                        row["missed_targets"] = missed_targets(row, sims_sorted[0])
                        rows, misses = rows + 1, misses + bool(row["missed_targets"])
                        emit(row)
    chance = f" ({unjudged} rows of games with chance, which have none)" if unjudged else ""
    print(
        f"# {rows - misses} of {rows} rows meet every target{chance}", file=sys.stderr, flush=True
    )


if __name__ == "__main__":
    main()
