"""The TD tests' shared runs: one uninterrupted, one stopped after an epoch and resumed."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from turbozero.td.config import TDConfig
from turbozero.td.load import load_agent
from turbozero.td.train import train_td


def full_and_resumed(recorded: TDConfig, config: TDConfig, root: Path) -> tuple[Path, Path]:
    """`recorded` trained in one go into ROOT/full; `config` stopped after its first epoch and
    resumed into ROOT/split (the two differ only in the records they draw)."""
    full, split = root / "full", root / "split"
    train_td(recorded, full, progress=False)
    train_td(config, split, num_epochs=1, progress=False)
    train_td(config, split, resume=True, progress=False)
    return full, split


def assert_same_learner(full: Path, split: Path) -> None:
    """The two runs' latest networks are equal to the bit (resuming is exact)."""
    a, b = load_agent(full, which="latest"), load_agent(split, which="latest")
    for x, y in zip(jax.tree.leaves(a.agent.params), jax.tree.leaves(b.agent.params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
