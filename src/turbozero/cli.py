"""The `turbozero` command: train, eval, play, plot, envs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from turbozero.config import PRESETS, ConfigError, get_preset


def _load_presets() -> None:
    import turbozero.alphazero.config
    import turbozero.ppo.config  # noqa: F401


def cmd_train(args: argparse.Namespace) -> int:
    _load_presets()
    if args.list or not args.preset:
        width = max(len(n) for n in PRESETS)
        for name, p in sorted(PRESETS.items()):
            print(f"{name:<{width}}  [{p.algorithm}] {p.description}")
        return 0
    from turbozero.io import enable_compilation_cache

    enable_compilation_cache()
    preset = get_preset(args.preset)
    config = preset.make().with_overrides(args.set or [])
    out = Path(args.out) if args.out else None
    if preset.algorithm == "ppo":
        from turbozero.ppo.train import train_ppo

        if out is None:
            from turbozero.alphazero.train import default_run_dir

            out = default_run_dir(args.preset)
        train_ppo(config, str(out), preset=args.preset)  # type: ignore[arg-type]
        return 0
    from turbozero.alphazero.train import train

    train(config, out, resume=args.resume, preset=args.preset)  # type: ignore[arg-type]
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    from turbozero import envs

    for name, desc in sorted(envs.GAMES.items()):
        if args.verbose:
            env = envs.make(name)
            print(
                f"{name:<24} players={env.num_players} actions={env.num_actions:<5} "
                f"observation={env.observation_shape}  {desc}"
            )
        else:
            print(f"{name:<24} {desc}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from turbozero.io.plots import plot_run
    from turbozero.io.rundir import RunDir

    rd = RunDir(args.run_dir)
    if not rd.is_run():
        print(f"error: {args.run_dir!r} is not a run directory (no config.json)", file=sys.stderr)
        return 2
    for p in plot_run(rd.read_metrics(), rd.plots):
        print(p)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="turbozero", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a preset (turbozero train --list shows them)")
    t.add_argument("preset", nargs="?", help="preset name")
    t.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key")
    t.add_argument("--out", help="run directory (default runs/PRESET-TIMESTAMP)")
    t.add_argument("--resume", action="store_true", help="continue the run in --out")
    t.add_argument("--list", action="store_true", help="list presets")
    t.set_defaults(fn=cmd_train)
    e = sub.add_parser("envs", help="list the games")
    e.add_argument("-v", "--verbose", action="store_true", help="show players/actions/shapes")
    e.set_defaults(fn=cmd_envs)
    p = sub.add_parser("plot", help="write the plots of a run directory")
    p.add_argument("run_dir")
    p.set_defaults(fn=cmd_plot)
    args = parser.parse_args(argv)
    try:
        return int(args.fn(args))
    except (ConfigError, FileExistsError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
