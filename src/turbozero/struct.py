"""The one pytree-dataclass helper, and the bytes a pytree takes.

`dataclass` turns a class into a frozen dataclass registered as a JAX pytree (through
`jax.tree_util.register_dataclass`), with a `.replace(**changes)` method. Fields declared with
`field(static=True)` are pytree metadata (hashable, part of the treedef); all others are leaves.

We do not use `flax.struct.dataclass` or `chex.dataclass` so that the base layer imports only JAX;
the helper is twenty lines.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

import jax

T = TypeVar("T")


def field(*, static: bool = False, **kwargs: Any) -> Any:
    """A dataclass field; `static=True` makes it pytree metadata instead of a leaf."""
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["static"] = static
    return dataclasses.field(metadata=metadata, **kwargs)


class Struct:
    """Base of pytree dataclasses: gives type checkers `.replace` (the decorator implements it)."""

    def replace(self: T, **changes: Any) -> T:  # pragma: no cover - replaced by the decorator
        raise NotImplementedError


@dataclass_transform(field_specifiers=(field, dataclasses.field), frozen_default=True)
def dataclass(cls: type[T]) -> type[T]:
    """Frozen dataclass registered as a pytree, with `.replace`."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    data = [f.name for f in fields if not f.metadata.get("static", False)]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)

    def replace(self: T, **changes: Any) -> T:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    cls.replace = replace  # type: ignore[attr-defined]
    return cls


def pytree_bytes(tree: Any) -> int:
    """Bytes the array leaves of `tree` take: arrays, or their `jax.ShapeDtypeStruct`s from
    `jax.eval_shape` (sizing a state without allocating it). `x.dtype.itemsize`, not NumPy's:
    typed PRNG keys in a state have a JAX dtype."""
    total = 0
    for x in jax.tree_util.tree_leaves(tree):
        size = 1
        for n in x.shape:
            size *= int(n)
        total += size * x.dtype.itemsize
    return total
