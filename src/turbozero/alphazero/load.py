"""Load a trained AlphaZeroSystem agent from a run directory or one checkpoint."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax

from turbozero import envs
from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.alphazero.learner import make_alphazero, make_selector
from turbozero.alphazero.rebuild import HOW, NotRebuildableError, check_trusted, rebuild_parts
from turbozero.arena import LoadedAgent, alphazero_agent
from turbozero.envs.core import Env
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.rundir import find_run_dir
from turbozero.nets import init_params
from turbozero.validate import is_digits

#: search settings an agent can play with other values than its run's (`load_agent`'s `search`):
#: PUCT's selection rule; the rest fix what the network was trained against
PLAY_SEARCH_SETTINGS = ("c_puct", "fpu", "fpu_reduction")


def play_search(run_search: Any, search: Mapping[str, Any] | None) -> Any:
    """The run's `SearchConfig` with `search`'s play settings changed, each checked as in a
    config; a `ValueError` naming a setting that cannot change at play."""
    if not search:
        return run_search
    if not isinstance(search, Mapping):
        raise ValueError(f"search must be a mapping of setting to value, got {search!r}")
    fixed = sorted(set(search) - set(PLAY_SEARCH_SETTINGS))
    if fixed:
        raise ValueError(
            f"search: {', '.join(fixed)} cannot change at play (the run trained with it); "
            f"what can: {', '.join(PLAY_SEARCH_SETTINGS)}"
        )
    if run_search.selector != "puct":
        raise ValueError(
            f"search: {', '.join(sorted(search))} are settings of the puct selector; the run "
            f"searches with {run_search.selector!r}"
        )
    return dataclasses.replace(run_search, **search)


def _check_load_args(which: str, weights: str, num_simulations: int | None) -> None:
    """`load_agent`'s arguments in range, or a `ValueError` naming the one that is not."""
    if which not in ("best", "latest"):
        raise ValueError(f"which must be 'best' or 'latest', got {which!r}")
    if weights not in ("playing", "trained"):
        raise ValueError(f"weights must be 'playing' or 'trained', got {weights!r}")
    if num_simulations is not None and (
        isinstance(num_simulations, bool)
        or not isinstance(num_simulations, numbers.Integral)
        or num_simulations < 1
    ):
        raise ValueError(
            "num_simulations must be an int >= 1 (None: the run's setting), "
            f"got {num_simulations!r}"
        )


def _rebuild_parts(
    rd: Any,
    saved: dict[str, Any],
    cfg: AlphaZeroConfig,
    env: Env | None,
    module: Any,
    *,
    trust: bool,
) -> tuple[Env, Any]:
    """The game and network a run trained with: those given, those its recipes rebuild (with
    `trust`), or the registered game `cfg.env` names; a `NotRebuildableError` otherwise."""
    recipes = saved.get("rebuild", {})
    wanted = [n for n, given in (("env", env), ("module", module)) if given is None]
    reward = cfg.reward_fn if env is None and not recipes.get("env") else None
    check_trusted(
        str(rd.path), {n: recipes[n] for n in wanted if n in recipes}, reward, trust=trust
    )
    rebuilt = rebuild_parts(recipes, wanted, str(rd.path))
    env = rebuilt.get("env", env)
    module = rebuilt.get("module", module)
    if module is None and "module" in saved.get("parts", {}):
        raise NotRebuildableError(
            f"{rd.path} was trained with its module given from Python, which it cannot rebuild: "
            + HOW.format(name="module")
        )
    if env is None:
        try:
            env = envs.make(cfg.env, reward_fn=cfg.reward_fn)
        except ValueError as err:
            raise NotRebuildableError(
                f"{rd.path} was trained on {cfg.env!r}, a game this run directory cannot rebuild "
                f"({err}); "
                + HOW.format(name="env")
                + " (for the tutorial's Trainer: Trainer(..., rebuild=...), or trainer.env and "
                "trainer.nn)"
            ) from None
    return env, module


def _restore_params(
    p: Path, rd: Any, cfg: AlphaZeroConfig, like: Any, *, which: str, weights: str
) -> tuple[Any, dict[str, Any]]:
    """`(params, checkpoint meta)` of the network `p` names: a step directory, or the run's
    best (from a training checkpoint when `best/` holds none) or latest checkpoint."""
    step: int | None = None
    # the best network from a training checkpoint (which also holds it) when `best/` has none
    best_of_checkpoint = False
    if p != rd.path and is_digits(p.name):
        directory, step = p.parent, int(p.name)
    else:
        directory = rd.path / "best" if which == "best" else rd.checkpoints
        # (a save cut short leaves `N.orbax-checkpoint-tmp...`, which holds no network)
        if which == "best" and not any(is_digits(p.name) for p in directory.glob("*")):
            directory, best_of_checkpoint = rd.checkpoints, True
    ck = Checkpointer(directory)
    try:
        meta = ck.restore_meta(step)
        if weights == "trained" and (meta.get("kind") == "params" or best_of_checkpoint):
            raise ValueError(
                f"weights='trained' reads a training checkpoint, and {p} gives the best network "
                "alone; pass which='latest' or a step directory inside checkpoints/"
            )
        if meta.get("kind") == "params":
            restored, meta = ck.restore({"params": like}, step)
            params = restored["params"]
        else:
            # Only the networks are read: the optimizer state and the memory depend on parts
            # (an optimizer, augmentations given from Python) that the config does not record.
            # (with `ema_decay` the network that plays is the weights' moving average)
            playing = "ema" if cfg.ema_decay and weights == "playing" else "params"
            restored, meta = ck.restore(
                {"train": {playing: like}, "best": like}, step, partial=True
            )
            params = restored["train"][playing]
            if best_of_checkpoint and meta.get("has_best"):
                params = restored["best"]
                meta = {**meta, "epoch": int(str(meta["best_name"]).removeprefix("epoch_"))}
    finally:
        ck.close()
    return params, meta


