"""Typed configuration base, `--set a.b=value` overrides, and the preset registry.

Configs are plain frozen dataclasses (not pytrees: they are static configuration, hashed into the
compiled program). Every config class validates its own ranges in `validate()`, called from
`__post_init__`, and raises `ValueError` naming the key and the allowed range or choices.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import numbers
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from turbozero.algorithms import algorithm as _algorithm
from turbozero.algorithms import algorithm_names as _algorithm_names
from turbozero.gamespec import BRING_A_GAME, all_games, game_spec

C = TypeVar("C", bound="Config")

#: seeds are what `jax.random.PRNGKey` keeps: 32 bits. Larger ones would repeat smaller ones
#: silently; negatives (int32, accepted so that runs made with them still load) are the same
#: keys as `seed + 2**32`
SEED_MIN, SEED_MAX = -(2**31), 2**32 - 1


class ConfigError(ValueError):
    """A configuration key or value that is not allowed."""


def suggest(name: str, choices: Iterable[str]) -> str:
    """A ' did you mean ...?' hint for a misspelt name (or an empty string)."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.6)
    return f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


INT32_MAX = 2**31 - 1


def _section_keys(cls: Any) -> list[str]:
    """The dotted keys of `cls`'s nested sections (`search.num_simulations`), which a key
    given without its section is meant to be when its name matches one exactly."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        section = _config_class(hints[f.name])
        if section is not None:
            out += [f"{f.name}.{g.name}" for g in dataclasses.fields(section)]
    return out


def check_range(
    name: str,
    value: float,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> None:
    """Raise `ConfigError` unless `value` is a finite number in the given range (NaN and the
    infinities are refused: no setting here means anything at either). An int without an
    upper bound must fit in int32 (`INT32_MAX`): counts reach compiled programs as int32, and a
    larger one failed there with an `OverflowError`, after the run had started."""
    if isinstance(value, numbers.Integral) and high is None:
        high = INT32_MAX
    # (an int too large for a float is finite all the same: math.isfinite would overflow)
    ok = isinstance(value, numbers.Integral) or math.isfinite(value)
    if ok and not isinstance(value, numbers.Integral):
        # numbers reach the compiled programs as float32: one that becomes 0 or inf there
        # (value_scale=1e-300 divided the targets by zero) means something else than it says
        # (below float32's smallest normal number, XLA:CPU flushes a number to zero)
        with np.errstate(over="ignore"):  # (an overflow is what is being checked for)
            as_f32 = float(np.float32(value))
        tiny = float(np.finfo(np.float32).tiny)
        if not math.isfinite(as_f32) or (value != 0 and abs(as_f32) < tiny):
            raise ConfigError(
                f"{name}={value!r} is {as_f32:g} as a float32, which the compiled programs "
                f"use: give a number of magnitude between about 1e-38 and 3e38"
            )
    if low is not None:
        ok &= value >= low if low_inclusive else value > low
    if high is not None:
        ok &= value <= high if high_inclusive else value < high
    if not ok:
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        lb = "[" if low_inclusive and low is not None else "("
        hb = "]" if high_inclusive and high is not None else ")"
        what = "" if isinstance(value, numbers.Integral) else "a finite number "
        raise ConfigError(f"{name} must be {what}in {lb}{lo}, {hi}{hb}, got {value!r}")


def check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    """Raise `ConfigError` unless `value` is one of `choices`."""
    if value not in choices:
        hint = suggest(str(value), [str(c) for c in choices])
        raise ConfigError(f"{name} must be one of {list(choices)}, got {value!r}.{hint}")


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of every typed config: validation, dict round trip and overrides."""

    #: the flat settings in named sections (`group: fields`), as `turbozero config` lists them;
    #: `--set group.key=v` names a field by its section, without the section's own prefix
    #: (`selfplay.num_games`, `eval.games` for `eval_games`). config.json keeps them flat, so
    #: runs written before the sections load as they were
    GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def grouped_key(cls, name: str) -> str:
        """The dotted name of a flat field in its section (`eval_games` -> `eval.games`), or the
        name itself where the class has no section for it."""
        for group, members in cls.GROUPS.items():
            if name in members:
                return f"{group}.{name.removeprefix(group + '_')}"
        return name

    @classmethod
    def _ungroup(cls, parts: list[str], path: str) -> list[str]:
        """`parts` of a `--set` key with a section's name replaced by the flat field it names."""
        if not parts or parts[0] not in cls.GROUPS:
            return parts
        members = cls.GROUPS[parts[0]]
        aliases = {m.removeprefix(parts[0] + "_"): m for m in members}
        if len(parts) != 2 or parts[1] not in aliases:
            raise ConfigError(
                f"unknown config key {path!r}: section {parts[0]!r} holds {sorted(aliases)}."
                + (suggest(parts[1], aliases) if len(parts) > 1 else "")
            )
        return [aliases[parts[1]]]

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            typed = _typed(f.name, hints[f.name], getattr(self, f.name))
            object.__setattr__(self, f.name, typed)
        self.validate()

    def validate(self) -> None:
        """Check ranges; subclasses extend it."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Config):
                v = v.to_dict()
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any], *, _prefix: str = "") -> C:
        """Build from a (nested) dict, refusing unknown keys with suggestions."""
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names:
                raise ConfigError(
                    f"unknown config key {_prefix + key!r}; valid keys: {names}."
                    + suggest(key, names)
                )
            kwargs[key] = _coerce(hints[key], value, _prefix + key)
        try:
            return cls(**kwargs)
        except TypeError as e:  # a missing required field
            raise ConfigError(f"{cls.__name__}: {e}") from None
        except ConfigError as e:  # name a nested key in full (`network.num_blocks`)
            message = str(e)
            if _prefix and any(message.startswith(n + " ") for n in names):
                raise ConfigError(_prefix + message) from None
            raise

    def with_overrides(self: C, overrides: Iterable[str]) -> C:
        """Apply `a.b=value` strings (as given to `--set`), parsing values by the field types."""
        data = self.to_dict()
        for item in overrides:
            if "=" not in item:
                raise ConfigError(f"override {item!r} must look like key=value (e.g. seed=3)")
            path, raw = item.split("=", 1)
            parts = type(self)._ungroup(path.strip().split("."), path.strip())
            node: Any = data
            cls: Any = type(self)
            for depth, part in enumerate(parts):
                names = [f.name for f in dataclasses.fields(cls)]
                if part not in names:
                    where = ".".join(parts[:depth]) or "the config"
                    inside = [n for n in _section_keys(cls) if n.rsplit(".", 1)[-1] == part]
                    hint_text = (
                        f" Did you mean {' or '.join(map(repr, inside))}?"
                        if inside
                        else suggest(part, names)
                    )
                    raise ConfigError(
                        f"unknown config key {path!r}: {part!r} is not in {where}; valid keys: "
                        f"{names}." + hint_text
                    )
                hint = typing.get_type_hints(cls)[part]
                if depth == len(parts) - 1:
                    section = _config_class(hint)
                    if section is not None:
                        keys = [f.name for f in dataclasses.fields(section)]
                        raise ConfigError(
                            f"{path} is a section ({section.__name__}), not a value: got "
                            f"{raw.strip()!r}; set its keys, e.g. {path}.{keys[0]}=...; its "
                            f"keys: {keys}"
                        )
                    node[part] = _parse_value(hint, raw.strip(), path)
                else:
                    node = node[part]
                    cls = _config_class(hint)
                    if cls is None:
                        raise ConfigError(
                            f"config key {'.'.join(parts[: depth + 1])!r} has no sub-keys"
                        )
        return type(self).from_dict(data)

    def diff(self, other: Config) -> dict[str, tuple[Any, Any]]:
        """`{dotted key: (self's value, other's value)}` for every field that differs."""

        def flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
            out: dict[str, Any] = {}
            for k, v in d.items():
                if isinstance(v, Mapping):
                    out.update(flat(v, f"{prefix}{k}."))
                else:
                    out[f"{prefix}{k}"] = v
            return out

        a, b = flat(self.to_dict()), flat(other.to_dict())
        keys = sorted(a.keys() | b.keys())
        return {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def resume_may_change(cls) -> tuple[str, ...]:
        """The settings a resumed run may change: those its groups name (each class's own
        `RESUME_MAY_CHANGE`: `RunSettings`'s and `EpochSettings`' and the algorithm's), which
        say where a run stops and logs and change nothing an epoch computes."""
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            for name in vars(klass).get("RESUME_MAY_CHANGE", ()):
                if name not in names:
                    names.append(name)
        return tuple(names)


@dataclasses.dataclass(frozen=True)
class RunSettings(Config):
    """The run settings every algorithm's config holds (its `run` group), validated here once:
    the game, the seed, the checkpoints and where it logs beside `metrics.jsonl`. An
    algorithm's config derives from it (or from `EpochSettings`) and sets its own `env`."""

    #: of these, what a resumed run may change (`Config.resume_may_change`): where it logs
    RESUME_MAY_CHANGE: ClassVar[tuple[str, ...]] = ("tensorboard", "wandb_project")

    env: str = ""  # the game or environment id (`turbozero envs`)
    seed: int = 0  # fixes the run: initialisation, self-play, evaluations
    checkpoint_every: int = 1  # save after every this many epochs (and at the end)
    keep_checkpoints: int | None = 3  # newest checkpoints kept; None keeps all
    tensorboard: bool = False  # also RUN/tensorboard events (the [tensorboard] extra)
    wandb_project: str | None = None  # also log to W&B (the [wandb] extra)

    def validate(self) -> None:
        super().validate()
        check_range("seed", self.seed, low=SEED_MIN, high=SEED_MAX)
        check_range("checkpoint_every", self.checkpoint_every, low=1)
        if self.keep_checkpoints is not None:
            check_range("keep_checkpoints", self.keep_checkpoints, low=1)
        if self.wandb_project is not None and (
            not isinstance(self.wandb_project, str) or not self.wandb_project
        ):
            raise ConfigError(
                f"wandb_project must be a non-empty name or None, got {self.wandb_project!r}"
            )


@dataclasses.dataclass(frozen=True)
class EpochSettings(RunSettings):
    """`RunSettings` for an algorithm whose run is counted in epochs and may stop on the clock
    (AlphaZero, TD): where it stops."""

    #: a resumed run may stop elsewhere (`Config.resume_may_change`)
    RESUME_MAY_CHANGE: ClassVar[tuple[str, ...]] = ("num_epochs", "max_wall_seconds")

    num_epochs: int = 100  # epochs in the whole run
    max_wall_seconds: float = 0.0  # 0: no limit; else stop (and save) after this much training

    def validate(self) -> None:
        super().validate()
        check_range("num_epochs", self.num_epochs, low=1)
        check_range("max_wall_seconds", self.max_wall_seconds, low=0)


def _is_number(value: Any, *, integer: bool) -> bool:
    """A Python, NumPy or 0-d JAX/NumPy array number (not a bool); `integer`: integers only."""
    if isinstance(value, bool | np.bool_):
        return False
    if isinstance(value, numbers.Integral):
        return True
    if not integer and isinstance(value, numbers.Real):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None or np.ndim(value) != 0:
        return False
    kinds = (np.integer,) if integer else (np.integer, np.floating)
    return any(np.issubdtype(dtype, k) for k in kinds)


def _typed(name: str, hint: Any, value: Any) -> Any:
    """`value` as the field's declared type (Python ints, floats and bools from NumPy or 0-d
    array scalars, tuples from lists), or a `ConfigError` naming the key, so that a wrong type
    is refused when the config is built rather than deep inside a compiled program."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        first: ConfigError | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _typed(name, arg, value)
            except ConfigError as err:
                first = first or err
        if first is not None:
            raise first
        return value
    if isinstance(hint, type) and issubclass(hint, Config):
        if isinstance(value, hint):
            return value
        keys = [f.name for f in dataclasses.fields(hint)]
        raise ConfigError(
            f"{name} is a section ({hint.__name__}), not a value: got {value!r}; set its keys, "
            f"e.g. {name}.{keys[0]}=...; its keys: {keys}"
        )
    if hint is bool:
        if isinstance(value, bool | np.bool_):
            return bool(value)
        want = "True or False"
    elif hint is int:
        if _is_number(value, integer=True):
            return int(value)
        want = "an int"
    elif hint is float:
        if _is_number(value, integer=False):
            return float(value)
        want = "a number"
    elif hint is str:
        if isinstance(value, str):
            return value
        want = "a string"
    elif origin is tuple:
        if isinstance(value, tuple | list):
            if args and (len(args) == 1 or args[-1] is Ellipsis):
                return tuple(_typed(name, args[0], v) for v in value)
            return tuple(value)
        want = "a tuple or list (on the command line a comma list, e.g. 64,64)"
    else:
        return value
    raise ConfigError(f"{name} must be {want}, got {value!r}")


def _config_class(hint: Any) -> type[Config] | None:
    if isinstance(hint, type) and issubclass(hint, Config):
        return hint
    for arg in typing.get_args(hint):
        if isinstance(arg, type) and issubclass(arg, Config):
            return arg
    return None


def _coerce(hint: Any, value: Any, name: str) -> Any:
    """A nested dict as its config section (other values are typed by `Config.__post_init__`)."""
    sub = _config_class(hint)
    if sub is not None and isinstance(value, Mapping):
        return sub.from_dict(value, _prefix=name + ".")
    return value


def _parse_value(hint: Any, raw: str, name: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if raw.lower() in ("none", "null") and type(None) in args:
            return None
        last: Exception | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _parse_value(arg, raw, name)
            except ConfigError as e:
                last = e
        raise last or ConfigError(f"cannot parse {raw!r} for {name}")
    try:
        if hint is bool:
            low = raw.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if hint is str:
            return raw
        if origin is tuple:
            vals = json.loads(raw) if raw.startswith("[") else [v for v in raw.split(",") if v]
            inner = args[0] if args else str
            return tuple(_parse_value(inner, str(v), name) for v in vals)
    except ValueError:
        raise ConfigError(
            f"{name} expects {getattr(hint, '__name__', hint)}, got {raw!r}"
        ) from None
    return json.loads(raw)


def markdown_cell(text: str) -> str:
    """`text` for a cell of a Markdown table: its `|` escaped, which would end the cell."""
    return text.replace("|", "\\|")


def setting_notes(cls: type[Config]) -> dict[str, str]:
    """`{field: its comment}` of a config class, read from its source (the comments
    docs/configuration.md and `config --explain` show): a field's trailing comment (with the
    comment lines that go on from it when it ends in ":" or ","), or for a field without one,
    the comment lines just above it."""
    import inspect

    notes: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # (the shared groups' first, the class's own last)
        if not (isinstance(klass, type) and issubclass(klass, Config)):
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        above: list[str] = []  # comment lines since the last field
        last: str | None = None  # a field whose trailing comment goes on below it
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith("#") and not stripped.startswith("#:"):
                text = stripped.lstrip("#").strip()
                if last is not None:
                    notes[last] += " " + text
                else:
                    above.append(text)
            elif ":" in stripped and stripped.split(":", 1)[0].strip().isidentifier():
                name = stripped.split(":", 1)[0].strip()
                own = stripped.split("#", 1)[1].strip() if "#" in stripped else ""
                if own or above:
                    notes[name] = own or " ".join(above)
                last = name if own.endswith((":", ",")) else None
                above = []
            else:
                above, last = [], None
    return notes


def presets_listing(columns: int = 100) -> list[str]:
    """`turbozero train --list`: each preset's name, algorithm and description, then its quick
    setting, wrapped at `columns` under the name (the descriptions run to 400 characters)."""
    width = max(len(n) for n in PRESETS)
    pad = " " * (width + 2)
    lines = []
    for name, preset in sorted(PRESETS.items()):
        text = f"{name:<{width}}  [{preset.algorithm}] {preset.description}"
        lines += textwrap.wrap(text, columns, subsequent_indent=pad, break_on_hyphens=False)
        if preset.quick:
            quick = f"Quick try (--quick): {' '.join(preset.quick)}"
            lines += textwrap.wrap(quick, columns, initial_indent=pad, subsequent_indent=pad)
    return lines


#: the settings that end a run, by what they count
STOPPING = ("num_epochs", "num_updates", "max_wall_seconds")


def config_listing(config: Config, name: str, *, explain: bool = False) -> str:
    """`config` as a person reads it: one `key = value` line per setting, in sections (the flat
    settings, then each nested group), `*` marking those that differ from the class defaults
    (what the preset and `--set` chose), what ends the run first, and with `explain` each
    setting's one-line meaning.

    Args:
        config: the resolved config (a preset with its overrides).
        name: the preset's name, for the header.
        explain: add each setting's comment from its class (docs/configuration.md's notes).
    """
    changed = set(config.diff(type(config)()))
    stops = [
        f"{type(config).grouped_key(k)}={getattr(config, k)!r}"
        for k in STOPPING
        if hasattr(config, k) and (k != "max_wall_seconds" or getattr(config, k))
    ]
    lines = [
        f"# {name}: {len(changed)} settings differ from the defaults (marked *)",
        f"# the run stops at the first of: {', '.join(stops)}",
    ]

    def line(cfg: Config, name: str, key: str, shown_key: str, notes: dict[str, str]) -> None:
        value = getattr(cfg, name)
        shown = json.dumps(list(value) if isinstance(value, tuple) else value)
        mark = "*" if key in changed else " "
        note = f"  # {notes[name]}" if notes.get(name) else ""
        lines.append(f"{mark} {shown_key} = {shown}{note}")

    def section(cfg: Config, prefix: str) -> None:
        notes = setting_notes(type(cfg)) if explain else {}
        nested, grouped = [], {m for ms in type(cfg).GROUPS.values() for m in ms}
        for f in dataclasses.fields(cfg):
            value = getattr(cfg, f.name)
            if isinstance(value, Config):
                nested.append((value, f"{prefix}{f.name}."))
            elif f.name not in grouped:
                line(cfg, f.name, f"{prefix}{f.name}", f"{prefix}{f.name}", notes)
        for group, members in type(cfg).GROUPS.items():
            lines.append(f"[{prefix}{group}]")
            for name in members:
                shown_key = prefix + type(cfg).grouped_key(name)
                line(cfg, name, f"{prefix}{name}", shown_key, notes)
        for sub, sub_prefix in nested:
            lines.append(f"[{sub_prefix[:-1]}]")
            section(sub, sub_prefix)

    section(config, "")
    return "\n".join(lines)


def reference_markdown(cls: type[Config], *, title: str, prefix: str = "") -> str:
    """Markdown tables of every key of a config class: name, type, default, comment; one table
    per section (`Config.GROUPS`, each key named as `--set` takes it and as config.json stores
    it) and per nested config."""
    source_lines = setting_notes(cls)
    hints = typing.get_type_hints(cls)
    header = ["| key | type | default | notes |", "|---|---|---|---|"]
    grouped = {m for ms in cls.GROUPS.values() for m in ms}
    fields = {f.name: f for f in dataclasses.fields(cls)}

    def row(name: str) -> str:
        f, hint = fields[name], hints[name]
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "(required)"
        type_name = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
        key = f"`{prefix}{cls.grouped_key(name)}`"
        if name in grouped and cls.grouped_key(name) != name:
            key += f" (`{name}` in config.json)"
        cells = [key, f"`{type_name}`", f"`{default!r}`", source_lines.get(name, "")]
        return "| " + " | ".join(markdown_cell(c) for c in cells) + " |"

    rows = [f"## {title}", ""]
    flat = [n for n in fields if n not in grouped and _config_class(hints[n]) is None]
    if flat:
        rows += [*header, *(row(n) for n in flat), ""]
    for group, members in cls.GROUPS.items():
        rows += [f"### {prefix}{group}.*", "", *header, *(row(n) for n in members), ""]
    nested = [
        reference_markdown(sub, title=f"{prefix}{n}.*", prefix=f"{prefix}{n}.")
        for n in fields
        if (sub := _config_class(hints[n])) is not None
    ]
    return "\n".join(rows[:-1]) + "\n" + "".join("\n" + n for n in nested)


@dataclasses.dataclass(frozen=True)
class Base:
    """A shared recipe that presets start from (`register_base`): settings as `Preset.settings`."""

    name: str
    algorithm: str
    settings: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Preset:
    """A named, described configuration, as data: its algorithm's config class built from its
    base recipe's settings overlaid with its own (`make`).

    Attributes:
        name: what `turbozero train NAME` and `get_preset` take.
        description: one line for `turbozero train --list` and docs/configuration.md.
        algorithm: the name of its algorithm (`turbozero.algorithms`), whose config it makes.
        settings: its own settings, as config.json holds them (a section as a nested dict,
            `{"network": {"num_blocks": 3}}`): only what differs from its base.
        base: the name of the registered `Base` it starts from, or None (the class defaults).
        quick: `KEY=VALUE` overrides (as `--set` takes them) of a run that shows learning in a
            couple of minutes on 2 CPU cores (`turbozero train PRESET --quick`); () where the
            preset is quick.
        factory: a zero-argument function that builds the config instead (a preset registered
            with `register_preset` as a decorator, in users' code); None for data.
    """

    name: str
    description: str
    algorithm: str
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    base: str | None = None
    quick: tuple[str, ...] = ()
    factory: Callable[[], Config] | None = None

    def make(self) -> Config:
        """The config: the algorithm's config class from the merged settings, validated."""
        if self.factory is not None:
            return self.factory()
        # (importing the config class registers the bases kept beside it)
        config_class: type[Config] = _algorithm(self.algorithm).config_class()
        settings = self.settings
        if self.base is not None:
            base = BASES.get(self.base)
            if base is None:
                raise ConfigError(
                    f"preset {self.name!r} starts from base {self.base!r}, which is not "
                    f"registered; registered: {sorted(BASES)}." + suggest(self.base, BASES)
                )
            if base.algorithm != self.algorithm:
                raise ConfigError(
                    f"preset {self.name!r} is for {self.algorithm!r} but its base "
                    f"{self.base!r} is for {base.algorithm!r}"
                )
            settings = merge_settings(base.settings, self.settings)
        try:
            return config_class.from_dict(settings)
        except ConfigError as err:
            raise ConfigError(f"preset {self.name!r}: {err}") from None


def merge_settings(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` overlaid with `over`: a section (nested dict) in both is merged key by key."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_settings(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


PRESETS: dict[str, Preset] = {}
#: the shared recipes presets start from, by name; each is registered beside its algorithm's
#: config class, which `Preset.make` imports first
BASES: dict[str, Base] = {}


def register_base(name: str, *, algorithm: str, settings: Mapping[str, Any]) -> Base:
    """Register the shared recipe `name` of `algorithm` (settings as `Preset.settings`)."""
    if name in BASES:
        raise ValueError(f"base {name!r} is registered twice")
    BASES[name] = Base(name, algorithm, copy.deepcopy(dict(settings)))
    return BASES[name]


@typing.overload
def register_preset(
    name: str,
    description: str,
    *,
    algorithm: str,
    settings: Mapping[str, Any],
    base: str | None = None,
    quick: Sequence[str] = (),
) -> Preset: ...


@typing.overload
def register_preset(
    name: str, description: str, *, algorithm: str, quick: Sequence[str] = ()
) -> Callable[[Callable[[], Config]], Callable[[], Config]]: ...


def register_preset(
    name: str,
    description: str,
    *,
    algorithm: str,
    settings: Mapping[str, Any] | None = None,
    base: str | None = None,
    quick: Sequence[str] = (),
) -> Preset | Callable[[Callable[[], Config]], Callable[[], Config]]:
    """Register the preset `name` (see `Preset`) as data: `settings`, over the recipe `base`.

    Without `settings` it is a decorator registering a zero-argument config factory instead
    (for a preset of one's own that computes its config).

        register_preset("hex", "...", algorithm="alphazero", base="board", settings={"env": "hex"})
    """

    def add(preset: Preset) -> Preset:
        if name in PRESETS:
            raise ValueError(f"preset {name!r} is registered twice")
        PRESETS[name] = preset
        return preset

    if settings is not None:
        own = copy.deepcopy(dict(settings))
        return add(Preset(name, description, algorithm, own, base, tuple(quick)))
    if base is not None:
        raise ValueError(f"preset {name!r}: a base needs settings (give settings={{}})")

    def deco(fn: Callable[[], Config]) -> Callable[[], Config]:
        add(Preset(name, description, algorithm, quick=tuple(quick), factory=fn))
        return fn

    return deco


def load_presets() -> dict[str, Preset]:
    """Every preset: the algorithms' own (beside their config classes, imported through the
    registry) and those of every game's file (`turbozero.games`), imported on first call;
    returns `PRESETS`."""
    for name in _algorithm_names():
        _algorithm(name).config_class()
    all_games()
    return PRESETS


def get_preset(name: str) -> Preset:
    """The preset called `name` (a game an installed package offers registers its presets when
    its name is asked for: `turbozero.gamespec.game_spec`); a misspelling gets a suggestion."""
    load_presets()
    if name not in PRESETS:
        game_spec(name)
    if name not in PRESETS:
        raise ConfigError(
            f"unknown preset {name!r}; available: {sorted(PRESETS)}."
            + suggest(name, PRESETS)
            + f" A game's presets come with its file. {BRING_A_GAME}."
        )
    return PRESETS[name]


def resolve_config(
    config: Any, preset: str | None, *, algorithm: str, config_class: type
) -> tuple[Any, str | None]:
    """`(config, preset)`: `config` itself, or the config of the preset it names (whose name is
    then the preset recorded unless `preset` says otherwise).

    Raises:
        ValueError: the preset is another algorithm's.
        TypeError: `config` is neither a `config_class` nor a preset name.
    """
    if isinstance(config, str):
        preset = preset or config
        spec = get_preset(config)
        if spec.algorithm != algorithm:
            raise ValueError(f"preset {config!r} is for {spec.algorithm!r}, not {algorithm}")
        config = spec.make()
    if not isinstance(config, config_class):
        raise TypeError(
            f"config must be a {config_class.__name__} or a preset name, got "
            f"{type(config).__name__}"
        )
    return config, preset
