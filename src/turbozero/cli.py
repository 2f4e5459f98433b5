"""The `turbozero` command: train, eval, play, plot, envs, config."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from turbozero.config import INT32_MAX, PRESETS, SEED_MAX, SEED_MIN, ConfigError, get_preset
from turbozero.io import outside
from turbozero.io.errors import (
    CheckpointError,
    DamagedRunError,
    MissingExtraError,
    NotRebuildableError,
    RunPathError,
    TooLargeError,
    UntrustedRunError,
)

#: errors of a disk that refuses writes: read-only, full, over quota
DISK_ERRORS = (errno.EROFS, errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def _exit_at_once_on_interrupt() -> Iterator[None]:
    """Ctrl-C ends the process at once, exit status 130, for commands that keep nothing.

    A `KeyboardInterrupt` unwinding while XLA's threads still run a match could crash the
    interpreter as it shut down (a segmentation fault); `os._exit` skips that teardown."""

    def handler(signum: int, frame: Any) -> None:
        sys.stderr.write("\ninterrupted\n")
        sys.stderr.flush()
        outside.end_all(at_once=True)  # (the engines it started: os._exit skips atexit)
        os._exit(130)

    try:
        old = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _load_presets() -> None:
    from turbozero.config import load_presets

    load_presets()


def _resumed_config(args: argparse.Namespace) -> tuple[Any, str, str | None]:
    """`(config, algorithm, preset)` of the run in `--out`: its own config.json with `--set`
    applied (a resumed run may change only where it stops; `train` refuses the rest)."""
    from turbozero.alphazero.config import AlphaZeroConfig
    from turbozero.arena.opponents import check_run_opponents
    from turbozero.io.rundir import RunDir
    from turbozero.loading import run_algorithm
    from turbozero.ppo.config import PPOConfig
    from turbozero.td.config import TDConfig

    if not RunDir(args.out).is_run():
        raise FileNotFoundError(f"{args.out!r} is not a run directory (no config.json) to resume")
    rd, algorithm = run_algorithm(args.out)
    saved = rd.read_config(algorithm)
    # (the opponents a resumed run plays are the run's: a command among them is its code)
    check_run_opponents(args.out, saved["config"].get("eval_opponents"), trust=args.trust_run)
    classes: dict[str, Any] = {"alphazero": AlphaZeroConfig, "ppo": PPOConfig, "td": TDConfig}
    preset = saved.get("preset")
    if args.preset and preset and args.preset != preset:
        raise ConfigError(f"{args.out!r} is a run of preset {preset!r}, not {args.preset!r}")
    config = classes[algorithm].from_record(saved["config"]).with_overrides(args.set or [])
    return config, algorithm, preset or args.preset


def cmd_train(args: argparse.Namespace) -> int:
    _load_presets()
    if args.resume and args.out is None:
        raise ConfigError("--resume needs --out RUN_DIR, the run to continue")
    if args.resume and args.quick:
        raise ConfigError("--quick starts a new run; --resume continues a run with its own config")
    if args.list or (not args.preset and not args.resume):
        if not args.list and (args.set or args.out is not None):
            raise ConfigError(
                "give a preset to train (turbozero train --list), or --resume with --out RUN_DIR"
            )
        width = max(len(n) for n in PRESETS)
        for name, p in sorted(PRESETS.items()):
            quick = f" Quick try (--quick): {' '.join(p.quick)}" if p.quick else ""
            print(f"{name:<{width}}  [{p.algorithm}] {p.description}{quick}")
        return 0
    from turbozero.io import enable_compilation_cache

    if args.out is not None:
        from turbozero.io.rundir import check_run_path

        check_run_path(args.out)  # before anything is built (`--out ''` is no default)
    enable_compilation_cache()
    out = Path(args.out) if args.out is not None else None
    if args.resume:
        config, algorithm, preset_name = _resumed_config(args)
    else:
        preset = get_preset(args.preset)
        if args.quick and not preset.quick:
            raise ConfigError(
                f"--quick: preset {args.preset!r} has no quick setting; it is small already "
                f"(turbozero train --list), or shorten it with --set num_epochs=..."
            )
        quick_sets = list(preset.quick) if args.quick else []
        config = preset.make().with_overrides(quick_sets + (args.set or []))
        algorithm, preset_name = preset.algorithm, args.preset
    if algorithm == "ppo":
        from turbozero.ppo.train import train_ppo

        train_ppo(config, out, resume=args.resume, preset=preset_name)
        return 0
    if algorithm == "td":
        from turbozero.td.train import train_td

        train_td(config, out, resume=args.resume, preset=preset_name)
        return 0
    from turbozero.alphazero.train import train

    parts, rebuild = _resumed_parts(args.out, args.trust_run) if args.resume else (None, None)
    train(
        config,
        out,
        resume=args.resume,
        preset=preset_name,
        check_memory=not args.skip_memory_check,
        parts=parts,
        rebuild=rebuild,
    )
    return 0


def _resumed_parts(run: str, trust: bool) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
    """The parts an AlphaZero run was given from Python, rebuilt from its recipes, and the
    recipes the user named (so the resumed run records them again); refuses a part that has no
    recipe, by name, and code the run names unless `trust` (`--trust-run`)."""
    from turbozero.alphazero.rebuild import check_trusted, rebuild_parts
    from turbozero.io.rundir import RunDir

    saved = RunDir(run).read_config("alphazero")
    recipes = saved.get("rebuild", {})
    reward = None if recipes.get("env") else saved["config"].get("reward_fn")
    check_trusted(run, recipes, reward, trust=trust)
    names = sorted(set(recipes) | set(saved.get("parts", {})))
    if not names:
        return None, None
    parts = rebuild_parts({n: recipes.get(n) for n in names}, names, run)
    named = {n: r["factory"] for n, r in recipes.items() if r and "factory" in r}
    return parts, named or None


def _opponent(spec: str, env, simulations: int | None, trust: bool = False):
    from turbozero.arena.opponents import make_opponent, parse_opponent

    if Path(spec).exists():
        import turbozero

        other = turbozero.load_agent(spec, simulations, trust=trust)
        if other.env.name != env.name:
            raise ConfigError(f"{spec} plays {other.env.name!r}, not {env.name!r}")
        return other.agent
    try:
        parse_opponent(spec, what="--vs")
    except ValueError as err:
        raise ConfigError(f"{err}, or a run directory") from None
    return make_opponent(env, spec)


MAX_EVAL_GAMES = 1 << 20  # games of one evaluation, played as one batch


def cmd_eval(args: argparse.Namespace) -> int:
    """`turbozero eval`: a run's agent against an opponent, or its accuracy on solved positions."""
    import jax

    import turbozero
    from turbozero.io import enable_compilation_cache

    _check_eval_args(args)
    enable_compilation_cache()
    loaded = turbozero.load_agent(
        args.run_dir,
        args.simulations,
        which=args.which,
        trust=args.trust_run,
        weights=args.weights,
        search=_play_settings(args.set),
    )
    key = jax.random.PRNGKey(args.seed)
    if args.accuracy:
        out = _eval_accuracy(args, loaded, key)
    elif loaded.env.num_players == 1:
        out = _eval_one_player(args, loaded, key)
    else:
        out = _eval_two_players(args, loaded, key)
    _print_eval(out, as_json=args.json)
    return 0


