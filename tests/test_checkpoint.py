"""Checkpoints that cannot be restored say why, naming the directory, instead of orbax's dump."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from turbozero.io import checkpoint
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.errors import CheckpointError


def test_a_checkpoint_restores_what_was_saved(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(3, {"w": jnp.arange(4.0)}, {"note": "x"})
    ckpt.manager.wait_until_finished()
    state, meta = ckpt.restore({"w": jnp.zeros(4)})
    assert state["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert meta["note"] == "x" and meta["step"] == 3
    ckpt.close()


def test_a_checkpoint_of_another_format_version_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 1)
    old = Checkpointer(tmp_path / "c")
    old.save(1, {"w": jnp.zeros(2)}, {})
    old.manager.wait_until_finished()
    old.close()
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 2)
    with pytest.raises(CheckpointError, match=r"format 1 .* not the supported version 2"):
        Checkpointer(tmp_path / "c").restore({"w": jnp.zeros(2)})


def test_a_checkpoint_of_another_structure_is_refused_by_name(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.zeros(2)}, {})
    ckpt.manager.wait_until_finished()
    with pytest.raises(CheckpointError, match="does not have the structure"):
        ckpt.restore({"w": jnp.zeros(2), "extra": jnp.zeros(3)})
    with pytest.raises(CheckpointError, match="structure or shapes"):
        ckpt.restore({"w": jnp.zeros(3)})
    ckpt.close()
