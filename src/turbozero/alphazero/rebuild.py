"""How a run directory records the parts given from Python, so that `turbozero eval`, `play` and
`train --resume` can rebuild them.

`train(config, parts={...})` may be given its own game, flax network, selector, optimizer, loss
or augmentations. The config does not name them, so the run directory records, for each part, a
recipe (`config.json`'s `"rebuild"`), where one can be made:

- `{"env": ID}`: a built-in game (`turbozero.envs.make(ID)` describes the same game);
- `{"object": "pkg.mod:name"}`: a function defined at the top of an importable module;
- `{"partial": "pkg.mod:name", "args": [...], "kwargs": {...}}`: `functools.partial` of one,
  with arguments JSON can hold;
- `{"class": "pkg.mod:Name", "fields": {...}}`: a dataclass (a flax module) of such a class,
  rebuilt from its fields (nested dataclasses too);
- `{"factory": SPEC}`: what the user names in `train(..., rebuild={part: SPEC})`, where SPEC is
  `"pkg.mod:function"` or `"path/to/file.py:function"`, a function of no arguments that returns
  the part (for parts made in a script: the file must not train when imported).

Each recipe is tried when the run starts: it must rebuild a part that `describe_parts` describes
as the given one, else an automatic recipe is dropped (the part is not rebuildable) and a named
one is refused. A part without a recipe is refused by name when a command needs it, saying how
to make it rebuildable.

A run directory is data that may come from anyone, so opening one (`load_agent`, `turbozero
eval`, `play`, `train --resume`) imports and calls nothing beyond turbozero's built-in parts
(`BUILTIN_MODULES`, the built-in games) unless the user says so for that run (`trust=True`,
`--trust-run`): `check_trusted` refuses such a run in one line naming the code, or, trusted,
first prints what it will import.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from turbozero import envs
from turbozero.envs.jumanji import REWARDS
from turbozero.io.errors import TRUST_HOW, NotRebuildableError, UntrustedRunError
from turbozero.io.rundir import RunDir

PART_NAMES = ("env", "module", "selector", "optimizer", "loss_fn", "augment_fns")

HOW = (
    "train it with train(..., rebuild={{{name!r}: 'pkg.module:function'}}) (or "
    "'path/to/file.py:function'; the tutorial's Trainer takes the same rebuild=), naming a "
    "function of no arguments that returns the {name} (then open the run with --trust-run), or "
    "load the run from Python with the part "
    "passed in (turbozero.load_agent(path, env=..., module=...); for the tutorial's Trainer: "
    "env=trainer.env, module=trainer.nn)"
)


#: modules whose functions and dataclasses a run directory may name without the user's word:
#: turbozero's networks, search rules, losses and augmentations (importing them runs nothing)
BUILTIN_MODULES = (
    "turbozero.nets",
    "turbozero.search",
    "turbozero.alphazero.losses",
    "turbozero.alphazero.augment",
)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
#: `"pkg.mod:attr"` spelled with dotted Python names only: no path, no `..`, no `.py`
_DOTTED_SPEC = re.compile(rf"({_NAME}(?:\.{_NAME})*):({_NAME}(?:\.{_NAME})*)")


def _of_builtin_module(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in BUILTIN_MODULES)


def is_builtin(spec: Any) -> bool:
    """`spec` (`"pkg.mod:attr"`) names a function or class defined in one of
    `BUILTIN_MODULES`.

    Decided by what the spec resolves to, not by its spelling: it must be dotted Python names
    (a path, `..` or a file is never built in), its module one of `BUILTIN_MODULES` (importing
    those runs nothing of the run's), and the object found there must be defined there under
    that name (`turbozero.nets:os.system` reaches `os.system` through an import of the module:
    not built in).
    """
    if not isinstance(spec, str):
        return False
    match = _DOTTED_SPEC.fullmatch(spec)
    if match is None or not _of_builtin_module(match.group(1)):
        return False
    try:
        obj = resolve(spec)
    except ValueError:
        return False
    owner = getattr(obj, "__module__", None)
    return (
        isinstance(owner, str)
        and _of_builtin_module(owner)
        and getattr(obj, "__qualname__", None) == match.group(2)
    )


def _nested_classes(x: Any) -> list[str]:
    """The `"__class__"` specs inside a recipe's JSON arguments or fields."""
    if isinstance(x, dict):
        own = [x["__class__"]] if "__class__" in x else []
        return own + [c for v in x.values() for c in _nested_classes(v)]
    if isinstance(x, list):
        return [c for v in x for c in _nested_classes(v)]
    return []


def outside_code(recipe: Mapping[str, Any] | None) -> list[str]:
    """The code `recipe` names outside turbozero's built-in parts: a `factory` always (a user's
    function, called), any other object not of `BUILTIN_MODULES`."""
    if not recipe:
        return []
    named = [recipe["factory"]] if "factory" in recipe else []
    specs = [recipe[k] for k in ("object", "partial", "class") if k in recipe]
    specs += list(recipe.get("objects", [])) + _nested_classes(
        [recipe.get("args"), recipe.get("kwargs"), recipe.get("fields")]
    )
    return named + [str(s) for s in specs if not is_builtin(s)]


def outside_reward(reward_fn: Any) -> list[str]:
    """`[reward_fn]` when a config's `reward_fn` names a function to import, not a built-in
    reward."""
    if not isinstance(reward_fn, str):
        return []

    return [] if reward_fn in REWARDS else [reward_fn]


def check_trusted(
    run: str, recipes: Mapping[str, Any], reward_fn: Any = None, *, trust: bool
) -> None:
    """Refuse to open a run whose `config.json` names code outside turbozero, unless `trust`;
    trusted, say on stderr what it will import first.

    Args:
        run: the run directory, as the user named it.
        recipes: the recipes (`config.json`'s `"rebuild"`) of the parts about to be rebuilt.
        reward_fn: the config's `reward_fn`, when its game is about to be made from the config.
        trust: the user's word that the run's code may be imported and called.

    Raises:
        UntrustedRunError: naming the first part whose recipe names such code, and how to allow
            it.
    """
    found = [
        (name, spec) for name, recipe in sorted(recipes.items()) for spec in outside_code(recipe)
    ]
    found += [("reward", r) for r in outside_reward(reward_fn)]
    if not found:
        return
    if not trust:
        name, spec = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise UntrustedRunError(
            f"{run}'s config.json names code to import and call to rebuild its {name}: "
            f"{spec!r}{more}; a run directory is opened as data, running none of it: {TRUST_HOW}"
        )
    listed = ", ".join(f"{spec} (its {name})" for name, spec in found)
    print(f"trusting {run}: importing {listed}", file=sys.stderr, flush=True)


def resolve(spec: str) -> Any:
    """The object `spec` names: `"pkg.mod:attr"` or `"path/to/file.py:attr"`.

    Raises:
        ValueError: `spec` is not of that form, or the module or attribute cannot be found.
    """
    if not isinstance(spec, str) or spec.count(":") < 1:
        raise ValueError(f"a rebuild recipe is 'pkg.module:function', got {spec!r}")
    where, _, attr = spec.rpartition(":")
    try:
        if where.endswith(".py"):
            path = Path(where).resolve()
            name = f"turbozero_user_{abs(hash(str(path)))}"
            module = sys.modules.get(name)
            if module is None:
                loader = importlib.util.spec_from_file_location(name, path)
                if loader is None or loader.loader is None:
                    raise ImportError(f"cannot load {path}")
                module = importlib.util.module_from_spec(loader)
                sys.modules[name] = module
                loader.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        obj: Any = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, OSError) as err:
        raise ValueError(f"the rebuild recipe {spec!r} cannot be loaded: {err}") from None
    return obj