def _play_settings(items: list[str]) -> dict[str, Any]:
    """`eval --set search.NAME=VALUE ...` as `load_agent`'s `search`, each value parsed by its
    setting's type; a `ConfigError` for a setting that cannot change at play."""
    from turbozero.alphazero.config import SearchConfig
    from turbozero.alphazero.load import PLAY_SEARCH_SETTINGS

    names, stripped = [], []
    for item in items:
        key, sep, value = item.partition("=")
        name = key.strip().removeprefix("search.")
        if not sep or name not in PLAY_SEARCH_SETTINGS:
            raise ConfigError(
                f"--set {item!r}: eval changes the search's play settings only, as "
                f"search.NAME=VALUE with NAME one of {', '.join(PLAY_SEARCH_SETTINGS)}"
            )
        names.append(name)
        stripped.append(f"{name}={value}")
    parsed = SearchConfig().with_overrides(stripped)
    return {name: getattr(parsed, name) for name in names}


def _play_search_of(loaded: Any) -> dict[str, Any]:
    """The play settings an AlphaZero agent searches with (none for PPO)."""
    from turbozero.alphazero.load import PLAY_SEARCH_SETTINGS

    search = getattr(getattr(loaded, "config", None), "search", None)
    return {} if search is None else {k: getattr(search, k) for k in PLAY_SEARCH_SETTINGS}


def _check_eval_args(args: argparse.Namespace) -> None:
    """`eval`'s arguments in range and consistent with each other, before anything loads."""
    from turbozero.search.search import MAX_NODES

    # (counts reach the compiled match as int32; games are a batch held in memory at once)
    for flag, value, low, high in (
        ("--simulations", args.simulations, 1, MAX_NODES - 1),
        ("--games", args.games, 1, MAX_EVAL_GAMES),
        ("--opening-moves", args.opening_moves, 0, INT32_MAX),
        ("--max-steps", args.max_steps, 1, INT32_MAX),
    ):
        if value is not None and not low <= value <= high:
            raise ConfigError(f"{flag} must be in [{low}, {high}], got {value}")
    if not SEED_MIN <= args.seed <= SEED_MAX:
        raise ConfigError(f"--seed must be in [{SEED_MIN}, {SEED_MAX}], got {args.seed}")
    _play_settings(args.set)
    searched = [("--simulations", args.simulations), ("--set", args.set or None)]
    searched.append(("--weights", None if args.weights == "playing" else args.weights))
    for flag, value in searched:
        if value is None:
            continue
        from turbozero.loading import run_algorithm

        rd, algorithm = run_algorithm(args.run_dir)
        if algorithm != "alphazero":
            raise ConfigError(
                f"{flag} is for AlphaZero runs; {str(rd.path)!r} is a {algorithm.upper()} run "
                f"(it does not search)"
            )
    if args.accuracy:
        for flag, value in (
            ("--vs", args.vs),
            ("--max-steps", args.max_steps),
            ("--opening-moves", args.opening_moves),
        ):
            if value is not None:
                raise ConfigError(f"{flag} is for games; --accuracy plays none")
        if args.positions is not None and not 1 <= args.positions <= 100_000:
            raise ConfigError(f"--positions must be in [1, 100000], got {args.positions}")
    elif args.positions is not None:
        raise ConfigError("--positions is the size of --accuracy's position set; add --accuracy")