def load_agent(
    path: str | Path,
    *,
    which: str = "best",
    num_simulations: int | None = None,
    temperature: float = 0.0,
    weights: str = "playing",
    env: Env | None = None,
    module: Any = None,
    trust: bool = False,
    search: Mapping[str, Any] | None = None,
) -> LoadedAgent:
    """The agent of a run directory (its best checkpoint, or latest with `which="latest"`).

    Its options are keyword-only, as PPO's and TD's loaders' are (`turbozero.load_agent`, the
    one loader of every run, also takes `num_simulations` and `temperature` by position).

    Args:
        path: a run directory, or a checkpoint step directory inside `checkpoints/` or `best/`.
        which: "best" or "latest" (ignored when `path` names a checkpoint).
        num_simulations: search simulations per move, >= 1 (default: the run's evaluation
            setting).
        temperature: 0 plays the best move; > 0 samples from the search policy.
        weights: "playing", the network the run plays with (with `ema_decay`, the weights'
            moving average), or "trained", the weights the gradient steps produced, which a
            training checkpoint (`which="latest"` or a step of `checkpoints/`) also holds; the
            two are the same without `ema_decay`. Comparing them on the same positions says
            what the average buys.
        env, module: the game and the flax network the run was trained with, for runs whose
            game or network was given from Python (the tutorial's `Trainer`, `train(parts=...)`):
            a run directory records only the config, which names neither.
        trust: import and call the code the run's `config.json` names to rebuild its parts
            (a function of yours, `train(..., rebuild=...)`, or a `reward_fn`), after saying
            what on stderr; without it such a run is refused (a run directory is data: see
            `turbozero.alphazero.rebuild`).
        search: play settings of the search other than the run's, e.g. `{"c_puct": 2.0,
            "fpu": "node"}`: any of `PLAY_SEARCH_SETTINGS` (PUCT's constant, the value of an
            unvisited move and its reduction), checked as in a config; `agent.config.search`
            holds the search it plays with.

    Raises:
        ValueError: for out-of-range arguments, `weights="trained"` asked of a best network
            (saved without the trained weights), or a run whose game was given from Python
            when `env` is not passed.
        UntrustedRunError: a run naming code to import, without `trust`.
    """
    _check_load_args(which, weights, num_simulations)
    p = Path(path)
    rd = find_run_dir(p)
    saved = rd.read_config()
    if saved["algorithm"] != "alphazero":
        raise ValueError(f"{rd.path} is a {saved['algorithm']!r} run; use turbozero.load_agent")
    cfg = AlphaZeroConfig.from_dict(saved["config"]).resolved()
    playing = play_search(cfg.search, search)
    env, module = _rebuild_parts(rd, saved, cfg, env, module, trust=trust)
    az = make_alphazero(cfg, env=env, module=module)
    example = az.env.observe(az.env.init(jax.random.PRNGKey(0))[0])
    like = init_params(az.module, example, jax.random.PRNGKey(0))
    params, meta = _restore_params(p, rd, cfg, like, which=which, weights=weights)
    sims = int(num_simulations or cfg.eval_simulations or cfg.search.num_simulations)
    agent = alphazero_agent(
        az.selfplay.search.env,  # the game as the run searched it (search.chance)
        az.eval_fn,
        params,
        num_simulations=sims,
        selector=make_selector(playing),
        temperature=temperature,
        chance_widening=cfg.search.chance_widening,
        discount=cfg.search.discount,
        name=f"{rd.path.name}@{meta.get('epoch', meta.get('step'))}",
    )
    return LoadedAgent(
        agent=agent,
        env=az.env,
        config=cfg if playing is cfg.search else dataclasses.replace(cfg, search=playing),
        path=rd.path,
        step=int(meta.get("epoch", meta.get("step", 0))),
        algorithm="alphazero",
        system=az,
    )


def load(path: str | Path, *, which: str, step: int | None, **options: Any) -> LoadedAgent:
    """`load_agent` as `turbozero.load_agent` calls it (`turbozero.algorithms`): a checkpoint
    directory's `path` names its step itself, so `step` is not used."""
    del step
    return load_agent(path, which=which, **options)
