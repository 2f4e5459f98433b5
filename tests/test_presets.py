"""Every preset builds, and its programs trace for one tiny step."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import turbozero.alphazero.config  # registers the presets
import turbozero.ppo.config  # (its presets too)
from turbozero.config import ConfigError, get_preset, load_presets

PRESETS = load_presets()


def test_presets_cover_the_advertised_games():
    names = set(PRESETS)
    for required in (
        "tic_tac_toe",
        "connect_four",
        "othello",
        "go_9x9",
        "animal_shogi",
        "hex",
        "2048",
        "backgammon",
        "ppo_cartpole",
    ):
        assert required in names


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_config_is_valid_and_described(name):
    preset = get_preset(name)
    config = preset.make()
    assert preset.description
    assert type(config).from_dict(config.to_dict()) == config


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_traces_one_step_of_its_programs(name):
    """Each preset's own game, network, search and augmentations trace through self-play and
    training (AlphaZero), one update (PPO) or one turn of self-play and its step (TD), at tiny
    batch sizes: shapes only, no compiling."""
    import jax

    from turbozero.alphazero import make_alphazero
    from turbozero.ppo import make_ppo

    preset = get_preset(name)
    key = jax.random.PRNGKey(0)
    if preset.algorithm == "alphazero":
        small = ["num_games=2", "train_batch_size=2", "memory_capacity=4", "devices=1"]
        cfg = preset.make().with_overrides(
            [*small, "search.num_simulations=2", "search.max_nodes=3"]
        )
        az = make_alphazero(cfg)
        state = jax.eval_shape(az.init, key)
        after, metrics = jax.eval_shape(lambda s: az.collect(s, 1), state)
        assert jax.tree_util.tree_structure(after) == jax.tree_util.tree_structure(state)
        assert metrics["episodes"].shape == ()
        _, losses = jax.eval_shape(lambda s: az.train_steps(s, 1), state)
        assert losses["loss"].shape == ()
    elif preset.algorithm == "td":
        from turbozero.td import make_td

        td = make_td(preset.make().with_overrides(["num_games=2"]))
        state = jax.eval_shape(td.init, key)
        after, metrics = jax.eval_shape(lambda s: td.train(s, 1), state)
        assert jax.tree_util.tree_structure(after) == jax.tree_util.tree_structure(state)
        assert metrics["loss"].shape == (1,)
    else:
        cfg = preset.make().with_overrides(["num_envs=2", "rollout_length=2", "num_minibatches=1"])
        ppo = make_ppo(cfg)
        state = jax.eval_shape(ppo.init, key)
        after, metrics = jax.eval_shape(ppo.update, state)
        assert jax.tree_util.tree_structure(after) == jax.tree_util.tree_structure(state)
        assert metrics["actor_loss"].shape == (cfg.num_updates_per_eval,)


def test_misspelt_preset_gets_a_suggestion():
    with pytest.raises(ConfigError, match="Did you mean 'connect_four'"):
        get_preset("conect_four")


def test_config_values_of_the_wrong_type_are_refused_naming_the_key():
    import dataclasses

    import pytest

    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig
    from turbozero.config import ConfigError
    from turbozero.ppo import make_ppo

    base = AlphaZeroConfig()
    for key, value, message in [
        ("num_games", 2.5, "num_games must be an int"),
        ("learning_rate", "0.1", "learning_rate must be a number"),
        ("eval_opponents", "random", "eval_opponents must be a tuple"),
        ("augment", 1, "augment must be True or False"),
    ]:
        with pytest.raises(ConfigError, match=message):
            dataclasses.replace(base, **{key: value})
    with pytest.raises(ConfigError, match="hidden must be a tuple"):
        NetworkConfig(hidden=64)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="num_envs must be an int"):
        make_ppo(env="gymnax:CartPole-v1", num_envs=2.5)
    with pytest.raises(ConfigError, match=r"network is a section \(NetworkConfig\)"):
        dataclasses.replace(base, network={"kind": "mlp"})
    with pytest.raises(ConfigError, match=r"network\.num_blocks must be an int"):
        AlphaZeroConfig.from_dict({"network": {"num_blocks": 2.5}})


def test_config_values_are_stored_as_their_declared_python_types():
    import dataclasses

    """Python callers may pass lists for tuples and NumPy or JAX scalars for numbers; the
    config holds plain Python values (it is hashed into compiled programs and compared with
    saved run configs)."""
    import jax.numpy as jnp
    import numpy as np

    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig

    cfg = AlphaZeroConfig(
        num_games=np.int64(8),
        learning_rate=jnp.float32(0.5),
        augment=np.bool_(True),
        eval_opponents=["random"],
        network=NetworkConfig(hidden=[16, np.int32(8)]),
    )
    assert cfg.num_games == 8 and type(cfg.num_games) is int
    assert cfg.learning_rate == 0.5 and type(cfg.learning_rate) is float
    assert cfg.augment is True and cfg.eval_opponents == ("random",)
    assert cfg.network.hidden == (16, 8) and all(type(h) is int for h in cfg.network.hidden)
    assert hash(cfg) == hash(AlphaZeroConfig.from_dict(cfg.to_dict()))
    assert dataclasses.replace(AlphaZeroConfig(), learning_rate=1).learning_rate == 1.0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("learning_rate=inf", r"learning_rate must be a finite number in \(0, inf\), got inf"),
        ("value_weight=nan", "value_weight must be a finite number"),
        ("value_weight=-1", "value_weight must be a finite number"),
        ("search.pb_c_base=-5", "search.pb_c_base must be a finite number"),
        ("search.pb_c_init=inf", "search.pb_c_init must be a finite number"),
        ("search.gumbel_scale=nan", "search.gumbel_scale must be a finite number"),
        ("search.dirichlet_alpha=inf", "search.dirichlet_alpha must be a finite number"),
    ],
)
def test_settings_that_are_not_finite_numbers_in_range_are_refused(override, message):
    from turbozero.alphazero.config import AlphaZeroConfig

    with pytest.raises(ConfigError, match=message):
        AlphaZeroConfig().with_overrides([override])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"actor_lr": float("inf")}, "actor_lr must be a finite number"),
        ({"init_log_std": float("nan")}, "init_log_std must be a finite number"),
    ],
)
def test_ppo_settings_that_are_not_finite_numbers_in_range_are_refused(changes, message):
    from turbozero.ppo import PPOConfig

    with pytest.raises(ConfigError, match=message):
        PPOConfig(env="gymnax:CartPole-v1", **changes)


def test_the_config_reference_takes_no_preset(capsys):
    from turbozero.cli import main

    assert main(["config", "tic_tac_toe", "--reference"]) == 2
    assert "--reference prints every key" in capsys.readouterr().err
    assert main(["config", "--reference"]) == 0
    assert capsys.readouterr().out.startswith("# Configuration")


def test_every_row_of_the_config_reference_has_its_headers_cells():
    """A `|` in a type (`bool | None`), a note (`drop | bootstrap`) or a preset's description
    is escaped, so Markdown does not split a row into more columns than its header has."""
    import re

    from turbozero.reference import config_reference

    text = config_reference()
    presets, keys = text.split("## AlphaZero", 1)
    assert "\\|" in keys  # (some cells hold a pipe)
    for table, cells in ((presets, 3), (keys, 4)):
        for row in (line for line in table.splitlines() if line.startswith("| `")):
            assert len(re.split(r"(?<!\\)\|", row.strip("|"))) == cells, row


@pytest.mark.parametrize(
    "setting",
    [
        "temperature_moves=3000000000",
        "max_episode_steps=3000000000",
        "lr_warmup_steps=3000000000",
        "eval_opening_moves=3000000000",
        "eval_network_opening_moves=3000000000",
    ],
)
def test_counts_beyond_int32_are_refused_when_the_config_is_made(setting):
    """Counts reach compiled programs as int32: a larger one passed validation, started the run
    and failed there with an OverflowError (at the first evaluation, for the opening moves)."""
    from turbozero.alphazero.config import AlphaZeroConfig

    key = setting.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{key} must be in \[[01], 2147483647\]"):
        AlphaZeroConfig().with_overrides([setting])
    AlphaZeroConfig().with_overrides([f"{key}=2147483647"])


@pytest.mark.parametrize(
    "setting", ["value_scale=1e-300", "max_grad_norm=1e-40", "learning_rate=1e39"]
)
def test_numbers_that_float32_cannot_hold_are_refused_when_the_config_is_made(setting):
    """value_scale=1e-300 passed and became 0 in float32: the value targets were divided by 0."""
    from turbozero.alphazero.config import AlphaZeroConfig

    key = setting.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{key}=.* as a float32"):
        AlphaZeroConfig().with_overrides([setting])
    AlphaZeroConfig().with_overrides([f"{key}=1e-30"])


def test_an_opponent_count_in_other_digits_is_refused_naming_the_setting():
    from turbozero.alphazero.config import AlphaZeroConfig

    with pytest.raises(ValueError, match="eval_opponents entry 'mcts:²'"):
        AlphaZeroConfig().with_overrides(["eval_opponents=mcts:²"])


@pytest.mark.parametrize(
    "setting",
    [
        "eval_simulations=16777216",
        "search.num_simulations=16777216",
        "eval_opponents=random,mcts:3000000000",
    ],
)
def test_simulation_counts_a_tree_cannot_hold_are_refused_by_their_own_name(setting):
    """A search of N simulations holds N + 1 nodes, at most 2**24: larger counts were accepted
    and refused later under the name max_nodes, which the user never set."""
    from turbozero.alphazero.config import AlphaZeroConfig

    key = setting.split("=")[0]
    with pytest.raises(ValueError, match=rf"{key.split('.')[-1]}|mcts:3000000000"):
        AlphaZeroConfig().with_overrides([setting])


def test_config_and_train_say_when_the_tree_cannot_hold_a_search(tmp_path, capsys):
    from turbozero.cli import main

    assert main(["config", "tic_tac_toe", "--set", "search.num_simulations=100"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "search.max_nodes=80 holds fewer nodes than search.num_simulations + 1 = 101" in err[0]
    assert main(["config", "tic_tac_toe"]) == 0
    assert capsys.readouterr().err == ""  # the preset's own tree holds its search
    cfg = get_preset("tic_tac_toe").make().with_overrides(["search.num_simulations=100"])
    assert cfg.search.capacity_warning() == err[0]


def test_a_chance_game_needs_two_nodes_per_simulation(capsys):
    from turbozero.cli import main

    args = [
        "config",
        "2048_alphazero",
        "--set",
        "search.num_simulations=32",
        "--set",
        "search.max_nodes=40",
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "2 * search.num_simulations + 1 = 65" in err
    assert main([*args, "--set", "search.chance=sampled"]) == 0
    assert "holds fewer nodes" not in capsys.readouterr().err  # 40 >= 33 without chance nodes


def test_config_marks_what_the_preset_and_set_change_and_what_stops_the_run(capsys):
    import json

    from turbozero.cli import main

    assert main(["config", "connect_four", "--set", "eval_games=8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    stops = "# the run stops at the first of: run.num_epochs=1000, run.max_wall_seconds=1800.0"
    assert lines[1] == stops
    assert "* eval.games = 8" in lines and '* search.fpu = "network"' in lines
    assert "  run.seed = 0" in lines and "[search]" in lines  # a default, unmarked; a section
    changed = [line for line in lines if line.startswith("* ")]
    header = f"# connect_four: {len(changed)} settings differ from the defaults (marked *)"
    assert lines[0] == header
    assert main(["config", "tic_tac_toe", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "  run.max_wall_seconds = 0.0  # 0: no limit" in out
    assert "# the run stops at the first of: run.num_epochs=80\n" in out  # no time budget
    assert main(["config", "tic_tac_toe", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == get_preset("tic_tac_toe").make().to_dict()


def test_games_with_chance_have_a_quick_setting_that_is_valid_and_lets_a_game_end():
    """2048 and backgammon games run to hundreds of moves: their quick settings play enough
    moves for games to end and training to start (the run itself: `make check`)."""
    from turbozero.alphazero.train import short_run_note

    for name in ("2048_alphazero", "backgammon_alphazero"):
        preset = get_preset(name)
        assert preset.quick, name
        config = preset.make().with_overrides(list(preset.quick))
        assert short_run_note(config) is None, name
        assert config.max_wall_seconds and config.max_wall_seconds <= 240  # a couple of minutes


def test_a_run_too_short_for_a_game_to_end_says_so_at_the_start():
    from turbozero.alphazero.train import short_run_note

    config = get_preset("backgammon_alphazero").make().with_overrides(["num_epochs=2"])
    note = short_run_note(config)
    assert note is not None and "2 epochs play 64 moves of each game" in note
    assert "max_episode_steps=1000" in note and "--set num_epochs=32" in note
    assert short_run_note(get_preset("tic_tac_toe").make()) is None


def test_quick_is_listed_and_refused_where_it_means_nothing(capsys):
    from turbozero.cli import main

    assert main(["train", "--list"]) == 0
    listing = capsys.readouterr().out
    rows = listing.splitlines()
    assert max(map(len, rows)) <= 100  # (each preset wrapped under its name)
    start = next(i for i, row in enumerate(rows) if row.startswith("backgammon "))
    end = next(i for i in range(start + 1, len(rows)) if not rows[i].startswith(" "))
    block = " ".join(row.strip() for row in rows[start:end])
    assert "Quick try (--quick): " + " ".join(get_preset("backgammon").quick) in block
    assert main(["train", "tic_tac_toe", "--quick"]) == 2
    assert "preset 'tic_tac_toe' has no quick setting" in capsys.readouterr().err
    assert main(["train", "--quick", "--resume", "--out", "runs/x"]) == 2
    assert "--quick starts a new run" in capsys.readouterr().err


def test_every_flat_alphazero_setting_sits_in_exactly_one_section():
    from turbozero.alphazero.config import AlphaZeroConfig

    fields = [
        f.name
        for f in dataclasses.fields(AlphaZeroConfig)
        if f.name not in ("network", "search")  # (sections of their own)
    ]
    members = [m for ms in AlphaZeroConfig.GROUPS.values() for m in ms]
    assert sorted(members) == sorted(fields)  # each once, none left out, none unknown
    assert not set(AlphaZeroConfig.GROUPS) & {f.name for f in dataclasses.fields(AlphaZeroConfig)}


def test_a_setting_is_set_by_its_section_and_stored_flat():
    config = get_preset("connect_four").make()
    changed = config.with_overrides(
        ["selfplay.num_games=8", "eval.games=4", "train.batch_size=16", "run.seed=3"]
    )
    assert (changed.num_games, changed.eval_games, changed.train_batch_size, changed.seed) == (
        8,
        4,
        16,
        3,
    )
    assert changed == config.with_overrides(
        ["num_games=8", "eval_games=4", "train_batch_size=16", "seed=3"]
    )
    assert "eval_games" in changed.to_dict() and "eval" not in changed.to_dict()
    with pytest.raises(ConfigError, match=r"section 'eval' holds .*Did you mean 'games'"):
        config.with_overrides(["eval.gamez=4"])
    with pytest.raises(ConfigError, match="section 'selfplay' holds"):
        config.with_overrides(["selfplay.learning_rate=0.1"])  # (a train setting)


def test_config_lists_the_settings_in_sections_as_set_takes_them(capsys):
    from turbozero.cli import main

    assert main(["config", "connect_four"]) == 0
    out = capsys.readouterr().out.splitlines()
    for header in ("[run]", "[selfplay]", "[train]", "[eval]", "[network]", "[search]"):
        assert header in out
    assert "* eval.simulations = 512" in out and "* selfplay.num_games = 128" in out
    shown = [line[2:].split(" = ")[0] for line in out if " = " in line]
    config = get_preset("connect_four").make()
    for key in shown:  # every key shown is one --set takes
        value = next(line for line in out if line[2:].startswith(key + " = ")).split(" = ", 1)[1]
        assert config.with_overrides([f"{key}={_as_set(value)}"]) == config


def _as_set(shown: str) -> str:
    """A value as `turbozero config` shows it (JSON), as `--set` takes it."""
    value = json.loads(shown)
    if isinstance(value, list):
        return ",".join(str(v) for v in value) if value else "[]"
    if value is None:
        return "none"
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_the_defaults_left_to_the_game_are_chosen_from_it_when_resolved():
    """None settings: a win/draw/loss head where the game can be drawn, a scalar value where it
    cannot; every move sampled; 64 epochs of play kept; 4x self-play's search at play; an
    unvisited move at the network's value under puct and by the selector's own rule otherwise."""
    from turbozero.alphazero.config import AlphaZeroConfig, SearchConfig

    base = AlphaZeroConfig(env="connect_four", max_episode_steps=42)
    assert base.network.value_bins is None and base.temperature_moves is None
    c4 = base.resolved()
    assert c4.network.value_bins == 3 and c4.temperature_moves == 42
    assert c4.memory_capacity == 64 * c4.collection_steps_per_epoch
    assert c4.eval_simulations == 4 * c4.search.num_simulations and c4.search.fpu == "network"
    for env in ("hex", "2048", "go_9x9"):
        assert AlphaZeroConfig(env=env).resolved().network.value_bins == 0, env
    gumbel = AlphaZeroConfig(env="hex", search=SearchConfig(selector="gumbel")).resolved()
    assert gumbel.search.fpu == "zero"
    huge = AlphaZeroConfig(search=SearchConfig(num_simulations=2**23, max_nodes=2**24))
    assert huge.resolved().eval_simulations == 2**24 - 1
    # what is set stays set, and resolving twice changes nothing
    mine = AlphaZeroConfig(env="connect_four", temperature_moves=3, eval_simulations=0)
    assert mine.resolved().temperature_moves == 3 and mine.resolved().eval_simulations == 0
    assert c4.resolved() == c4


BOARD_PRESETS = ("animal_shogi", "hex", "othello", "go_9x9", "go_7x7")


def _flat(settings, prefix=""):
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def test_the_board_presets_start_from_the_one_board_recipe():
    from turbozero.config import BASES

    assert BASES["board"].algorithm == "alphazero"
    for name in BOARD_PRESETS:
        preset = PRESETS[name]
        assert (preset.base, preset.algorithm, preset.factory) == ("board", "alphazero", None)
        made = _flat(preset.make().to_dict())
        recipe = _flat(BASES["board"].settings)
        own = _flat(preset.settings)
        for key, value in recipe.items():  # what the preset leaves is the recipe's
            expected = own.get(key, value)
            assert made[key] == (list(expected) if isinstance(expected, tuple) else expected)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_holds_only_what_differs_from_its_base(name):
    from turbozero.config import BASES

    preset = PRESETS[name]
    if preset.base is None:
        return
    recipe = _flat(BASES[preset.base].settings)
    same = [k for k, v in _flat(preset.settings).items() if k in recipe and recipe[k] == v]
    assert not same, f"{name} repeats its base {preset.base!r}: {same}"


def test_a_section_set_by_a_preset_keeps_its_bases_other_keys():
    network = get_preset("go_7x7").make().network
    assert (network.kind, network.num_blocks, network.num_channels) == ("resnet", 3, 32)


def test_the_game_files_register_presets_as_data_without_the_algorithms_configs():
    import turbozero.games

    for path in sorted(Path(turbozero.games.__file__).parent.glob("*.py")):
        text = path.read_text()
        for module in ("alphazero.config", "ppo.config", "td.config"):
            assert f"turbozero.{module}" not in text, f"{path.name} imports {module}"
    for name in ("tic_tac_toe", "connect_four", "2048", "backgammon", "ppo_cartpole"):
        assert PRESETS[name].factory is None and PRESETS[name].settings, name


def test_a_preset_of_ones_own_is_data_or_a_function():
    from turbozero.alphazero.config import AlphaZeroConfig
    from turbozero.config import PRESETS as REGISTRY
    from turbozero.config import register_preset

    try:
        hex_again = {
            "env": "hex",
            "max_episode_steps": 122,
            "train_steps_per_epoch": 8,
            "eval_share": 0.1,
        }
        register_preset("mine", "mine", algorithm="alphazero", base="board", settings=hex_again)
        register_preset("mine_fn", "mine", algorithm="alphazero")(lambda: AlphaZeroConfig())
        register_preset("mine_bad", "mine", algorithm="alphazero", base="bord", settings={})
        assert get_preset("mine").make() == get_preset("hex").make()
        assert get_preset("mine_fn").make() == AlphaZeroConfig()
        with pytest.raises(ConfigError, match="Did you mean 'board'"):
            get_preset("mine_bad").make()
        with pytest.raises(ValueError, match="registered twice"):
            register_preset("mine", "again", algorithm="alphazero", settings={})
    finally:
        for name in ("mine", "mine_fn", "mine_bad"):
            REGISTRY.pop(name, None)


def test_a_nested_setting_given_without_its_section_is_suggested_with_it():
    """`--set num_simulations=8` names `search.num_simulations` (a nested setting), not the
    flat name that merely looks alike (`eval_simulations`)."""
    config = turbozero.alphazero.config.AlphaZeroConfig()
    with pytest.raises(ConfigError, match=r"Did you mean 'search\.num_simulations'\?$"):
        config.with_overrides(["num_simulations=8"])
    with pytest.raises(ConfigError, match=r"Did you mean 'eval_simulations'\?$"):
        config.with_overrides(["eval_simulaton=8"])  # a misspelling still gets its neighbour