def _eval_accuracy(args: argparse.Namespace, loaded: Any, key: Any) -> dict[str, Any]:
    """`eval --accuracy`: the share of solver-labelled positions where the agent keeps the
    result."""
    from turbozero.arena.accuracy import judged_games, move_accuracy, positions_for
    from turbozero.games import game_spec

    env = loaded.env
    spec = game_spec(env.name)
    judge = None if spec is None else spec.judge
    if judge is None:
        raise ConfigError(
            f"--accuracy needs a solver or an engine to judge moves, which exist for "
            f"{', '.join(judged_games())}; {env.name!r} has neither"
        )
    if judge.by == "gnubg":
        return _eval_gnubg_quality(args, loaded, key)
    if not judge.sized and args.positions is not None:
        raise ConfigError(
            f"--positions chooses the size of a sampled position set; {env.name}'s set is all "
            f"of its positions"
        )
    # the set the run's own evaluations used, unless asked for another size
    default = getattr(getattr(loaded, "config", None), "eval_accuracy_positions", 1000)
    positions = positions_for(env.name, num_positions=args.positions or default)
    acc = move_accuracy(env, loaded.agent, positions, key)
    return {
        "run": str(args.run_dir),
        "agent": loaded.agent.name,
        "env": env.name,
        "epoch": loaded.epoch,
        "weights": args.weights,
        "search": _play_search_of(loaded),
        "positions": acc.num_positions,
        "accuracy_result": acc.result,
        "mistakes": acc.mistakes,
        "accuracy_best": acc.best,
        "phases": acc.phases,
        "by_result": acc.by_result,
    }


def _eval_gnubg_quality(args: argparse.Namespace, loaded: Any, key: Any) -> dict[str, Any]:
    """`eval --accuracy` in backgammon: gnubg's error rate of the agent's plays and their share
    of gnubg's best, on the run's own number of positions unless `--positions` says."""
    from turbozero.engines.quality import move_quality, quality_positions

    default = getattr(getattr(loaded, "config", None), "eval_accuracy_positions", 1000)
    positions = quality_positions(loaded.env, args.positions or default)
    q = move_quality(loaded.env, loaded.agent, positions, key)
    return {
        "run": str(args.run_dir),
        "agent": loaded.agent.name,
        "env": loaded.env.name,
        "positions": q.num_positions,
        "gnubg_ply": q.ply,
        "error_rate": round(q.error_rate, 2),  # millipoints a move, as gnubg reports it
        "gnubg_best": q.best_share,
        "phases": q.phases,
    }


def _eval_one_player(args: argparse.Namespace, loaded: Any, key: Any) -> dict[str, Any]:
    """`eval` of a one-player game: the agent's mean return over `--games` games."""
    from turbozero.arena import play_match

    env = loaded.env
    if args.vs is not None:
        raise ConfigError(f"--vs is for two-player games; {env.name!r} has one player")
    if args.opening_moves:
        raise ConfigError(f"--opening-moves is for two-player games; {env.name!r} has one player")
    r = play_match(env, loaded.agent, None, key, num_games=args.games, max_steps=args.max_steps)
    return {
        "run": str(args.run_dir),
        "agent": loaded.agent.name,
        "env": env.name,
        "games": r.num_games,
        "mean_return": r.mean_return_a,
        "mean_length": r.mean_length,
        # ended by a time limit (the environment's, e.g. Pendulum's 200 steps, or --max-steps)
        "truncated": r.num_truncated,
    }


def _eval_two_players(args: argparse.Namespace, loaded: Any, key: Any) -> dict[str, Any]:
    """`eval` of a two-player game: a match against `--vs` with its intervals."""
    from turbozero.arena import play_match
    from turbozero.arena.match import points_interval

    env = loaded.env
    if args.games % 2:
        raise ConfigError(f"--games must be even (sides are swapped), got {args.games}")
    vs = args.vs or "random"
    opp = _opponent(vs, env, args.simulations, args.trust_run)
    if args.opening_moves is None:  # the default leaves the agent at least one move
        args.opening_moves = 2 if args.max_steps is None else min(2, args.max_steps - 1)
    elif args.max_steps is not None and args.opening_moves >= args.max_steps:
        raise ConfigError(
            f"--opening-moves ({args.opening_moves}) must be below --max-steps "
            f"({args.max_steps}): every move played would be random"
        )
    r = play_match(
        env,
        loaded.agent,
        opp,
        key,
        num_games=args.games,
        max_steps=args.max_steps,
        opening_moves=args.opening_moves,
    )
    return {
        "run": str(args.run_dir),
        "agent": loaded.agent.name,
        "env": env.name,
        "vs": vs,
        "games": r.num_games,
        "opening_moves": args.opening_moves,  # random moves: even "perfect" can lose
        "wins": r.wins,
        "draws": r.draws,
        "losses": r.losses,
        "score": r.score,
        "score_ci95": [round(r.score_low, 4), round(r.score_high, 4)],
        # the game's own points (backgammon: 1, 2 for a gammon, 3 for a backgammon)
        "points_per_game": round(float(r.mean_return_a), 4),
        "points_per_game_ci95": [round(x, 4) for x in points_interval(r)],
        "as_first": list(r.as_first),  # [wins, draws, losses]
        "as_second": list(r.as_second),
        "illegal_moves": r.illegal_moves,  # both sides'
        "agent_illegal_moves": r.illegal_moves_a,
        "mean_length": r.mean_length,
        # ended by a time limit (the environment's or --max-steps), not by the game: draws
        "truncated": r.num_truncated,
    }