def _where(x: Any) -> str | None:
    """`"module:qualname"` of a top-level object of an importable module (not a script's)."""
    module, qualname = getattr(x, "__module__", None), getattr(x, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        if resolve(f"{module}:{qualname}") is not x:
            return None
    except ValueError:
        return None
    return f"{module}:{qualname}"


def _plain(x: Any) -> Any:
    """`x` as JSON data, dataclasses as `{"__class__": ..., "fields": ...}`; raises TypeError."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        where = _where(type(x))
        if where is None:
            raise TypeError(f"{type(x).__name__} is not importable")
        fields = {
            f.name: _plain(getattr(x, f.name))
            for f in dataclasses.fields(x)
            if f.init and f.name not in ("parent", "name")
        }
        return {"__class__": where, "fields": fields}
    if isinstance(x, tuple | list):
        return [_plain(v) for v in x]
    if isinstance(x, dict) and all(isinstance(k, str) for k in x):
        return {k: _plain(v) for k, v in x.items()}
    if x is None or isinstance(x, bool | int | float | str):
        return x
    raise TypeError(f"{type(x).__name__} is not JSON data")


def _unplain(x: Any) -> Any:
    if isinstance(x, dict) and "__class__" in x:
        cls = resolve(x["__class__"])
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"the rebuild recipe {x['__class__']!r} is not a dataclass")
        return cls(**{k: _unplain(v) for k, v in x["fields"].items()})
    if isinstance(x, list):
        return tuple(_unplain(v) for v in x)  # (configs hold tuples; JSON has only lists)
    if isinstance(x, dict):
        return {k: _unplain(v) for k, v in x.items()}
    return x


def automatic_recipe(name: str, part: Any) -> dict[str, Any] | None:
    """A recipe for `part` found without the user's help, or None."""
    try:
        if name == "env":
            return {"env": part.name} if part.name in envs.GAMES else None
        if isinstance(part, functools.partial):
            where = _where(part.func)
            if where is None:
                return None
            args = _plain(list(part.args))
            kwargs = _plain(dict(part.keywords))
            return {"partial": where, "args": args, "kwargs": kwargs}
        if inspect.isfunction(part):
            where = _where(part)
            return None if where is None else {"object": where}
        if dataclasses.is_dataclass(part) and not isinstance(part, type):
            plain = _plain(part)
            return {"class": plain["__class__"], "fields": plain["fields"]}
        if name == "augment_fns" and isinstance(part, list | tuple):
            items = [_where(f) for f in part]
            return None if None in items else {"objects": items}
    except TypeError:
        return None
    return None


def build(recipe: Mapping[str, Any]) -> Any:
    """The part a recipe describes."""
    if "env" in recipe:
        return envs.make(recipe["env"])
    if "factory" in recipe:
        factory = resolve(recipe["factory"])
        if not callable(factory):
            raise ValueError(f"the rebuild recipe {recipe['factory']!r} is not a function")
        return factory()
    if "object" in recipe:
        return resolve(recipe["object"])
    if "objects" in recipe:
        return [resolve(spec) for spec in recipe["objects"]]
    if "partial" in recipe:
        args = [_unplain(a) for a in recipe["args"]]
        kwargs = {k: _unplain(v) for k, v in recipe["kwargs"].items()}
        return functools.partial(resolve(recipe["partial"]), *args, **kwargs)
    if "class" in recipe:
        return _unplain({"__class__": recipe["class"], "fields": recipe["fields"]})
    raise ValueError(f"unknown rebuild recipe {recipe!r}")


def record_parts(
    parts: Mapping[str, Any],
    rebuild: Mapping[str, str] | None,
    describe: Callable[[dict[str, Any]], dict[str, str]],
) -> dict[str, dict[str, Any] | None]:
    """`{part name: recipe or None}` for every part given, checked by rebuilding it.

    Raises:
        ValueError: `rebuild` names a part not given, or its recipe fails or rebuilds a part that
            differs from the given one.
    """
    given = {n: p for n, p in parts.items() if p is not None}
    named = dict(rebuild or {})
    extra = sorted(set(named) - set(given))
    if extra:
        raise ValueError(
            f"rebuild names {extra}, which were not given as parts (given: {sorted(given)})"
        )
    out: dict[str, dict[str, Any] | None] = {}
    for name, part in sorted(given.items()):
        if name in named:
            recipe: dict[str, Any] | None = {"factory": named[name]}
        else:
            recipe = automatic_recipe(name, part)
        if recipe is not None and name != "optimizer":
            try:
                same = describe({name: build(recipe)}) == describe({name: part})
            except Exception as err:  # a recipe that fails to build: say which
                if name in named:
                    raise ValueError(
                        f"rebuild[{name!r}] = {named[name]!r} failed to build the {name}: {err}"
                    ) from err
                same = False
            if not same:
                if name in named:
                    raise ValueError(
                        f"rebuild[{name!r}] = {named[name]!r} builds a {name} that differs from "
                        f"the one given (compared by train's description of parts)"
                    )
                recipe = None
        out[name] = recipe
    json.dumps(out)  # (recipes are JSON by construction)
    return out


def resumed_parts(
    run: str | Path, *, trust: bool
) -> tuple[dict[str, Any] | None, dict[str, str] | None]:
    """The parts an AlphaZero run was given from Python, rebuilt from the recipes its
    `config.json` records, and the recipes the user named (so the resumed run records them
    again); `(None, None)` for a run given none.

    Raises:
        UntrustedRunError: the recipes name code outside turbozero and not `trust`.
        NotRebuildableError: a part has no recipe (by name).
    """
    saved = RunDir(run).read_config("alphazero")
    recipes = saved.get("rebuild", {})
    reward = None if recipes.get("env") else saved["config"].get("reward_fn")
    check_trusted(str(run), recipes, reward, trust=trust)
    names = sorted(set(recipes) | set(saved.get("parts", {})))
    if not names:
        return None, None
    parts = rebuild_parts({n: recipes.get(n) for n in names}, names, str(run))
    named = {n: r["factory"] for n, r in recipes.items() if r and "factory" in r}
    return parts, named or None


def rebuild_parts(
    recipes: Mapping[str, Mapping[str, Any] | None], wanted: Iterable[str], run: str
) -> dict[str, Any]:
    """The parts among `wanted` that the run was given, rebuilt from their recipes.

    Raises:
        NotRebuildableError: naming the first wanted part that has no recipe, and how to give it
            one.
    """
    out = {}
    for name in wanted:
        if name not in recipes:
            continue
        recipe = recipes[name]
        if recipe is None:
            raise NotRebuildableError(
                f"{run} was trained with its {name} given from Python, which it cannot rebuild: "
                + HOW.format(name=name)
            )
        out[name] = build(recipe)
    return out
