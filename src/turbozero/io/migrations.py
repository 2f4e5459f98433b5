"""The run directory's format versions, and the one way a run written by an older turbozero is
read: `config.json` records the `format` it was written in, and `migrate` brings an older one to
today's through one function per version step, in order. Nothing else in the library knows what
older runs looked like; each step has its own test (tests/io/test_migrations.py).

A step is a pure function of the whole `config.json` object (a dict) to the next version's. A
setting whose default changed is filled in at the value older runs ran with; a setting that was
removed is dropped where a run left it at the value that left it off, and a run that used it is
refused in one line (this version cannot rebuild it; the version that wrote it can).

Versions:
    1: every run written before versions were recorded (no `format` key).
    2: `format` recorded; AlphaZero's settings tried on Connect Four and not kept are gone
       (`REMOVED_IN_2`), the first recipe's values of the settings whose default moved are
       written out (`BEFORE_2`), and a ResNet's description in `parts` names its `line_length`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from turbozero.config import ConfigError
from turbozero.io.errors import DamagedRunError

#: the version this turbozero writes (config.json's `"format"`)
FORMAT_VERSION = 2
#: the version of a config.json that records none
UNVERSIONED = 1

#: AlphaZero's settings removed at version 2, at the value that left them off (dotted: nested in
#: the config's `network` section). None was kept on Connect Four (docs/benchmarks.md's lever
#: table): gravity features 97.98% -> 97.69%; the heads' wider 1x1 convolutions (32 value, 4
#: policy channels), KataGo's global pooling and layer norm each 97.9% -> 97.8%; `root_value=best`
#: (the most visited move's Q as the value target's search share); a cosine decay of the learning
#: rate (`lr_decay_steps`, to `lr_final` of it)
REMOVED_IN_2: dict[str, Any] = {
    "root_value": "mean",
    "lr_decay_steps": 0,
    "lr_final": 0.1,
    "network.gravity_features": False,
    "network.policy_channels": 2,
    "network.value_channels": 1,
    "network.global_pool": False,
    "network.norm": "batch",
}
#: AlphaZero's settings whose default became the Connect Four recipe's, at the first recipe's
#: value: a version-1 run that does not record one (it predates the setting) ran with this
BEFORE_2: dict[str, Any] = {
    "temperature_moves": 10,
    "memory_capacity": 128,
    "learning_rate": 1e-3,
    "root_value_weight": 0.0,
    "ema_decay": 0.0,
    "ema_selfplay": True,
    "overlap": False,
    "eval_simulations": 0,
    "network.value_bins": 0,
    "search.fpu": "zero",
}

_RESNET = re.compile(r"AZResnetConfig\(([^()]*)\)")


def _to_2(saved: dict[str, Any]) -> dict[str, Any]:
    """Version 1 to 2 (see the module's docstring): AlphaZero's runs change, PPO's and TD's
    only record the version."""
    step = {"alphazero": _alphazero_to_2}.get(saved.get("algorithm", ""))
    return saved if step is None else step(saved)


def _alphazero_to_2(saved: dict[str, Any]) -> dict[str, Any]:
    """An AlphaZero run from version 1 to 2.

    Raises:
        ConfigError: the run used a removed setting (named, with its value, in one line).
    """
    config = saved["config"]
    for dotted, off in REMOVED_IN_2.items():
        *path, key = dotted.split(".")
        level = config
        for part in path:
            level = level.get(part) if isinstance(level, dict) else None
        if not isinstance(level, dict) or key not in level:
            continue
        if level[key] != off:
            raise ConfigError(
                f"{dotted}={level[key]!r}: that setting was tried, not kept and removed "
                f"(docs/benchmarks.md, the lever table); this version cannot rebuild a run that "
                f"used it (the version that wrote it can)"
            )
        del level[key]
    for dotted, value in BEFORE_2.items():
        *path, key = dotted.split(".")
        level = config
        for part in path:
            level = level.setdefault(part, {}) if isinstance(level, dict) else None
        if isinstance(level, dict):  # (else a malformed record: `from_dict` names what is wrong)
            level.setdefault(key, value)

    def with_line_length(match: re.Match[str]) -> str:
        fields = match.group(1)
        return (
            match.group(0)
            if "line_length=" in fields
            else f"AZResnetConfig({fields}, line_length=0)"
        )

    parts = saved.get("parts")
    if isinstance(parts, dict):
        saved["parts"] = {
            name: _RESNET.sub(with_line_length, text) if isinstance(text, str) else text
            for name, text in parts.items()
        }
    return saved


#: `{version: the step from it to the next}`, one per version below `FORMAT_VERSION`
STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _to_2}


def migrate(saved: dict[str, Any], *, where: str = "config.json") -> dict[str, Any]:
    """`saved` (a run's `config.json` object, not changed) in today's format: each step from
    its recorded `format` (`UNVERSIONED` when it records none) to `FORMAT_VERSION`, in order.

    Raises:
        DamagedRunError: `format` is no version this turbozero knows (a newer one wrote it, or
            it was edited).
        ConfigError: a step refuses the run (it used a removed setting).
    """
    version = saved.get("format", UNVERSIONED)
    if isinstance(version, bool) or not isinstance(version, int) or version < UNVERSIONED:
        raise DamagedRunError(f"{where}: format {version!r} is no format version (1, 2, ...)")
    if version > FORMAT_VERSION:
        raise DamagedRunError(
            f"{where} is in format {version}, written by a newer turbozero; this one reads "
            f"formats up to {FORMAT_VERSION} (upgrade turbozero to open it)"
        )
    out = copy.deepcopy(saved)
    for step in range(version, FORMAT_VERSION):
        out = STEPS[step](out)
        out["format"] = step + 1
    out["format"] = FORMAT_VERSION
    return out