def _phase_line(p: dict[str, Any]) -> str:
    """One phase's figures: a solver's (result, best) or gnubg's (error rate, best share)."""
    if "error_rate" in p:
        return (
            f"error rate {p['error_rate']:.1f}, gnubg's best {p['best_share']:.3f} "
            f"({p['positions']} positions)"
        )
    return f"result {p['result']:.3f}, best {p['best']:.3f} ({p['positions']} positions)"


def _print_eval(out: dict[str, Any], *, as_json: bool) -> None:
    """`eval`'s result: one JSON object, or one aligned line per figure."""
    import json

    if as_json:
        print(json.dumps(out))
    else:
        width = max(map(len, out))
        for k, v in out.items():
            if k in ("as_first", "as_second"):
                v = "{} wins, {} draws, {} losses".format(*v)
            elif k == "truncated" and "mean_return" in out and v:
                v = (
                    f"{v} of {out['games']} (ended by the time limit, not by the game: in a "
                    "balancing task such as CartPole, kept up to the end)"
                )
            elif k in ("phases", "by_result"):
                v = "; ".join(f"{name}: {_phase_line(p)}" for name, p in v.items())
            elif k == "search":
                v = ", ".join(f"{name}={x}" for name, x in v.items())
            print(f"{k:>{width}}: {v}")


