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

import turbozero
from turbozero.algorithms import algorithm
from turbozero.config import ConfigError, config_listing, get_preset, load_presets, presets_listing
from turbozero.gamespec import game_spec, load_game_module
from turbozero.io import enable_compilation_cache, outside
from turbozero.io.errors import (
    CheckpointError,
    DamagedRunError,
    MissingExtraError,
    NotRebuildableError,
    RunPathError,
    TooLargeError,
    UntrustedRunError,
)
from turbozero.io.plots import plot_run
from turbozero.io.rundir import RunDir, check_run_path, find_run_dir, load_run_game

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


def _resumed_config(args: argparse.Namespace) -> tuple[Any, str, str | None]:
    """`(config, algorithm, preset)` of the run in `--out`: its own config.json with `--set`
    applied (a resumed run may change only where it stops; `train` refuses the rest)."""
    from turbozero.arena.opponents import check_run_opponents  # (pgx: loaded to run)

    if not RunDir(args.out).is_run():
        raise FileNotFoundError(f"{args.out!r} is not a run directory (no config.json) to resume")
    saved = RunDir(args.out).read_config()
    load_run_game(RunDir(args.out), trust=args.trust_run)  # (before its config names the game)
    name = saved["algorithm"]
    # (the opponents a resumed run plays are the run's: a command among them is its code)
    check_run_opponents(args.out, saved["config"].get("eval_opponents"), trust=args.trust_run)
    preset = saved.get("preset")
    if args.preset and preset and args.preset != preset:
        raise ConfigError(f"{args.out!r} is a run of preset {preset!r}, not {args.preset!r}")
    config_class = algorithm(name).config_class()
    config = config_class.from_dict(saved["config"]).with_overrides(args.set or [])
    return config, name, preset or args.preset


def cmd_train(args: argparse.Namespace) -> int:
    if args.game is not None and args.resume:
        raise ConfigError("--game is for a new run; --resume imports the run's own (--trust-run)")
    if args.game is not None:
        load_game_module(args.game)  # (its register() adds the game and its presets)
    load_presets()
    if args.resume and args.out is None:
        raise ConfigError("--resume needs --out RUN_DIR, the run to continue")
    if args.resume and args.quick:
        raise ConfigError("--quick starts a new run; --resume continues a run with its own config")
    if args.list or (not args.preset and not args.resume):
        if not args.list and (args.set or args.out is not None):
            raise ConfigError(
                "give a preset to train (turbozero train --list), or --resume with --out RUN_DIR"
            )
        print("\n".join(presets_listing()))
        return 0

    if args.out is not None:
        check_run_path(args.out)  # before anything is built (`--out ''` is no default)
    enable_compilation_cache()
    out = Path(args.out) if args.out is not None else None
    if args.resume:
        config, algorithm_name, preset_name = _resumed_config(args)
    else:
        preset = get_preset(args.preset)
        if args.quick and not preset.quick:
            raise ConfigError(
                f"--quick: preset {args.preset!r} has no quick setting; it is small already "
                f"(turbozero train --list), or shorten it with --set num_epochs=..."
            )
        quick_sets = list(preset.quick) if args.quick else []
        config = preset.make().with_overrides(quick_sets + (args.set or []))
        algorithm_name, preset_name = preset.algorithm, args.preset
    entry = algorithm(algorithm_name)
    entry.run_function()(
        config,
        out,
        resume=args.resume,
        preset=preset_name,
        check_memory=not args.skip_memory_check,
        **({"trust": args.trust_run} if entry.opens_code else {}),
    )
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """`turbozero eval`: a run's agent against an opponent, or its accuracy on solved positions."""
    import functools
    import json

    from turbozero.arena import evaluation  # (pgx: loaded to run)

    evaluation.check_eval_counts(
        simulations=args.simulations,
        games=args.games,
        opening_moves=args.opening_moves,
        max_steps=args.max_steps,
        seed=args.seed,
    )
    search = _play_settings(args.set)
    _check_searching_flags(args)
    evaluation.check_accuracy_flags(
        accuracy=args.accuracy,
        vs=args.vs,
        max_steps=args.max_steps,
        opening_moves=args.opening_moves,
        positions=args.positions,
    )
    enable_compilation_cache()
    loaded = turbozero.load_agent(
        args.run_dir,
        args.simulations,
        which=args.which,
        trust=args.trust_run,
        weights=args.weights,
        search=search,
        depth=args.depth,
    )
    out = evaluation.evaluate_run(
        loaded,
        run=str(args.run_dir),
        seed=args.seed,
        vs=args.vs,
        games=args.games,
        max_steps=args.max_steps,
        opening_moves=args.opening_moves,
        accuracy=args.accuracy,
        positions=args.positions,
        weights=args.weights,
        search=_play_search_of(loaded),
        load_opponent=functools.partial(
            turbozero.load_agent, num_simulations=args.simulations, trust=args.trust_run
        ),
    )
    print(json.dumps(out) if args.json else "\n".join(evaluation.eval_lines(out)))
    return 0


def _play_settings(items: list[str]) -> dict[str, Any]:
    """`eval --set search.NAME=VALUE ...` as `load_agent`'s `search`, each value parsed by its
    setting's type; a `ConfigError` for a setting that cannot change at play."""
    from turbozero.alphazero.config import SearchConfig  # (pgx: loaded to run)
    from turbozero.alphazero.load import PLAY_SEARCH_SETTINGS  # (pgx: loaded to run)

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
    from turbozero.alphazero.load import PLAY_SEARCH_SETTINGS  # (pgx: loaded to run)

    search = getattr(getattr(loaded, "config", None), "search", None)
    return {} if search is None else {k: getattr(search, k) for k in PLAY_SEARCH_SETTINGS}


