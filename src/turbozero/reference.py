"""Reference texts generated from the code: docs/configuration.md (`turbozero config
--reference`: every key of every config, the presets, the published techniques behind settings
and where AlphaZero's defaults come from) and the environments `turbozero envs` lists."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

from turbozero import envs
from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.config import PRESETS, load_presets, markdown_cell, reference_markdown
from turbozero.envs.registry import NEEDS_DOWNLOAD
from turbozero.gamespec import game_spec, installed_games
from turbozero.io.migrations import REMOVED_IN_2
from turbozero.ppo.config import PPOConfig
from turbozero.td.config import TDConfig


def _engines_text(name: str) -> str:
    """`  engines: pubeval, gnubg:PLY`: the opponents a game's file lists (`eval --vs`), or ""."""
    spec = game_spec(name)
    if spec is None or not spec.engines:
        return ""
    return "  engines: " + ", ".join(engine.form for engine in spec.engines.values())


def environments_listing(*, verbose: bool = False) -> Iterator[str]:
    """`turbozero envs`' lines: the games (installed packages' too, imported to be listed), then
    the gymnax and jumanji ids, each with the presets that train it and the engines a game
    plays as opponents (`eval --vs`), or with its players, actions and observation shape
    (`verbose`)."""
    yield "games, pgx's and registered ones (AlphaZero; the one-player ones also PPO):"
    for name in installed_games():  # (installed packages' games: imported to be listed)
        game_spec(name)
    presets = _presets_by_env()
    for name, desc in sorted(envs.GAMES.items()):
        if verbose:
            env = envs.make(name)
            yield (
                f"  {name:<24} players={env.num_players} actions={env.num_actions:<5} "
                f"observation={env.observation_shape}  {desc}"
            )
        else:
            used = f"  preset: {', '.join(presets[name])}" if name in presets else ""
            yield f"  {name:<24} {desc}{used}{_engines_text(name)}"
    for package, ids in other_environments().items():
        yield f"{package} environments (one player: PPO, AlphaZero where discrete):"
        if isinstance(ids, str):
            yield f"  {ids}"
            continue
        for env_id in ids:
            used = f"  preset: {', '.join(presets[env_id])}" if env_id in presets else ""
            if verbose:
                shape = _env_shape(env_id)
                yield f"  {env_id:<40} {shape}{used}"
            else:
                yield f"  {env_id}{used}"


def other_environments() -> dict[str, list[str] | str]:
    """Ids of the gymnax and jumanji environments `envs.make` accepts, per package, or the line
    saying how to install a missing package."""
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


def _env_shape(env_id: str) -> str:
    """`actions=... observation=...` of a gymnax or jumanji id, or why it cannot be used here
    (whole), or the download it would start (not started)."""
    if env_id in NEEDS_DOWNLOAD:
        return f"(needs a download when made: {NEEDS_DOWNLOAD[env_id]}; not made here)"
    try:
        env = envs.make(env_id)
    except Exception as err:  # an adapter refusal: say why, list the rest
        return f"(not usable here: {str(err).splitlines()[0]})"
    return f"actions={env.num_actions:<5} observation={env.observation_shape}"


def _presets_by_env() -> dict[str, list[str]]:
    load_presets()
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
        "Learning-rate warmup",
        "`train.lr_warmup_steps`",
        'Goyal et al., "Accurate, large minibatch SGD: training ImageNet in 1 hour", 2017',
    ),
    (
        "Gating on the best network",
        "`eval.gating_threshold`",
        'Silver et al., "Mastering the game of Go without human knowledge" (AlphaGo Zero), '
        "Nature 2017",
    ),
    ("Board symmetries as extra positions", "`train.augment`", "Silver et al. 2017"),
    (
        "PPO: the clipped surrogate, value clipping, advantage standardisation, entropy bonus",
        "`loss=clip`, `clip_eps`, `value_clip_eps`, `standardize_advantages`, `ent_coef`, "
        "`vf_coef`, `max_grad_norm`, `adam_eps`, `lr_schedule`",
        'Schulman et al., "Proximal policy optimization algorithms", 2017; Huang et al., "The '
        '37 implementation details of PPO", ICLR blog track 2022',
    ),
    (
        "PPO: generalised advantage estimation",
        "`gamma`, `gae_lambda`, `rollout_length`",
        'Schulman et al., "High-dimensional continuous control using generalized advantage '
        'estimation", ICLR 2016',
    ),
    (
        "PPO: the adaptive-KL objective's fixed penalty",
        "`loss=kl_penalty`, `kl_coef`",
        "Schulman et al. 2017",
    ),
    (
        "PPO: discovered policy optimisation (a learned drift)",
        "`loss=dpo`, `dpo_alpha`, `dpo_beta`",
        'Lu et al., "Discovered policy optimisation", NeurIPS 2022',
    ),
    (
        "PPO: observation normalisation, separate actor and critic, their widths, activation "
        "and layer norm, the Gaussian's initial scale",
        "`normalize_observations`, `obs_clip`, `obs_norm_warmup_steps`, `actor_hidden`, "
        "`critic_hidden`, `activation`, `layer_norm`, `init_log_std`",
        'Andrychowicz et al., "What matters in on-policy reinforcement learning? A large-scale '
        'empirical study", ICLR 2021',
    ),
    (
        "PPO: bounded action heads",
        "`action_head=tanh_gaussian`, `action_head=beta`",
        'Haarnoja et al., "Soft actor-critic", ICML 2018; Chou et al., "Improving stochastic '
        'policy gradients in continuous control with deep RL using the beta distribution", '
        "ICML 2017",
    ),
    (
        "PPO: independent seeds in one program, the absolute metric of the best policy",
        "`num_seeds`, `eval_greedy`, `absolute_eval_factor`",
        'Gorsane et al., "Towards a standardised performance evaluation protocol for '
        'cooperative MARL", NeurIPS 2022 (as Stoix reports)',
    ),
)


def techniques_markdown() -> str:
    """docs/configuration.md's table of the published techniques and their settings."""
    rows = "\n".join(f"| {t} | {s} | {r} |" for t, s, r in TECHNIQUES)
    removed = ", ".join(f"`{name}`" for name in REMOVED_IN_2)
    return (
        "## Published techniques and their settings\n\n"
        "A setting stays when a preset uses it or when it is a published technique users look "
        "for; the levers tried and not kept are in `docs/benchmarks.md`'s lever table. Removed "
        f"settings ({removed}): a run's config.json holding one at the value that left it off "
        "loads as before, at another it is refused in one line (`turbozero.io.migrations`). "
        "PPO's and TD's settings were read by the same rule: each PPO learning setting no "
        "preset sets is a technique below (the others are the run's, the evaluation's and "
        "jumanji's input encoding); TD's are its method's own (TD-Gammon's network and step "
        "size) or the run's and evaluation's.\n\n"
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
    load_presets()
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