def cmd_play(args: argparse.Namespace) -> int:
    from turbozero.io import enable_compilation_cache
    from turbozero.play import serve

    if args.simulations is not None and args.simulations < 1:
        raise ConfigError(f"--simulations must be >= 1, got {args.simulations}")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be in [0, 65535], got {args.port}")
    if (args.run_dir is None) == (args.engine is None):
        raise ConfigError("play needs a run directory, or --engine SPEC --game GAME (not both)")
    if (args.engine is None) != (args.game is None):
        raise ConfigError("--engine and --game go together: the engine plays that game")
    if args.engine is not None and args.simulations is not None and args.engine[:5] != "mcts:":
        raise ConfigError("--simulations is a run's search; an engine plays at its own setting")
    enable_compilation_cache()
    try:
        serve(
            args.run_dir,
            engine=args.engine,
            game_id=args.game,
            human_first=args.human_first,
            num_simulations=args.simulations,
            port=args.port,
            open_browser=not args.no_browser,
            which=args.which,
            trust=args.trust_run,
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return 0


def other_environments() -> dict[str, list[str] | str]:
    """Ids of the gymnax and jumanji environments `envs.make` accepts, per package, or the line
    saying how to install a missing package."""
    import importlib

    out: dict[str, list[str] | str] = {}
    for package, listing in (
        ("gymnax", lambda m: list(m.registered_envs)),
        ("jumanji", lambda m: list(m.registered_environments())),
    ):
        try:
            module = importlib.import_module(package)
        except ImportError:
            out[package] = f"not installed: pip install 'turbozero[envs]' to use {package}:ID"
            continue
        out[package] = sorted(f"{package}:{name}" for name in listing(module))
    return out


def cmd_envs(args: argparse.Namespace) -> int:
    from turbozero import envs

    print("games, pgx's and registered ones (AlphaZero; the one-player ones also PPO):")
    presets = _presets_by_env()
    for name, desc in sorted(envs.GAMES.items()):
        if args.verbose:
            env = envs.make(name)
            print(
                f"  {name:<24} players={env.num_players} actions={env.num_actions:<5} "
                f"observation={env.observation_shape}  {desc}"
            )
        else:
            used = f"  preset: {', '.join(presets[name])}" if name in presets else ""
            print(f"  {name:<24} {desc}{used}")
    for package, ids in other_environments().items():
        print(f"{package} environments (one player: PPO, AlphaZero where discrete):")
        if isinstance(ids, str):
            print(f"  {ids}")
            continue
        for env_id in ids:
            used = f"  preset: {', '.join(presets[env_id])}" if env_id in presets else ""
            if args.verbose:
                shape = _env_shape(env_id)
                print(f"  {env_id:<40} {shape}{used}")
            else:
                print(f"  {env_id}{used}")
    return 0


def _env_shape(env_id: str) -> str:
    """`actions=... observation=...` of a gymnax or jumanji id, or why it cannot be used here
    (whole), or the download it would start (not started)."""
    from turbozero import envs
    from turbozero.envs.registry import NEEDS_DOWNLOAD

    if env_id in NEEDS_DOWNLOAD:
        return f"(needs a download when made: {NEEDS_DOWNLOAD[env_id]}; not made here)"
    try:
        env = envs.make(env_id)
    except Exception as err:  # an adapter refusal: say why, list the rest
        return f"(not usable here: {str(err).splitlines()[0]})"
    return f"actions={env.num_actions:<5} observation={env.observation_shape}"


def _presets_by_env() -> dict[str, list[str]]:
    _load_presets()
    out: dict[str, list[str]] = {}
    for name, preset in sorted(PRESETS.items()):
        env = getattr(preset.make(), "env", None)
        if isinstance(env, str):
            out.setdefault(env, []).append(name)
    return out


#: published techniques behind settings no preset turns on, kept because users look for them:
#: (technique, settings, reference)
TECHNIQUES = (
    (
        "Gumbel AlphaZero (sequential halving, planning with few simulations)",
        "`search.selector=gumbel`, `search.max_num_considered_actions`, `search.gumbel_scale`",
        'Danihelka et al., "Policy improvement by planning with Gumbel", ICLR 2022',
    ),
    (
        "MuZero's pUCT with min-max normalised values",
        "`search.selector=muzero_puct`, `search.pb_c_init`, `search.pb_c_base`, `search.discount`",
        'Schrittwieser et al., "Mastering Atari, Go, chess and shogi by planning with a learned '
        'model", Nature 2020',
    ),
    (
        "Chance nodes (expectimax over outcomes), progressively widened",
        "`search.chance`, `search.chance_widening`",
        'Antonoglou et al., "Planning in stochastic environments with a learned model" '
        '(Stochastic MuZero), ICLR 2022; Couetoux et al., "Continuous upper confidence trees", '
        "2011",
    ),
    (
        "Forced playouts and policy target pruning",
        "`search.forced_playouts`",
        'Wu, "Accelerating self-play learning in Go" (KataGo), 2019',
    ),
    (
        "Playout cap randomisation",
        "`search.fast_simulations`, `search.full_fraction`",
        "Wu 2019 (KataGo)",
    ),
    (
        "First-play urgency and its reduction",
        "`search.fpu`, `search.fpu_reduction`",
        "Leela Zero; Wu 2019 (KataGo)",
    ),
    ("Global pooling in residual blocks", "`network.global_pool`", "Wu 2019 (KataGo)"),
    ("Win/draw/loss value head", "`network.value_bins=3`", "Leela Chess Zero's WDL head"),
    (
        "Value targets mixing the outcome with the search's root value",
        "`train.root_value_weight`",
        'Abrams, "Lessons from AlphaZero: improving the training target", 2018',
    ),
    (
        "Reanalyse",
        "`selfplay.reanalyse_positions`",
        'Schrittwieser et al., "Online and offline reinforcement learning by planning with a '
        'learned model" (MuZero Unplugged), NeurIPS 2021',
    ),
    (
        "The weights' moving average at play",
        "`train.ema_decay`, `train.ema_selfplay`",
        "Polyak and Juditsky 1992; KataGo's stochastic weight averaging (Wu 2019)",
    ),
    (
        "Learning-rate warmup and cosine decay",
        "`train.lr_warmup_steps`, `train.lr_decay_steps`, `train.lr_final`",
        'Loshchilov and Hutter, "SGDR", ICLR 2017',
    ),
    (
        "Gating on the best network",
        "`eval.gating_threshold`",
        'Silver et al., "Mastering the game of Go without human knowledge" (AlphaGo Zero), '
        "Nature 2017",
    ),
    ("Board symmetries as extra positions", "`train.augment`", "Silver et al. 2017"),
)


def techniques_markdown() -> str:
    """docs/configuration.md's table of the published techniques and their settings."""
    rows = "\n".join(f"| {t} | {s} | {r} |" for t, s, r in TECHNIQUES)
    return (
        "## Published techniques and their settings\n\n"
        "A setting stays when a preset uses it or when it is a published technique users look "
        "for; the levers tried and not kept are in `docs/benchmarks.md`'s lever table.\n\n"
        "| technique | settings | reference |\n|---|---|---|\n" + rows + "\n"
    )


#: (setting, default, the measurement it comes from): docs/configuration.md's "Where the
#: defaults come from"; each figure is a row of docs/benchmarks.md's lever table (Connect Four,
#: 30 minutes on a 2-core CPU, the share of solver-labelled positions whose result is kept)
DEFAULT_SOURCES = (
    (
        "`selfplay.temperature_moves`",
        "every move (None: the episode's length)",
        "every move sampled with value targets from the search: 88.6% -> 93.4%",
    ),
    ("`train.root_value_weight`", "0.75", "0.5 -> 0.75: 93.4% -> 94.0%; 1.0: 96.3% -> 95.6%"),
    (
        "`train.memory_capacity`",
        "64 epochs of self-play (None)",
        "1,024 positions per game (64 epochs): 94.0% -> 95.8% (512: 94.5%; 2,048: 95.6%)",
    ),
    ("`train.learning_rate`", "2e-3", "1e-3 -> 2e-3, seeds 0 / 1: 96.3% / 95.5% -> 96.7% / 96.7%"),
    (
        "`network.value_bins`",
        "3 where the game can be drawn (`GameSpec.draws`), else 0 (None)",
        "win/draw/loss head, three seeds paired: +0.50, +0.00, +0.13 points",
    ),
    (
        "`train.ema_decay`, `train.ema_selfplay`",
        "0.9995, false (the average plays evaluations and the saved agent)",
        "15 checkpoints: 97.73% -> 98.03%; five seeds +0.00 to +0.30 points",
    ),
    (
        "`search.fpu`",
        "network with `puct` (None)",
        "10,000 positions, seeds 0 / 6: 97.38% / 97.29% -> 97.74% / 97.72%",
    ),
    (
        "`selfplay.overlap`",
        "on with one device (None)",
        "an epoch 1.60x faster (`bench/overlap.py`), so 1.5x the epochs in a budget",
    ),
    (
        "`eval.eval_simulations`",
        "4x self-play's (None)",
        "at play 128 (4x): 95.8% -> 96.3%; 512 (16x) adds 0.5-0.7 points at 4x the cost, "
        "which the Connect Four preset pays",
    ),
)


def defaults_markdown() -> str:
    """docs/configuration.md's table of where AlphaZero's defaults come from."""
    rows = "\n".join(f"| {s} | {d} | {m} |" for s, d, m in DEFAULT_SOURCES)
    return (
        "## Where the defaults come from\n\n"
        "`AlphaZeroConfig()`'s defaults are the recipe that took Connect Four from 88.6% to 98% "
        "of solver-labelled positions in 30 CPU minutes, less what is Connect Four's own (its "
        "input planes, `network.line_features`). Settings shown as None are chosen from the "
        "game when a run starts (`AlphaZeroConfig.resolved`) and recorded in its config.json, "
        "so a run keeps them; runs written before these defaults recorded theirs and resume and "
        "load as they were. Measured on Connect Four (docs/benchmarks.md, lever table); the "
        "transfer to other games is `bench/transfer.py`'s: 30 minutes a side, the recipe beat "
        "the first one on hex (0.760) and animal_shogi (0.945) as it is, and on othello (0.948 "
        "and 0.915 on two seeds) with 15 sampled moves and 256 positions of memory per game, "
        "which its preset keeps (on every move sampled and 64 epochs of memory it lost, "
        "0.255).\n\n"
        "| setting | default | measurement |\n|---|---|---|\n" + rows + "\n"
    )


def config_reference() -> str:
    """docs/configuration.md, generated from the typed configs and the presets."""
    _load_presets()
    from turbozero.alphazero.config import AlphaZeroConfig
    from turbozero.config import markdown_cell, reference_markdown
    from turbozero.ppo.config import PPOConfig
    from turbozero.td.config import TDConfig

    presets = "\n".join(
        f"| `{n}` | {p.algorithm} | {markdown_cell(p.description)} |"
        for n, p in sorted(PRESETS.items())
    )
    return (
        "# Configuration reference\n\n"
        "Generated by `turbozero config --reference` from the typed configs; do not edit by "
        "hand. Override any key with `turbozero train PRESET --set key=value` (nested keys with "
        "dots, e.g. `--set search.num_simulations=64`; tuples as a comma list or JSON, e.g. "
        "`--set network.hidden=64,64` or `--set 'network.hidden=[64, 64]'`); unknown keys and "
        "out-of-range values are refused with the valid choices.\n\n"
        "AlphaZero's flat settings are listed in sections (`run`, `selfplay`, `train`, `eval`) "
        "as `turbozero config PRESET` prints them; `--set` takes either name "
        "(`--set eval.games=64` or `--set eval_games=64`), and config.json stores the flat one, "
        "so runs written before the sections load unchanged.\n\n"
        "## Presets\n\n| preset | algorithm | description |\n|---|---|---|\n"
        f"{presets}\n\n"
        f"{defaults_markdown()}\n"
        f"{techniques_markdown()}\n"
        + reference_markdown(AlphaZeroConfig, title="AlphaZero (`AlphaZeroConfig`)")
        + "\n"
        + reference_markdown(PPOConfig, title="PPO (`PPOConfig`)")
        + "\n"
        + reference_markdown(TDConfig, title="TD over afterstates (`TDConfig`)")
    )


def cmd_config(args: argparse.Namespace) -> int:
    if args.reference:
        if args.preset or args.set:
            raise ConfigError("--reference prints every key of every config: give no preset")
        print(config_reference(), end="")
        return 0
    _load_presets()
    if not args.preset:
        raise ConfigError("give a preset name, or --reference")
    config = get_preset(args.preset).make().with_overrides(args.set or [])
    from turbozero.alphazero.config import AlphaZeroConfig

    if isinstance(config, AlphaZeroConfig):
        config = config.resolved()  # (what a run records: the settings the game chooses)
    if args.json:
        print(config.to_json())
    else:
        from turbozero.config import config_listing

        print(config_listing(config, args.preset, explain=args.explain))
    search = getattr(config, "search", None)
    warning = None
    if search is not None:
        from turbozero.games import game_spec

        spec = game_spec(getattr(config, "env", ""))
        has_chance = spec is not None and spec.chance is not None
        chance_nodes = has_chance and search.chance == "nodes"
        warning = search.capacity_warning(chance_nodes)
    if warning:
        print(warning, file=sys.stderr)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from turbozero.io.plots import plot_run
    from turbozero.io.rundir import find_run_dir

    rd = find_run_dir(args.run_dir)  # a checkpoint path names its run, as for eval and play
    rd.check_writes_stay_inside()  # (the plots are written inside the run, never through links)
    rows = rd.read_metrics()
    if not rows:
        why = "is empty" if rd.metrics_path.exists() else "does not exist"
        print(f"error: {args.run_dir!r} has no metrics yet (metrics.jsonl {why})", file=sys.stderr)
        return 2
    for p in plot_run(rows, rd.plots):
        print(p)
    return 0


def _interrupted_training(out: str | None) -> str:
    """What an interrupted `train` leaves to resume from, said after "interrupted"."""
    if out is None:
        return " (a run's last checkpoint is kept: --out RUN --resume goes on from it)"
    steps = Path(out) / "checkpoints"
    if steps.is_dir() and any(p.name.isdigit() for p in steps.iterdir()):
        return " (the last checkpoint is kept: --resume goes on from it)"
    return " before the first checkpoint: --resume starts the run from the beginning"


def _trust_run(parser: argparse.ArgumentParser, when: str) -> None:
    parser.add_argument(
        "--trust-run",
        action="store_true",
        dest="trust_run",
        help=f"{when}import and call the code the run's config.json names to rebuild its game, "
        "network or loss (train(..., rebuild=...), a reward_fn); without it a run directory is "
        "opened as data and such a run is refused",
    )


def _add_train(sub: Any) -> None:
    """`turbozero train`: its arguments."""
    t = sub.add_parser("train", help="train a preset (turbozero train --list shows them)")
    t.add_argument("preset", nargs="?", help="preset name")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    t.add_argument("--out", help="run directory (default runs/PRESET-TIMESTAMP)")
    t.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its own config (--set may change only where it "
        "stops and what it logs; AlphaZero: num_epochs, max_wall_seconds, tensorboard, "
        "wandb_project, eval_record_games, eval_share; PPO: tensorboard, wandb_project)",
    )
    t.add_argument("--list", action="store_true", help="list presets")
    t.add_argument(
        "--quick",
        action="store_true",
        help="the preset's quick setting (shown by --list): a run of a couple of minutes on 2 "
        "CPU cores that shows it learning; --set still applies after it",
    )
    t.add_argument(
        "--skip-memory-check",
        action="store_true",
        help="start an AlphaZero run even if its estimated memory exceeds the machine's",
    )
    _trust_run(t, "with --resume: ")
    t.set_defaults(fn=cmd_train)


def _add_eval(sub: Any) -> None:
    """`turbozero eval`: its arguments."""
    v = sub.add_parser("eval", help="play a trained agent against an opponent")
    v.add_argument("run_dir", help="a run directory, or a checkpoint step directory in it")
    v.add_argument(
        "--vs",
        default=None,
        help="random (default) | perfect (tic_tac_toe, connect_four) | mcts:N | RUN_DIR2, for "
        "two-player games (a second "
        "run's agent searches with --simulations too)",
    )
    v.add_argument(
        "--games",
        type=int,
        default=100,
        help="games played in parallel (default 100; even in two-player games, each agent "
        "moves first in half)",
    )
    v.add_argument(
        "--simulations",
        type=int,
        default=None,
        help="search simulations per move (default: the run's evaluation setting)",
    )
    v.add_argument(
        "--which",
        default="best",
        choices=["best", "latest"],
        help="the best network so far (default) or the latest; with a checkpoint path, "
        "AlphaZero plays that checkpoint's network and PPO that checkpoint's best (default) or "
        "latest parameters",
    )
    v.add_argument(
        "--max-steps",
        type=int,
        default=None,
        dest="max_steps",
        help="cut games after this many moves (counted with the environment's own time limit "
        "as truncated; in two-player games a draw)",
    )
    v.add_argument(
        "--opening-moves",
        type=int,
        default=None,
        dest="opening_moves",
        help="the first N moves of each game, by either player, are random, for diversity "
        "(default 2; 0: none, e.g. to test against perfect play)",
    )
    v.add_argument("--seed", type=int, default=0, help="seed of the games (default 0)")
    v.add_argument(
        "--accuracy",
        action="store_true",
        help="instead of games: the share of solver-labelled positions where the agent's move "
        "keeps the game's result, and where it is the solver's best (tic_tac_toe: all 4,520 "
        "positions; connect_four: needs the [solvers] extra); in backgammon, gnubg's error rate "
        "(millipoints a move) and share of its best plays (the [engines] extra)",
    )
    v.add_argument(
        "--positions",
        type=int,
        default=None,
        help="with --accuracy: Connect Four positions in the labelled set (default: the run's "
        "eval_accuracy_positions, 1000 unless set)",
    )
    v.add_argument(
        "--weights",
        default="playing",
        choices=["playing", "trained"],
        help="AlphaZero: the weights the run plays with (default; with ema_decay, their moving "
        "average) or the trained ones (a training checkpoint: --which latest or a step)",
    )
    v.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="search.NAME=VALUE",
        help="AlphaZero: play with another value of the search's c_puct, fpu or fpu_reduction "
        "than the run's (repeatable)",
    )
    v.add_argument("--json", action="store_true", help="print one JSON object")
    _trust_run(v, "")
    v.set_defaults(fn=cmd_eval)