def _check_searching_flags(args: argparse.Namespace) -> None:
    """`eval`'s flags that change a search refused for a run that does not search."""
    from turbozero.loading import run_algorithm  # (pgx: loaded to run)

    searched = [("--simulations", args.simulations), ("--set", args.set or None)]
    searched.append(("--weights", None if args.weights == "playing" else args.weights))
    for flag, value in searched:
        if value is None:
            continue

        rd, name = run_algorithm(args.run_dir)
        entry = algorithm(name)
        if "num_simulations" not in entry.load_options:
            raise ConfigError(
                f"{flag} is not for {entry.title} runs: {str(rd.path)!r} is a {entry.title} "
                f"run ({entry.plays})"
            )


def cmd_play(args: argparse.Namespace) -> int:
    from turbozero.play import serve  # (pgx: loaded to run)

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
            seed=args.seed,
            depth=args.depth,
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    from turbozero.reference import environments_listing  # (pgx: loaded to run)

    for line in environments_listing(verbose=args.verbose):
        print(line)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from turbozero.alphazero.config import AlphaZeroConfig  # (pgx: loaded to run)
    from turbozero.reference import config_reference  # (pgx: loaded to run)

    if args.reference:
        if args.preset or args.set:
            raise ConfigError("--reference prints every key of every config: give no preset")

        print(config_reference(), end="")
        return 0
    load_presets()
    if not args.preset:
        raise ConfigError("give a preset name, or --reference")
    config = get_preset(args.preset).make().with_overrides(args.set or [])

    if isinstance(config, AlphaZeroConfig):
        config = config.resolved()  # (what a run records: the settings the game chooses)
    if args.json:
        print(config.to_json())
    else:
        print(config_listing(config, args.preset, explain=args.explain))
    search = getattr(config, "search", None)
    warning = None
    if search is not None:
        spec = game_spec(getattr(config, "env", ""))
        has_chance = spec is not None and spec.chance is not None
        chance_nodes = has_chance and search.chance == "nodes"
        warning = search.capacity_warning(chance_nodes)
    if warning:
        print(warning, file=sys.stderr)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from turbozero.io.experiment import judge_of  # (pgx: loaded to run)

    rd = find_run_dir(args.run_dir)  # a checkpoint path names its run, as for eval and play
    rd.check_writes_stay_inside()  # (the plots are written inside the run, never through links)
    rows = rd.read_metrics()
    if not rows:
        why = "is empty" if rd.metrics_path.exists() else "does not exist"
        print(f"error: {args.run_dir!r} has no metrics yet (metrics.jsonl {why})", file=sys.stderr)
        return 2
    try:  # the game's judge words its own panels (plots need no more of the config)
        env = rd.read_config()["config"].get("env")
    except (OSError, ValueError):
        env = None
    for p in plot_run(rows, rd.plots, judge=judge_of(env)):
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
        help=f"{when}import and call the code the run's config.json names: its game's file or "
        "module (train --game), or code to rebuild its game, network or loss (train(..., "
        "rebuild=...), a reward_fn); without it a run directory is opened as data and such a "
        "run is refused",
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
        "--game",
        metavar="FILE_OR_MODULE",
        help="a game of your own: path/to/game.py or pkg.module (the current directory is "
        "searched too), whose register() adds the game and its presets; the run records it, "
        "and eval, play and --resume import it again with --trust-run (docs/own-game.md)",
    )
    t.add_argument(
        "--quick",
        action="store_true",
        help="the preset's quick setting (shown by --list): a run of a couple of minutes on 2 "
        "CPU cores that shows it learning; --set still applies after it",
    )
    t.add_argument(
        "--skip-memory-check",
        action="store_true",
        help="start a run even if its estimated memory exceeds the machine's",
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
        help="two-player games: random (default) | perfect (games with a solver) | mcts:N | an "
        "engine the game plays (`turbozero envs` lists each game's; docs/engines.md) | "
        "RUN_DIR2 (a second run's agent, searching with --simulations too)",
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
    _depth(v)
    v.add_argument("--json", action="store_true", help="print one JSON object")
    _trust_run(v, "")
    v.set_defaults(fn=cmd_eval)


def _add_play(sub: Any) -> None:
    """`turbozero play`: its arguments."""
    pl = sub.add_parser("play", help="play against a trained agent or an engine in the browser")
    pl.add_argument(
        "run_dir",
        nargs="?",
        help="a trained run of any algorithm (or a checkpoint step in it); or --engine",
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
    pl.add_argument("--no-browser", action="store_true", dest="no_browser", help="print the URL")
    seed_help = "fixes the dice, tiles and the agent's sampling (default: new each start)"
    pl.add_argument("--seed", type=int, default=None, help=seed_help)
    pl.add_argument(
        "--which", default="best", choices=["best", "latest"], help="as for eval (default best)"
    )
    _depth(pl)
    _trust_run(pl, "")
    pl.set_defaults(fn=cmd_play)


def _depth(parser: Any) -> None:
    help = (
        "TD runs: chance layers the agent looks ahead (default: the run's): 2048 0 (1 ply) to 2; "
        "backgammon 0 or 1 (the opponent's best reply to each roll)"
    )
    parser.add_argument("--depth", type=int, default=None, help=help)


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
