"""Argument checks shared by the factories: each raises a `ValueError` naming the argument and
its allowed range, before anything is traced."""

from __future__ import annotations

import math
import numbers
from typing import Any


def check_number(name: str, value: Any, *, low: float, strict: bool = False) -> float:
    """`value` as a float when it is a finite real number `>= low` (`> low` when `strict`), else
    a `ValueError` naming the argument and the range (NaN and infinities included: a rule fed
    one searches wrongly, and an infinite Dirichlet alpha never finishes drawing noise)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and math.isfinite(float(value)) and abs(float(value)) <= 3.4e38  # a float32
    ok = ok and (float(value) > low if strict else float(value) >= low)
    if not ok:
        bound = f"> {low}" if strict else f">= {low}"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def check_count(name: str, value: Any, *, low: int, high: int | None = None) -> int:
    """`value` as an int when it is an integer (NumPy's too, not a bool) `>= low` (and
    `<= high` when given), else a `ValueError` naming the argument."""
    ok = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    if not (ok and low <= int(value) and (high is None or int(value) <= high)):
        above = "" if high is None else f" and <= {high}"
        raise ValueError(f"{name} must be an int >= {low}{above}, got {value!r}")
    return int(value)


def is_digits(text: str) -> bool:
    """Whether `text` is a non-empty run of ASCII digits (`str.isdigit` also takes "²",
    which `int` refuses, and `str.isdecimal` other scripts' digits)."""
    return text.isascii() and text.isdigit()