def _add_play(sub: Any) -> None:
    """`turbozero play`: its arguments."""
    pl = sub.add_parser("play", help="play against a trained agent or an engine in the browser")
    pl.add_argument(
        "run_dir",
        nargs="?",
        help="a trained run, AlphaZero or PPO (or a checkpoint step in it); or --engine",
    )
    pl.add_argument(
        "--engine",
        help="play an engine instead of a run: pubeval, gnubg:PLY, gnugo:LEVEL, gtp:COMMAND, "
        "mcts:N, random, perfect (with --game)",
    )
    pl.add_argument("--game", help="with --engine: the game's id (e.g. backgammon, go_9x9)")
    pl.add_argument(
        "--human-first",
        action="store_true",
        dest="human_first",
        help="you move first (default: the agent does; a one-player game is yours to play)",
    )
    pl.add_argument(
        "--simulations",
        type=int,
        default=None,
        help="search simulations per move (default: the run's evaluation setting)",
    )
    pl.add_argument(
        "--port", type=int, default=8000, help="port on 127.0.0.1 (default 8000; busy: a free one)"
    )
    pl.add_argument(
        "--no-browser", action="store_true", dest="no_browser", help="only print the URL"
    )
    pl.add_argument(
        "--which", default="best", choices=["best", "latest"], help="as for eval (default best)"
    )
    _trust_run(pl, "")
    pl.set_defaults(fn=cmd_play)


def _add_the_others(sub: Any) -> None:
    """`turbozero envs`, `config` and `plot`: their arguments."""
    e = sub.add_parser("envs", help="list the games")
    e.add_argument("-v", "--verbose", action="store_true", help="show players/actions/shapes")
    e.set_defaults(fn=cmd_envs)
    c = sub.add_parser("config", help="print a preset's full config (or the reference)")
    c.add_argument("preset", nargs="?")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    c.add_argument("--reference", action="store_true", help="print docs/configuration.md")
    c.add_argument("--json", action="store_true", help="print the config as JSON (as config.json)")
    c.add_argument("--explain", action="store_true", help="add each setting's one-line meaning")
    c.set_defaults(fn=cmd_config)
    p = sub.add_parser("plot", help="write the plots of a run directory (into RUN/plots)")
    p.add_argument("run_dir", help="the run directory (or a checkpoint step in it)")
    p.set_defaults(fn=cmd_plot)


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per `cmd_*` function."""
    parser = argparse.ArgumentParser(prog="turbozero", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_train, _add_eval, _add_play, _add_the_others):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a user's error ends it with one `error:` line and exit status 2."""
    args = build_parser().parse_args(argv)
    return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    """Call the command's function, turning the library's errors into one line each."""
    try:
        import turbozero

        turbozero.configure()  # before any JAX computation (a no-op once done)
        if args.command == "eval":
            with _exit_at_once_on_interrupt():
                return int(args.fn(args))
        return int(args.fn(args))
    except KeyboardInterrupt:
        # training: a second Ctrl-C (the first finishes the epoch and saves), or one before the
        # first epoch began; what was saved stays. The other commands save nothing.
        kept = _interrupted_training(args.out) if args.command == "train" else ""
        print(f"\ninterrupted{kept}", file=sys.stderr)
        return 130
    except (
        ConfigError,
        MissingExtraError,
        RunPathError,
        TooLargeError,
        CheckpointError,
        DamagedRunError,
        NotRebuildableError,
        UntrustedRunError,
        FileExistsError,
        FileNotFoundError,
    ) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (NotADirectoryError, PermissionError, IsADirectoryError) as err:
        # a path that cannot be a run directory (under a file, not writable): the user's input
        print(f"error: {err.strerror}: {err.filename!r}", file=sys.stderr)
        return 2
    except OSError as err:
        # the disk refuses the writes (read-only, full, over quota): the machine's state, told
        # in one line; what was saved before stays
        if err.errno not in DISK_ERRORS:
            raise
        where = f": {err.filename!r}" if err.filename else ""
        print(f"error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except FloatingPointError as err:  # training diverged; what was saved before stays
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ValueError as err:
        # The library's checks of arguments and settings raise ValueError naming the argument;
        # a user reads the message, not the traceback (TURBOZERO_DEBUG=1 shows it).
        if os.environ.get("TURBOZERO_DEBUG"):
            raise
        print(f"error: {err} (TURBOZERO_DEBUG=1 shows where it was raised)", file=sys.stderr)
        return 2
    except Exception as err:
        # an engine's failure (or a Ctrl-C while one thinks), raised as is or inside a
        # compiled match, which wraps it in tracebacks: one line naming the engine
        failure = outside.failure_behind(err)
        if failure is None:
            raise
        if isinstance(failure, KeyboardInterrupt):
            kept = _interrupted_training(args.out) if args.command == "train" else ""
            print(f"\ninterrupted{kept}", file=sys.stderr)
            return 130
        print(f"error: {failure}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
